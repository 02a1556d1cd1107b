//! An edge's Envoy stats, whatever the shell: every name, what each
//! [`Metric`] delta writes, defined once per worker with their ids cached.
//! A shell gives the host's stats as [`Stats`] (proxy-wasm's metrics, the
//! dynamic-module ABI's), so both shells count under the same names.
//!
//! Envoy custom metrics carry no labels here: a label is encoded in the
//! name (`ankusa_admissions_total_outcome=.=admitted;.;`) and the bootstrap's
//! `stats_config.stats_tags` turns it back into `{outcome="admitted"}` in
//! `/stats/prometheus`. Every metric write is best effort: a stat is never
//! worth failing a hook over.

use crate::hook::degraded::GaugeWrites;
use crate::hook::machine::Metric;
pub use crate::hook::outcome::{Kind, Outcome};
use std::cell::RefCell;

/// What a stat is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatKind {
    Counter,
    Gauge,
    Histogram,
}

/// A host's stats.
pub trait Stats {
    /// A defined stat's handle.
    type Id: Copy;
    /// Defines stat `name`; None when the host refused it (its writes are then skipped).
    fn define(&self, kind: StatKind, name: &str) -> Option<Self::Id>;
    /// Adds `by` to a counter.
    fn increment(&self, id: Self::Id, by: u64);
    /// Sets a gauge, or records a histogram's value.
    fn record(&self, id: Self::Id, value: u64);
}

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

/// The ids of every stat, as the host handed them out (None: refused).
#[derive(Clone, Debug)]
pub struct MetricIds<I> {
    admissions: Vec<(Outcome, Option<I>)>,
    shadowed: Vec<(Outcome, Option<I>)>,
    fallback: Option<I>,
    call_ms: Option<I>,
    breaker_state: Option<I>,
    degraded_rate: Option<I>,
    degraded_dedupe: Option<I>,
    settle_dropped: Option<I>,
    settle_depth: Option<I>,
    settle_batches_ok: Option<I>,
    settle_batches_failed: Option<I>,
    contended: Option<I>,
    override_polls_ok: Option<I>,
    override_polls_failed: Option<I>,
    overrides_cut: Option<I>,
    overrides_listed: Option<I>,
    overrides_left_out: Option<I>,
    live_edges: Option<I>,
    share_ppm: Option<I>,
    store_wire: Option<I>,
    wire_unknown: Option<I>,
}

/// One worker's stats: the host's, their ids, and this worker's
/// degraded-gauge writes.
pub struct Metrics<S: Stats> {
    stats: S,
    ids: MetricIds<S::Id>,
    /// This worker's degraded-gauge writes (a value per hook would be a host call per hook).
    degraded_writes: RefCell<GaugeWrites>,
}

impl<I: Copy> MetricIds<I> {
    /// Defines every metric on `stats`; Envoy maps a repeated name to the
    /// same stat, so every worker may define them again.
    pub fn define<S: Stats<Id = I>>(stats: &S) -> MetricIds<I> {
        use StatKind::{Counter, Gauge, Histogram};
        let define = |kind, name: &str| stats.define(kind, name);
        MetricIds {
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
        }
    }
}

impl<S: Stats> Metrics<S> {
    /// Defines every metric on `stats`.
    pub fn define(stats: S) -> Metrics<S> {
        let ids = MetricIds::define(&stats);
        Metrics::with_ids(stats, ids)
    }

    /// Over stats defined already (a shell that defines them once per
    /// configuration, on Envoy's main thread).
    pub fn with_ids(stats: S, ids: MetricIds<S::Id>) -> Metrics<S> {
        Metrics {
            stats,
            ids,
            degraded_writes: RefCell::default(),
        }
    }

    fn inc(&self, id: Option<S::Id>, by: u64) {
        if let Some(id) = id {
            self.stats.increment(id, by);
        }
    }

    fn set(&self, id: Option<S::Id>, value: u64) {
        if let Some(id) = id {
            self.stats.record(id, value);
        }
    }

    pub fn admission(&self, outcome: Outcome) {
        if let Some((_, id)) = self.ids.admissions.iter().find(|(o, _)| *o == outcome) {
            self.inc(*id, 1);
        }
    }

    /// One of a hook's metric deltas.
    pub fn apply(&self, metric: Metric) {
        match metric {
            Metric::Admission(outcome) => self.admission(outcome),
            Metric::Shadowed(outcome) => {
                if let Some((_, id)) = self.ids.shadowed.iter().find(|(o, _)| *o == outcome) {
                    self.inc(*id, 1);
                }
            }
            Metric::Fallback => self.fallback(),
            Metric::CallMs(ms) => self.call_ms(ms),
            Metric::BreakerState(state) => self.breaker_state(state),
            Metric::Degraded(kind, on) => self.degraded(kind, on),
            Metric::Contended => self.contended(),
            Metric::Edges { live, share_ppm } => self.edges(live, share_ppm),
            Metric::StoreWire(version) => self.set(self.ids.store_wire, version),
            Metric::WireUnknown(fields) => self.inc(self.ids.wire_unknown, fields),
        }
    }

    pub fn fallback(&self) {
        self.inc(self.ids.fallback, 1);
    }

    /// One fleet call's latency, answered or failed.
    pub fn call_ms(&self, ms: u64) {
        self.set(self.ids.call_ms, ms);
    }

    /// 0 closed, 1 open, 2 probing.
    pub fn breaker_state(&self, state: u64) {
        self.set(self.ids.breaker_state, state);
    }

    pub fn degraded(&self, kind: Kind, on: bool) {
        if !self.degraded_writes.borrow_mut().due(kind, on) {
            return;
        }
        let id = match kind {
            Kind::RateLimit => self.ids.degraded_rate,
            Kind::Dedupe => self.ids.degraded_dedupe,
        };
        self.set(id, u64::from(on));
    }

    pub fn settle_dropped(&self, n: u64) {
        self.inc(self.ids.settle_dropped, n);
    }

    pub fn settle_depth(&self, depth: u64) {
        self.set(self.ids.settle_depth, depth);
    }

    pub fn settle_batch(&self, ok: bool) {
        self.inc(
            if ok {
                self.ids.settle_batches_ok
            } else {
                self.ids.settle_batches_failed
            },
            1,
        );
    }

    /// A hook admitted uncharged because every compare-and-swap on its node bucket conflicted.
    pub fn contended(&self) {
        self.inc(self.ids.contended, 1);
    }

    /// The live edge count the node last heard (0: never) and the share of
    /// a fleet quota it answers alone with, in parts per million.
    pub fn edges(&self, live: u64, share_ppm: u64) {
        self.set(self.ids.live_edges, live);
        self.set(self.ids.share_ppm, share_ppm);
    }

    /// One override-list poll: taken (`cut` overrides left out past the
    /// cap by it; once a list is applied, how many it holds and how many of
    /// the store's it leaves out), or failed (the last good list stays).
    pub fn override_poll(&self, taken: Option<(usize, Option<(usize, u64)>)>) {
        match taken {
            Some((cut, listed)) => {
                self.inc(self.ids.override_polls_ok, 1);
                self.inc(self.ids.overrides_cut, cut as u64);
                if let Some((held, left_out)) = listed {
                    self.set(self.ids.overrides_listed, held as u64);
                    self.set(self.ids.overrides_left_out, left_out);
                }
            }
            None => self.inc(self.ids.override_polls_failed, 1),
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
