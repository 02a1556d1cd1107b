//! The fault suite: a two-edge fleet under the mock provider's traffic, one
//! fault injected mid-run and healed, then the audit of what the intake stored.
//!
//! - [`scenario`]: every fault an operator meets, how it is injected and healed.
//! - [`plan`]: a row's timeline: traffic, fault, heal.
//! - [`fleet`]: the fleet of every row, with fault proxies in front of the
//!   store and the intake, and the plugin configuration it runs.
//! - `inject`: breaking and healing what a fault breaks; `cluster`: the
//!   Redis Cluster moves among them.
//! - [`target`]: what a row needs of the fleet it breaks (its target), whether
//!   processes on loopback ([`fleet`]) or a Compose stack
//!   (`crate::compose`); [`row_fault`]: what it needs of the fault.
//! - `drive`: one row's run against any target: traffic, the
//!   fault, the sampling of the edges' gauges (`gauges`).
//! - [`runner`]: one row on loopback: the fleet, the drive, the figures.
//! - `figures`: the row's figures from its run; `latency`: its p99s.
//! - [`metered`]: a tenant pushed past a small fleet quota, to show the quota
//!   held while the fault lasted.
//! - [`stalls`]: how long the edges' Envoy workers waited for a CPU, so a
//!   starved machine isn't blamed on the edge.
//! - [`row`]: a row's figures as a JSON file; [`promise`]: what a row must
//!   hold to pass; [`table`]: the rows as the tables of `RELIABILITY.md`.

mod cluster;
pub(crate) mod drive;
pub(crate) mod figures;
pub mod fleet;
pub(crate) mod gauges;
pub(crate) mod inject;
pub(crate) mod latency;
pub mod metered;
pub mod plan;
pub mod promise;
pub mod row;
pub mod row_fault;
pub mod runner;
pub mod scenario;
pub mod stalls;
pub mod table;
pub mod target;

pub use plan::Plan;
pub use row::Row;
pub use runner::run_row;
pub use scenario::Fault;
