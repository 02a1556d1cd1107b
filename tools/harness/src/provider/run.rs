//! Delivering a run of events like a real provider: at a rate, to several
//! edges, redelivering some, retrying every non-2xx until a deadline.
//!
//! Attempts wait in one time-ordered queue, so a hook backing off for its
//! `Retry-After` holds no worker thread; `concurrency` threads send whatever
//! is due, each request on its own connection (as providers do).

use super::profile::{Event, Forgery, Profile};
use super::report::{Progress, Tally, Waiting};
use crate::ids::Rng;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// First backoff after a failure with no `Retry-After`; doubles per attempt.
const BACKOFF_BASE: Duration = Duration::from_millis(100);
/// Longest backoff between two attempts of one delivery.
const BACKOFF_CAP: Duration = Duration::from_secs(10);
/// Longest wait for one answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct Options {
    /// Edge base URLs (`http://host:port`).
    pub edges: Vec<String>,
    pub events: usize,
    /// First deliveries per second.
    pub rate: f64,
    pub profile: Profile,
    pub tenant: String,
    pub source: String,
    /// Share of events delivered a second time, to another edge (0..=1).
    pub redeliver: f64,
    /// Share of those redeliveries sent alongside the first delivery rather
    /// than after it was acknowledged (0..=1).
    pub concurrent: f64,
    /// No attempt starts after this long from the start of the run.
    pub deadline: Duration,
    /// Requests in flight at once.
    pub concurrency: usize,
    pub seed: u64,
    /// Print a progress line on stderr every second.
    pub progress: bool,
    /// The secret real deliveries are signed with.
    pub secret: String,
    /// Share of events (0..=1) that also get one forged delivery (same event
    /// id and body, wrong secret, stale timestamp or no signature) sent at
    /// the same moment to an edge; never retried, every one must be 401.
    pub forge: f64,
}

impl Options {
    pub fn path(&self) -> String {
        format!("/webhooks/{}/{}", self.tenant, self.source)
    }
}

/// Why a delivery of an event was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    First,
    /// Sent once the first delivery was acknowledged (a provider's manual or
    /// timeout-driven redelivery).
    AfterAck,
    /// Sent at the same moment as the first, to another edge (two provider
    /// workers racing).
    Concurrent,
    /// A forgery of the event: sent once, never retried, must be refused 401.
    Forged,
}

#[derive(Debug)]
struct Delivery {
    event: usize,
    edge: usize,
    kind: Kind,
    started: bool,
    acked: bool,
    /// Done, one way or another: acknowledged, given up, or never to be sent.
    resolved: bool,
}

/// Everything the workers share, under one mutex.
struct Board {
    queue: BinaryHeap<Reverse<(Instant, u64, usize, u32)>>,
    deliveries: Vec<Delivery>,
    /// The `AfterAck` delivery of each event, if it has one.
    follow_up: Vec<Option<usize>>,
    unresolved: usize,
    order: u64,
    tally: Tally,
    rng: Rng,
    last_resolved: Instant,
    /// When the run started.
    start: Instant,
    attempts: Vec<Attempt>,
}

impl Board {
    fn push(&mut self, due: Instant, delivery: usize, attempt: u32) {
        self.order += 1;
        self.queue
            .push(Reverse((due, self.order, delivery, attempt)));
    }

    fn resolve(&mut self, delivery: usize, now: Instant) {
        if !self.deliveries[delivery].resolved {
            self.deliveries[delivery].resolved = true;
            self.unresolved -= 1;
            self.last_resolved = now;
        }
    }
}

/// One attempt of a real delivery: when it started and how it ended.
#[derive(Clone, Copy, Debug)]
pub struct Attempt {
    /// From the start of the run.
    pub started: Duration,
    /// Until the answer (or the transport error).
    pub took: Duration,
    /// The status, `None` when no HTTP answer came.
    pub status: Option<u16>,
}

/// What a run produced: the counts, and which events were acknowledged.
pub struct Outcome {
    /// Every real attempt, in the order answers came.
    pub attempts: Vec<Attempt>,
    pub tally: Tally,
    pub events: Vec<Event>,
    /// Per event: whether any of its deliveries got a 2xx.
    pub acknowledged: Vec<bool>,
    pub elapsed: Duration,
}

pub fn run(options: &Options) -> Outcome {
    let mut rng = Rng::new(options.seed);
    let unix_s = crate::ids::now_ms() / 1000;
    let mut events: Vec<Event> = (0..options.events)
        .map(|i| {
            options
                .profile
                .event_signed(&mut rng, i, unix_s, &options.secret)
        })
        .collect();
    let real_events = events.len();
    let edges = options.edges.len().max(1);
    let start = Instant::now();
    let deadline = start + options.deadline;
    let mut board = Board {
        queue: BinaryHeap::new(),
        deliveries: Vec::new(),
        follow_up: vec![None; events.len()],
        unresolved: 0,
        order: 0,
        tally: Tally::default(),
        rng: Rng::new(rng.next_u64()),
        last_resolved: start,
        start,
        attempts: Vec::new(),
    };
    for event in 0..events.len() {
        let due = start + Duration::from_secs_f64(event as f64 / options.rate);
        let edge = event % edges;
        board.deliveries.push(Delivery {
            event,
            edge,
            kind: Kind::First,
            started: false,
            acked: false,
            resolved: false,
        });
        board.push(due, board.deliveries.len() - 1, 0);
        if rng.next_f64() < options.redeliver {
            let other = if edges > 1 {
                (edge + 1 + rng.below(edges as u64 - 1) as usize) % edges
            } else {
                edge
            };
            let kind = if rng.next_f64() < options.concurrent {
                Kind::Concurrent
            } else {
                Kind::AfterAck
            };
            board.deliveries.push(Delivery {
                event,
                edge: other,
                kind,
                started: false,
                acked: false,
                resolved: false,
            });
            let index = board.deliveries.len() - 1;
            match kind {
                Kind::Concurrent => board.push(due, index, 0),
                _ => board.follow_up[event] = Some(index),
            }
        }
    }
    board.tally.events = real_events as u64;
    board.tally.redeliveries = (board.deliveries.len() - real_events) as u64;
    // Forgeries go after the real events in `events`, each due with the event it copies.
    if options.forge > 0.0 {
        let mut forge_rng = Rng::new(rng.next_u64());
        for event in 0..real_events {
            if forge_rng.next_f64() >= options.forge {
                continue;
            }
            let how = Forgery::ALL[forge_rng.below(Forgery::ALL.len() as u64) as usize];
            let forged = options
                .profile
                .forge(&events[event], &options.secret, unix_s, how);
            events.push(forged);
            board.deliveries.push(Delivery {
                event: events.len() - 1,
                edge: forge_rng.below(edges as u64) as usize,
                kind: Kind::Forged,
                started: false,
                acked: false,
                resolved: false,
            });
            let due = start + Duration::from_secs_f64(event as f64 / options.rate);
            board.push(due, board.deliveries.len() - 1, 0);
        }
    }
    board.unresolved = board.deliveries.len();

    let shared = (Mutex::new(board), Condvar::new());
    let path = options.path();
    std::thread::scope(|s| {
        for _ in 0..options.concurrency.max(1) {
            s.spawn(|| worker(&shared, options, &events, &path, deadline));
        }
        if options.progress {
            s.spawn(|| report_progress(&shared, start, deadline));
        }
    });
    let board = shared.0.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut acknowledged = vec![false; events.len()];
    let mut tally = board.tally;
    for d in &board.deliveries {
        if d.kind == Kind::Forged {
            continue;
        }
        acknowledged[d.event] |= d.acked;
        match (d.started, d.acked) {
            (true, false) => tally.unacknowledged += 1,
            (false, _) => tally.not_sent += 1,
            _ => {}
        }
    }
    events.truncate(real_events);
    acknowledged.truncate(real_events);
    Outcome {
        attempts: board.attempts,
        tally,
        events,
        acknowledged,
        elapsed: board.last_resolved.duration_since(start),
    }
}

fn lock(shared: &(Mutex<Board>, Condvar)) -> std::sync::MutexGuard<'_, Board> {
    shared.0.lock().unwrap_or_else(|p| p.into_inner())
}

fn worker(
    shared: &(Mutex<Board>, Condvar),
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
            if answer.as_ref().is_ok_and(|a| a.status == 401) {
                board.tally.forged_rejected += 1;
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

fn report_progress(shared: &(Mutex<Board>, Condvar), start: Instant, deadline: Instant) {
    let mut progress = Progress::new();
    let mut next = start + Duration::from_secs(1);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let (tally, waiting, done) = {
            let board = lock(shared);
            let now = Instant::now();
            let done = board.unresolved == 0 || now >= deadline && board.tally.in_flight == 0;
            // Retries waiting out a Retry-After or a backoff (first deliveries
            // not yet due don't count).
            let retries = board
                .queue
                .iter()
                .filter(|Reverse((_, _, _, attempt))| *attempt > 0);
            let next = retries
                .clone()
                .map(|Reverse((due, _, _, _))| due.saturating_duration_since(now))
                .min();
            (
                board.tally.clone(),
                Waiting {
                    count: retries.count(),
                    next,
                },
                done,
            )
        };
        if done {
            progress.finish(start.elapsed(), &tally, &waiting);
            return;
        }
        if Instant::now() >= next {
            progress.show(start.elapsed(), &tally, &waiting);
            next += Duration::from_secs(1);
        }
    }
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
