//! Upgrading in any order, through real processes: the previous release's
//! store and filter (built by scripts/mixed-versions.sh from the commit
//! CHANGELOG.md names, into `$ANKUSA_PREVIOUS_RELEASE`) against this one's,
//! in every mix a rolling upgrade passes through, stores of both releases
//! on one Redis among them. Each fleet of two edges
//! keeps every promise: the tenant's quota and an override set on the store
//! hold across both edges as one limit, and the mock provider's events,
//! a fifth redelivered to the other edge, are all stored once.
//!
//! Without `ANKUSA_PREVIOUS_RELEASE` the tests say SKIPPED and pass: the
//! previous release takes minutes to build, so this run lives in its own
//! script (its figures are in RELIABILITY.md, "Upgrades").

use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::paths::{filter_wasm, workspace_bin};
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::{deliver, fleet_config, store_call};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Which build each part runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Build {
    Previous,
    This,
}

/// The previous release's `ankusa-store` and `ankusa_filter.wasm`, or None.
fn previous() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("ANKUSA_PREVIOUS_RELEASE")?);
    for file in ["ankusa-store", "ankusa_filter.wasm"] {
        assert!(
            dir.join(file).exists(),
            "ANKUSA_PREVIOUS_RELEASE={} has no {file}: scripts/mixed-versions.sh builds it",
            dir.display()
        );
    }
    Some(dir)
}

fn edge(
    node: &str,
    build: Build,
    previous: &std::path::Path,
    intake: &Intake,
    store: &Store,
) -> Edge {
    let mut config = fleet_config(1000, 5);
    // A racing copy comes back after the claim's pending time: 5 s keeps
    // the run short without changing what it checks.
    config["fleet"]["pending_ttl_ms"] = 5000.into();
    let spec = EdgeSpec::new(node, intake.port, store.port, config);
    let this = filter_wasm().display().to_string();
    let module = match build {
        Build::This => this.clone(),
        Build::Previous => previous.join("ankusa_filter.wasm").display().to_string(),
    };
    Edge::start_with(spec, move |bootstrap| bootstrap.replace(&this, &module))
}

fn start_store(build: Build, previous: &std::path::Path, redis: &Redis) -> Store {
    let store = match build {
        // While edges of the previous release (which send no receipt) run,
        // a store takes their promotes; while its stores share the Redis,
        // committed claims are written in both layouts (so a previous store
        // reads this one's): the upgrade's settings (docs/deploy.md).
        Build::This => Store::start_with_args(
            &redis.url(),
            &["--receipts", "accept-missing", "--committed-layout", "dual"],
        ),
        Build::Previous => Store::start_binary(&previous.join("ankusa-store"), &redis.url()),
    };
    assert!(store.wait_ready(Duration::from_secs(10)), "{build:?} store");
    store
}

/// One mix: each edge's build and the build of the store it calls (one
/// store when both call the same build; two stores on one Redis when not,
/// as while the stores roll). Panics on a broken promise.
fn run(edges: [Build; 2], stores: [Build; 2]) {
    let Some(previous) = previous() else {
        eprintln!(
            "SKIPPED: ANKUSA_PREVIOUS_RELEASE is not set (scripts/mixed-versions.sh sets it)"
        );
        return;
    };
    let label = format!(
        "edges {:?} and {:?}, calling stores {:?} and {:?}",
        edges[0], edges[1], stores[0], stores[1]
    );
    let redis = Redis::start();
    let first = start_store(stores[0], &previous, &redis);
    let second = (stores[1] != stores[0]).then(|| start_store(stores[1], &previous, &redis));
    let store = &first;
    let intake = Intake::start();
    let a = edge("edge-a", edges[0], &previous, &intake, &first);
    let b = edge(
        "edge-b",
        edges[1],
        &previous,
        &intake,
        second.as_ref().unwrap_or(&first),
    );

    // One quota across both edges: acme has 1 hook/s and a burst of 1000;
    // an override lowers the burst to 25 fleet-wide. 20 hooks are spent
    // first, so at most 5 more (and 1 a second of refill) pass, whichever
    // edge they reach: both edges apply the override, and charge one bucket.
    for i in 0..20 {
        let edge = if i % 2 == 0 { &a } else { &b };
        let status = deliver(edge, "/webhooks/gh", &format!("before-{i}")).status;
        assert_eq!(status, 201, "{label}: hook {i} before the override");
    }
    let set = store_call(
        store,
        "PUT",
        "/v1/overrides/acme",
        r#"{"rate": 1, "burst": 25, "ttl_ms": 600000}"#,
    );
    assert_eq!(set.status, 200, "{label}: {}", set.text());
    // Each edge reads the fleet's overrides on its own poll (about a second).
    for (name, e) in [("edge-a", &a), ("edge-b", &b)] {
        let deadline = Instant::now() + Duration::from_secs(15);
        while e.stat("ankusa_overrides_listed") < 1.0 {
            assert!(
                Instant::now() < deadline,
                "{label}: {name} never listed the override"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let started = Instant::now();
    let after: Vec<u16> = (0..30)
        .map(|i| {
            let edge = if i % 2 == 0 { &a } else { &b };
            deliver(edge, "/webhooks/gh", &format!("after-{i}")).status
        })
        .collect();
    let elapsed_s = started.elapsed().as_secs();
    let admitted = after.iter().filter(|s| **s == 201).count() as u64;
    assert!(
        after.iter().all(|s| *s == 201 || *s == 429),
        "{label}: {after:?}"
    );
    // The poll came after the override was set: up to 2 s of refill at 1/s
    // passed between the last hook before it and the first after.
    let bound = 5 + elapsed_s + 2;
    assert!(
        (5..=bound).contains(&admitted),
        "{label}: admitted {admitted} of 30 under the override (bound {bound}): {after:?}"
    );
    let gone = store_call(store, "DELETE", "/v1/overrides/acme", "");
    assert_eq!(gone.status, 200, "{label}: {}", gone.text());
    for (name, e) in [("edge-a", &a), ("edge-b", &b)] {
        let deadline = Instant::now() + Duration::from_secs(15);
        while e.stat("ankusa_overrides_listed") > 0.0 {
            assert!(
                Instant::now() < deadline,
                "{label}: {name} kept the deleted override"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    // The provider: 600 events, a fifth redelivered to the other edge (half
    // racing the first delivery): every one stored once, none lost.
    let urls = [a.url(""), b.url("")].join(",");
    let out = Command::new(workspace_bin("mock-provider"))
        .args(["--edges", &urls, "--intake", &intake.url()])
        .args(["--profile", "github", "--tenant", "acme", "--source", "gh"])
        .args(["--events", "600", "--rate", "200", "--redeliver", "0.2"])
        .args(["--deadline-s", "120", "--json", "--quiet"])
        .output()
        .expect("run mock-provider");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let table = String::from_utf8_lossy(&out.stderr);
    let s: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{label}: no JSON from mock-provider ({e}): {stdout}\n{table}"));
    eprintln!("{label}\n{table}");
    assert_eq!(s["lost"], 0, "{label}: {s}");
    assert_eq!(s["stored_duplicates"], 0, "{label}: {s}");
    assert_eq!(s["stored"], 600, "{label}: {s}");
    assert_eq!(s["acknowledged"], s["sent"], "{label}: {s}");
    let duplicates = s["duplicate_answers"].as_u64().unwrap_or(0);
    assert!(
        duplicates >= s["redeliveries"].as_u64().unwrap_or(0) / 2,
        "{label}: redeliveries answered as duplicates: {s}"
    );
    let requests = s["requests"].as_f64().unwrap_or(0.0);
    // Next to nothing fell back and no settle batch failed: every call of every mix
    // was understood (an edge sending a v0.1.0 store a field it doesn't
    // know, a receipt, would have its settle batches refused).
    for (name, e) in [("edge-a", &a), ("edge-b", &b)] {
        // A call past its budget on a starved machine falls back too: a
        // few are that; a mix whose calls aren't understood falls back on
        // every hook.
        let fell_back = e.stat("ankusa_fleet_fallback_total");
        assert!(
            fell_back <= requests / 100.0,
            "{label}: {name} fell back {fell_back} times in {requests} requests"
        );
        assert_eq!(
            e.stat("ankusa_fleet_settle_batches_total{result=\"failed\"}"),
            0.0,
            "{label}: {name} had a settle batch refused"
        );
    }
    println!(
        "MIXED {label}: override admitted {admitted}/30 (bound {bound}); provider {} events, {} redeliveries, {} duplicate answers, stored {}, lost {}, stored duplicates {}, {} s",
        s["events"], s["redeliveries"], s["duplicate_answers"], s["stored"], s["lost"], s["stored_duplicates"], s["elapsed_s"]
    );
}

#[test]
fn previous_edges_with_this_store() {
    run([Build::Previous; 2], [Build::This; 2]);
}

#[test]
fn this_releases_edges_with_the_previous_store() {
    run([Build::This; 2], [Build::Previous; 2]);
}

#[test]
fn one_previous_and_one_new_edge_with_this_store() {
    run([Build::Previous, Build::This], [Build::This; 2]);
}

#[test]
fn one_previous_and_one_new_edge_with_the_previous_store() {
    run([Build::Previous, Build::This], [Build::Previous; 2]);
}

/// Half-way through a roll of the stores: each edge calls a store of
/// another release, both on one Redis, so each reads what the other wrote.
#[test]
fn stores_of_both_releases_on_one_redis() {
    run(
        [Build::Previous, Build::This],
        [Build::Previous, Build::This],
    );
}

/// One call to `store`'s `path` as an edge makes it; its JSON answer.
fn call(store: &Store, path: &str, body: &serde_json::Value) -> serde_json::Value {
    let (name, value) = ankusa_testkit::token::auth_header();
    let r = ankusa_testkit::http::request(
        "POST",
        &store.url_of(path),
        &[(name, value.as_str()), ("content-type", "application/json")],
        body.to_string().as_bytes(),
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    r.json()
}

/// A store of the previous release reads only the old claim layout. Under
/// `--committed-layout dual` it answers `duplicate`, with the hook id, for
/// an event this release's store committed on the same Redis; under
/// `compact` it takes the event afresh. That is why the upgrade runs `dual`
/// while both share a Redis (docs/deploy.md, "Upgrading"): the mixes above
/// pass either way, as the intake's own index catches a copy.
#[test]
fn the_previous_store_answers_duplicate_for_claims_this_store_committed_in_dual() {
    let Some(previous) = previous() else {
        eprintln!(
            "SKIPPED: ANKUSA_PREVIOUS_RELEASE is not set (scripts/mixed-versions.sh sets it)"
        );
        return;
    };
    for (layout, duplicate) in [("dual", true), ("compact", false)] {
        let redis = Redis::start();
        let new = Store::start_with_args(
            &redis.url(),
            &["--receipts", "accept-missing", "--committed-layout", layout],
        );
        assert!(
            new.wait_ready(Duration::from_secs(10)),
            "{layout}: this store"
        );
        let old = start_store(Build::Previous, &previous, &redis);
        let claim = |hook: &str| {
            serde_json::json!({"tenant": "acme", "source_id": "gh", "key": "evt-1", "hook_id": hook,
                               "node": "edge-1", "ttl_ms": 3_600_000, "pending_ttl_ms": 30_000})
        };
        let hit = |hook: &str| serde_json::json!({"charges": [], "claim": claim(hook)});
        assert_eq!(
            call(&new, "/v1/hit", &hit("h-1"))["result"],
            "ok",
            "{layout}"
        );
        let stored = "0190a0b1-2222-7aaa-8bbb-0123456789ab";
        let settled = call(
            &new,
            "/v1/settle",
            &serde_json::json!({"ops": [{"op": "promote", "claim": claim("h-1"), "hook_id": stored}]}),
        );
        assert_eq!(settled["applied"], 1, "{layout}: {settled}");
        // This store answers duplicate under either layout.
        assert_eq!(
            call(&new, "/v1/hit", &hit("h-2"))["hook_id"],
            stored,
            "{layout}"
        );
        let answer = call(&old, "/v1/hit", &hit("h-3"));
        if duplicate {
            assert_eq!(
                (&answer["result"], &answer["hook_id"]),
                (&serde_json::json!("duplicate"), &serde_json::json!(stored)),
                "{layout}: {answer}"
            );
        } else {
            assert_eq!(answer["result"], "ok", "{layout}: {answer}");
        }
    }
}
