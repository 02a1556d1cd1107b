//! One sender of the run: takes whatever attempt is due off the board, sends
//! it on its own connection, and puts the delivery back for a retry (after
//! the edge's `Retry-After` or a backoff) until it is acknowledged or the
//! deadline passes.

use super::board::{lock, Attempt, Kind, Shared};
use super::options::Options;
use super::profile::Event;
use crate::ids::Rng;
use std::cmp::Reverse;
use std::time::{Duration, Instant};

/// First backoff after a failure with no `Retry-After`; doubles per attempt.
const BACKOFF_BASE: Duration = Duration::from_millis(100);
/// Longest backoff between two attempts of one delivery.
const BACKOFF_CAP: Duration = Duration::from_secs(10);
/// Longest wait for one answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

pub(super) fn worker(
    shared: &Shared,
    options: &Options,
    events: &[Event],
    path: &str,
    deadline: Instant,
) {
    loop {
        let (delivery, attempt, event, edge) = {
            let mut board = lock(shared);
            loop {
                let now = Instant::now();
                if board.unresolved == 0 || now >= deadline {
                    shared.1.notify_all();
                    return;
                }
                let wake = match board.queue.peek() {
                    Some(Reverse((due, _, _, _))) if *due <= now => break,
                    Some(Reverse((due, _, _, _))) => (*due).min(deadline),
                    None => deadline,
                };
                board = shared
                    .1
                    .wait_timeout(board, wake - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
            }
            let Some(Reverse((_, _, delivery, attempt))) = board.queue.pop() else {
                continue;
            };
            let d = &mut board.deliveries[delivery];
            let (event, edge, first_send, forged) =
                (d.event, d.edge, !d.started, d.kind == Kind::Forged);
            d.started = true;
            if forged {
                board.tally.forged_sent += 1;
            } else {
                board.tally.sent += u64::from(first_send);
                board.tally.requests += 1;
            }
            board.tally.in_flight += 1;
            (delivery, attempt, event, edge)
        };
        let timeout = deadline
            .saturating_duration_since(Instant::now())
            .clamp(Duration::from_secs(1), REQUEST_TIMEOUT);
        let url = format!("{}{path}", options.edges[edge].trim_end_matches('/'));
        let headers: Vec<(&str, &str)> = events[event]
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let sent_at = Instant::now();
        let answer =
            ankusa_testkit::http::request("POST", &url, &headers, &events[event].body, timeout);

        let mut board = lock(shared);
        let now = Instant::now();
        board.tally.in_flight -= 1;
        if board.deliveries[delivery].kind != Kind::Forged {
            let attempt = Attempt {
                started: sent_at.saturating_duration_since(board.start),
                took: now.duration_since(sent_at),
                status: answer.as_ref().ok().map(|a| a.status),
            };
            board.attempts.push(attempt);
        }
        if board.deliveries[delivery].kind == Kind::Forged {
            // A forger neither retries nor honours Retry-After.
            match &answer {
                Ok(a) if a.status == 401 => board.tally.forged_rejected += 1,
                Ok(_) => {}
                Err(_) => board.tally.forged_unanswered += 1,
            }
            board.resolve(delivery, now);
            shared.1.notify_all();
            continue;
        }
        let retry_after = match &answer {
            Ok(a) => {
                *board.tally.answers.entry(a.status).or_default() += 1;
                a.header("retry-after")
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs)
            }
            Err(_) => None,
        };
        match &answer {
            Ok(a) if (200..300).contains(&a.status) => {
                board.tally.acknowledged += 1;
                let duplicate = serde_json::from_slice::<serde_json::Value>(&a.body)
                    .is_ok_and(|body| body["duplicate"] == serde_json::Value::Bool(true));
                board.tally.duplicate_answers += u64::from(duplicate);
                board.deliveries[delivery].acked = true;
                board.resolve(delivery, now);
                if board.deliveries[delivery].kind == Kind::First {
                    if let Some(next) = board.follow_up[event] {
                        // A provider's redelivery comes a little later, not at once.
                        let pause = Duration::from_millis(board.rng.below(500));
                        board.push(now + pause, next, 0);
                    }
                }
            }
            _ => {
                match &answer {
                    Ok(a) if a.status == 429 => board.tally.rate_limited += 1,
                    Ok(a) if a.status == 409 => board.tally.pending += 1,
                    Ok(_) => board.tally.other_non_2xx += 1,
                    Err(_) => board.tally.transport_errors += 1,
                }
                let wait = retry_wait(&mut board.rng, attempt, retry_after);
                if now + wait < deadline {
                    board.tally.retried += 1;
                    board.push(now + wait, delivery, attempt + 1);
                } else {
                    // Gives up, as a provider does past its retry horizon; a
                    // follow-up redelivery of this event will never be sent.
                    board.resolve(delivery, now);
                    if board.deliveries[delivery].kind == Kind::First {
                        if let Some(next) = board.follow_up[event] {
                            board.resolve(next, now);
                        }
                    }
                }
            }
        }
        shared.1.notify_all();
    }
}

/// `Retry-After` when the edge sent one (plus up to 0.5 s, so a crowd told the
/// same second doesn't return in the same millisecond); else exponential
/// backoff with jitter, between half and all of `base × 2^attempt`.
fn retry_wait(rng: &mut Rng, attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(after) = retry_after {
        return after + Duration::from_millis(rng.below(500));
    }
    let full = BACKOFF_BASE
        .saturating_mul(1u32 << attempt.min(16))
        .min(BACKOFF_CAP);
    let half = full / 2;
    half + Duration::from_micros(rng.below(half.as_micros() as u64 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn honours_retry_after_and_caps_backoff() {
        let mut rng = Rng::new(3);
        let wait = retry_wait(&mut rng, 0, Some(Duration::from_secs(2)));
        assert!(
            wait >= Duration::from_secs(2) && wait < Duration::from_millis(2500),
            "{wait:?}"
        );
        let first = retry_wait(&mut rng, 0, None);
        assert!(
            first >= BACKOFF_BASE / 2 && first <= BACKOFF_BASE,
            "{first:?}"
        );
        let late = retry_wait(&mut rng, 30, None);
        assert!(late >= BACKOFF_CAP / 2 && late <= BACKOFF_CAP, "{late:?}");
    }
}
