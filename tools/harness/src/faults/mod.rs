//! The fault suite: a two-edge fleet under the mock provider's traffic, one
//! fault injected mid-run and healed, then the audit of what the intake stored.
//!
//! - [`scenario`]: every fault an operator meets, how it is injected and healed.
//! - [`runner`]: the fleet with fault proxies in front of the store and the
//!   intake, the run, the sampling of the edges' gauges, the figures of a row.
//! - [`metered`]: a tenant pushed past a small fleet quota, to show the quota
//!   held while the fault lasted.
//! - [`stalls`]: how long the edges' Envoy workers waited for a CPU, so a
//!   starved machine isn't blamed on the edge.
//! - [`table`]: the rows as JSON files and as the tables of `RELIABILITY.md`.

pub mod metered;
pub mod runner;
pub mod scenario;
pub mod stalls;
pub mod table;

pub use runner::{run_row, Plan};
pub use scenario::Fault;
pub use table::Row;
