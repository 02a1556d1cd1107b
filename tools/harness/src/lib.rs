//! The parts of a local Ankusa fleet that aren't Ankusa itself.
//!
//! - [`intake`]: the sample upstream ("queue writer") that stores admitted hooks durably.
//! - [`fleet`]: Redis, the store, the intake and N Envoy edges as one unit.
//! - [`children`]: stopping every child process on a panic or a signal, by PID.
//! - [`provider`]: the mock webhook provider and its audit of the intake.
//! - [`faults`]: the fault suite: faults injected under traffic, the audit, the figures.
//! - [`compose`]: the fault rows across hosts, on `docker-compose.yml`'s containers.
//! - [`soak`]: a long run of the fleet under traffic and a random schedule of faults, then its checks.
//! - [`load`]: a keep-alive HTTP/1.1 load generator (the benchmark scripts' client).
//! - [`floors`]: the no-op and one-callout wasm filters the edge benchmark compares with.
//! - [`ids`], [`codec`]: hook ids, seedable randomness, the encodings providers sign with.

pub mod children;
pub mod codec;
pub mod compose;
pub mod faults;
pub mod fleet;
pub mod floors;
pub mod ids;
pub mod intake;
pub mod load;
pub mod provider;
pub mod soak;
