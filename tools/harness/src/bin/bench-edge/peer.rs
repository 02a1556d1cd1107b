//! The peer: what a user would deploy instead of the filter for one limit
//! over the fleet. Envoy's native `envoy.filters.http.ratelimit` filter asks
//! a Limitador (`limitador-server`, built by the user and given by
//! `--limitador`) over gRPC, one descriptor per hook (the tenant), before
//! the router; Limitador keeps its counters in a Redis of its own. It rate
//! limits only: no dedupe, no claims.

use ankusa_testkit::http;
use ankusa_testkit::metrics::metric_value;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::process::{scratch_dir, Proc};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The rate-limit domain, which is Limitador's namespace.
pub const DOMAIN: &str = "ankusa_bench";
/// The one descriptor every hook carries: the tenant.
pub const TENANT: &str = "acme";
/// Hooks Envoy's filter let through on an answer from Limitador, counted
/// under the route's target cluster (`cluster.intake.ratelimit.ok`), as
/// `/stats/prometheus` prints it.
pub const PEER_OK: &str = r#"envoy_cluster_ratelimit_ok{envoy_cluster_name="intake"}"#;
/// Calls Limitador allowed, as its `/metrics` prints them.
const AUTHORIZED: &str = r#"authorized_calls{limitador_namespace="ankusa_bench"}"#;

/// The limit: as high as the filter's tenant quota (1 000 000 a second),
/// so nothing is refused, counted per tenant.
pub fn limits_yaml() -> String {
    format!(
        "- namespace: {DOMAIN}\n  max_value: 1000000\n  seconds: 1\n  conditions: []\n  variables:\n    - descriptors[0]['tenant']\n"
    )
}

/// A `limitador-server` on free loopback ports, its counters in `redis_url`.
pub struct Limitador {
    pub proc: Proc,
    pub rls_port: u16,
    pub http_port: u16,
}

impl Limitador {
    pub fn start(bin: &Path, redis_url: &str) -> Result<Limitador, String> {
        let dir = scratch_dir("bench-peer");
        let limits = dir.join("limits.yaml");
        std::fs::write(&limits, limits_yaml())
            .map_err(|e| format!("cannot write {}: {e}", limits.display()))?;
        let (rls_port, http_port) = (free_port(), free_port());
        let mut cmd = Command::new(bin);
        cmd.args(["--rls-ip", "127.0.0.1", "--rls-port", &rls_port.to_string()])
            .args([
                "--http-ip",
                "127.0.0.1",
                "--http-port",
                &http_port.to_string(),
            ])
            .arg(&limits)
            .args(["redis", redis_url]);
        let mut proc = Proc::spawn("limitador", cmd, &dir.join("limitador.log"));
        for port in [rls_port, http_port] {
            proc.wait_for_port(port, Duration::from_secs(20));
        }
        Ok(Limitador {
            proc,
            rls_port,
            http_port,
        })
    }

    /// Calls Limitador allowed so far.
    pub fn authorized(&self) -> f64 {
        let url = format!("http://127.0.0.1:{}/metrics", self.http_port);
        let text = http::get(&url).map(|r| r.text()).unwrap_or_default();
        metric_value(&text, AUTHORIZED)
    }
}

const ROUTE: &str = "route: { cluster: intake, timeout: 30s }";
const ROUTER: &str = "- name: envoy.filters.http.router";
const CLUSTERS: &str = "  clusters:\n";

/// `bootstrap` (the edge template without the wasm filter) with the peer:
/// the route sends one descriptor per hook, Envoy's `ratelimit` filter sits
/// before the router and asks the `limitador` cluster (HTTP/2, gRPC) at
/// `rls_port`. A hook Limitador can't answer for is refused
/// (`failure_mode_deny`), so every 2xx was counted by it.
pub fn with_ratelimit(bootstrap: &str, rls_port: u16) -> Result<String, String> {
    let missing = |what: &str| format!("the bootstrap has no `{}`", what.trim());
    if !bootstrap.contains(ROUTE) {
        return Err(missing(ROUTE));
    }
    let router = bootstrap
        .lines()
        .find(|l| l.trim() == ROUTER)
        .ok_or_else(|| missing(ROUTER))?;
    if !bootstrap.contains(CLUSTERS) {
        return Err(missing(CLUSTERS));
    }
    let indent = &router[..router.len() - router.trim_start().len()];
    let filter = [
        "- name: envoy.filters.http.ratelimit",
        "  typed_config:",
        "    \"@type\": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit",
        &format!("    domain: {DOMAIN}"),
        "    failure_mode_deny: true",
        "    timeout: 1s",
        "    rate_limit_service:",
        "      transport_api_version: V3",
        "      grpc_service: { envoy_grpc: { cluster_name: limitador } }",
    ]
    .iter()
    .map(|l| format!("{indent}{l}"))
    .collect::<Vec<_>>()
    .join("\n");
    let route = format!(
        "route: {{ cluster: intake, timeout: 30s, rate_limits: [{{ actions: [{{ generic_key: {{ descriptor_key: tenant, descriptor_value: {TENANT} }} }}] }}] }}"
    );
    let cluster = format!(
        "{CLUSTERS}  - name: limitador\n    type: STATIC\n    connect_timeout: 1s\n    \
         typed_extension_protocol_options:\n      \
         envoy.extensions.upstreams.http.v3.HttpProtocolOptions:\n        \
         \"@type\": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions\n        \
         explicit_http_config: {{ http2_protocol_options: {{}} }}\n    \
         load_assignment:\n      cluster_name: limitador\n      endpoints:\n      \
         - lb_endpoints:\n        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {rls_port} }} }} }}\n"
    );
    Ok(bootstrap
        .replacen(ROUTE, &route, 1)
        .replacen(router, &format!("{filter}\n{router}"), 1)
        .replacen(CLUSTERS, &cluster, 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variants::without_wasm;
    use ankusa_testkit::envoy::{render, EdgeSpec};
    use serde_json::json;

    #[test]
    fn the_peer_asks_limitador_before_the_router_for_every_hook() {
        let spec = EdgeSpec::new("edge-t", 1, 2, json!({"sources": {}}));
        let bare = without_wasm(&render(&spec, Path::new("/x.wasm"))).unwrap();
        let peer = with_ratelimit(&bare, 4321).unwrap();
        assert!(
            peer.contains(
                "http_filters:\n          - name: envoy.filters.http.ratelimit\n            typed_config:\n"
            ),
            "{peer}"
        );
        assert!(
            peer.contains(
                "cluster_name: limitador } }\n          - name: envoy.filters.http.router"
            ),
            "{peer}"
        );
        assert!(peer.contains(&format!("domain: {DOMAIN}\n")));
        assert!(peer.contains("failure_mode_deny: true"));
        assert!(peer.contains("descriptor_key: tenant, descriptor_value: acme"));
        assert!(peer.contains("  - name: limitador\n    type: STATIC\n"));
        assert!(peer.contains("port_value: 4321 }"));
        // Everything else stays: the intake's route and cluster, the store's cluster.
        for kept in [
            "- name: intake\n",
            "- name: ankusa_store\n",
            "cluster: intake",
        ] {
            assert!(peer.contains(kept), "{kept} missing:\n{peer}");
        }
        let err = with_ratelimit("static_resources: {}\n", 1).unwrap_err();
        assert!(err.contains("route: { cluster: intake"), "{err}");
    }

    #[test]
    fn the_limit_is_per_tenant_and_too_high_to_refuse() {
        let limits = limits_yaml();
        assert!(
            limits.starts_with(&format!("- namespace: {DOMAIN}\n")),
            "{limits}"
        );
        for line in ["max_value: 1000000\n", "seconds: 1\n", "conditions: []\n"] {
            assert!(
                limits.contains(&format!("  {line}")),
                "{line} missing:\n{limits}"
            );
        }
        assert!(limits.ends_with("variables:\n    - descriptors[0]['tenant']\n"));
        assert!(AUTHORIZED.contains(DOMAIN));
    }
}
