//! The edges' gauges during a row, as the runner reads them from every
//! edge's admin: breaker, degraded, fall-backs, dropped settles, live edges.

use ankusa_testkit::metrics::find_metric;
use std::time::Duration;

/// The edges' gauges and counters at one moment (summed or maxed over edges
/// that answered).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sample {
    pub at: Duration,
    pub breaker_max: f64,
    pub degraded_max: f64,
    pub fallback_sum: f64,
    pub settle_dropped_sum: f64,
    /// The fewest live edges any answering edge last heard (0: none yet).
    pub live_edges_min: f64,
}

pub(crate) fn sample(urls: &[String], at: Duration) -> Sample {
    let mut s = Sample {
        at,
        ..Sample::default()
    };
    for url in urls {
        let Ok(r) = ankusa_testkit::http::get(url) else {
            continue;
        };
        let text = r.text();
        let get = |name: &str| find_metric(&text, name).unwrap_or(0.0);
        s.breaker_max = s.breaker_max.max(get("ankusa_fleet_breaker_state"));
        s.degraded_max = s
            .degraded_max
            .max(get(r#"ankusa_fleet_limiter_degraded{kind="rate_limit"}"#))
            .max(get(r#"ankusa_fleet_limiter_degraded{kind="dedupe"}"#));
        s.fallback_sum += get("ankusa_fleet_fallback_total");
        s.settle_dropped_sum += get("ankusa_fleet_settle_dropped_total");
        let live = get("ankusa_fleet_live_edges");
        if s.live_edges_min == 0.0 || (live > 0.0 && live < s.live_edges_min) {
            s.live_edges_min = live;
        }
    }
    s
}
