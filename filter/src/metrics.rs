//! The filter's Envoy stats, defined once per VM with their ids cached.
//!
//! Envoy custom metrics have no labels of their own: a label is encoded in the
//! name (`ankusa_admissions_total_outcome=.=admitted;.;`) and the bootstrap's
//! `stats_config.stats_tags` turns it back into `{outcome="admitted"}` in
//! `/stats/prometheus`. Every metric write is best effort: a stat is never
//! worth failing a hook over.

use ankusa_core::hook::degraded::GaugeWrites;
use ankusa_core::hook::machine::Metric;
pub use ankusa_core::hook::outcome::{Kind, Outcome};
use proxy_wasm::hostcalls;
use proxy_wasm::types::MetricType;
use std::cell::RefCell;

/// A metric name carrying one label, in the form the bootstrap's stats_tags extract.
pub fn labelled(name: &str, label: &str, value: &str) -> String {
    format!("{name}_{label}=.={value};.;")
}

/// The refusals shadow mode can forward instead of enforcing.
const SHADOWED: [Outcome; 3] = [Outcome::RateLimited, Outcome::Duplicate, Outcome::Pending];

/// `ankusa_admissions_total{outcome="…",shadow="true"}`: a refusal computed
/// and counted, the hook forwarded.
pub fn shadowed_name(outcome: Outcome) -> String {
    labelled(
        &labelled("ankusa_admissions_total", "outcome", outcome.as_str()),
        "shadow",
        "true",
    )
}

/// Metric ids of this VM; 0 (never handed out by Envoy) when a define failed.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    admissions: Vec<(Outcome, u32)>,
    shadowed: Vec<(Outcome, u32)>,
    fallback: u32,
    call_ms: u32,
    breaker_state: u32,
    degraded_rate: u32,
    degraded_dedupe: u32,
    settle_dropped: u32,
    settle_depth: u32,
    settle_batches_ok: u32,
    settle_batches_failed: u32,
    contended: u32,
    override_polls_ok: u32,
    override_polls_failed: u32,
    overrides_cut: u32,
    overrides_listed: u32,
    overrides_left_out: u32,
    live_edges: u32,
    share_ppm: u32,
    store_wire: u32,
    wire_unknown: u32,
    /// This VM's degraded-gauge writes (a value per hook would be a host call per hook).
    degraded_writes: RefCell<GaugeWrites>,
}

fn define(kind: MetricType, name: &str) -> u32 {
    hostcalls::define_metric(kind, name).unwrap_or(0)
}

impl Metrics {
    /// Defines every metric; Envoy maps a repeated name to the same stat, so
    /// every root context (one per worker VM) may call this.
    pub fn define() -> Metrics {
        use MetricType::{Counter, Gauge, Histogram};
        Metrics {
            admissions: Outcome::ALL
                .iter()
                .map(|o| {
                    (
                        *o,
                        define(
                            Counter,
                            &labelled("ankusa_admissions_total", "outcome", o.as_str()),
                        ),
                    )
                })
                .collect(),
            shadowed: SHADOWED
                .iter()
                .map(|o| (*o, define(Counter, &shadowed_name(*o))))
                .collect(),
            fallback: define(Counter, "ankusa_fleet_fallback_total"),
            call_ms: define(Histogram, "ankusa_fleet_call_duration"),
            breaker_state: define(Gauge, "ankusa_fleet_breaker_state"),
            degraded_rate: define(
                Gauge,
                &labelled("ankusa_fleet_limiter_degraded", "kind", "rate_limit"),
            ),
            degraded_dedupe: define(
                Gauge,
                &labelled("ankusa_fleet_limiter_degraded", "kind", "dedupe"),
            ),
            settle_dropped: define(Counter, "ankusa_fleet_settle_dropped_total"),
            settle_depth: define(Gauge, "ankusa_fleet_settle_queue_depth"),
            settle_batches_ok: define(
                Counter,
                &labelled("ankusa_fleet_settle_batches_total", "result", "ok"),
            ),
            settle_batches_failed: define(
                Counter,
                &labelled("ankusa_fleet_settle_batches_total", "result", "failed"),
            ),
            contended: define(Counter, "ankusa_node_contended_total"),
            override_polls_ok: define(
                Counter,
                &labelled("ankusa_overrides_polls_total", "result", "ok"),
            ),
            override_polls_failed: define(
                Counter,
                &labelled("ankusa_overrides_polls_total", "result", "failed"),
            ),
            overrides_cut: define(Counter, "ankusa_overrides_cut_total"),
            overrides_listed: define(Gauge, "ankusa_overrides_listed"),
            overrides_left_out: define(Gauge, "ankusa_overrides_left_out"),
            live_edges: define(Gauge, "ankusa_fleet_live_edges"),
            store_wire: define(Gauge, "ankusa_fleet_store_wire"),
            wire_unknown: define(Counter, "ankusa_fleet_wire_unknown_total"),
            share_ppm: define(Gauge, "ankusa_fleet_degraded_share_ppm"),
            degraded_writes: RefCell::default(),
        }
    }

    fn inc(id: u32, by: i64) {
        if id != 0 {
            let _ = hostcalls::increment_metric(id, by);
        }
    }

    fn set(id: u32, value: u64) {
        if id != 0 {
            let _ = hostcalls::record_metric(id, value);
        }
    }

    pub fn admission(&self, outcome: Outcome) {
        if let Some((_, id)) = self.admissions.iter().find(|(o, _)| *o == outcome) {
            Self::inc(*id, 1);
        }
    }

    /// One of a hook's metric deltas.
    pub fn apply(&self, metric: Metric) {
        match metric {
            Metric::Admission(outcome) => self.admission(outcome),
            Metric::Shadowed(outcome) => {
                if let Some((_, id)) = self.shadowed.iter().find(|(o, _)| *o == outcome) {
                    Self::inc(*id, 1);
                }
            }
            Metric::Fallback => self.fallback(),
            Metric::CallMs(ms) => self.call_ms(ms),
            Metric::BreakerState(state) => self.breaker_state(state),
            Metric::Degraded(kind, on) => self.degraded(kind, on),
            Metric::Contended => self.contended(),
            Metric::Edges { live, share_ppm } => self.edges(live, share_ppm),
            Metric::StoreWire(version) => Self::set(self.store_wire, version),
            Metric::WireUnknown(fields) => {
                Self::inc(self.wire_unknown, i64::try_from(fields).unwrap_or(i64::MAX))
            }
        }
    }

    pub fn fallback(&self) {
        Self::inc(self.fallback, 1);
    }

    /// One fleet call's latency, answered or failed.
    pub fn call_ms(&self, ms: u64) {
        Self::set(self.call_ms, ms);
    }

    /// 0 closed, 1 open, 2 probing.
    pub fn breaker_state(&self, state: u64) {
        Self::set(self.breaker_state, state);
    }

    pub fn degraded(&self, kind: Kind, on: bool) {
        if !self.degraded_writes.borrow_mut().due(kind, on) {
            return;
        }
        let id = match kind {
            Kind::RateLimit => self.degraded_rate,
            Kind::Dedupe => self.degraded_dedupe,
        };
        Self::set(id, u64::from(on));
    }

    pub fn settle_dropped(&self, n: u64) {
        Self::inc(self.settle_dropped, i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn settle_depth(&self, depth: u64) {
        Self::set(self.settle_depth, depth);
    }

    pub fn settle_batch(&self, ok: bool) {
        Self::inc(
            if ok {
                self.settle_batches_ok
            } else {
                self.settle_batches_failed
            },
            1,
        );
    }

    /// A hook admitted uncharged because every compare-and-swap on its node bucket conflicted.
    pub fn contended(&self) {
        Self::inc(self.contended, 1);
    }

    /// The live edge count the node last heard (0: never) and the share of
    /// a fleet quota it answers alone with, in parts per million.
    pub fn edges(&self, live: u64, share_ppm: u64) {
        Self::set(self.live_edges, live);
        Self::set(self.share_ppm, share_ppm);
    }

    /// One override-list poll: taken (`cut` overrides left out past the
    /// cap by it; once a list is applied, how many it holds and how many of
    /// the store's it leaves out), or failed (the last good list stays).
    pub fn override_poll(&self, taken: Option<(usize, Option<(usize, u64)>)>) {
        match taken {
            Some((cut, listed)) => {
                Self::inc(self.override_polls_ok, 1);
                Self::inc(self.overrides_cut, i64::try_from(cut).unwrap_or(i64::MAX));
                if let Some((held, left_out)) = listed {
                    Self::set(self.overrides_listed, held as u64);
                    Self::set(self.overrides_left_out, left_out);
                }
            }
            None => Self::inc(self.override_polls_failed, 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_encoded_the_way_stats_tags_extract_them() {
        assert_eq!(
            labelled(
                "ankusa_fleet_limiter_degraded",
                "kind",
                Kind::RateLimit.as_str()
            ),
            "ankusa_fleet_limiter_degraded_kind=.=rate_limit;.;"
        );
        assert_eq!(
            shadowed_name(Outcome::RateLimited),
            "ankusa_admissions_total_outcome=.=rate_limited;.;_shadow=.=true;.;"
        );
    }
}
