//! The metered tenant's admissions cut into 10 s windows, each marked by
//! whether the store answered throughout it, and with how few live edges.

use crate::faults::gauges::Sample;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The length of a window.
pub const WINDOW: Duration = Duration::from_secs(10);

/// One window of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Seconds from the start of traffic.
    pub from_s: f64,
    /// Metered hooks started within it that an edge admitted.
    pub admitted: u64,
    /// Whether no edge answered without the store within it (the edges'
    /// `ankusa_fleet_fallback_total` didn't grow).
    pub store_answered: bool,
    /// The fewest live edges an edge had heard within it (0: none heard).
    pub live_edges: u64,
}

/// The whole windows of `[0, end)`: `attempts` are the metered hooks'
/// (start, admitted), `samples` the edges' gauges in time order.
pub(crate) fn windows(
    attempts: &[(Duration, bool)],
    samples: &[Sample],
    end: Duration,
) -> Vec<Window> {
    let count = (end.as_secs_f64() / WINDOW.as_secs_f64()).floor() as u32;
    (0..count)
        .map(|i| {
            let (from, to) = (WINDOW * i, WINDOW * (i + 1));
            let admitted = attempts
                .iter()
                .filter(|(at, ok)| *ok && *at >= from && *at < to)
                .count() as u64;
            // Samples from the last one before the window to the first one
            // after it: a fall-back anywhere within shows as growth.
            let first = samples.iter().rposition(|s| s.at <= from).unwrap_or(0);
            let last = samples
                .iter()
                .position(|s| s.at >= to)
                .unwrap_or(samples.len().saturating_sub(1));
            let span = samples.get(first..=last).unwrap_or(&[]);
            let store_answered = span
                .windows(2)
                .all(|w| w[1].fallback_sum <= w[0].fallback_sum);
            let live_edges = span
                .iter()
                .map(|s| s.live_edges_min as u64)
                .filter(|n| *n > 0)
                .min()
                .unwrap_or(0);
            Window {
                from_s: from.as_secs_f64(),
                admitted,
                store_answered,
                live_edges,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_s: u64, fallbacks: f64, live: f64) -> Sample {
        Sample {
            at: Duration::from_secs(at_s),
            fallback_sum: fallbacks,
            live_edges_min: live,
            ..Sample::default()
        }
    }

    #[test]
    fn counts_admitted_hooks_per_window_and_marks_the_ones_with_fall_backs() {
        let attempts = [
            (Duration::from_secs(1), true),
            (Duration::from_secs(2), false),
            (Duration::from_millis(9999), true),
            (Duration::from_secs(10), true),
            (Duration::from_secs(25), true),
            (Duration::from_secs(31), true),
        ];
        let samples = [
            sample(0, 0.0, 3.0),
            sample(5, 0.0, 3.0),
            sample(10, 0.0, 3.0),
            sample(15, 4.0, 2.0),
            sample(20, 4.0, 3.0),
            sample(25, 4.0, 3.0),
            sample(30, 4.0, 3.0),
        ];
        let w = windows(&attempts, &samples, Duration::from_secs(31));
        assert_eq!(w.len(), 3, "the part window after 30 s is left out");
        assert_eq!(w.iter().map(|w| w.admitted).collect::<Vec<_>>(), [2, 1, 1]);
        assert_eq!(
            w.iter().map(|w| w.store_answered).collect::<Vec<_>>(),
            [true, false, true]
        );
        assert_eq!(
            w.iter().map(|w| w.live_edges).collect::<Vec<_>>(),
            [3, 2, 3]
        );
    }
}
