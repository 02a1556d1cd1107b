//! A [`Host`] in memory for unit tests: it records every call a hook makes
//! (headers set, replies, store calls with their bodies, settles, metric
//! deltas, logs, published decisions, resumes) and lets a test set the
//! request, the body, the store's answer (or refuse the dispatch) and the
//! upstream's answer.

use crate::host::Host;
use ankusa_core::breaker::SeenClosed;
use ankusa_core::cas::{ensure_keys, MapStore};
use ankusa_core::config::Config;
use ankusa_core::edge_keys::{BUCKET_PREFIX, BUCKET_SLOTS, FIXED};
use ankusa_core::edges::EdgesSeen;
use ankusa_core::hook::headers::RequestHeaders;
use ankusa_core::hook::machine::{Level, Metric};
use ankusa_core::hook::reply::LocalReply;
use ankusa_core::hook::settle::Queued;
use ankusa_core::node_buckets::NodeBuckets;
use ankusa_core::verify::Keys;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

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
    pub config: Config,
    pub keys: Keys,
    pub store: MapStore,
    pub seen_closed: SeenClosed,
    pub edges_seen: EdgesSeen,
    pub now_us: Cell<u64>,
    pub request: RefCell<Vec<(String, Vec<u8>)>>,
    pub body: RefCell<Vec<u8>>,
    pub response: RefCell<Vec<(String, String)>>,
    pub refuse_dispatch: Cell<bool>,
    pub set_headers: RefCell<Vec<(String, Option<String>)>>,
    /// Headers set on the upstream's response.
    pub response_set: RefCell<Vec<(String, String)>>,
    pub replies: RefCell<Vec<LocalReply>>,
    pub calls: RefCell<Vec<StoreCall>>,
    pub settles: RefCell<Vec<Queued>>,
    pub metrics: RefCell<Vec<Metric>>,
    pub logs: RefCell<Vec<(Level, String)>>,
    /// Decisions published for the access log, as written.
    pub published: RefCell<Vec<String>>,
    pub resumed: Cell<u32>,
    answer: RefCell<(Option<String>, Option<Vec<u8>>)>,
}

impl MockHost {
    /// A host with `config`, the signing secrets `env` names, and the node's shared data created.
    pub fn new(config: &str, env: &[(&str, &str)]) -> Rc<MockHost> {
        let config = Config::parse(config.as_bytes()).unwrap();
        let keys = Keys::resolve(&config, |name| {
            env.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
        .unwrap();
        let store = MapStore::new();
        let buckets = NodeBuckets::new(&store, BUCKET_PREFIX, BUCKET_SLOTS);
        ensure_keys(&store, buckets.keys().chain(FIXED.map(String::from)));
        Rc::new(MockHost {
            config,
            keys,
            store,
            seen_closed: SeenClosed::default(),
            edges_seen: EdgesSeen::default(),
            now_us: Cell::new(1_700_000_000_000_000),
            request: RefCell::default(),
            body: RefCell::default(),
            response: RefCell::default(),
            refuse_dispatch: Cell::new(false),
            set_headers: RefCell::default(),
            response_set: RefCell::default(),
            replies: RefCell::default(),
            calls: RefCell::default(),
            settles: RefCell::default(),
            metrics: RefCell::default(),
            logs: RefCell::default(),
            published: RefCell::default(),
            resumed: Cell::new(0),
            answer: RefCell::default(),
        })
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

impl Host for Rc<MockHost> {
    type Store = MapStore;

    fn config(&self) -> &Config {
        &self.config
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn node(&self) -> &str {
        "edge-1"
    }

    fn seen_closed(&self) -> &SeenClosed {
        &self.seen_closed
    }

    fn edges_seen(&self) -> &EdgesSeen {
        &self.edges_seen
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

    fn publish(&self, line: &str) {
        self.published.borrow_mut().push(line.to_string());
    }

    fn log(&self, level: Level, line: &str) {
        self.logs.borrow_mut().push((level, line.to_string()));
    }
}
