//! What a root's background calls need of their host, whatever the shell:
//! the store calls a root sends on its own (settle batches, override-list
//! polls) and the node's state they read. The proxy-wasm filter's root
//! context sends them from each worker's tick; the native module from its
//! configuration's tick on Envoy's main thread. When a call is due, what it
//! carries and what its answer means are [`crate::shell::drain`]'s and
//! [`crate::shell::poll`]'s, over the core's settle and override modules.

use crate::config::Config;
use crate::hook::machine::Level;
use crate::hook::settle::Queued;
use crate::node::cas::CasStore;
use crate::shell::metrics::{Metrics, Stats};

/// A root's host for its background calls.
pub trait Background {
    type Store: CasStore;
    type Stats: Stats;
    fn config(&self) -> &Config;
    /// The node's shared data.
    fn store(&self) -> &Self::Store;
    fn metrics(&self) -> &Metrics<Self::Stats>;
    /// µs since the unix epoch.
    fn now_us(&self) -> u64;
    /// Sends a call to the store (`body` None: a GET, else a POST); its
    /// token, or why the host took no call.
    fn call(&self, path: &str, body: Option<&[u8]>, timeout_ms: u64) -> Result<u64, String>;
    /// Up to `max` settle operations off the node's queue.
    fn dequeue(&self, max: usize) -> Vec<Queued>;
    /// Settle operations to queue again (a failed batch's, within their retries).
    fn requeue(&self, item: Queued);
    fn log(&self, level: Level, line: &str);
}
