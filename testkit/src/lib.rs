//! Real processes on loopback, for tests and the `fleet` command.
//!
//! - [`ports`]: free TCP ports on 127.0.0.1.
//! - [`process`]: a child process that is stopped (by its PID) when dropped.
//! - [`http`]: a small blocking HTTP/1.1 client that returns every status as a value.
//! - [`redis`]: a throw-away Redis, single or a 3-master Cluster.
//! - [`redis_monitor`]: `MONITOR` on Redis nodes, to count what each really ran.
//! - [`store`]: the `ankusa-store` binary against a given Redis.
//! - [`intake`]: the sample intake (the upstream the edges forward to).
//! - [`paths`]: where the workspace's built binaries, the filter and Envoy live.
//! - [`envoy`]: a real Envoy edge with the Ankusa filter.
//! - [`metrics`]: a series' value in Prometheus text (an edge's stats, the store's metrics).
//! - [`access_log`]: an edge's access log, the time a request spent at the edge.
//! - [`fault`]: a TCP proxy that delays, blackholes, resets or garbles, switched at runtime.
//! - [`prometheus`]: a real Prometheus scraping them, and `promtool`.
//! - [`token`]: the store token of a test run, passed to store and edges by environment.
//! - `otlp` (feature `otlp`): an OTLP/HTTP trace receiver keeping the spans it is sent.

pub mod access_log;
pub mod envoy;
pub mod fault;
pub mod http;
pub mod intake;
pub mod metrics;
#[cfg(feature = "otlp")]
pub mod otlp;
pub mod paths;
pub mod ports;
pub mod process;
pub mod prometheus;
pub mod redis;
pub mod redis_monitor;
pub mod store;
pub mod token;

pub use process::Proc;
