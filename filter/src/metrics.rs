//! The filter's Envoy stats: the core's [`Metrics`] (every name, what each
//! metric delta writes) over proxy-wasm's metrics ([`ProxyStats`]), defined
//! once per VM with their ids cached.

pub use ankusa_core::shell::metrics::{labelled, shadowed_name, Kind, Outcome, StatKind, Stats};
use proxy_wasm::hostcalls;
use proxy_wasm::types::MetricType;

/// This VM's stats.
pub type Metrics = ankusa_core::shell::metrics::Metrics<ProxyStats>;

/// Envoy's stats through proxy-wasm hostcalls.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProxyStats;

impl Stats for ProxyStats {
    type Id = u32;

    fn define(&self, kind: StatKind, name: &str) -> Option<u32> {
        let kind = match kind {
            StatKind::Counter => MetricType::Counter,
            StatKind::Gauge => MetricType::Gauge,
            StatKind::Histogram => MetricType::Histogram,
        };
        hostcalls::define_metric(kind, name).ok()
    }

    fn increment(&self, id: u32, by: u64) {
        let _ = hostcalls::increment_metric(id, i64::try_from(by).unwrap_or(i64::MAX));
    }

    fn record(&self, id: u32, value: u64) {
        let _ = hostcalls::record_metric(id, value);
    }
}
