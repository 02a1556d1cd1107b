//! The core's [`Host`] over Envoy's dynamic-module ABI ([`NativeHost`]),
//! and what a worker builds once per configuration ([`Runtime`]).
//!
//! Node buckets, the breaker's state and the settle queue live process-wide
//! ([`NODE`], [`SETTLES`]), shared by every worker thread: no shared-data
//! host calls. A hook's hit call is an HTTP callout from its own stream;
//! the batched calls of a worker's waiting hooks are [`crate::root`]'s.
#![deny(unsafe_code)]

use crate::abi::{
    self, Envoy, EnvoyConfig, SharedScheduler, StatId, REQUEST_HEADER, RESPONSE_HEADER,
};
use crate::{direct, store};
use ankusa_core::config::Config;
use ankusa_core::fleet::edges;
use ankusa_core::hook::headers::RequestHeaders;
use ankusa_core::hook::hook_id::{IdBits, RANDOM_BYTES};
use ankusa_core::hook::machine::{Level, Metric};
use ankusa_core::hook::reply::LocalReply;
use ankusa_core::hook::settle::{Enqueued, Queued};
use ankusa_core::hook::worker::Worker;
use ankusa_core::node::cas::{read_u64, MapStore};
use ankusa_core::node::edge_keys::DEPTH_KEY;
use ankusa_core::node::{node_name, reload};
use ankusa_core::shell::drain::settled_with;
use ankusa_core::shell::host::Host;
use ankusa_core::shell::metrics::{MetricIds, Metrics, StatKind, Stats};
use ankusa_core::shell::native::SettleQueue;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::{Arc, LazyLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// The node's shared state (buckets, breaker, reload marks), process-wide.
pub static NODE: LazyLock<MapStore> = LazyLock::new(MapStore::new);

/// The node's settle operations, process-wide: hit calls carry them, the
/// configuration's tick sends the rest ([`crate::node`]).
pub static SETTLES: SettleQueue = SettleQueue::new();

/// The filter-state key the decision is published under: the one the
/// proxy-wasm filter's property lands on (`wasm.ankusa`), so one access-log
/// format (`%FILTER_STATE(wasm.ankusa:PLAIN)%`) serves both shells.
pub const DECISION_KEY: &str = "wasm.ankusa";

/// A node name for claims when neither the configuration nor Envoy's
/// command line names one.
const DEFAULT_NODE: &str = "edge";

/// What every hook on one worker reads, built once per configuration.
pub struct Runtime {
    pub worker: Worker,
    pub metrics: Metrics<NativeStats>,
    node: String,
    ids: RefCell<IdBits>,
    /// `Bearer <token>` for every store call (None: no token).
    pub authorization: Option<String>,
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
        let authorization = store::authorization()?;
        let changed = reload::note_limit_changes(&*NODE, &worker.config);
        if !changed.is_empty() {
            abi::log(
                abi::LOG_INFO,
                &format!("ankusa: limits changed for {changed:?}; their buckets were reset"),
            );
        }
        let node = match &worker.config.node {
            Some(node) => node.clone(),
            None => service_node().unwrap_or_else(|| DEFAULT_NODE.to_string()),
        };
        let runtime = Runtime {
            worker,
            metrics: Metrics::with_ids(stats, ids),
            node,
            ids: RefCell::new(IdBits::new(id_seed())),
            authorization,
        };
        if runtime.config().uses_store() {
            // The share in force before any answer: the count the node last
            // heard (kept across reloads), or the configuration's.
            let live = edges::heard(&*NODE);
            let share_ppm = edges::share_of(&runtime.config().fleet, live).ppm();
            runtime.metrics.edges(live, share_ppm);
        }
        Ok(runtime)
    }

    pub fn config(&self) -> &Config {
        &self.worker.config
    }

    /// Holds a settle operation for the next hit call; a batch's worth goes
    /// to the node's queue at once (as a wasm worker holds its own).
    pub fn settle(&self, item: Queued) {
        let fleet = &self.config().fleet;
        for item in SETTLES.hold(item, now_us(), fleet.settle_batch_max) {
            self.enqueue(item);
        }
    }

    /// Queues a settle operation on the node's queue; a full queue drops it
    /// and counts the drop.
    pub fn enqueue(&self, item: Queued) {
        match SETTLES.enqueue(&*NODE, self.config().fleet.settle_queue_max, item) {
            Enqueued::Queued(depth) => self.metrics.settle_depth(depth),
            Enqueued::Dropped => self.metrics.settle_dropped(1),
        }
    }

    /// The held settle operations, up to `settle_batch_max`, to ride on a hook's own hit.
    pub fn held(&self) -> Vec<Queued> {
        SETTLES.take_held(self.config().fleet.settle_batch_max)
    }

    /// Settle operations to ride on a batched call: the held ones first,
    /// then the node's queue's, `settle_batch_max` at most.
    pub fn riding(&self) -> Vec<Queued> {
        let max = self.config().fleet.settle_batch_max;
        let mut batch = SETTLES.take_held(max);
        let queued = SETTLES.dequeue(&*NODE, max - batch.len());
        if !queued.is_empty() {
            self.metrics.settle_depth(read_u64(&*NODE, DEPTH_KEY).0);
        }
        batch.extend(queued);
        batch
    }

    /// The riding operations' fate: counted, and when not applied queued
    /// again (or dropped once out of retries).
    pub fn settled(&self, settles: Vec<Queued>, applied: bool) {
        let retries = self.config().fleet.settle_retries;
        settled_with(&self.metrics, retries, settles, applied, |item| {
            self.settle(item)
        });
    }

    /// Sends a store call for the stream on `envoy`: as its HTTP callout,
    /// or on the module's own connection (`fleet.connection: "direct"`),
    /// answered through `scheduler`. The call's id, or None when refused.
    fn call(
        &self,
        envoy: Envoy,
        scheduler: impl FnOnce() -> Arc<SharedScheduler>,
        path: &str,
        body: &[u8],
        timeout_ms: u64,
    ) -> Option<u64> {
        let mut budget = String::new();
        let fleet = &self.config().fleet;
        let call = store::call(
            fleet,
            self.authorization.as_deref(),
            path,
            Some(body),
            timeout_ms,
            &mut budget,
        );
        match fleet.connection.direct() {
            None => envoy.callout(&call),
            Some(addr) => direct::send(
                addr,
                direct::http1::request(&call),
                timeout_ms,
                &scheduler(),
            ),
        }
    }
}

/// Envoy's `--service-node` (as a wire name), read from the process's
/// command line: the module's ABI hands a filter no node id (the wasm
/// filter reads `xds.node.id`). None when Envoy was started without it.
fn service_node() -> Option<String> {
    let cmdline = std::fs::read("/proc/self/cmdline").ok()?;
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    let id = args.iter().enumerate().find_map(|(i, arg)| {
        if *arg == b"--service-node" {
            args.get(i + 1).copied()
        } else {
            arg.strip_prefix(b"--service-node=")
        }
    })?;
    let id = String::from_utf8_lossy(id);
    let name = node_name::wire_name(&id);
    (!name.is_empty()).then_some(name)
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
    /// The callout id of the hit call this stream sent on its own.
    own_call: Cell<Option<u64>>,
    /// This stream's scheduler, made on its first wake of the worker's
    /// batching or its first direct call; shared with the direct calls in flight.
    scheduler: RefCell<Option<Arc<SharedScheduler>>>,
    /// Direct calls sent for this stream and not answered to it yet.
    direct_calls: RefCell<Vec<u64>>,
    /// A wake committed on this stream's scheduler has not run yet.
    wake_owed: Cell<bool>,
}

impl NativeHost {
    pub fn new(rt: Rc<Runtime>) -> NativeHost {
        NativeHost {
            rt,
            envoy: Cell::new(None),
            in_body: Cell::new(false),
            own_call: Cell::new(None),
            scheduler: RefCell::new(None),
            direct_calls: RefCell::new(Vec::new()),
            wake_owed: Cell::new(false),
        }
    }

    pub fn runtime(&self) -> &Rc<Runtime> {
        &self.rt
    }

    /// Whether callout `id` is this stream's own hit call; if so it is answered.
    pub fn owns_call(&self, id: u64) -> bool {
        let ours = self.own_call.get() == Some(id);
        if ours {
            self.own_call.set(None);
        }
        ours
    }

    /// Whether a wake this stream committed is still owed; it is taken.
    pub fn take_wake(&self) -> bool {
        self.wake_owed.replace(false)
    }

    /// The stream is destroyed: the answers of its direct calls will be
    /// dropped, and its scheduler goes (once no call holds it either).
    pub fn release(&self) {
        for id in self.direct_calls.borrow_mut().drain(..) {
            direct::forget(id);
        }
        self.scheduler.borrow_mut().take();
    }

    /// This stream's scheduler, made on first use.
    fn scheduler(&self, envoy: Envoy) -> Arc<SharedScheduler> {
        let mut scheduler = self.scheduler.borrow_mut();
        Arc::clone(
            scheduler.get_or_insert_with(|| Arc::new(SharedScheduler::new(envoy.scheduler()))),
        )
    }

    /// Sends a store call for this stream (see [`Runtime::call`]): its id.
    pub fn call(&self, path: &str, body: &[u8], timeout_ms: u64) -> Option<u64> {
        let envoy = self.envoy.get()?;
        let id = self
            .rt
            .call(envoy, || self.scheduler(envoy), path, body, timeout_ms)?;
        if direct::is_answer(id) {
            self.direct_calls.borrow_mut().push(id);
        }
        Some(id)
    }

    /// The answer of direct call `id`, handed over to this stream (None:
    /// not one of its calls, or taken already).
    pub fn direct_answer(&self, id: u64) -> Option<abi::Answer> {
        let mut calls = self.direct_calls.borrow_mut();
        let at = calls.iter().position(|c| *c == id)?;
        calls.swap_remove(at);
        direct::take(id)
    }

    /// The hook now running is on `envoy`'s filter.
    pub fn enter(&self, envoy: Envoy, in_body: bool) {
        self.envoy.set(Some(envoy));
        self.in_body.set(in_body);
    }

    /// The stream's Envoy filter (None: no hook has run yet).
    pub fn envoy(&self) -> Option<Envoy> {
        self.envoy.get()
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

    /// The answer being handed over ([`store::answering`]).
    fn call_answer(&self, body_size: usize) -> (Option<String>, Option<Vec<u8>>) {
        store::answer(body_size)
    }

    /// An HTTP callout from this stream, answered to it
    /// (`on_http_filter_http_callout_done`).
    fn dispatch(&self, path: &str, body: &[u8], timeout_ms: u64) -> bool {
        let id = self.call(path, body, timeout_ms);
        self.own_call.set(id);
        id.is_some()
    }

    /// A hook's callback can't send the worker's batched call while its own
    /// machine is not parked yet: the wake runs one event-loop turn later,
    /// through this stream's scheduler (`on_http_filter_scheduled`). Should
    /// the stream end first, the wake runs as it ends (`Filter::stream_complete`).
    fn wake_root(&self, queue: u32) -> bool {
        let Some(envoy) = self.envoy.get() else {
            return false;
        };
        self.scheduler(envoy).commit(u64::from(queue));
        self.wake_owed.set(true);
        true
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

    fn settle(&self, item: Queued) {
        self.rt.settle(item);
    }

    fn take_riding(&self) -> Vec<Queued> {
        self.rt.held()
    }

    fn riding_settled(&self, settles: Vec<Queued>, applied: bool) {
        self.rt.settled(settles, applied);
    }

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
