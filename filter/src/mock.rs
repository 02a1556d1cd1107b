//! A [`Host`] in memory for unit tests: it records every call a hook makes
//! (headers set, replies, store calls with their bodies, settles, metric
//! deltas, logs, published decisions, resumes) and lets a test set the
//! request, the body, the store's answer (or refuse the dispatch) and the
//! upstream's answer.

use crate::batch_call::Root;
use crate::host::Host;
use ankusa_core::hook::headers::RequestHeaders;
use ankusa_core::hook::machine::{Level, Metric};
use ankusa_core::hook::outcome::Outcome;
use ankusa_core::hook::reply::LocalReply;
use ankusa_core::hook::settle::Queued;
use ankusa_core::hook::worker::Worker;
use ankusa_core::node::cas::MapStore;
use ankusa_core::wire::version::StoreWire;
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

thread_local! {
    /// Replies sent with no configured host (this test thread's).
    pub static UNCONFIGURED: RefCell<Vec<LocalReply>> = const { RefCell::new(Vec::new()) };
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreCall {
    pub path: String,
    pub body: serde_json::Value,
    pub timeout_ms: u64,
}

pub struct MockHost {
    /// What the filter's runtime builds for the configuration.
    pub worker: Worker,
    pub store: MapStore,
    pub now_us: Cell<u64>,
    pub request: RefCell<Vec<(String, Vec<u8>)>>,
    pub body: RefCell<Vec<u8>>,
    pub response: RefCell<Vec<(String, String)>>,
    pub refuse_dispatch: Cell<bool>,
    pub set_headers: RefCell<Vec<(String, Option<String>)>>,
    /// Headers set on the upstream's response.
    pub response_set: RefCell<Vec<(String, String)>>,
    /// Headers removed from the upstream's response.
    pub response_removed: RefCell<Vec<String>>,
    pub replies: RefCell<Vec<LocalReply>>,
    pub calls: RefCell<Vec<StoreCall>>,
    pub settles: RefCell<Vec<Queued>>,
    pub metrics: RefCell<Vec<Metric>>,
    pub logs: RefCell<Vec<(Level, String)>>,
    /// Decisions published for the access log, as written.
    pub published: RefCell<Vec<String>>,
    pub resumed: Cell<u32>,
    /// Wakes queued for the worker's root (their queue ids).
    pub wakes: RefCell<Vec<u32>>,
    /// The contexts the root entered to answer a parked hook, in order.
    pub entered: RefCell<Vec<u32>>,
    /// Settle operations that rode on a batched call, and whether the store applied them.
    pub rode: RefCell<Vec<(Vec<Queued>, bool)>>,
    /// Tick periods set on the root, in order (ms; 0: none).
    pub ticks: RefCell<Vec<u64>>,
    answer: RefCell<(Option<String>, Option<Vec<u8>>)>,
    /// Itself, for the root's `enter` (the core takes a shared host as the host).
    me: Weak<MockHost>,
}

impl MockHost {
    /// A host with `config`, the signing secrets `env` names, and the node's shared data created.
    pub fn new(config: &str, env: &[(&str, &str)]) -> Rc<MockHost> {
        let store = MapStore::new();
        let worker = Worker::configure_with_env(config.as_bytes(), env, &store).unwrap();
        Rc::new_cyclic(|me| MockHost {
            me: me.clone(),
            worker,
            store,
            now_us: Cell::new(1_700_000_000_000_000),
            request: RefCell::default(),
            body: RefCell::default(),
            response: RefCell::default(),
            refuse_dispatch: Cell::new(false),
            set_headers: RefCell::default(),
            response_set: RefCell::default(),
            response_removed: RefCell::default(),
            replies: RefCell::default(),
            calls: RefCell::default(),
            settles: RefCell::default(),
            metrics: RefCell::default(),
            logs: RefCell::default(),
            published: RefCell::default(),
            resumed: Cell::new(0),
            wakes: RefCell::default(),
            entered: RefCell::default(),
            rode: RefCell::default(),
            ticks: RefCell::default(),
            answer: RefCell::default(),
        })
    }

    /// The admission outcomes counted so far, in order.
    pub fn admissions(&self) -> Vec<Outcome> {
        self.metrics
            .borrow()
            .iter()
            .filter_map(|m| match m {
                Metric::Admission(o) => Some(*o),
                _ => None,
            })
            .collect()
    }

    /// The request the sender makes.
    pub fn request(&self, pairs: &[(&str, &str)], body: &[u8]) {
        *self.request.borrow_mut() = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect();
        *self.body.borrow_mut() = body.to_vec();
    }

    /// What the store (or Envoy in its place) answers the next call.
    pub fn answer(&self, status: Option<&str>, body: &str) {
        *self.answer.borrow_mut() = (status.map(str::to_string), Some(body.as_bytes().to_vec()));
    }

    /// The upstream's response headers.
    pub fn respond(&self, pairs: &[(&str, &str)]) {
        *self.response.borrow_mut() = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }
}

impl Host for MockHost {
    type Store = MapStore;

    fn worker(&self) -> &Worker {
        &self.worker
    }

    fn node(&self) -> &str {
        "edge-1"
    }

    fn store(&self) -> &MapStore {
        &self.store
    }

    fn now_us(&self) -> u64 {
        self.now_us.get()
    }

    fn random(&self, _now_us: u64) -> [u8; 10] {
        [7; 10]
    }

    fn request_headers(&self) -> RequestHeaders {
        RequestHeaders::from_pairs(self.request.borrow().clone())
    }

    fn set_request_header(&self, name: &str, value: Option<&str>) {
        self.set_headers
            .borrow_mut()
            .push((name.to_string(), value.map(str::to_string)));
    }

    fn set_response_header(&self, name: &str, value: &str) {
        self.response_set
            .borrow_mut()
            .push((name.to_string(), value.to_string()));
    }

    fn remove_response_header(&self, name: &str) {
        self.response_removed.borrow_mut().push(name.to_string());
    }

    fn request_body(&self, size: usize) -> Vec<u8> {
        let body = self.body.borrow();
        body[..size.min(body.len())].to_vec()
    }

    fn response_header(&self, name: &str) -> Option<String> {
        self.response
            .borrow()
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }

    fn call_answer(&self, _body_size: usize) -> (Option<String>, Option<Vec<u8>>) {
        self.answer.borrow().clone()
    }

    fn dispatch(&self, path: &str, body: &[u8], timeout_ms: u64) -> bool {
        self.calls.borrow_mut().push(StoreCall {
            path: path.to_string(),
            body: serde_json::from_slice(body).unwrap(),
            timeout_ms,
        });
        !self.refuse_dispatch.get()
    }

    fn reply(&self, reply: &LocalReply) {
        self.replies.borrow_mut().push(reply.clone());
    }

    fn reply_unconfigured(reply: &LocalReply) {
        UNCONFIGURED.with(|r| r.borrow_mut().push(reply.clone()));
    }

    fn resume(&self) {
        self.resumed.set(self.resumed.get() + 1);
    }

    fn metric(&self, metric: Metric) {
        self.metrics.borrow_mut().push(metric);
    }

    fn settle(&self, item: Queued) {
        self.settles.borrow_mut().push(item);
    }

    fn take_riding(&self) -> Vec<Queued> {
        let max = self.worker.config.fleet.settle_batch_max;
        self.worker.held.borrow_mut().take(max)
    }

    fn riding_settled(&self, settles: Vec<Queued>, applied: bool) {
        self.rode.borrow_mut().push((settles, applied));
    }

    fn wake_root(&self, queue: u32) -> bool {
        self.wakes.borrow_mut().push(queue);
        true
    }

    fn publish(&self, line: &str) {
        self.published.borrow_mut().push(line.to_string());
    }

    fn log(&self, level: Level, line: &str) {
        self.logs.borrow_mut().push((level, line.to_string()));
    }
}

/// The root's side of batching over the same host: a batched call is
/// recorded with the hooks' own calls (its token: its place among them).
impl crate::tick::Ticks for MockHost {
    fn set_tick_period(&self, ms: u64) {
        self.ticks.borrow_mut().push(ms);
    }
}

impl Root for MockHost {
    type HookHost = Rc<MockHost>;

    fn now_us(&self) -> u64 {
        self.now_us.get()
    }

    fn send(&self, path: &str, body: &[u8], timeout_ms: u64, _members: &[u32]) -> Option<u32> {
        if !self.dispatch(path, body, timeout_ms) {
            return None;
        }
        u32::try_from(self.calls.borrow().len()).ok()
    }

    fn riding_settles(&self) -> Vec<Queued> {
        let max = self.worker.config.fleet.settle_batch_max;
        self.worker.held.borrow_mut().take(max)
    }

    fn settled(&self, settles: Vec<Queued>, ok: bool) {
        self.rode.borrow_mut().push((settles, ok));
    }

    fn store_wire(&self) -> StoreWire {
        StoreWire::of_node(&self.store)
    }

    fn store_refused(&self) {
        let version = StoreWire::refused(&self.store, &self.worker.store_wire);
        self.metrics
            .borrow_mut()
            .push(Metric::StoreWire(u64::from(version)));
    }

    fn call_answer(&self, body_size: usize) -> (Option<String>, Option<Vec<u8>>) {
        Host::call_answer(self, body_size)
    }

    fn enter(&self, id: u32) -> Option<Rc<MockHost>> {
        self.entered.borrow_mut().push(id);
        self.me.upgrade()
    }
}
