//! The p99 latencies of a row: the provider's whole attempts, and the time
//! the edges held each request (from their access logs), with and without
//! the time the edge's worker waited for a CPU.

use super::stalls::Series;
use crate::provider::board::Attempt;
use ankusa_testkit::access_log::Held;
use std::collections::HashMap;
use std::time::Duration;

/// The 99th percentile of `took` over `attempts` (ms), 0 when none.
pub(super) fn p99_ms(attempts: &[&Attempt]) -> f64 {
    p99_of(attempts.iter().map(|a| a.took))
}

/// The requests the edges answered (with the pid of the edge) that started
/// within `[from, to)` and, when `ended_by` is given, were over by then (ms
/// from the run's start).
pub(crate) fn held_within(
    held: &[(Held, u32)],
    run_start_unix_ms: u64,
    from: Duration,
    to: Duration,
    ended_by: Option<Duration>,
) -> Vec<(Held, u32)> {
    let ms = |d: Duration| run_start_unix_ms + d.as_millis() as u64;
    held.iter()
        // Status 0: the sender left before any answer (the provider's
        // own timeout), so nothing was held for it.
        .filter(|(h, _)| h.status != 0)
        .filter(|(h, _)| h.start_unix_ms >= ms(from) && h.start_unix_ms < ms(to))
        .filter(|(h, _)| ended_by.is_none_or(|end| h.start_unix_ms + h.total_ms < ms(end)))
        .copied()
        .collect()
}

/// The p99 of the time at the edge of `held` (ms), and the same with the
/// time each request's worker waited for a CPU meanwhile taken out.
pub(crate) fn p99_at_edge_ms(held: &[(Held, u32)], waits: &HashMap<u32, Series>) -> (f64, f64) {
    let all = p99_of(
        held.iter()
            .map(|(h, _)| Duration::from_millis(h.at_edge_ms())),
    );
    let running = p99_of(held.iter().map(|(h, pid)| {
        let waited = waits.get(pid).map_or(0, |s| {
            s.waited_ms(h.start_unix_ms, h.start_unix_ms + h.total_ms)
        });
        Duration::from_millis(h.at_edge_ms().saturating_sub(waited))
    }));
    (all, running)
}

fn p99_of(durations: impl Iterator<Item = Duration>) -> f64 {
    let mut ms: Vec<f64> = durations.map(|d| d.as_secs_f64() * 1000.0).collect();
    if ms.is_empty() {
        return 0.0;
    }
    ms.sort_by(f64::total_cmp);
    let i = ((ms.len() as f64 * 0.99).ceil() as usize).clamp(1, ms.len()) - 1;
    (ms[i] * 10.0).round() / 10.0
}
