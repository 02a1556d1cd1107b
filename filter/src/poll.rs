//! The override-list poll a root context sends from its tick: one per node
//! per interval (the lease), answered into the node's shared data. When a
//! poll is due, what an answer means and how long a list is applied are the
//! core's ([`ankusa_core::overrides::node_list`]); here are only the call,
//! the reads and writes, the metrics and the log lines.

use crate::metrics::Metrics;
use crate::runtime::{get_store, Runtime, HOST};
use crate::shared::now_us;
use ankusa_core::clock::every_due;
use ankusa_core::overrides::node_list::{
    parse_list, poll_due, store_list, LIST_PATH, MAX_OVERRIDES,
};
use proxy_wasm::hostcalls;
use proxy_wasm::types::BufferType;

/// A failed poll is logged at most this often per worker (ms).
const WARN_EVERY_MS: u64 = 60_000;

/// This root context's poll in flight, if any.
#[derive(Default)]
pub struct Poller {
    inflight: Option<u32>,
    /// When a failed poll was last logged (ms).
    warned_ms: u64,
}

impl Poller {
    /// One tick: a poll leaves if this worker took the node's lease.
    pub fn tick(&mut self, rt: &Runtime) {
        let fleet = &rt.config.fleet;
        let in_flight = self.inflight.is_some();
        if !poll_due(&HOST, in_flight, fleet.breaker, now_us() / 1_000) {
            return;
        }
        match get_store(fleet, LIST_PATH, fleet.timeout_ms) {
            Ok(token) => self.inflight = Some(token),
            Err(status) => self.failed(
                &rt.metrics,
                &format!("the store cluster took no call ({status:?})"),
            ),
        }
    }

    /// Whether `token` is this context's poll.
    pub fn owns(&self, token: u32) -> bool {
        self.inflight == Some(token)
    }

    /// The store's answer to the poll: `:status` (None: a reset) and the body's size.
    pub fn answered(&mut self, rt: &Runtime, status: Option<&str>, body_size: usize) {
        self.inflight = None;
        let read = || {
            hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, body_size)
                .ok()
                .flatten()
        };
        match parse_list(status, body_size, read) {
            Ok(polled) => {
                if polled.cut > 0 {
                    log::warn!(
                        "ankusa: the store lists {} overrides, over the cap of {MAX_OVERRIDES}: \
                         the first {MAX_OVERRIDES} by tenant are applied",
                        polled.overrides.len() + polled.cut
                    );
                }
                if store_list(&HOST, &polled, now_us() / 1_000) {
                    log::info!(
                        "ankusa: fleet overrides changed: {} in force",
                        polled.overrides.len()
                    );
                }
                rt.metrics
                    .override_poll(Some((polled.overrides.len(), polled.cut)));
            }
            Err(e) => self.failed(&rt.metrics, &e.to_string()),
        }
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
