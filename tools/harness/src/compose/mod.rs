//! The fault rows across hosts: `docker-compose.yml`'s stack, each service
//! in a container of its own on networks of their own, under the mock
//! provider's traffic from the host while one fault a row is injected with
//! Docker and healed, held to the loopback suite's promises with its own
//! drive, figures and tables (`crate::faults`).
//!
//! - [`host_fault`]: the rows, what each breaks, which run in CI.
//! - [`stack`]: one row's Compose project, up and down; [`readings`]: what
//!   a row reads of it, as its target; [`edge_config`]: the edges'
//!   bootstrap it renders.
//! - [`command`]: the Compose and Docker command lines.
//! - [`inject`]: breaking and healing; [`rollout`]: the rolling restart;
//!   [`cluster`]: the Redis Cluster profile's roles.
//! - [`run`]: a run of rows, with its progress and its failures.

pub mod cluster;
pub mod command;
pub mod edge_config;
pub mod host_fault;
pub mod inject;
pub mod readings;
pub mod rollout;
pub mod run;
pub mod stack;

pub use host_fault::HostFault;
pub use stack::Stack;
