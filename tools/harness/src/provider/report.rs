//! What a run tells its user: a progress line every second while it runs, and
//! the final table (or one JSON object with `--json`).

use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// Counts kept while a run goes; every field is a number of deliveries or answers.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Tally {
    /// Distinct events.
    pub events: u64,
    /// Extra deliveries of an event to another edge.
    pub redeliveries: u64,
    /// Deliveries that went out at least once.
    pub sent: u64,
    /// Deliveries answered with a 2xx.
    pub acknowledged: u64,
    /// Attempts scheduled again after a non-2xx or a transport error.
    pub retried: u64,
    /// 429 answers.
    pub rate_limited: u64,
    /// 409 answers (the event is in flight on another edge).
    pub pending: u64,
    /// 2xx answers saying `"duplicate":true`.
    pub duplicate_answers: u64,
    /// Non-2xx answers other than 429 and 409.
    pub other_non_2xx: u64,
    /// Attempts that got no HTTP answer (refused, reset, timed out).
    pub transport_errors: u64,
    /// Every attempt.
    pub requests: u64,
    /// Deliveries sent but never acknowledged before the deadline.
    pub unacknowledged: u64,
    /// Deliveries never sent (the deadline came first).
    pub not_sent: u64,
    /// Answers by status code (real deliveries only).
    pub answers: BTreeMap<u16, u64>,
    /// Forged deliveries sent (`--forge`); not counted in `sent` or `requests`.
    pub forged_sent: u64,
    /// Forged deliveries answered 401. Must equal `forged_sent` less
    /// `forged_unanswered`.
    pub forged_rejected: u64,
    /// Forged deliveries that got no HTTP answer (no edge listening: one
    /// killed, say): neither admitted nor refused.
    pub forged_unanswered: u64,
    #[serde(skip)]
    pub in_flight: u64,
}

/// The end of a run: the tally plus the audit of what the intake stored.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub profile: &'static str,
    pub tenant: String,
    pub source: String,
    pub edges: Vec<String>,
    pub rate: f64,
    #[serde(flatten)]
    pub tally: Tally,
    pub elapsed_s: f64,
    /// Hooks of this run the intake holds, counting copies.
    pub stored: Option<u64>,
    /// Acknowledged events with no stored hook. Must be 0.
    pub lost: Option<u64>,
    /// Events of this run stored more than once.
    pub stored_duplicates: Option<u64>,
    /// A few of the lost event keys, to look up in the logs.
    pub lost_keys: Vec<String>,
    /// Why there is no audit, when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_error: Option<String>,
}

impl Summary {
    pub fn table(&self) -> String {
        let t = &self.tally;
        let answers: Vec<String> = t
            .answers
            .iter()
            .map(|(code, n)| format!("{code}: {n}"))
            .collect();
        let or_dash = |v: Option<u64>| v.map_or("-".to_string(), |n| n.to_string());
        let mut out = format!(
            "mock-provider: {} events ({}) to {} edge(s) at {}/s as {}/{}\n",
            t.events,
            self.profile,
            self.edges.len(),
            self.rate,
            self.tenant,
            self.source
        );
        let rows: [(&str, String); 15] = [
            (
                "sent",
                format!(
                    "{}  ({} events + {} redeliveries)",
                    t.sent, t.events, t.redeliveries
                ),
            ),
            ("acknowledged", t.acknowledged.to_string()),
            ("retried", t.retried.to_string()),
            ("rate-limited (429)", t.rate_limited.to_string()),
            ("pending (409)", t.pending.to_string()),
            ("duplicate answers", t.duplicate_answers.to_string()),
            ("other non-2xx", t.other_non_2xx.to_string()),
            ("transport errors", t.transport_errors.to_string()),
            (
                "unacknowledged",
                format!("{}  (+{} never sent)", t.unacknowledged, t.not_sent),
            ),
            (
                "requests",
                format!("{}  [{}]", t.requests, answers.join(", ")),
            ),
            (
                "forged (401)",
                format!("{} sent, {} refused 401", t.forged_sent, t.forged_rejected),
            ),
            ("elapsed", format!("{:.1} s", self.elapsed_s)),
            ("stored (GET /hooks)", or_dash(self.stored)),
            ("LOST", or_dash(self.lost)),
            ("stored duplicates", or_dash(self.stored_duplicates)),
        ];
        for (name, value) in rows {
            out.push_str(&format!("  {name:<20} {value}\n"));
        }
        if let Some(e) = &self.audit_error {
            out.push_str(&format!("  audit failed: {e}\n"));
        }
        if !self.lost_keys.is_empty() {
            out.push_str(&format!(
                "  lost keys (first {}): {}\n",
                self.lost_keys.len(),
                self.lost_keys.join(" ")
            ));
        }
        out
    }
}

/// Retries queued behind a `Retry-After` or a backoff.
pub struct Waiting {
    pub count: usize,
    /// Until the soonest of them is due.
    pub next: Option<Duration>,
}

/// The live line on stderr: rewritten in place on a terminal, one line a
/// second otherwise (logs, CI).
pub struct Progress {
    tty: bool,
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

impl Progress {
    pub fn new() -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
        }
    }

    pub fn show(&mut self, elapsed: Duration, t: &Tally, waiting: &Waiting) {
        let mut line = format!(
            "[{:>5.1}s] sent {}/{} acked {} in-flight {} retried {} 429s {} 409s {} dup {} errors {}",
            elapsed.as_secs_f64(),
            t.sent,
            t.events + t.redeliveries,
            t.acknowledged,
            t.in_flight,
            t.retried,
            t.rate_limited,
            t.pending,
            t.duplicate_answers,
            t.transport_errors + t.other_non_2xx
        );
        if let Some(next) = waiting.next {
            let next = next.as_secs_f64();
            line.push_str(&format!(
                " | {} waiting to retry, next in {next:.1}s",
                waiting.count
            ));
        }
        let mut err = std::io::stderr().lock();
        let _ = if self.tty {
            write!(err, "\r\x1b[2K{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }

    pub fn finish(&mut self, elapsed: Duration, t: &Tally, waiting: &Waiting) {
        self.show(elapsed, t, waiting);
        if self.tty {
            let _ = writeln!(std::io::stderr());
        }
    }
}
