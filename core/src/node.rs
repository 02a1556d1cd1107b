//! What one edge keeps in its node's shared data, seen by every worker.
//!
//! - [`cas`]: the compare-and-swap seam to proxy-wasm shared data, and the CAS loops over it.
//! - [`edge_keys`]: the node's shared-data layout (every key the filter uses).
//! - [`clock`]: deadlines in shared data that survive a wall-clock step.
//! - [`node_buckets`]: node-scope GCRA buckets in a bounded ring of shared-data keys.
//! - [`node_name`]: this edge's name in claims, from Envoy's node id.
//! - [`reload`]: a reload that changed tenant limits resets their buckets and leaves store resets.

pub mod cas;
pub mod clock;
pub mod edge_keys;
pub mod node_buckets;
pub mod node_name;
pub mod reload;
