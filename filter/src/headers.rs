//! The request's headers, read from the host in one call.
//!
//! Every hostcall is a crossing from the wasm VM into Envoy and costs more
//! than the lookup it makes; a hook needs :path, :method, content-length and
//! possibly a dedupe header, and must know which x-ankusa-* names the sender
//! set. One snapshot ([`RequestHeaders`]) answers all of them.

use ankusa_core::hook::headers::RequestHeaders;
use proxy_wasm::hostcalls;
use proxy_wasm::types::MapType;

/// One header value of `map` (a response's, a callout answer's); None when
/// absent or not UTF-8. The SDK's string getter would panic on a value that
/// isn't UTF-8, and an upstream may send one (HTTP allows obs-text).
pub fn value(map: MapType, name: &str) -> Option<String> {
    hostcalls::get_map_value_bytes(map, name)
        .ok()
        .flatten()
        .and_then(|v| String::from_utf8(v).ok())
}

/// The request's headers as the host holds them now (none if it won't say).
pub fn request_headers() -> RequestHeaders {
    // Values as bytes: a value needn't be UTF-8 (HTTP allows obs-text),
    // and the SDK's string map would panic on one. Names are tokens,
    // which Envoy's codecs enforce.
    let pairs = hostcalls::get_map_bytes(MapType::HttpRequestHeaders).unwrap_or_default();
    RequestHeaders::from_pairs(pairs)
}
