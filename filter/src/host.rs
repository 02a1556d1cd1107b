//! The host calls a hook makes, behind one trait: the request's headers and
//! body, the upstream's and the store's answers, the dispatch of a store
//! call, local replies, metrics, settles, the access log's decision, logs,
//! the clock and randomness.
//!
//! [`ProxyHost`] is Envoy through proxy-wasm; the tests' mock records every
//! call, so whole hook lives run without Envoy.

use crate::headers;
use crate::runtime::{call_store, Runtime, SHARED};
use crate::shared::{now_us, SharedData};
use ankusa_core::hook::batch::with_settle;
use ankusa_core::hook::decision;
use ankusa_core::hook::headers::RequestHeaders;
use ankusa_core::hook::hook_id::RANDOM_BYTES;
use ankusa_core::hook::machine::{self, Effect, Env, Flow, Level, Metric, Step};
use ankusa_core::hook::reply::LocalReply;
use ankusa_core::hook::settle::Queued;
use ankusa_core::hook::worker::Worker;
use ankusa_core::node::cas::CasStore;
use ankusa_core::wire::version::StoreWire;
use ankusa_core::wire::HIT_PATH;
use proxy_wasm::hostcalls;
use proxy_wasm::types::{BufferType, MapType};
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
    /// [`crate::batch`]); false when the wake could not be queued.
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
    /// call (`settle_batch_max` at most; see [`ankusa_core::hook::batch::with_settle`]).
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

/// Envoy, through proxy-wasm hostcalls.
pub struct ProxyHost(pub Rc<Runtime>);

impl Host for ProxyHost {
    type Store = SharedData;

    fn worker(&self) -> &Worker {
        &self.0.worker
    }

    fn node(&self) -> &str {
        self.0.node()
    }

    fn store(&self) -> &SharedData {
        &SHARED
    }

    fn now_us(&self) -> u64 {
        now_us()
    }

    /// From the VM's seed, drawn once (see [`ankusa_core::hook::hook_id::IdBits`]).
    fn random(&self, _now_us: u64) -> [u8; RANDOM_BYTES] {
        self.0.id_bits()
    }

    fn request_headers(&self) -> RequestHeaders {
        headers::request_headers()
    }

    /// A value is added, not replaced: the machine names only its own
    /// headers, and removed every copy a sender sent before it sets one, so
    /// adding is setting, without Envoy's search for a copy to replace.
    fn set_request_header(&self, name: &str, value: Option<&str>) {
        let _ = match value {
            Some(value) => hostcalls::add_map_value(MapType::HttpRequestHeaders, name, value),
            None => hostcalls::set_map_value(MapType::HttpRequestHeaders, name, None),
        };
    }

    fn set_response_header(&self, name: &str, value: &str) {
        let _ = hostcalls::set_map_value(MapType::HttpResponseHeaders, name, Some(value));
    }

    fn remove_response_header(&self, name: &str) {
        let _ = hostcalls::set_map_value(MapType::HttpResponseHeaders, name, None);
    }

    fn request_body(&self, size: usize) -> Vec<u8> {
        hostcalls::get_buffer(BufferType::HttpRequestBody, 0, size)
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    fn response_header(&self, name: &str) -> Option<String> {
        headers::value(MapType::HttpResponseHeaders, name)
    }

    fn call_answer(&self, body_size: usize) -> (Option<String>, Option<Vec<u8>>) {
        let status = headers::value(MapType::HttpCallResponseHeaders, ":status");
        let body = hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, body_size)
            .ok()
            .flatten();
        (status, body)
    }

    fn dispatch(&self, path: &str, body: &[u8], timeout_ms: u64) -> bool {
        call_store(&self.0.config().fleet, path, body, timeout_ms).is_ok()
    }

    fn wake_root(&self, queue: u32) -> bool {
        hostcalls::enqueue_shared_queue(queue, Some(b"w")).is_ok()
    }

    fn reply(&self, reply: &LocalReply) {
        send_reply(reply);
    }

    fn reply_unconfigured(reply: &LocalReply) {
        send_reply(reply);
    }

    fn resume(&self) {
        let _ = hostcalls::resume_http_request();
    }

    fn metric(&self, metric: Metric) {
        self.0.metrics.apply(metric);
    }

    fn settle(&self, item: Queued) {
        self.0.settle(item);
    }

    fn take_riding(&self) -> Vec<Queued> {
        self.0.take_held(self.0.config().fleet.settle_batch_max)
    }

    fn riding_settled(&self, settles: Vec<Queued>, applied: bool) {
        crate::drain::settled(&self.0, settles, applied);
    }

    /// Into the request's filter state `wasm.ankusa`, which
    /// `%FILTER_STATE(wasm.ankusa:PLAIN)%` prints (Envoy keys a property
    /// set from wasm as `wasm.` and its path). One hostcall per hook.
    fn publish(&self, line: &str) {
        let _ = hostcalls::set_property(vec![decision::PROPERTY], Some(line.as_bytes()));
    }

    fn log(&self, level: Level, line: &str) {
        match level {
            Level::Info => log::info!("{line}"),
            Level::Warn => log::warn!("{line}"),
        }
    }
}

/// A local reply: JSON, with `Retry-After` when it says when to come back,
/// and its rate-limit headers.
fn send_reply(reply: &LocalReply) {
    let retry = reply.retry_after.map(|s| s.to_string());
    let mut headers = vec![("content-type", "application/json")];
    if let Some(r) = &retry {
        headers.push(("retry-after", r.as_str()));
    }
    headers.extend(reply.headers.iter().map(|(k, v)| (*k, v.as_str())));
    let _ = hostcalls::send_http_response(reply.status, headers, Some(reply.body.as_bytes()));
}
