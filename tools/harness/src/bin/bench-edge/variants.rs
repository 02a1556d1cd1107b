//! The edges bench-edge compares: the same Envoy, listener, route and
//! clusters, and what sits before the router.

use super::peer::with_ratelimit;
use ankusa_testkit::envoy::shell::with_direct_connection;
use ankusa_testkit::envoy::{fleet_filter_config, render, Edge, EdgeSpec, Shell};
use ankusa_testkit::paths;
use ankusa_tools::floors;
use serde_json::{json, Value};
use std::path::Path;

/// What runs before the router.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Module {
    /// Nothing: the router alone.
    Bare,
    /// Envoy's native `local_ratelimit`, a bucket too large to deny.
    LocalRatelimit,
    /// `bench/noop-filter`.
    Noop,
    /// `bench/noop-filter` making a node hook's host calls with fixed values.
    NodeCalls,
    /// `bench/callout-floor`, calling the store's `/healthz`.
    Callout,
    /// `bench/callout-floor`, making a real hit on the store's `/v1/hit`.
    HitCallout,
    /// The Ankusa filter with [`Variant::config`].
    Filter,
    /// The peer: Envoy's native `ratelimit` filter asking Limitador
    /// ([`super::peer`]).
    Peer,
}

pub struct Variant {
    pub key: char,
    pub name: &'static str,
    pub module: Module,
    /// The Ankusa filter's configuration ([`Module::Filter`] only).
    pub config: Value,
    /// Hooks are signed ([`SIGNED_BODY`], `x-hub-signature-256`) and the
    /// filter's VM holds the secret.
    pub signed: bool,
    /// The `ankusa_store` cluster points at a port nobody listens on, and the
    /// breaker is open before the run is measured.
    pub store_down: bool,
    /// Runs the filter build given by `--baseline-wasm` instead of this tree's.
    pub baseline: bool,
    /// Runs the core as the native module (libankusa_module.so, profile
    /// release-native) instead of the proxy-wasm filter.
    pub native: bool,
    /// The native module's store calls go on its own connection to the
    /// variant's store (`fleet.connection: "direct"`), not Envoy's callouts.
    pub direct: bool,
}

impl Variant {
    /// Calls the store's `/v1/hit` or `/v1/hits` (the one variant the store's counts belong to).
    pub fn hits_store(&self) -> bool {
        self.module == Module::Filter && !self.store_down && self.config.get("fleet").is_some()
    }

    /// Gets a store and Redis of its own: it calls the store (the floor's
    /// `/healthz`, or hits).
    pub fn needs_store(&self) -> bool {
        matches!(self.module, Module::Callout | Module::HitCallout) || self.hits_store()
    }
}

/// The verified variant's secret, passed to Envoy's VM by name.
pub const SECRET_ENV: &str = "ANKUSA_BENCH_GH_SECRET";
pub const SECRET: &str = "bench-edge-github-secret";
/// The hook every client sends, `{i}` being the request counter.
pub const PATH: &str = "/webhooks/gh";
pub const BODY: &str = r#"{"zen":"Design for failure.","n":{i}}"#;
/// [`BODY`] as it reads for a six-digit counter: the same bytes to hash for
/// every hook, so one signature serves the whole run (deliveries still differ
/// by their `x-github-delivery`).
pub const SIGNED_BODY: &str = r#"{"zen":"Design for failure.","n":100000}"#;
/// What the callout floor calls: cheap, and answered by the store without Redis.
pub const CALLOUT_TARGET: &str = "ankusa_store /healthz";
/// How long the breaker-open variant's breaker stays open: a day, the most allowed.
pub const BREAKER_OPEN_MS: u64 = 86_400_000;

pub fn variants() -> Vec<Variant> {
    // Every filter variant differs from (c) only where its name says; no tenant can be refused.
    let mut fleet = fleet_filter_config();
    fleet["rate_limits"]["tenants"]["acme"] = json!({"rate": 1_000_000, "burst": 1_000_000});
    // A call slower than the budget would be answered node-locally and no
    // longer measure the store: give a loaded machine room, and count fallbacks.
    fleet["fleet"]["timeout_ms"] = json!(1_000);
    let mut node = fleet.clone();
    node["rate_limits"]["scope"] = json!("node");
    node["dedupe"]["scope"] = json!("node");
    if let Some(map) = node.as_object_mut() {
        map.remove("fleet");
    }
    let mut verified = node.clone();
    verified["sources"]["gh"]["verify"] = json!({"scheme": "github", "secret_env": [SECRET_ENV]});
    let mut open = fleet.clone();
    open["fleet"]["breaker_min_calls"] = json!(5);
    open["fleet"]["breaker_open_ms"] = json!(BREAKER_OPEN_MS);
    let v = |key, name, module, config, signed, store_down| Variant {
        key,
        name,
        module,
        config,
        signed,
        store_down,
        baseline: false,
        native: false,
        direct: false,
    };
    let baseline = |key, name, config: &Value| Variant {
        baseline: true,
        ..v(key, name, Module::Filter, config.clone(), false, false)
    };
    let peer = v(
        'p',
        "peer: ratelimit + Limitador",
        Module::Peer,
        Value::Null,
        false,
        false,
    );
    let native_node = Variant {
        native: true,
        ..v(
            'N',
            "native module, node scopes",
            Module::Filter,
            node.clone(),
            false,
            false,
        )
    };
    let native_verified = Variant {
        native: true,
        ..v(
            'D',
            "native module, node, verify",
            Module::Filter,
            verified.clone(),
            true,
            false,
        )
    };
    let native = |key, name, module, config: &Value| Variant {
        native: true,
        ..v(key, name, module, config.clone(), false, false)
    };
    let native_noop = native('M', "native no-op module", Module::Noop, &Value::Null);
    let native_calls = native(
        'K',
        "native host-call floor",
        Module::NodeCalls,
        &Value::Null,
    );
    let native_callout = native(
        'G',
        "native one-callout floor",
        Module::Callout,
        &Value::Null,
    );
    let native_fleet = native('F', "native module, fleet scopes", Module::Filter, &fleet);
    let native_direct = Variant {
        direct: true,
        ..native('H', "native fleet, own connection", Module::Filter, &fleet)
    };
    let (node_base, fleet_base) = (
        baseline('B', "baseline build, node scopes", &node),
        baseline('C', "baseline build, fleet scopes", &fleet),
    );
    vec![
        v(
            'a',
            "bare Envoy (router only)",
            Module::Bare,
            Value::Null,
            false,
            false,
        ),
        v(
            'l',
            "native local_ratelimit",
            Module::LocalRatelimit,
            Value::Null,
            false,
            false,
        ),
        v(
            'n',
            "no-op wasm filter",
            Module::Noop,
            Value::Null,
            false,
            false,
        ),
        v(
            'k',
            "host-call floor: a node hook's calls",
            Module::NodeCalls,
            Value::Null,
            false,
            false,
        ),
        v(
            'f',
            "one-callout floor",
            Module::Callout,
            Value::Null,
            false,
            false,
        ),
        v(
            'h',
            "hit floor: one real /v1/hit",
            Module::HitCallout,
            Value::Null,
            false,
            false,
        ),
        v(
            'b',
            "filter, node scopes",
            Module::Filter,
            node,
            false,
            false,
        ),
        v(
            'd',
            "filter, node, verify",
            Module::Filter,
            verified,
            true,
            false,
        ),
        v(
            'c',
            "filter, fleet scopes",
            Module::Filter,
            fleet,
            false,
            false,
        ),
        v(
            'o',
            "filter, fleet, breaker open",
            Module::Filter,
            open,
            false,
            true,
        ),
        peer,
        node_base,
        fleet_base,
        native_node,
        native_verified,
        native_noop,
        native_calls,
        native_callout,
        native_fleet,
        native_direct,
    ]
}

/// Starts (without waiting) `variant`'s Envoy from `spec`; a baseline
/// variant loads `baseline` instead of this tree's filter; the peer asks
/// the Limitador listening for gRPC on `spec.store_port`.
pub fn spawn(
    variant: &Variant,
    mut spec: EdgeSpec,
    baseline: Option<&Path>,
) -> Result<Edge, String> {
    if variant.signed {
        spec.vm_env = vec![(SECRET_ENV.to_string(), SECRET.to_string())];
    }
    spec.shell = if variant.native {
        Shell::Native
    } else {
        Shell::Wasm
    };
    let rendered = |spec: &EdgeSpec| render(spec, &paths::filter_wasm());
    match variant.module {
        Module::Filter if variant.baseline => {
            let wasm = baseline
                .ok_or_else(|| format!("variant {:?} needs --baseline-wasm", variant.key))?;
            spec.filter_config = variant.config.clone();
            let ours = paths::filter_wasm().display().to_string();
            let theirs = wasm.display().to_string();
            Ok(Edge::spawn_with(spec, move |b| b.replace(&ours, &theirs)))
        }
        Module::Filter if variant.direct => {
            spec.filter_config = with_direct_connection(&variant.config, spec.store_port);
            Ok(Edge::spawn(spec))
        }
        Module::Filter => {
            spec.filter_config = variant.config.clone();
            Ok(Edge::spawn(spec))
        }
        Module::Bare => {
            let bare = without_wasm(&rendered(&spec))?;
            Ok(Edge::spawn_with(spec, move |_| bare))
        }
        Module::LocalRatelimit => {
            let native = with_local_ratelimit(&without_wasm(&rendered(&spec))?)?;
            Ok(Edge::spawn_with(spec, move |_| native))
        }
        Module::Peer => {
            let peer = with_ratelimit(&without_wasm(&rendered(&spec))?, spec.store_port)?;
            Ok(Edge::spawn_with(spec, move |_| peer))
        }
        Module::Noop if variant.native => {
            spec.filter_config = Value::String(String::new());
            Ok(Edge::spawn_with(spec, floors::native_floor))
        }
        Module::NodeCalls if variant.native => {
            spec.filter_config = Value::String(floors::NODE_CALLS.to_string());
            Ok(Edge::spawn_with(spec, floors::native_floor))
        }
        Module::Callout if variant.native => {
            spec.filter_config = Value::String(CALLOUT_TARGET.to_string());
            Ok(Edge::spawn_with(spec, floors::native_floor))
        }
        Module::Noop => floors::spawn(spec, floors::NOOP),
        Module::NodeCalls => {
            spec.filter_config = Value::String(floors::NODE_CALLS.to_string());
            floors::spawn(spec, floors::NOOP)
        }
        Module::Callout => {
            spec.filter_config = Value::String(CALLOUT_TARGET.to_string());
            floors::spawn(spec, floors::CALLOUT)
        }
        Module::HitCallout => {
            spec.filter_config = Value::String(floors::HIT_TARGET.to_string());
            floors::spawn(spec, floors::CALLOUT)
        }
    }
}

const ROUTER: &str = "- name: envoy.filters.http.router";

/// The rendered bootstrap without the wasm filter: the same listener, route
/// and clusters, the router the only HTTP filter.
pub fn without_wasm(bootstrap: &str) -> Result<String, String> {
    let lines: Vec<&str> = bootstrap.lines().collect();
    let find = |name: &str| {
        lines
            .iter()
            .position(|l| l.trim() == format!("- name: {name}"))
            .ok_or_else(|| format!("the edge template has no `- name: {name}` line"))
    };
    let (wasm, router) = (
        find("envoy.filters.http.wasm")?,
        find("envoy.filters.http.router")?,
    );
    if router < wasm {
        return Err("the edge template lists the router before the wasm filter".to_string());
    }
    let mut kept: Vec<&str> = lines[..wasm].to_vec();
    kept.extend(&lines[router..]);
    Ok(kept.join("\n") + "\n")
}

/// The stat prefix of the native rate limiter (`bench_local.http_local_rate_limit.*`).
pub const LOCAL_PREFIX: &str = "bench_local";
/// Requests the native limiter let through, as `/stats/prometheus` prints it
/// (Envoy turns the prefix into a label).
pub const LOCAL_OK: &str =
    r#"envoy_http_local_rate_limit_ok{envoy_local_http_ratelimit_prefix="bench_local"}"#;

/// `bootstrap` with Envoy's `local_ratelimit` before the router, its bucket
/// (4 000 000 000 tokens, refilled in full every second) too large to deny.
pub fn with_local_ratelimit(bootstrap: &str) -> Result<String, String> {
    let at = bootstrap
        .lines()
        .find(|l| l.trim() == ROUTER)
        .ok_or_else(|| format!("the bootstrap has no `{ROUTER}` line"))?;
    let indent = &at[..at.len() - at.trim_start().len()];
    let inner = format!("{indent}  ");
    let filter = [
        "- name: envoy.filters.http.local_ratelimit".to_string(),
        "  typed_config:".to_string(),
        "    \"@type\": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit".to_string(),
        format!("    stat_prefix: {LOCAL_PREFIX}"),
        "    token_bucket: { max_tokens: 4000000000, tokens_per_fill: 4000000000, fill_interval: 1s }".to_string(),
        "    filter_enabled: { default_value: { numerator: 100, denominator: HUNDRED } }".to_string(),
        "    filter_enforced: { default_value: { numerator: 100, denominator: HUNDRED } }".to_string(),
    ]
    .iter()
    .map(|l| match l.strip_prefix("  ") {
        Some(rest) => format!("{inner}{rest}"),
        None => format!("{indent}{l}"),
    })
    .collect::<Vec<_>>()
    .join("\n");
    Ok(bootstrap.replacen(at, &format!("{filter}\n{at}"), 1))
}

/// GitHub's signature of [`SIGNED_BODY`] under [`SECRET`].
pub fn signature() -> String {
    use ankusa_core::verify::{body_mac, Encoding};
    body_mac::sign(
        SECRET.as_bytes(),
        "sha256=",
        Encoding::Hex,
        SIGNED_BODY.as_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_baseline_variants_run_the_node_and_fleet_configs() {
        let v = variants();
        let get = |k: char| v.iter().find(|x| x.key == k).unwrap();
        for (base, ours) in [('B', 'b'), ('C', 'c')] {
            assert!(get(base).baseline && !get(ours).baseline);
            assert_eq!(get(base).config, get(ours).config);
            assert_eq!(get(base).hits_store(), get(ours).hits_store());
        }
        let spec = EdgeSpec::new("edge-t", 1, 2, json!({"sources": {}}));
        let err = spawn(get('B'), spec, None).err().unwrap();
        assert!(err.contains("--baseline-wasm"), "{err}");
    }

    #[test]
    fn the_native_floors_and_fleet_variant_are_the_wasm_ones_run_natively() {
        let v = variants();
        let get = |k: char| v.iter().find(|x| x.key == k).unwrap();
        for (native, wasm) in [('M', 'n'), ('K', 'k'), ('G', 'f'), ('F', 'c')] {
            assert!(get(native).native && !get(wasm).native);
            assert_eq!(get(native).module, get(wasm).module);
            assert_eq!(get(native).config, get(wasm).config);
        }
        assert!(get('F').hits_store() && get('G').needs_store());
        // (H) is (F) with its store calls on the module's own connection.
        assert!(get('H').native && get('H').direct && !get('F').direct);
        assert_eq!(get('H').config, get('F').config);
        assert!(get('H').hits_store());
        assert_eq!(
            floors::native_floor("name: ankusa_module\n".into()),
            "name: ankusa_floor\n"
        );
    }

    #[test]
    fn the_native_variants_run_the_wasm_variants_configs_as_the_native_module() {
        let v = variants();
        let get = |k: char| v.iter().find(|x| x.key == k).unwrap();
        for (native, wasm) in [('N', 'b'), ('D', 'd')] {
            assert!(get(native).native && !get(wasm).native);
            assert_eq!(get(native).config, get(wasm).config);
            assert_eq!(get(native).signed, get(wasm).signed);
            assert_eq!(get(native).module, Module::Filter);
        }
    }

    fn full() -> String {
        let spec = EdgeSpec::new("edge-t", 1, 2, json!({"sources": {}}));
        render(&spec, Path::new("/x.wasm"))
    }

    #[test]
    fn the_bare_bootstrap_keeps_everything_but_the_wasm_filter() {
        let bare = without_wasm(&full()).unwrap();
        assert!(!bare.contains("envoy.filters.http.wasm"), "{bare}");
        assert!(!bare.contains("/x.wasm"), "{bare}");
        for kept in [
            "http_filters:\n          - name: envoy.filters.http.router",
            "route: { cluster: intake, timeout: 30s }",
            "per_connection_buffer_limit_bytes",
            "- name: ankusa_store",
        ] {
            assert!(bare.contains(kept), "{kept} missing:\n{bare}");
        }
        assert!(without_wasm("static_resources: {}\n").is_err());
    }

    #[test]
    fn the_native_limiter_sits_before_the_router_at_its_indent() {
        let bare = without_wasm(&full()).unwrap();
        let native = with_local_ratelimit(&bare).unwrap();
        assert!(
            native.contains(
                "http_filters:\n          - name: envoy.filters.http.local_ratelimit\n            typed_config:\n"
            ),
            "{native}"
        );
        assert!(
            native.contains("HUNDRED } }\n          - name: envoy.filters.http.router"),
            "{native}"
        );
        assert_eq!(native.lines().count(), bare.lines().count() + 7);
        assert!(native.contains(&format!("stat_prefix: {LOCAL_PREFIX}\n")));
        assert!(LOCAL_OK.contains(&format!("\"{LOCAL_PREFIX}\"")));
        assert!(with_local_ratelimit("static_resources: {}\n").is_err());
    }

    #[test]
    fn the_filter_variants_differ_only_where_their_names_say() {
        let v = variants();
        let get = |k: char| v.iter().find(|x| x.key == k).unwrap();
        let (node, fleet) = (get('b').config.clone(), get('c').config.clone());
        assert_eq!(node["rate_limits"]["scope"], "node");
        assert_eq!(fleet["rate_limits"]["scope"], "fleet");
        assert_eq!(node["sources"], fleet["sources"]);
        assert_eq!(
            node["rate_limits"]["tenants"],
            fleet["rate_limits"]["tenants"]
        );
        assert!(node.get("fleet").is_none());

        let mut verified = get('d').config.clone();
        assert!(get('d').signed && !get('b').signed);
        verified["sources"]["gh"]
            .as_object_mut()
            .unwrap()
            .remove("verify");
        assert_eq!(node, verified);
        assert_eq!(SIGNED_BODY.len(), BODY.replace("{i}", "100000").len());

        let open = get('o');
        assert!(open.store_down && !open.hits_store() && get('c').hits_store());
        assert!(!open.needs_store() && get('f').needs_store() && get('C').needs_store());
        assert!(get('h').needs_store() && !get('h').hits_store());
        assert!(!get('n').needs_store() && !get('b').needs_store());
        assert!(!get('k').needs_store() && get('k').module == Module::NodeCalls);
        let mut open = open.config.clone();
        assert_eq!(open["fleet"]["breaker_open_ms"], BREAKER_OPEN_MS);
        for k in ["breaker_min_calls", "breaker_open_ms"] {
            open["fleet"].as_object_mut().unwrap().remove(k);
        }
        assert_eq!(open, fleet);
        let keys: String = v.iter().map(|x| x.key).collect();
        assert_eq!(keys, "alnkfhbdcopBCNDMKGFH");
        let peer = get('p');
        assert!(peer.module == Module::Peer && !peer.needs_store() && !peer.hits_store());
    }
}
