//! The Ankusa admission filter for Envoy: thin host glue around `ankusa-core`.
//!
//! Every decision lives in the core crate or in [`plan`], which has no host
//! attached and is tested natively; the files that touch proxy-wasm only read
//! the request, ask, and turn the answer into forwarding or a local reply.
//!
//! - [`root`]: the root context: config, metrics, pre-created keys, the settle drainer's tick.
//! - [`http`]: one hook's admission (route, event key, node or fleet charge, fallback).
//! - [`headers`]: the request's headers, read from the host once per hook.
//! - [`plan`]: what a hook costs where, and how a store answer becomes a reply.
//! - [`reload`]: a reload that changed tenant limits resets their buckets.
//! - [`settle`]: the node-wide queue of promote/release operations and its drainer.
//! - [`shared`]: [`ankusa_core::cas::CasStore`] over proxy-wasm shared data, and the host clock.
//! - [`metrics`]: Envoy stats with labels encoded in their names.
//! - [`verify`]: provider signatures: secrets from the VM environment, the check before any charge.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

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
