//! The native host-call floor, (K) in bench-edge: the host calls a node
//! hook of the module makes, with fixed values and nothing decided. The
//! list is the module's own, counted through the ABI layer's fake Envoy
//! (`hooks::tests::a_node_hook_makes_only_the_host_calls_it_needs`): on the
//! request's headers, every header read (two calls: the count, then the
//! headers), the decision set as filter state for the access log, four
//! forwarded headers added and the admission counter (here, the no-op's
//! own); on the upstream's response headers, the two RateLimit headers. Ten
//! calls a hook; the body and the stream's end make none.
//!
//! The values are the wasm host-call floor's ((k), `bench/noop-filter`),
//! the same file, so both floors write the same bytes.
#![deny(unsafe_code)]

use crate::abi::{Envoy, REQUEST_HEADER, RESPONSE_HEADER};
use crate::host::DECISION_KEY;

#[path = "../../../bench/noop-filter/src/node_values.rs"]
mod node_values;

use node_values::{DECISION, FORWARDED, RATE};

/// The configuration that selects this floor (text, or a JSON string), as
/// for the wasm one.
pub const MODE: &str = "node host calls";

/// The request's headers: read them all (lent, not copied), publish the
/// decision, add the four forwarded headers. The counter is the caller's.
pub fn on_request(envoy: Envoy) {
    std::hint::black_box(envoy.header_buffers(REQUEST_HEADER));
    let _ = envoy.set_filter_state(DECISION_KEY, DECISION.as_bytes());
    for (name, value) in FORWARDED {
        let _ = envoy.add_header(REQUEST_HEADER, name, value);
    }
}

/// The upstream's response headers: the two RateLimit headers.
pub fn on_response(envoy: Envoy) {
    for (name, value) in RATE {
        let _ = envoy.set_header(RESPONSE_HEADER, name, Some(value));
    }
}
