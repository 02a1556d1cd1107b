//! The edges' gauges during a row, as the runner reads them from every
//! edge's admin: breaker, degraded, fall-backs, dropped settles, live edges.

use ankusa_testkit::metrics::find_metric;
use std::time::Duration;

/// The longest one edge's admin may take to answer a reading: a frozen or
/// paused edge must not hold up the others' readings.
const READ_TIMEOUT: Duration = Duration::from_secs(1);

/// The edges' gauges and counters at one moment (summed or maxed over the
/// edges).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sample {
    pub at: Duration,
    pub breaker_max: f64,
    pub degraded_max: f64,
    pub fallback_sum: f64,
    pub settle_dropped_sum: f64,
    /// The fewest live edges any edge last heard (0: none yet).
    pub live_edges_min: f64,
}

/// One edge's gauges and counters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Reading {
    breaker: f64,
    degraded: f64,
    fallbacks: f64,
    settle_dropped: f64,
    live_edges: f64,
}

/// Reads every edge's admin at once. An edge that doesn't answer (killed,
/// frozen, paused, cut off) counts with its last reading, so a sum over the
/// edges doesn't drop while one is away, and a paused edge holds up no
/// reading past [`READ_TIMEOUT`].
pub(crate) struct Gauges {
    urls: Vec<String>,
    last: Vec<Option<Reading>>,
}

impl Gauges {
    pub(crate) fn new(urls: Vec<String>) -> Gauges {
        let last = vec![None; urls.len()];
        Gauges { urls, last }
    }

    pub(crate) fn sample(&mut self, at: Duration) -> Sample {
        let fresh: Vec<Option<Reading>> = std::thread::scope(|s| {
            let reads: Vec<_> = self
                .urls
                .iter()
                .map(|url| s.spawn(move || read(url)))
                .collect();
            reads.into_iter().map(|r| r.join().ok().flatten()).collect()
        });
        for (last, fresh) in self.last.iter_mut().zip(fresh) {
            if fresh.is_some() {
                *last = fresh;
            }
        }
        combine(at, &self.last)
    }
}

fn read(url: &str) -> Option<Reading> {
    let r = ankusa_testkit::http::request("GET", url, &[], b"", READ_TIMEOUT).ok()?;
    let text = r.text();
    let get = |name: &str| find_metric(&text, name).unwrap_or(0.0);
    Some(Reading {
        breaker: get("ankusa_fleet_breaker_state"),
        degraded: get(r#"ankusa_fleet_limiter_degraded{kind="rate_limit"}"#)
            .max(get(r#"ankusa_fleet_limiter_degraded{kind="dedupe"}"#)),
        fallbacks: get("ankusa_fleet_fallback_total"),
        settle_dropped: get("ankusa_fleet_settle_dropped_total"),
        live_edges: get("ankusa_fleet_live_edges"),
    })
}

/// The fleet's sample from each edge's reading (none yet: left out).
fn combine(at: Duration, readings: &[Option<Reading>]) -> Sample {
    let mut s = Sample {
        at,
        ..Sample::default()
    };
    for r in readings.iter().flatten() {
        s.breaker_max = s.breaker_max.max(r.breaker);
        s.degraded_max = s.degraded_max.max(r.degraded);
        s.fallback_sum += r.fallbacks;
        s.settle_dropped_sum += r.settle_dropped;
        if s.live_edges_min == 0.0 || (r.live_edges > 0.0 && r.live_edges < s.live_edges_min) {
            s.live_edges_min = r.live_edges;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edge_that_stops_answering_keeps_its_last_reading() {
        let mut gauges = Gauges::new(vec!["http://127.0.0.1:1/stats".into()]);
        gauges.last[0] = Some(Reading {
            fallbacks: 7.0,
            breaker: 1.0,
            live_edges: 2.0,
            ..Reading::default()
        });
        let s = gauges.sample(Duration::from_secs(3));
        assert_eq!(
            (s.fallback_sum, s.breaker_max, s.live_edges_min),
            (7.0, 1.0, 2.0)
        );
    }

    #[test]
    fn sums_fall_backs_and_takes_the_worst_breaker_and_fewest_live_edges() {
        let edge = |fallbacks, breaker, live_edges| {
            Some(Reading {
                fallbacks,
                breaker,
                live_edges,
                ..Reading::default()
            })
        };
        let s = combine(
            Duration::ZERO,
            &[edge(3.0, 0.0, 2.0), None, edge(4.0, 1.0, 1.0)],
        );
        assert_eq!(s.fallback_sum, 7.0);
        assert_eq!(s.breaker_max, 1.0);
        assert_eq!(s.live_edges_min, 1.0);
    }
}
