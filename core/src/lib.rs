//! Every decision an Ankusa edge makes, with no host attached.
//!
//! Nothing here touches a clock, a socket or proxy-wasm: "now" and randomness
//! are arguments, shared state sits behind a compare-and-swap trait. The filter
//! links this crate into wasm, the store service natively, and its tests run in
//! both (`wasm-bindgen-test` under Node).
//!
//! - [`wire`]: the JSON between filter and store.
//! - [`wire_batch`]: the JSON of several hooks' hits in one store call (`/v1/hits`).
//! - [`gcra`]: the rate-limit arithmetic.
//! - [`limits`]: every numeric bound, shared by config and wire validation.
//! - [`cas`]: the compare-and-swap seam to proxy-wasm shared data, and the CAS loops over it.
//! - [`edge_keys`]: the node's shared-data layout (every key the filter uses).
//! - [`clock`]: deadlines in shared data that survive a wall-clock step.
//! - [`share`]: a node's share of a fleet quota while it answers alone, priced exactly.
//! - [`edges`]: the live edge count the store last reported, kept in the node's shared data.
//! - [`node_buckets`]: node-scope GCRA buckets in a bounded ring of shared-data keys.
//! - [`hook`]: one hook's life as a state machine (events in, effects out), with its request
//!   rules, scope plan, replies, settle and settle-queue policy, degraded gauges.
//! - [`reload`]: a reload that changed tenant limits resets their buckets and leaves store resets.
//! - [`breaker`]: the node-wide fleet breaker (closed, open, probing) in one shared-data value.
//! - [`config`]: the plugin configuration, parsed and validated.
//! - [`event_key`]: the provider event id a hook is deduplicated on.
//! - [`route`]: which tenant and source a request path is for.
//! - [`node_name`]: this edge's name in claims, from Envoy's node id.
//! - [`hook_id`]: UUIDv7 hook ids from (unix ms, random bytes).
//! - [`verify`]: provider signatures (GitHub, Stripe, Shopify, Standard Webhooks, Svix, generic HMAC).
//! - [`overrides`]: fleet overrides set at runtime, the merge with the configuration, and the
//!   node's polled copy of the list (poll lease, answer checks, staleness, size cap).
//! - [`shadow`]: shadow mode, what is enforced and what is only counted.
//! - [`ratelimit_headers`]: `RateLimit-Policy`/`RateLimit` (and legacy) header values from GCRA state.
//! - [`token`]: the bearer token edges present to the store, and its constant-time check.
//! - [`trace_context`]: the sender's W3C `traceparent`, carried from the edge to the store.
//!
//! Every decision here runs inside the filter's VM, where a panic takes the
//! worker down: `unwrap`, `expect` and `panic!` are denied outside tests.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod breaker;
pub mod cas;
pub mod clock;
pub mod config;
pub mod edge_keys;
pub mod edges;
pub mod event_key;
pub mod gcra;
pub mod hook;
pub mod hook_id;
pub mod limits;
pub mod node_buckets;
pub mod node_name;
pub mod overrides;
pub mod ratelimit_headers;
pub mod reload;
pub mod route;
pub mod shadow;
pub mod share;
pub mod token;
pub mod trace_context;
pub mod verify;
pub mod wire;
pub mod wire_batch;
