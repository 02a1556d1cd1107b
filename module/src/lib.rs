//! The Ankusa admission filter as a native Envoy module
//! (`envoy.filters.http.dynamic_modules`): the same core as the proxy-wasm
//! filter, a second shell over [`ankusa_core::shell`].
//!
//! - [`abi`]: the dynamic-module ABI of the pinned Envoy, bound by hand, behind
//!   safe handles.
//! - [`hooks`]: the event hooks exported to Envoy, each catching a panic and
//!   failing closed. With [`abi`], the ABI layer: the only files with `unsafe`.
//! - [`init`]: the load-time hook (the ABI version), exported by both builds.
//! - [`filter`]: the configuration (the core's parser) and one stream's
//!   filter: Envoy's hooks onto the core's stream.
//! - [`host`]: the core's host over the ABI, local replies, and a worker's runtime.
//! - [`store`]: a store call's request (the token from Envoy's environment) and answer.
//! - [`root`]: a worker's batched hit calls, sent from a waiting hook's stream.
//! - [`direct`]: store calls on connections the module owns
//!   (`fleet.connection: "direct"`), answered through the stream's scheduler.
//! - `floor` (feature `floor`, the benchmark's build): hooks that decide
//!   nothing, the native no-op, host-call and one-callout floors, in place of [`hooks`].
//! - [`node`]: the node's background calls (settle batches, override polls)
//!   on Envoy's main thread, ticked by a thread of the module's own.
//!
//! Node and fleet scopes alike: hit calls are HTTP callouts from the hook's
//! stream (or, with `fleet.connection: "direct"`, calls on the module's own
//! connection), with the wasm filter's budget, batching and breaker (the core's).
//! Built with `cargo build -p ankusa-module --profile release-native`
//! (`panic = "unwind"`): `target/release-native/libankusa_module.so`.
#![deny(unsafe_code)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

#[allow(unsafe_code)]
pub mod abi;
pub mod direct;
pub mod filter;
#[cfg(feature = "floor")]
#[allow(unsafe_code)]
pub mod floor;
#[cfg(not(feature = "floor"))]
#[allow(unsafe_code)]
pub mod hooks;
pub mod host;
#[allow(unsafe_code)]
pub mod init;
pub mod node;
pub mod root;
pub mod store;
