//! Every end-to-end test as one binary: real Envoy, the real store, real
//! Redis and Prometheus, the tools' intake and mock provider, each test on
//! free ports of 127.0.0.1. `cargo test -p ankusa-tests --test e2e MODULE::`
//! runs one module. Build what they launch first: `cargo build --workspace
//! --bins` and the filter as `wasm32-wasip1` (`scripts/test.sh` does both).

mod access_log;
mod bench_floors;
mod compose;
mod dashboards;
mod edge_auth;
mod edge_batch;
mod edge_claims;
mod edge_config;
mod edge_event_keys;
mod edge_fallback;
mod edge_faults;
mod edge_fleet;
mod edge_node;
mod edge_node_overrides;
mod edge_override_shadow;
mod edge_overrides;
mod edge_quota;
mod edge_rate_headers;
mod edge_receipts;
mod edge_reload;
mod edge_remote;
mod edge_replay;
mod edge_settle;
mod edge_shadow;
mod edge_shapes;
mod edge_share;
mod edge_verify;
mod faults;
mod fleet;
mod fleet_cli;
mod fleet_provider;
mod hostile;
mod intake;
mod mixed_versions;
mod native;
mod prometheus;
mod provider;
mod release;
mod soak;
mod traces;
mod upgrade;
