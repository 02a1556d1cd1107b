//! The p99 latencies of a row: the provider's whole attempts, and the time
//! the edges held each request (from their access logs), with and without
//! the time the edge's worker could not run: waiting for a CPU, or frozen
//! by the fault.

use super::stalls::Series;
use super::target::Frozen;
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
/// time each request's worker could not run meanwhile taken out: its waits
/// for a CPU, and the time its edge was `frozen`.
pub(crate) fn p99_at_edge_ms(
    held: &[(Held, u32)],
    waits: &HashMap<u32, Series>,
    frozen: &[Frozen],
) -> (f64, f64) {
    let all = p99_of(
        held.iter()
            .map(|(h, _)| Duration::from_millis(h.at_edge_ms())),
    );
    let running = p99_of(held.iter().map(|(h, pid)| {
        let (from, to) = (h.start_unix_ms, h.start_unix_ms + h.total_ms);
        let waited = waits.get(pid).map_or(0, |s| s.waited_ms(from, to));
        let stopped: u64 = frozen
            .iter()
            .filter(|f| f.pid == *pid)
            .map(|f| f.overlap_ms(from, to))
            .sum();
        Duration::from_millis(h.at_edge_ms().saturating_sub(waited + stopped))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn hold(start_unix_ms: u64, total_ms: u64) -> Held {
        Held {
            start_unix_ms,
            total_ms,
            upstream_ms: Some(2),
            status: 201,
        }
    }

    #[test]
    fn a_hook_held_across_its_edges_freeze_counts_only_its_running_time() {
        // 49 quick hooks at edge 7, and one edge 7 held across its freeze
        // (from 1 100 to 3 500): 2 422 ms at the edge, 22 of them running.
        let mut held: Vec<(Held, u32)> = (0..49).map(|i| (hold(1_000 + i, 10), 7)).collect();
        held.push((hold(1_090, 2_424), 7));
        let frozen = [Frozen {
            pid: 7,
            from_unix_ms: 1_100,
            to_unix_ms: 3_500,
        }];
        let (all, running) = p99_at_edge_ms(&held, &HashMap::new(), &frozen);
        assert_eq!(all, 2_422.0, "the time at the edge keeps the freeze");
        assert_eq!(running, 22.0, "the running time leaves it out");
        // Another edge's freeze takes nothing from edge 7's hooks.
        let elsewhere = [Frozen {
            pid: 8,
            ..frozen[0]
        }];
        assert_eq!(
            p99_at_edge_ms(&held, &HashMap::new(), &elsewhere).1,
            2_422.0
        );
    }

    #[test]
    fn a_freeze_not_yet_thawed_runs_to_the_hooks_end() {
        let f = Frozen {
            pid: 1,
            from_unix_ms: 500,
            to_unix_ms: u64::MAX,
        };
        assert_eq!(f.overlap_ms(400, 900), 400);
        assert_eq!(f.overlap_ms(100, 400), 0);
    }
}
