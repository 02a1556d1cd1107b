//! The module's filter: Envoy's HTTP filter hooks mapped onto the core's
//! [`Stream`], exactly as the proxy-wasm filter maps its callbacks. Nothing
//! here decides anything about admission.
//!
//! Envoy builds one [`ModuleConfig`] per filter configuration on its main
//! thread and makes filters from it on every worker; the core's
//! [`Worker`](ankusa_core::hook::worker::Worker) is one worker's state, so
//! each worker thread builds its own [`Runtime`] from the configuration on
//! first use, as each wasm VM does in `on_configure`.
#![deny(unsafe_code)]

use crate::abi::{self, Answer, Envoy, EnvoyConfig, StatId};
use crate::host::{send_reply, NativeHost, NativeStats, Runtime};
use crate::node::Node;
use crate::{direct, root, store};
use ankusa_core::hook::machine::Flow;
use ankusa_core::hook::reply::{self, LocalReply};
use ankusa_core::shell::hook::Stream;
use ankusa_core::shell::metrics::MetricIds;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Configurations made so far: each gets its own id, so a worker's runtime
/// for an old one is never mistaken for a new one's.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The filter's configuration as Envoy handed it over, checked once, and
/// the stats defined on Envoy's configuration for it.
pub struct ModuleConfig {
    id: u64,
    bytes: Vec<u8>,
    stats: NativeStats,
    ids: MetricIds<StatId>,
    /// The node's background calls (None: the configuration makes none).
    node: Option<Node>,
}

impl ModuleConfig {
    /// Checks the configuration with the core's own parser (and the signing
    /// secrets it names in the environment, and the store token) and keeps
    /// it for the workers; starts the node's background tick when it calls
    /// the store ([`Node`]).
    ///
    /// Called on Envoy's main thread, where stats may be defined: every
    /// metric is defined here, under the wasm filter's names.
    pub fn new(bytes: &[u8], envoy: EnvoyConfig) -> Result<ModuleConfig, String> {
        let stats = NativeStats(envoy);
        let ids = MetricIds::define(&stats);
        let rt = Runtime::configure(bytes, stats, ids.clone())?;
        if rt.authorization.is_none() {
            if let Some(line) = store::missing_token(rt.config()) {
                abi::log(abi::LOG_ERROR, &line);
            }
        }
        Ok(ModuleConfig {
            id: GENERATION.fetch_add(1, Ordering::Relaxed),
            bytes: bytes.to_vec(),
            stats,
            ids,
            node: Node::start(envoy, rt.config()),
        })
    }

    /// The node's tick, on Envoy's main thread.
    pub fn tick(&self) {
        if let (Some(node), Some(rt)) = (&self.node, runtime(self)) {
            node.tick(&rt);
        }
    }

    /// The answer to one of the configuration's callouts, on the main thread.
    pub fn callout_done(&self, callout: u64, answer: Answer) {
        if let (Some(node), Some(rt)) = (&self.node, runtime(self)) {
            node.answered(&rt, callout, answer);
        }
    }
}

thread_local! {
    /// This worker's runtime per configuration id.
    static RUNTIMES: RefCell<HashMap<u64, Rc<Runtime>>> = RefCell::new(HashMap::new());
}

/// This worker's runtime for `config`, built on first use (None: the
/// configuration no longer holds here, e.g. a secret left the environment).
fn runtime(config: &ModuleConfig) -> Option<Rc<Runtime>> {
    RUNTIMES.with(|r| {
        if let Some(rt) = r.borrow().get(&config.id) {
            return Some(Rc::clone(rt));
        }
        match Runtime::configure(&config.bytes, config.stats, config.ids.clone()) {
            Ok(rt) => {
                let rt = Rc::new(rt);
                if rt.config().uses_store() {
                    root::init();
                }
                let mut r = r.borrow_mut();
                // One configuration in force per worker: an old one's runtime goes.
                r.retain(|id, _| *id > config.id);
                r.insert(config.id, Rc::clone(&rt));
                Some(rt)
            }
            Err(message) => {
                abi::log(
                    abi::LOG_ERROR,
                    &format!("ankusa: configuration refused on this worker: {message}"),
                );
                None
            }
        }
    })
}

/// Stream ids on this worker (the batching seam keys parked hooks by them).
static STREAMS: AtomicU64 = AtomicU64::new(1);

/// One HTTP stream's filter.
pub struct Filter {
    /// The stream's id on its worker (how a batched call finds its hook).
    id: u32,
    /// None: the configuration didn't hold on this worker; every request is
    /// answered 503 (not configured), as the wasm filter answers without one.
    stream: Option<Stream<Rc<NativeHost>>>,
    /// A hook panicked: the request was answered 500 and nothing more is done.
    failed: bool,
    /// The stream took part in the worker's batched calls and has not left them.
    batching: bool,
}

impl Filter {
    pub fn new(config: &ModuleConfig) -> Filter {
        let id = u32::try_from(STREAMS.fetch_add(1, Ordering::Relaxed) % u64::from(u32::MAX))
            .unwrap_or(0);
        let mut batching = false;
        let stream = runtime(config).map(|rt| {
            let host = Rc::new(NativeHost::new(rt));
            if host.runtime().config().uses_store() {
                root::register(id, Rc::clone(&host));
                batching = true;
            }
            Stream::new(Some(host)).in_context(id)
        });
        Filter {
            id,
            stream,
            failed: false,
            batching,
        }
    }

    /// The stream's host, pointed at the hook's Envoy filter.
    fn enter(&mut self, envoy: Envoy, in_body: bool) -> Option<&mut Stream<Rc<NativeHost>>> {
        if self.failed {
            return None;
        }
        let stream = self.stream.as_mut()?;
        if let Some(host) = stream.host() {
            host.enter(envoy, in_body);
        }
        Some(stream)
    }

    pub fn request_headers(&mut self, envoy: Envoy, end_of_stream: bool) -> Flow {
        if self.stream.is_none() && !self.failed {
            send_reply(envoy, &reply::not_configured());
            return Flow::Pause;
        }
        match self.enter(envoy, false) {
            Some(stream) => stream.on_request_headers(end_of_stream),
            None => Flow::Pause,
        }
    }

    pub fn request_body(&mut self, envoy: Envoy, end_of_stream: bool) -> Flow {
        match self.enter(envoy, true) {
            Some(stream) => {
                let host = stream.host().map(Rc::clone);
                stream.on_request_body(move || host.map_or(0, |h| h.body_len()), end_of_stream)
            }
            None => Flow::Pause,
        }
    }

    pub fn request_trailers(&mut self, envoy: Envoy) -> Flow {
        match self.enter(envoy, false) {
            Some(stream) => stream.on_request_trailers(),
            None => Flow::Pause,
        }
    }

    pub fn response_headers(&mut self, envoy: Envoy) {
        if let Some(stream) = self.enter(envoy, false) {
            stream.on_response_headers();
        }
    }

    pub fn stream_complete(&mut self, envoy: Envoy) {
        if let Some(stream) = self.enter(envoy, false) {
            stream.on_stream_end();
        }
        self.leave_batching();
    }

    /// A store call's answer: this stream's own hit call, or a batched call
    /// it carries for its worker's waiting hooks ([`crate::root`]).
    pub fn callout_done(&mut self, envoy: Envoy, callout: u64, answer: Answer) {
        let id = self.id;
        let Some(stream) = self.enter(envoy, false) else {
            return;
        };
        let Some(host) = stream.host().map(Rc::clone) else {
            return;
        };
        if host.owns_call(callout) {
            store::answering(answer, |len| stream.on_call_answer(len));
        } else {
            root::answer(host.runtime(), id, callout, answer);
        }
    }

    /// An event of this stream's scheduler: the worker's batching woken, or
    /// the answer of a call on the module's own connection ([`crate::direct`]).
    pub fn scheduled(&mut self, envoy: Envoy, event: u64) {
        let Some(stream) = self.enter(envoy, false) else {
            return;
        };
        let Some(host) = stream.host().map(Rc::clone) else {
            return;
        };
        if direct::is_answer(event) {
            // A direct call's answer: taken as its callout's would be.
            if let Some(answer) = host.direct_answer(event) {
                self.callout_done(envoy, event, answer);
            }
        } else if host.take_wake() {
            root::wake(host.runtime(), u32::try_from(event).unwrap_or(0));
        }
    }

    /// The stream is over: no batched call leaves from it or is answered to
    /// it; the calls it carries are answered as reset to their other hooks,
    /// and a wake it still owes runs now.
    fn leave_batching(&mut self) {
        if !std::mem::take(&mut self.batching) {
            return;
        }
        root::deregister(self.id);
        let Some(host) = self.stream.as_ref().and_then(|s| s.host()).map(Rc::clone) else {
            return;
        };
        root::abandon(host.runtime(), self.id);
        if host.take_wake() {
            root::wake(host.runtime(), root::WAKE_QUEUE);
        }
    }

    /// A hook panicked: the request is answered 500 (once) and never
    /// forwarded; the stream's state is dropped with what it held.
    pub fn fail_closed(&mut self, envoy: Envoy) {
        if self.failed {
            return;
        }
        self.failed = true;
        self.leave_batching();
        if let Some(host) = self.stream.as_ref().and_then(|s| s.host()) {
            host.release();
        }
        self.stream = None;
        send_reply(
            envoy,
            &LocalReply {
                status: 500,
                body: r#"{"error":"internal"}"#.into(),
                retry_after: Some(1),
                headers: Vec::new(),
            },
        );
    }
}

impl Drop for Filter {
    /// Envoy destroys the stream (after `stream_complete`, or without it):
    /// it leaves the worker's batching, and its scheduler goes.
    fn drop(&mut self) {
        self.leave_batching();
        if let Some(host) = self.stream.as_ref().and_then(|s| s.host()) {
            host.release();
        }
    }
}
