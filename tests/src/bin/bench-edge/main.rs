//! `bench-edge [--clients N] [--seconds S] [--warmup-seconds S] [--concurrency N]`
//!
//! What the filter costs an edge: the same Envoy, listener and route
//! forwarding the same webhook POSTs to the intake, (a) without the wasm
//! filter, (b) with it on node scopes (no store call), (d) the same with the
//! source verifying GitHub signatures (the body buffered and its HMAC checked)
//! and (c) on fleet scopes (one call per hook to a release ankusa-store on a
//! real Redis), quotas high enough that nothing is refused. Prints one table
//! with each variant's rate, p50/p99 and their ratios to (a), and what
//! verification costs per hook in Envoy CPU, (d) beside (b). Run by scripts/bench-edge.sh, which builds
//! the release artefacts first.

use ankusa_testkit::envoy::{fleet_filter_config, render, Edge, EdgeSpec};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::{http, paths};
use ankusa_tests::fleet::stop_children;
use ankusa_tests::load::{self, LoadSpec};
use clap::Parser;
use serde_json::{json, Value};
use std::time::Duration;

mod report;
use report::{clock_tick, cpu_seconds, print_cpu, print_facts, print_table, Row};

#[derive(Parser)]
#[command(name = "bench-edge", version)]
struct Args {
    /// Concurrent keep-alive clients.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Measured seconds per variant.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Unmeasured seconds per variant first (V8's JIT, upstream connections).
    #[arg(long, default_value_t = 1.0)]
    warmup_seconds: f64,
    /// Envoy worker threads (`--concurrency`).
    #[arg(long, default_value_t = 2)]
    concurrency: u32,
}

/// The hook every client sends, `{i}` being the request counter.
const PATH: &str = "/webhooks/gh";
const BODY: &str = r#"{"zen":"Design for failure.","n":{i}}"#;
/// The intake answers this without writing to disk: the upstream stays cheap.
const INTAKE_STATUS: &str = "201";

struct Variant {
    key: char,
    name: &'static str,
    /// The plugin configuration; `None` removes the wasm filter.
    config: Option<Value>,
    /// Hooks are signed ([`SIGNED_BODY`], `x-hub-signature-256`) and the
    /// filter's VM holds the secret.
    signed: bool,
}

/// The verified variant's secret, passed to Envoy's VM by name.
const SECRET_ENV: &str = "ANKUSA_BENCH_GH_SECRET";
const SECRET: &str = "bench-edge-github-secret";
/// [`BODY`] as it reads for a six-digit counter: the same bytes to hash for
/// every hook, so one signature serves the whole run (deliveries still differ
/// by their `x-github-delivery`).
const SIGNED_BODY: &str = r#"{"zen":"Design for failure.","n":100000}"#;

fn variants() -> Vec<Variant> {
    // Both filter variants differ only in scope; no tenant can be refused.
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
    vec![
        Variant {
            key: 'a',
            name: "bare Envoy (no filter)",
            config: None,
            signed: false,
        },
        Variant {
            key: 'b',
            name: "filter, node scopes",
            config: Some(node),
            signed: false,
        },
        Variant {
            key: 'd',
            name: "filter, node, verify",
            config: Some(verified),
            signed: true,
        },
        Variant {
            key: 'c',
            name: "filter, fleet scopes",
            config: Some(fleet),
            signed: false,
        },
    ]
}

/// The rendered bootstrap without the wasm filter: the same listener, route
/// and clusters, the router the only HTTP filter.
fn without_wasm(bootstrap: &str) -> Result<String, String> {
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

fn main() {
    let args = Args::parse();
    // Read by testkit::paths::workspace_bin: the store and intake as released.
    std::env::set_var("ANKUSA_PROFILE", "release");
    // A release build aborts on panic without running destructors: stop the
    // children from the hook, which runs either way.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        stop_children(Duration::from_secs(5));
    }));
    if let Err(e) = watch_signals() {
        eprintln!("bench-edge: {e}");
        std::process::exit(1);
    }
    match run(&args) {
        Ok(rows) => {
            let problems: Vec<String> = rows.iter().filter_map(Row::problem).collect();
            for p in &problems {
                eprintln!("bench-edge: {p}");
            }
            std::process::exit(if problems.is_empty() { 0 } else { 1 });
        }
        Err(e) => {
            eprintln!("bench-edge: {e}");
            std::process::exit(1);
        }
    }
}

/// On SIGTERM or SIGINT (a timeout, a ^C), stops every child and exits 130.
/// Installed before any child starts.
fn watch_signals() -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the signal runtime: {e}"))?;
    let (mut term, mut int) = runtime
        .block_on(async {
            Ok::<_, std::io::Error>((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
            ))
        })
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    std::thread::spawn(move || {
        runtime.block_on(async {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        });
        eprintln!("bench-edge: stopping (signal)");
        stop_children(Duration::from_secs(5));
        std::process::exit(130);
    });
    Ok(())
}

fn seconds(flag: &str, v: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(v).map_err(|_| format!("--{flag} must be seconds ≥ 0, got {v}"))
}

fn run(args: &Args) -> Result<Vec<Row>, String> {
    let measured = seconds("seconds", args.seconds)?;
    let warmup = seconds("warmup-seconds", args.warmup_seconds)?;
    let wasm = paths::target_dir().join("wasm32-wasip1/release/ankusa_filter.wasm");
    for needed in [
        paths::target_dir().join("release/ankusa-store"),
        paths::target_dir().join("release/intake"),
        wasm.clone(),
    ] {
        if !needed.exists() {
            return Err(format!(
                "{} is missing: run scripts/bench-edge.sh, which builds it",
                needed.display()
            ));
        }
    }
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    if !store.wait_ready(Duration::from_secs(10)) {
        return Err(format!(
            "ankusa-store never reached Redis:\n{}",
            store.proc.log_tail()
        ));
    }
    let intake = Intake::start();

    print_facts(args, &redis);
    let tick = clock_tick();
    let mut rows = Vec::new();
    // One Envoy at a time: the one measured has the cores to itself (and to
    // what it calls), with no idle edge's timers beside it.
    for variant in variants() {
        let mut spec = EdgeSpec::new(
            &format!("bench-{}", variant.key),
            intake.port,
            store.port,
            variant.config.clone().unwrap_or_else(|| json!({})),
        );
        spec.concurrency = args.concurrency;
        if variant.signed {
            spec.vm_env = vec![(SECRET_ENV.to_string(), SECRET.to_string())];
        }
        let mut edge = match &variant.config {
            Some(_) => Edge::spawn(spec),
            None => {
                let bare = without_wasm(&render(&spec, &wasm))?;
                Edge::spawn_with(spec, move |_| bare)
            }
        };
        edge.wait_ready(Duration::from_secs(60));
        let signed = variant.signed;
        let spec = |tag: String, duration: Duration| {
            let mut headers = vec![
                ("content-type".to_string(), "application/json".to_string()),
                // A fresh delivery per hook: none is a duplicate, every one a claim.
                ("x-github-delivery".to_string(), format!("{tag}-{{i}}")),
                ("x-intake-status".to_string(), INTAKE_STATUS.to_string()),
            ];
            let body = if signed {
                headers.push(("x-hub-signature-256".to_string(), signature()));
                SIGNED_BODY
            } else {
                BODY
            };
            LoadSpec {
                url: edge.url(PATH),
                method: "POST".to_string(),
                headers,
                body: body.to_string(),
                clients: args.clients,
                duration,
                expect_body: None,
                timeout: Duration::from_secs(10),
            }
        };
        load::run(&spec(format!("warm-{}", variant.key), warmup))?;
        let pids = [
            edge.proc.pid(),
            store.proc.pid(),
            redis.proc.pid(),
            intake.proc.pid(),
            std::process::id(),
        ];
        let counts = || {
            (
                edge.stat(r#"ankusa_admissions_total{outcome="admitted"}"#),
                edge.stat("ankusa_fleet_fallback_total"),
                store_hits(&store),
                pids.map(|pid| cpu_seconds(pid, tick)),
            )
        };
        let before = counts();
        let report = load::run(&spec(format!("run-{}", variant.key), measured))?;
        let after = counts();
        rows.push(Row {
            variant,
            report,
            admitted: after.0 - before.0,
            fallbacks: after.1 - before.1,
            store_hits: after.2 - before.2,
            cpu: std::array::from_fn(|i| after.3[i] - before.3[i]),
        });
        drop(edge);
    }
    print_table(&rows);
    print_cpu(&rows, args.concurrency, measured);
    Ok(rows)
}

/// GitHub's signature of [`SIGNED_BODY`] under [`SECRET`].
fn signature() -> String {
    use ankusa_core::verify::{body_mac, Encoding};
    body_mac::sign(
        SECRET.as_bytes(),
        "sha256=",
        Encoding::Hex,
        SIGNED_BODY.as_bytes(),
    )
}

/// Every `/v1/hit` the store answered, whatever the result.
fn store_hits(store: &Store) -> f64 {
    let text = http::get(&store.url_of("/metrics"))
        .map(|r| r.text())
        .unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.starts_with("ankusa_store_requests_total{") && l.contains(r#"endpoint="hit""#)
        })
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_bare_bootstrap_keeps_everything_but_the_wasm_filter() {
        let spec = EdgeSpec::new("edge-t", 1, 2, json!({"sources": {}}));
        let full = render(&spec, Path::new("/x.wasm"));
        let bare = without_wasm(&full).unwrap();
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
    fn the_filter_variants_differ_only_in_scope() {
        let v = variants();
        let (node, fleet) = (v[1].config.clone().unwrap(), v[3].config.clone().unwrap());
        assert_eq!(node["rate_limits"]["scope"], "node");
        assert_eq!(fleet["rate_limits"]["scope"], "fleet");
        assert_eq!(node["sources"], fleet["sources"]);
        assert_eq!(
            node["rate_limits"]["tenants"],
            fleet["rate_limits"]["tenants"]
        );
        assert!(node.get("fleet").is_none());
    }

    #[test]
    fn the_verified_variant_is_node_scopes_plus_verify() {
        let v = variants();
        let (node, mut verified) = (v[1].config.clone().unwrap(), v[2].config.clone().unwrap());
        assert_eq!(v[2].key, 'd');
        assert!(v[2].signed && !v[1].signed);
        verified["sources"]["gh"]
            .as_object_mut()
            .unwrap()
            .remove("verify");
        assert_eq!(node, verified);
        assert_eq!(SIGNED_BODY.len(), BODY.replace("{i}", "100000").len());
    }
}
