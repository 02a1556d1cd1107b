//! The Ankusa fleet store: the shared state of a fleet of edges, in front of Redis.
//!
//! - [`auth`]: the start-up policy and the check of a caller's token.
//! - [`receipts`]: the check of each promote's receipt, the upstream's proof it stored the hook.
//! - [`tokens`]: the accepted bearer tokens by role (edge, operator), from files and the environment.
//! - [`scope`]: the node names an edge token speaks for, and its allowance of live names.
//! - [`config`]: flags, environment fallbacks, and the Redis target (single or Cluster).
//! - [`server`]: the listener (HTTP/1.1 and h2c) and the graceful stop; tests call [`server::run`].
//! - [`conns`]: the open connections: the limit, who made room, idle and header timeouts.
//! - [`endpoint`]: every endpoint once: its path, methods, the role it needs, whether it is counted.
//! - [`routes`]: the handler of each endpoint: budget, body, deadline, answer and metrics.
//! - [`backend`]: the Redis connection, made and probed in the background.
//! - [`scripts`] and [`keys`]: the Lua scripts and the key names they touch.
//! - [`claims`]: the pending claims a node made, as an operator lists and releases them.
//! - [`commits`]: the commits a node made without a verified receipt, as an operator lists and releases them.
//! - [`committed`]: the compact layout of committed claims (`--committed-layout`).
//! - [`override_log`]: the versioned log of override changes that edges poll.
//! - [`edges`]: the edges heard from lately, counted in Redis within each token's allowance,
//!   carried in every hit answer; [`live_names`]: the names Redis admitted lately, by scope.
//! - [`batcher`]: settle coalescing, one pipeline per Redis node per flush.
//! - [`metrics`] and [`errors`]: what is counted, and how a failure is answered.
//! - [`telemetry`] and [`spans`]: the logs (text or JSON, filtered by `RUST_LOG`) and the
//!   OTLP traces, and the spans of a request and of each hit.

pub mod auth;
pub mod backend;
pub mod batcher;
pub mod claims;
pub mod commits;
pub mod committed;
pub mod config;
pub mod conns;
pub mod edges;
pub mod endpoint;
pub mod errors;
pub mod keys;
pub mod live_names;
pub mod metrics;
pub mod override_log;
pub mod receipts;
pub mod routes;
pub mod scope;
pub mod scripts;
pub mod server;
pub mod spans;
pub mod telemetry;
pub mod tokens;

pub use config::Config;
