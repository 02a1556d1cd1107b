//! The Ankusa admission filter for Envoy: thin host glue around `ankusa-core`.
//!
//! Every decision lives in the core crate: a hook's life is
//! [`ankusa_core::hook::machine`], which takes events and returns effects.
//! The files here only read what Envoy hands over, feed it in, and perform
//! the effects on the host.
//!
//! What every shell does the same way (the host trait, a step's effects
//! performed, one hook's stream, batched hit calls, the tick) is the core's
//! [`ankusa_core::shell`]; the native module is the same core over Envoy's
//! dynamic-module ABI.
//!
//! - [`root`]: the root context: builds the runtime, sets the tick, hands each stream a hook.
//! - [`runtime`]: config, signing keys, store token, metrics, shared-data keys, store calls.
//! - [`http`]: one hook's HTTP context: proxy-wasm's callbacks onto the core's stream.
//! - [`host`]: the core's host trait over proxy-wasm ([`host::ProxyHost`]).
//! - [`batch_call`]: the core's batching root over proxy-wasm ([`batch_call::ProxyRoot`]).
//! - [`tick`]: the core's tick over proxy-wasm.
//! - [`drain`]: the core's background calls (settle batches, override-list polls) over proxy-wasm.
//! - [`headers`]: the request's headers, read from the host once per hook.
//! - [`settle`]: the settle shared queue: enqueue within the bound, dequeue a batch.
//! - [`shared`]: [`ankusa_core::node::cas::CasStore`] over proxy-wasm shared data, and the host clock.
//! - [`metrics`]: Envoy stats with labels encoded in their names.
//! - `mock` (tests only): a host in memory that records every call.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod batch_call;
pub mod drain;
pub mod headers;
pub mod host;
pub mod http;
pub mod metrics;
#[cfg(test)]
pub mod mock;
pub mod root;
pub mod runtime;
pub mod settle;
pub mod shared;
pub mod tick;

use proxy_wasm::types::LogLevel;

/// A panic would take down the worker's VM; should one slip through anyway,
/// say where before the host reloads it (failure_policy FAIL_RELOAD).
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let _ = proxy_wasm::hostcalls::log(LogLevel::Critical, &format!("ankusa: panic: {info}"));
    }));
}

proxy_wasm::main! {{
    // set_log_level installs the SDK's own hook first; ours replaces it.
    proxy_wasm::set_log_level(LogLevel::Info);
    install_panic_hook();
    proxy_wasm::set_root_context(|context_id| -> Box<dyn proxy_wasm::traits::RootContext> {
        Box::new(root::Root::new(context_id))
    });
}}
