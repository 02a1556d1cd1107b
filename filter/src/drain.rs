//! A root context's background calls over proxy-wasm: the core's
//! [`Background`] as [`ProxyBackground`], so its settle batches
//! ([`ankusa_core::shell::drain`]) and override-list polls
//! ([`ankusa_core::shell::poll`]) leave from each worker's tick; and the fate
//! of settle operations a call carried. (A reload resets only node buckets:
//! `/v1/reset` is an operator's call, see `ankusa_core::node::reload`.)

use crate::metrics::{Metrics, ProxyStats};
use crate::runtime::{call_store, get_store, Runtime, SHARED};
use crate::settle;
use crate::shared::{now_us, SharedData};
use ankusa_core::config::Config;
use ankusa_core::hook::machine::Level;
use ankusa_core::hook::settle::Queued;
use ankusa_core::shell::background::Background;
pub use ankusa_core::shell::drain::{settled_with, Drainer, BACKGROUND_TIMEOUT_MS};

/// A root context's runtime, as the core's background calls see it.
pub struct ProxyBackground<'a>(pub &'a Runtime);

impl Background for ProxyBackground<'_> {
    type Store = SharedData;
    type Stats = ProxyStats;

    fn config(&self) -> &Config {
        self.0.config()
    }

    fn store(&self) -> &SharedData {
        &SHARED
    }

    fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    fn now_us(&self) -> u64 {
        now_us()
    }

    fn call(&self, path: &str, body: Option<&[u8]>, timeout_ms: u64) -> Result<u64, String> {
        let fleet = &self.0.config().fleet;
        let sent = match body {
            Some(body) => call_store(fleet, path, body, timeout_ms),
            None => get_store(fleet, path, timeout_ms),
        };
        sent.map(u64::from).map_err(|status| format!("{status:?}"))
    }

    /// Off the node's shared queue (unparsable items are dropped and counted).
    fn dequeue(&self, max: usize) -> Vec<Queued> {
        let Some(queue_id) = self.0.queue_id else {
            return Vec::new();
        };
        let (batch, garbage) = settle::dequeue_batch(&SHARED, queue_id, max);
        self.0.metrics.settle_dropped(garbage);
        batch
    }

    /// Held by this worker for its next call, as a hook's own settle is.
    fn requeue(&self, item: Queued) {
        self.0.settle(item);
    }

    fn log(&self, level: Level, line: &str) {
        match level {
            Level::Info => log::info!("{line}"),
            Level::Warn => log::warn!("{line}"),
        }
    }
}

/// A batch's fate: counted, and on failure held again or dropped.
pub(crate) fn settled(rt: &Runtime, batch: Vec<Queued>, ok: bool) {
    let retries = rt.config().fleet.settle_retries;
    settled_with(&rt.metrics, retries, batch, ok, |item| rt.settle(item));
}
