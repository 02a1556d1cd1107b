//! The override-list poll a root context sends from its tick: one per node
//! per interval (the lease), or at once while a listing has pages left,
//! answered into the node's shared data. When a poll is due, what it asks,
//! what an answer means, what the node keeps and how long a list is applied
//! are the core's ([`ankusa_core::fleet::overrides::node_list`] and
//! [`ankusa_core::fleet::overrides::node_sync`]); here are only the call, the
//! reads and writes, the metrics and the log lines.

use crate::metrics::Metrics;
use crate::runtime::{get_store, Runtime, SHARED};
use crate::shared::now_us;
use ankusa_core::fleet::overrides::node_list::{parse_page, poll_due, MAX_OVERRIDES};
use ankusa_core::fleet::overrides::node_sync::{
    apply_page, configured_tenants, describe_cut, next_query,
};
use ankusa_core::fleet::overrides::page::ListQuery;
use ankusa_core::node::clock::every_due;
use proxy_wasm::hostcalls;
use proxy_wasm::types::BufferType;

/// A failed poll, or overrides left out past the cap, are logged at most
/// this often per worker (ms).
const WARN_EVERY_MS: u64 = 60_000;

/// This root context's poll in flight, if any.
#[derive(Default)]
pub struct Poller {
    /// The call's token and what it asked.
    inflight: Option<(u32, ListQuery)>,
    /// When a failed poll was last logged (ms).
    warned_ms: u64,
    /// When overrides left out were last logged (ms).
    cut_warned_ms: u64,
}

impl Poller {
    /// One tick: a poll leaves if this worker took the node's lease.
    pub fn tick(&mut self, rt: &Runtime) {
        let fleet = &rt.config().fleet;
        let in_flight = self.inflight.is_some();
        if !poll_due(&SHARED, in_flight, fleet.breaker, now_us() / 1_000) {
            return;
        }
        let query = next_query(&SHARED, &configured_tenants(rt.config()));
        match get_store(fleet, &query.path(), fleet.timeout_ms) {
            Ok(token) => self.inflight = Some((token, query)),
            Err(status) => self.failed(
                &rt.metrics,
                &format!("the store cluster took no call ({status:?})"),
            ),
        }
    }

    /// Whether `token` is this context's poll.
    pub fn owns(&self, token: u32) -> bool {
        self.inflight.as_ref().is_some_and(|(t, _)| *t == token)
    }

    /// The store's answer to the poll: `:status` (None: a reset) and the body's size.
    pub fn answered(&mut self, rt: &Runtime, status: Option<&str>, body_size: usize) {
        let Some((_, asked)) = self.inflight.take() else {
            return;
        };
        let read = || {
            hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, body_size)
                .ok()
                .flatten()
        };
        let page = match parse_page(status, body_size, read) {
            Ok(page) => page,
            Err(e) => return self.failed(&rt.metrics, &e.to_string()),
        };
        let now_ms = now_us() / 1_000;
        let applied = apply_page(
            &SHARED,
            &asked,
            page,
            &configured_tenants(rt.config()),
            now_ms,
        );
        if applied.gap {
            log::info!(
                "ankusa: the store can't list the override changes since version {}: \
                 reading the whole list",
                asked.since
            );
        }
        if !applied.cut.is_empty() && every_due(self.cut_warned_ms, now_ms, WARN_EVERY_MS) {
            self.cut_warned_ms = now_ms;
            log::warn!(
                "ankusa: {} overrides left out past the cap of {MAX_OVERRIDES} (the configured \
                 tenants' first, then the most recently changed): {}",
                applied.cut.len(),
                describe_cut(&applied.cut)
            );
        }
        if applied.changed {
            if let Some((held, _)) = applied.listed {
                log::info!("ankusa: fleet overrides changed: {held} in force");
            }
        }
        rt.metrics
            .override_poll(Some((applied.cut.len(), applied.listed)));
    }

    fn failed(&mut self, metrics: &Metrics, why: &str) {
        metrics.override_poll(None);
        let now_ms = now_us() / 1_000;
        if every_due(self.warned_ms, now_ms, WARN_EVERY_MS) {
            self.warned_ms = now_ms;
            log::warn!(
                "ankusa: override list poll failed, the last good list stays until stale: {why}"
            );
        }
    }
}
