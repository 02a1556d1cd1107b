//! The host calls a hook makes, behind one trait: the request's headers and
//! body, the upstream's and the store's answers, the dispatch of a store
//! call, local replies, metrics, settles, the access log's decision, logs,
//! the clock and randomness.
//!
//! Each shell implements it over its host (the proxy-wasm filter's
//! `ProxyHost`, the native module's host over the dynamic-module ABI); the
//! filter's tests implement it in memory and record every call, so whole
//! hook lives run without Envoy.

use crate::hook::batch::with_settle;
use crate::hook::headers::RequestHeaders;
use crate::hook::hook_id::RANDOM_BYTES;
use crate::hook::machine::{self, Effect, Env, Flow, Level, Metric, Step};
use crate::hook::reply::LocalReply;
use crate::hook::settle::Queued;
use crate::hook::worker::Worker;
use crate::node::cas::CasStore;
use crate::wire::version::StoreWire;
use crate::wire::HIT_PATH;
use std::rc::Rc;

pub trait Host {
    type Store: CasStore;
    /// The configuration, keys and worker state every hook reads.
    fn worker(&self) -> &Worker;
    /// This edge's name in claims.
    fn node(&self) -> &str;
    /// The node's shared data.
    fn store(&self) -> &Self::Store;
    /// µs since the unix epoch.
    fn now_us(&self) -> u64;
    /// The random bytes of the next hook id (`now_us`: the hook's clock, for
    /// a host that has nothing better to draw from).
    fn random(&self, now_us: u64) -> [u8; RANDOM_BYTES];
    fn request_headers(&self) -> RequestHeaders;
    fn set_request_header(&self, name: &str, value: Option<&str>);
    /// Sets a header on the upstream's response.
    fn set_response_header(&self, name: &str, value: &str);
    /// Removes a header from the upstream's response.
    fn remove_response_header(&self, name: &str);
    fn request_body(&self, size: usize) -> Vec<u8>;
    /// One of the upstream's response headers (None: absent or not UTF-8).
    fn response_header(&self, name: &str) -> Option<String>;
    /// The store call's answer: `:status` (None: a reset) and body.
    fn call_answer(&self, body_size: usize) -> (Option<String>, Option<Vec<u8>>);
    /// POSTs to the store; false when the host refuses the call at once.
    fn dispatch(&self, path: &str, body: &[u8], timeout_ms: u64) -> bool;
    /// Wakes this worker's root through its wake `queue` (see
    /// [`crate::shell::batch`]); false when the wake could not be queued.
    fn wake_root(&self, queue: u32) -> bool;
    fn reply(&self, reply: &LocalReply);
    /// A reply with no configured host behind it (the filter has no configuration).
    fn reply_unconfigured(reply: &LocalReply)
    where
        Self: Sized;
    /// Lets a paused request go on.
    fn resume(&self);
    fn metric(&self, metric: Metric);
    fn settle(&self, item: Queued);
    /// Settle operations this worker holds, to ride on a hook's own hit
    /// call (`settle_batch_max` at most; see [`crate::hook::batch::with_settle`]).
    fn take_riding(&self) -> Vec<Queued>;
    /// The riding operations' fate: counted, and when not applied held again or dropped.
    fn riding_settled(&self, settles: Vec<Queued>, applied: bool);
    /// Writes the hook's decision line where Envoy's access log reads it.
    fn publish(&self, line: &str);
    fn log(&self, level: Level, line: &str);

    /// What the hook's state machine reads of this host.
    fn env(&self) -> Env<'_, Self::Store>
    where
        Self: Sized,
    {
        self.worker().env(self.node(), self.store())
    }
}

/// Performs a step's effects in order; the request's flow after them.
pub fn perform<H: Host>(host: &H, machine: &mut machine::Hook, step: Step) -> Flow {
    perform_riding(host, machine, step, &[], StoreWire::default())
}

/// [`perform`], the step's hit call (if any) carrying the settle
/// operations `riding`, written for a store of wire `wire`.
pub fn perform_riding<H: Host>(
    host: &H,
    machine: &mut machine::Hook,
    step: Step,
    riding: &[Queued],
    wire: StoreWire,
) -> Flow {
    for effect in step.effects {
        match effect {
            Effect::Header(name, value) => host.set_request_header(name, value.as_deref()),
            Effect::RemoveHeader(name) => host.set_request_header(&name, None),
            Effect::ResponseHeader(name, value) => host.set_response_header(name, &value),
            Effect::RemoveResponseHeader(name) => host.remove_response_header(name),
            Effect::Reply(reply) => host.reply(&reply),
            Effect::Decision(decision) => host.publish(&decision.render()),
            Effect::Settle(item) => host.settle(item),
            Effect::Metric(metric) => host.metric(metric),
            Effect::Log(level, line) => host.log(level, &line),
        }
    }
    if let Some(hit) = step.hit {
        let (path, body) = with_settle(HIT_PATH, hit.body, riding, wire);
        if !host.dispatch(path, &body, hit.timeout_ms) {
            let next = machine.on_dispatch_failed(&host.env(), host.now_us());
            return perform(host, machine, next);
        }
    }
    step.flow
}

/// A shared host is the host: a shell hands each hook an `Rc` of its own.
impl<H: Host> Host for Rc<H> {
    type Store = H::Store;

    fn worker(&self) -> &Worker {
        H::worker(self)
    }

    fn node(&self) -> &str {
        H::node(self)
    }

    fn store(&self) -> &Self::Store {
        H::store(self)
    }

    fn now_us(&self) -> u64 {
        H::now_us(self)
    }

    fn random(&self, now_us: u64) -> [u8; RANDOM_BYTES] {
        H::random(self, now_us)
    }

    fn request_headers(&self) -> RequestHeaders {
        H::request_headers(self)
    }

    fn set_request_header(&self, name: &str, value: Option<&str>) {
        H::set_request_header(self, name, value)
    }

    fn set_response_header(&self, name: &str, value: &str) {
        H::set_response_header(self, name, value)
    }

    fn remove_response_header(&self, name: &str) {
        H::remove_response_header(self, name)
    }

    fn request_body(&self, size: usize) -> Vec<u8> {
        H::request_body(self, size)
    }

    fn response_header(&self, name: &str) -> Option<String> {
        H::response_header(self, name)
    }

    fn call_answer(&self, body_size: usize) -> (Option<String>, Option<Vec<u8>>) {
        H::call_answer(self, body_size)
    }

    fn dispatch(&self, path: &str, body: &[u8], timeout_ms: u64) -> bool {
        H::dispatch(self, path, body, timeout_ms)
    }

    fn wake_root(&self, queue: u32) -> bool {
        H::wake_root(self, queue)
    }

    fn reply(&self, reply: &LocalReply) {
        H::reply(self, reply)
    }

    fn reply_unconfigured(reply: &LocalReply) {
        H::reply_unconfigured(reply)
    }

    fn resume(&self) {
        H::resume(self)
    }

    fn metric(&self, metric: Metric) {
        H::metric(self, metric)
    }

    fn settle(&self, item: Queued) {
        H::settle(self, item)
    }

    fn take_riding(&self) -> Vec<Queued> {
        H::take_riding(self)
    }

    fn riding_settled(&self, settles: Vec<Queued>, applied: bool) {
        H::riding_settled(self, settles, applied)
    }

    fn publish(&self, line: &str) {
        H::publish(self, line)
    }

    fn log(&self, level: Level, line: &str) {
        H::log(self, level, line)
    }
}
