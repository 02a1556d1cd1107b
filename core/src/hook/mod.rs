//! One hook's admission, from its request headers to the settle of its claim.
//!
//! - [`machine`]: the hook's life: events in (headers, body, store answer, upstream answer, stream end), effects out.
//! - [`headers`]: the request headers as one snapshot.
//! - [`admit`]: the request rules (POST only, body limit, when the body is needed).
//! - [`batch`]: micro-batched fleet hits per worker: which hooks share a store call, and each one's share of its answer.
//! - [`plan`]: what a hook costs where, and what the store's answer or failure means.
//! - [`rate_headers`]: the rate-limit headers of an answer, from the state that decided it.
//! - [`reply`]: the local replies.
//! - [`settle`]: promote or release a claim; the settle queue's bound, lease, drain gating and
//!   retries; the settles a worker holds for its next batched call.
//! - [`degraded`]: which limiters a fall-back degrades.
//! - [`outcome`]: how a hook was answered, as the metrics count it.
//! - [`worker`]: what every hook on a worker shares, built once per configuration.
//! - [`decision`]: how a hook was answered, as Envoy's access log prints it.
//! - [`route`]: which tenant and source a request path is for.
//! - [`event_key`]: the provider event id a hook is deduplicated on.
//! - [`hook_id`]: UUIDv7 hook ids from (unix ms, random bytes).
//! - [`shadow`]: shadow mode, what is enforced and what is only counted.
//! - [`trace_context`]: the sender's W3C `traceparent`, carried from the edge to the store.

pub mod admit;
pub mod batch;
pub mod decision;
pub mod degraded;
pub mod event_key;
pub mod headers;
pub mod hook_id;
pub mod machine;
pub mod outcome;
pub mod plan;
pub mod rate_headers;
pub mod reply;
pub mod route;
pub mod settle;
pub mod shadow;
pub mod trace_context;
pub mod worker;
