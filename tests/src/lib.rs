//! What the end-to-end tests share.
//!
//! - [`edge_support`]: Envoy edge configs, concurrent senders, stand-in stores that fail.
//! - [`observability_support`]: the fleet Prometheus scrapes, and promtool.

pub mod edge_support;
pub mod observability_support;
