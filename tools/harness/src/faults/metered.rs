//! A tenant held to a small fleet quota, pushed past it through every edge
//! for the whole row: what the fleet admitted of it while the fault lasted,
//! against its quota for that window, shows whether the quota held (each
//! edge answering alone spends only its share of it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The metered tenant (source of the same name, no dedupe: no claims).
pub const TENANT: &str = "metered";
/// Its fleet quota: hooks per second, and at once.
pub const RATE: u64 = 20;
pub const BURST: u64 = 20;
/// Senders per edge, each pacing [`PER_SENDER`] hooks a second: 30/s per
/// edge, more than the whole fleet's quota, so an edge answering with the
/// whole quota alone would show as 2× across two edges.
pub const SENDERS: usize = 2;
pub const PER_SENDER: f64 = 15.0;

/// The plugin configuration's part for the metered tenant.
pub fn configure(config: &mut serde_json::Value) {
    config["sources"][TENANT] = serde_json::json!({"tenant": TENANT});
    config["rate_limits"]["tenants"][TENANT] = serde_json::json!({"rate": RATE, "burst": BURST});
}

/// Each attempt: when it started (from the run's start) and whether the
/// edge admitted it (any answer but its 429: a forwarded hook the intake
/// failed still spent the quota).
#[derive(Default)]
pub struct Attempts(Mutex<Vec<(Duration, bool)>>);

impl Attempts {
    /// Every attempt so far: (start, admitted).
    pub fn all(&self) -> Vec<(Duration, bool)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Admitted hooks that started within `[from, to)`.
    pub fn admitted_within(&self, from: Duration, to: Duration) -> u64 {
        let attempts = self.0.lock().unwrap_or_else(|p| p.into_inner());
        attempts
            .iter()
            .filter(|(at, ok)| *ok && *at >= from && *at < to)
            .count() as u64
    }
}

/// The quota for a window: `burst + rate × window`, whole hooks.
pub fn quota(window: Duration) -> u64 {
    BURST + (RATE as f64 * window.as_secs_f64()).floor() as u64
}

/// What a fleet may admit of `quota` when some of its edges answer hooks
/// alone while the store answers others (docs/admission.md, "Partial
/// outage"): the whole quota at the store, and `shares` edges' shares of it
/// (1 / `edges` each) from the edges' own buckets on top. With none, `quota`.
pub fn quota_and_shares(quota: u64, shares: u64, edges: u64) -> u64 {
    quota + quota * shares / edges.max(1)
}

/// Paces metered hooks to `url` (an edge's) until `done`, recording each
/// attempt in `into`. A refused connection (an edge killed) is no attempt.
pub fn send(url: &str, start: Instant, done: &AtomicBool, into: &Attempts) {
    let period = Duration::from_secs_f64(1.0 / PER_SENDER);
    let target = format!("{}/webhooks/{TENANT}", url.trim_end_matches('/'));
    let mut next = Instant::now();
    while !done.load(Ordering::SeqCst) {
        let at = start.elapsed();
        if let Ok(r) = ankusa_testkit::http::request(
            "POST",
            &target,
            &[("content-type", "application/json")],
            b"{}",
            Duration::from_secs(10),
        ) {
            into.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((at, r.status != 429));
        }
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_answering_alone_add_their_shares_to_the_quota() {
        assert_eq!(quota_and_shares(76, 0, 2), 76);
        assert_eq!(quota_and_shares(76, 1, 2), 114);
        assert_eq!(quota_and_shares(90, 1, 3), 120);
    }
}
