//! Every decision an Ankusa edge makes, with no host attached.
//!
//! Nothing here touches a clock, a socket or proxy-wasm: "now" and randomness
//! are arguments, shared state sits behind a compare-and-swap trait, the host
//! behind the shell layer's traits. The filter links this crate into wasm, the
//! native module and the store service natively, and its tests run in both
//! (`wasm-bindgen-test` under Node).
//!
//! - [`hook`]: one hook's life as a state machine (events in, effects out), with its request
//!   rules, routes, event keys, hook ids, shadow mode, scope plan, replies, settle and
//!   settle-queue policy, batching, degraded gauges and the worker state it reads.
//! - [`limit`]: the rate-limit arithmetic (GCRA), every numeric bound, a node's share of a
//!   fleet quota, and the RateLimit header values.
//! - [`node`]: what one edge keeps in its shared data: the compare-and-swap seam and loops,
//!   the key layout, clock-safe deadlines, node-scope buckets, its name, reload resets.
//! - [`fleet`]: what the edges share through the store: the breaker in front of it, the live
//!   edge count, fleet overrides, the bearer token.
//! - [`wire`]: the JSON between filter and store, its checks and its paths.
//! - [`config`]: the plugin configuration, parsed and validated.
//! - [`verify`]: provider signatures (GitHub, Stripe, Shopify, Standard Webhooks, Svix, generic HMAC).
//! - [`shell`]: what every shell does the same way around the state machine: the host trait,
//!   effects performed, one hook's stream, batched hit calls, the root's tick.
//!
//! Every decision here runs inside the filter's VM, where a panic takes the
//! worker down: `unwrap`, `expect` and `panic!` are denied outside tests.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod config;
pub mod fleet;
pub mod hook;
pub mod limit;
pub mod node;
pub mod shell;
pub mod verify;
pub mod wire;
