//! The host calls a node-scope hook of the Ankusa filter makes, made with
//! fixed values and nothing decided: the floor under node scopes that no
//! decision logic can go below while the filter keeps those calls.
//!
//! The list is the filter's own, counted per hook through Envoy (a node hook
//! of `scripts/bench-edge.sh`'s (b)): on the request's headers, one read of
//! every header, the clock, a shared-data read and compare-and-swap of the
//! tenant's node bucket, four added headers (`x-ankusa-hook-id`, `-tenant`,
//! `-source`, `-event-key`) and the admission counter (here, the no-op's own
//! counter); on the upstream's response headers, the two RateLimit headers;
//! on the log, the decision as filter state for the access log. Twelve host
//! calls a hook, two of which (the header read and the shared-data read)
//! also enter the VM to allocate what they return.

use proxy_wasm::hostcalls;
use proxy_wasm::types::MapType;

use crate::node_values::{DECISION, FORWARDED, RATE};

/// The plugin configuration that selects this mode (text, or a JSON string).
pub const MODE: &str = "node host calls";

/// Whether the plugin configuration `text` selects [`MODE`].
pub fn selected(text: &[u8]) -> bool {
    let text = String::from_utf8_lossy(text);
    text.trim().trim_matches('"') == MODE
}

/// The shared-data key standing in for a tenant's node bucket.
const BUCKET: &str = "bench:node-bucket";
/// A node bucket's size: format byte, two GCRA pairs of three u64s, the
/// guest mask, and the tenant's name (`acme`).
const BUCKET_BYTES: usize = 1 + 48 + 8 + 4;

/// Creates the bucket's key: a compare-and-swap needs a version to compare.
pub fn configure() -> bool {
    hostcalls::set_shared_data(BUCKET, Some(&[0u8; BUCKET_BYTES]), None).is_ok()
}

/// The request's headers: read them all, read the clock, charge the bucket
/// (read, then write back what was read under its version), add four headers.
pub fn on_request() {
    let _ = std::hint::black_box(hostcalls::get_map_bytes(MapType::HttpRequestHeaders));
    let _ = std::hint::black_box(hostcalls::get_current_time());
    if let Ok((value, cas)) = hostcalls::get_shared_data(BUCKET) {
        let value = value.unwrap_or_default();
        let _ = hostcalls::set_shared_data(BUCKET, Some(&value), cas);
    }
    for (name, value) in FORWARDED {
        let _ = hostcalls::add_map_value(MapType::HttpRequestHeaders, name, value);
    }
}

/// The upstream's response headers: the two RateLimit headers.
pub fn on_response() {
    for (name, value) in RATE {
        let _ = hostcalls::set_map_value(MapType::HttpResponseHeaders, name, Some(value));
    }
}

/// The end of the stream: the decision, where the access log reads it.
pub fn on_log() {
    let _ = hostcalls::set_property(vec!["ankusa"], Some(DECISION.as_bytes()));
}
