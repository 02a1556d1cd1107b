//! The fixed values a node hook's host calls write in the host-call floors,
//! as long as the Ankusa filter's own: the wasm one (`calls.rs`, bench-edge's
//! (k)) and the native one (`module/src/floor/node_calls.rs`, (K)), which
//! includes this file so both write the same bytes.

/// Values of a bench hook's forwarded headers, as long as the filter's.
pub const FORWARDED: [(&str, &str); 4] = [
    ("x-ankusa-hook-id", "018bcfe5-6800-7707-8707-070707070707"),
    ("x-ankusa-tenant", "acme"),
    ("x-ankusa-source", "gh"),
    ("x-ankusa-event-key", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
];

/// The RateLimit headers of a forwarded hook under the bench's quota.
pub const RATE: [(&str, &str); 2] = [
    (
        "ratelimit-policy",
        "\"hooks\";q=1000000;w=1, \"bytes\";q=1048576;w=4",
    ),
    ("ratelimit", "\"hooks\";r=999999;t=0"),
];

/// A decision line as long as a forwarded node hook's.
pub const DECISION: &str = "outcome=admitted shadow=false tenant=acme source=gh \
    key=72d3162e-cc78-11e3-81ab-4c9367dc0958 hook=018bcfe5-6800-7707-8707-070707070707 \
    rate_scope=node dedupe_scope=node decided=node store_us=- trace=-";
