//! The core's [`Host`] (the host calls a hook makes: the request's headers
//! and body, the upstream's and the store's answers, the dispatch of a store
//! call, local replies, metrics, settles, the access log's decision, logs,
//! the clock and randomness) over proxy-wasm: [`ProxyHost`]. The tests'
//! mock records every call, so whole hook lives run without Envoy.

use crate::headers;
use crate::runtime::{call_store, Runtime, SHARED};
use crate::shared::{now_us, SharedData};
use ankusa_core::hook::decision;
use ankusa_core::hook::headers::RequestHeaders;
use ankusa_core::hook::hook_id::RANDOM_BYTES;
use ankusa_core::hook::machine::{Level, Metric};
use ankusa_core::hook::reply::LocalReply;
use ankusa_core::hook::settle::Queued;
use ankusa_core::hook::worker::Worker;
pub use ankusa_core::shell::host::{perform, perform_riding, Host};
use proxy_wasm::hostcalls;
use proxy_wasm::types::{BufferType, MapType};
use std::rc::Rc;

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
