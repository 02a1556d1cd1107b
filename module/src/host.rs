//! The core's [`Host`] over Envoy's dynamic-module ABI ([`NativeHost`]),
//! and what a worker builds once per configuration ([`Runtime`]).
//!
//! Node buckets and the breaker's state live in one process-wide
//! [`MapStore`] every worker thread shares: no shared-data host calls.
#![deny(unsafe_code)]

use crate::abi::{self, Envoy, EnvoyConfig, StatId, REQUEST_HEADER, RESPONSE_HEADER};
use ankusa_core::config::Config;
use ankusa_core::hook::headers::RequestHeaders;
use ankusa_core::hook::hook_id::{IdBits, RANDOM_BYTES};
use ankusa_core::hook::machine::{Level, Metric};
use ankusa_core::hook::reply::LocalReply;
use ankusa_core::hook::settle::Queued;
use ankusa_core::hook::worker::Worker;
use ankusa_core::node::cas::MapStore;
use ankusa_core::node::reload;
use ankusa_core::shell::host::Host;
use ankusa_core::shell::metrics::{MetricIds, Metrics, StatKind, Stats};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::LazyLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// The node's shared state (buckets, breaker, reload marks), process-wide.
pub static NODE: LazyLock<MapStore> = LazyLock::new(MapStore::new);

/// The filter-state key the decision is published under: the one the
/// proxy-wasm filter's property lands on (`wasm.ankusa`), so one access-log
/// format (`%FILTER_STATE(wasm.ankusa:PLAIN)%`) serves both shells.
pub const DECISION_KEY: &str = "wasm.ankusa";

/// A node name for claims when the configuration names none.
const DEFAULT_NODE: &str = "edge";

/// What every hook on one worker reads, built once per configuration.
pub struct Runtime {
    pub worker: Worker,
    pub metrics: Metrics<NativeStats>,
    node: String,
    ids: RefCell<IdBits>,
}

impl Runtime {
    /// Parses the configuration with the core's parser (refused with the
    /// field named), reads the signing secrets it names from the process
    /// environment, and resets the buckets of tenants a reload changed.
    pub fn configure(
        bytes: &[u8],
        stats: NativeStats,
        ids: MetricIds<StatId>,
    ) -> Result<Runtime, String> {
        let worker = Worker::configure(bytes, |name| std::env::var(name).ok(), &*NODE)?;
        let changed = reload::note_limit_changes(&*NODE, &worker.config);
        if !changed.is_empty() {
            abi::log(
                abi::LOG_INFO,
                &format!("ankusa: limits changed for {changed:?}; their buckets were reset"),
            );
        }
        let node = worker
            .config
            .node
            .clone()
            .unwrap_or_else(|| DEFAULT_NODE.to_string());
        Ok(Runtime {
            worker,
            metrics: Metrics::with_ids(stats, ids),
            node,
            ids: RefCell::new(IdBits::new(id_seed())),
        })
    }

    pub fn config(&self) -> &Config {
        &self.worker.config
    }
}

/// The seed of a worker's hook ids; should the OS's randomness fail, the
/// clock's µs still make one worker's seed differ from another's.
fn id_seed() -> [u8; RANDOM_BYTES] {
    let mut seed = [0u8; RANDOM_BYTES];
    if getrandom::getrandom(&mut seed).is_err() {
        seed[2..].copy_from_slice(&now_us().to_le_bytes());
    }
    seed
}

/// Envoy's stats through the filter configuration they were defined on.
#[derive(Clone, Copy, Debug)]
pub struct NativeStats(pub EnvoyConfig);

impl Stats for NativeStats {
    type Id = StatId;

    fn define(&self, kind: StatKind, name: &str) -> Option<StatId> {
        let kind = match kind {
            StatKind::Counter => 0,
            StatKind::Gauge => 1,
            StatKind::Histogram => 2,
        };
        self.0.define(kind, name)
    }

    fn increment(&self, id: StatId, by: u64) {
        self.0.write(id, by);
    }

    fn record(&self, id: StatId, value: u64) {
        self.0.write(id, value);
    }
}

/// µs since the unix epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// One stream's host: the worker's runtime and the Envoy filter of the hook
/// being run (set by [`NativeHost::enter`] at every hook).
pub struct NativeHost {
    rt: Rc<Runtime>,
    envoy: Cell<Option<Envoy>>,
    /// Within a body hook: the chunk Envoy is handing over counts.
    in_body: Cell<bool>,
}

impl NativeHost {
    pub fn new(rt: Rc<Runtime>) -> NativeHost {
        NativeHost {
            rt,
            envoy: Cell::new(None),
            in_body: Cell::new(false),
        }
    }

    /// The hook now running is on `envoy`'s filter.
    pub fn enter(&self, envoy: Envoy, in_body: bool) {
        self.envoy.set(Some(envoy));
        self.in_body.set(in_body);
    }

    fn with_envoy<R>(&self, otherwise: R, f: impl FnOnce(Envoy) -> R) -> R {
        match self.envoy.get() {
            Some(envoy) => f(envoy),
            None => otherwise,
        }
    }

    /// The request body's bytes so far.
    pub fn body_len(&self) -> usize {
        self.with_envoy(0, |e| e.request_body_len(self.in_body.get()))
    }
}

impl Host for NativeHost {
    type Store = MapStore;

    fn worker(&self) -> &Worker {
        &self.rt.worker
    }

    fn node(&self) -> &str {
        &self.rt.node
    }

    fn store(&self) -> &MapStore {
        &NODE
    }

    fn now_us(&self) -> u64 {
        now_us()
    }

    fn random(&self, _now_us: u64) -> [u8; RANDOM_BYTES] {
        self.rt.ids.borrow_mut().next_bits()
    }

    fn request_headers(&self) -> RequestHeaders {
        RequestHeaders::from_pairs(self.with_envoy(Vec::new(), |e| e.headers(REQUEST_HEADER)))
    }

    /// A value is added, not replaced: the machine removed every copy a
    /// sender sent before it sets one (as the wasm filter does).
    fn set_request_header(&self, name: &str, value: Option<&str>) {
        self.with_envoy((), |e| {
            let _ = match value {
                Some(value) => e.add_header(REQUEST_HEADER, name, value),
                None => e.set_header(REQUEST_HEADER, name, None),
            };
        })
    }

    fn set_response_header(&self, name: &str, value: &str) {
        self.with_envoy((), |e| {
            let _ = e.set_header(RESPONSE_HEADER, name, Some(value));
        })
    }

    fn remove_response_header(&self, name: &str) {
        self.with_envoy((), |e| {
            let _ = e.set_header(RESPONSE_HEADER, name, None);
        })
    }

    fn request_body(&self, size: usize) -> Vec<u8> {
        let mut body = self.with_envoy(Vec::new(), |e| e.request_body(self.in_body.get()));
        body.truncate(size);
        body
    }

    fn response_header(&self, name: &str) -> Option<String> {
        self.with_envoy(None, |e| {
            e.headers(RESPONSE_HEADER)
                .into_iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .and_then(|(_, v)| String::from_utf8(v).ok())
        })
    }

    /// No store call is ever made (fleet scopes are refused at configuration).
    fn call_answer(&self, _body_size: usize) -> (Option<String>, Option<Vec<u8>>) {
        (None, None)
    }

    /// Refused at once: the module makes no store call (fleet scopes are
    /// refused at configuration, so no hook plans one).
    fn dispatch(&self, _path: &str, _body: &[u8], _timeout_ms: u64) -> bool {
        false
    }

    fn wake_root(&self, _queue: u32) -> bool {
        false
    }

    fn reply(&self, reply: &LocalReply) {
        self.with_envoy((), |e| send_reply(e, reply))
    }

    /// Never reached: a stream without a runtime is answered by the filter
    /// itself (`Filter::request_headers`), which holds Envoy's pointer.
    fn reply_unconfigured(_reply: &LocalReply) {}

    fn resume(&self) {
        self.with_envoy((), Envoy::continue_decoding)
    }

    fn metric(&self, metric: Metric) {
        self.rt.metrics.apply(metric);
    }

    /// Node scopes hold no claim in the store: nothing to settle.
    fn settle(&self, _item: Queued) {}

    fn take_riding(&self) -> Vec<Queued> {
        Vec::new()
    }

    fn riding_settled(&self, _settles: Vec<Queued>, _applied: bool) {}

    fn publish(&self, line: &str) {
        self.with_envoy((), |e| {
            let _ = e.set_filter_state(DECISION_KEY, line.as_bytes());
        })
    }

    fn log(&self, level: Level, line: &str) {
        let level = match level {
            Level::Info => abi::LOG_INFO,
            Level::Warn => abi::LOG_WARN,
        };
        abi::log(level, line);
    }
}

/// A local reply: JSON, with `Retry-After` when it says when to come back,
/// and its rate-limit headers (as the wasm filter sends it).
pub fn send_reply(envoy: Envoy, reply: &LocalReply) {
    let retry = reply.retry_after.map(|s| s.to_string());
    let mut headers = vec![("content-type", "application/json")];
    if let Some(r) = &retry {
        headers.push(("retry-after", r.as_str()));
    }
    headers.extend(reply.headers.iter().map(|(k, v)| (*k, v.as_str())));
    envoy.send_response(reply.status, &headers, reply.body.as_bytes(), "ankusa");
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_core::hook::decision;

    #[test]
    fn the_decision_key_is_the_one_the_wasm_filter_writes() {
        assert_eq!(DECISION_KEY, format!("wasm.{}", decision::PROPERTY));
    }
}
