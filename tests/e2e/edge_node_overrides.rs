//! Fleet overrides on node-scope edges, through real Envoy, a real store and
//! real Redis: each edge lists the overrides once at start and then polls
//! the changes since its version once a second per node, so an override set
//! on the store holds on every edge within two seconds, its deletion gives
//! the configuration back as fast, and an edge cut off from the store
//! returns to its configuration once the list is stale. Overrides past the
//! edge's cap never push out the tenants its configuration names. A
//! fleet-scope edge whose store went down answers node-local under the last
//! override it learnt.

use ankusa_core::fleet::overrides::node_list::{MAX_OVERRIDES, POLL_INTERVAL_MS, STALE_AFTER_MS};
use ankusa_testkit::envoy::Edge;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The longest an override takes to reach every edge: two poll intervals.
const PICKED_UP: Duration = Duration::from_millis(2 * POLL_INTERVAL_MS);

/// Node scopes with a store: `acme` at 1 hook/s, burst 1000.
fn node_with_store() -> Value {
    let mut config = node_config(1000);
    config["fleet"] = json!({"timeout_ms": 1000});
    config
}

struct Fleet {
    _redis: Redis,
    store: Option<Store>,
    intake: Intake,
    edges: Vec<Edge>,
}

fn fleet(n: usize, config: Value) -> Fleet {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    assert!(store.wait_ready(Duration::from_secs(10)));
    let intake = Intake::start();
    let edges = (0..n)
        .map(|i| {
            edge(
                &format!("edge-{i}"),
                intake.port,
                store.port,
                config.clone(),
            )
        })
        .collect();
    Fleet {
        _redis: redis,
        store: Some(store),
        intake,
        edges,
    }
}

impl Fleet {
    fn store(&self) -> &Store {
        self.store.as_ref().expect("the store is running")
    }

    fn set(&self, body: &str) {
        let r = store_call(self.store(), "PUT", "/v1/overrides/acme", body);
        assert_eq!(r.status, 200, "{}", r.text());
    }
}

/// Sends `count` distinct hooks to `edge` at once; how many were admitted
/// (201), and the whole seconds the sending took.
fn admitted(edge: &Edge, tag: &str, count: usize) -> (u64, u64) {
    let started = Instant::now();
    let statuses: Vec<u16> = (0..count)
        .map(|i| deliver(edge, "/webhooks/gh", &format!("{tag}-{i}")).status)
        .collect();
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 429),
        "{statuses:?}"
    );
    let ok = statuses.iter().filter(|s| **s == 201).count() as u64;
    (ok, started.elapsed().as_secs())
}

/// `admitted` held to a GCRA of `rate`/s and `burst` from an empty bucket:
/// at least `burst`, at most `burst + rate × (elapsed + 1)`.
/// Waits until `e` counts two failed polls of the override list, then
/// checks its log holds each of `lines`.
fn polls_fail_and_log(e: &Edge, lines: &[&str]) {
    assert!(
        eventually(PICKED_UP * 2, || e
            .stat(r#"ankusa_overrides_polls_total{result="failed"}"#)
            >= 2.0),
        "{}",
        e.log_tail()
    );
    let log = e.log();
    for line in lines {
        assert!(log.contains(line), "no {line:?} in:\n{}", e.log_tail());
    }
}

fn assert_held(what: &str, (ok, elapsed_s): (u64, u64), rate: u64, burst: u64) {
    assert!(
        (burst..=burst + rate * (elapsed_s + 1)).contains(&ok),
        "{what}: admitted {ok} over {elapsed_s} s, expected burst {burst} at {rate}/s"
    );
}

#[test]
fn a_lowered_limit_reaches_two_node_edges_within_two_seconds_and_its_deletion_gives_the_config_back(
) {
    let f = fleet(2, node_with_store());
    f.set(r#"{"rate": 1, "burst": 5, "ttl_ms": 600000}"#);
    std::thread::sleep(PICKED_UP);
    for (i, e) in f.edges.iter().enumerate() {
        assert_held(
            &format!("edge-{i} under the override"),
            admitted(e, &format!("low-{i}"), 20),
            1,
            5,
        );
        assert!(e.stat(r#"ankusa_overrides_polls_total{result="ok"}"#) >= 1.0);
        assert_eq!(e.stat("ankusa_overrides_listed"), 1.0);
    }

    let gone = store_call(f.store(), "DELETE", "/v1/overrides/acme", "");
    assert_eq!(gone.status, 200, "{}", gone.text());
    std::thread::sleep(PICKED_UP);
    for (i, e) in f.edges.iter().enumerate() {
        let (ok, _) = admitted(e, &format!("back-{i}"), 20);
        assert_eq!(
            ok, 20,
            "edge-{i}: the configuration's burst of 1000 is back"
        );
    }
}

#[test]
fn an_expired_override_gives_the_config_back_on_a_node_edge() {
    let f = fleet(1, node_with_store());
    f.set(r#"{"rate": 1, "burst": 3, "ttl_ms": 3000}"#);
    std::thread::sleep(PICKED_UP);
    let e = &f.edges[0];
    let under = admitted(e, "short", 10);
    assert_held("under the override", under, 1, 3);
    std::thread::sleep(Duration::from_millis(3_000));
    let (ok, _) = admitted(e, "expired", 10);
    assert_eq!(ok, 10, "expired: the configuration's burst of 1000");
}

#[test]
fn a_node_edge_cut_off_from_the_store_returns_to_its_config_after_the_staleness_bound() {
    let mut f = fleet(1, node_with_store());
    f.set(r#"{"rate": 1, "burst": 3, "ttl_ms": 600000}"#);
    std::thread::sleep(PICKED_UP);
    let e = &f.edges[0];
    assert_held("under the override", admitted(e, "low", 10), 1, 3);

    let killed = Instant::now();
    f.store = None;
    // Within the bound the last good list still applies: the bucket filled
    // at burst 3 refills at 1/s, nowhere near the configuration's 1000.
    let (ok, _) = admitted(e, "cut", 10);
    assert!(
        ok < 10,
        "the last good list holds until stale: admitted {ok}"
    );
    let stale = Duration::from_millis(STALE_AFTER_MS + 2 * POLL_INTERVAL_MS);
    std::thread::sleep(stale.saturating_sub(killed.elapsed()));
    let (ok, _) = admitted(e, "stale", 20);
    assert_eq!(ok, 20, "stale: the configuration's burst of 1000");
    assert!(e.stat(r#"ankusa_overrides_polls_total{result="failed"}"#) >= 1.0);
}

#[test]
fn an_overrides_shadow_on_a_node_tenant_refuses_nothing_and_counts_shadowed() {
    let f = fleet(1, node_with_store());
    f.set(r#"{"rate": 1, "burst": 2, "shadow": true, "ttl_ms": 600000}"#);
    std::thread::sleep(PICKED_UP);
    let e = &f.edges[0];
    let (ok, elapsed_s) = admitted(e, "sh", 10);
    assert_eq!(ok, 10, "nothing refused");
    assert_eq!(f.intake.hooks().len(), 10, "every hook forwarded");
    let shadowed = e.stat(r#"ankusa_admissions_total{outcome="rate_limited",shadow="true"}"#);
    let least = 10 - 2 - (elapsed_s + 1);
    assert!(
        shadowed >= least as f64 && shadowed <= 8.0,
        "shadowed {shadowed}, expected {least} to 8"
    );
    assert_eq!(
        e.stat(r#"ankusa_admissions_total{outcome="rate_limited"}"#),
        0.0
    );
}

#[test]
fn a_fleet_edge_whose_store_is_down_answers_under_the_last_known_override() {
    let mut f = fleet(1, fleet_config(1000, 5));
    f.set(r#"{"rate": 1, "burst": 3, "ttl_ms": 600000}"#);
    std::thread::sleep(PICKED_UP);
    f.store = None;
    let e = &f.edges[0];
    assert_held(
        "node-local under the override",
        admitted(e, "down", 10),
        1,
        3,
    );
    assert!(
        e.stat("ankusa_fleet_fallback_total") >= 10.0,
        "every hook was answered node-local"
    );
}

#[test]
fn an_edge_without_a_store_polls_nothing() {
    let f = fleet(1, node_config(1000));
    std::thread::sleep(PICKED_UP + Duration::from_millis(500));
    for result in ["full", "delta", "gap"] {
        let lists = f.store().metric(&format!(
            r#"ankusa_store_requests_total{{endpoint="overrides",result="{result}"}}"#
        ));
        assert_eq!(lists, 0.0, "no fleet section: no store to poll");
    }
    let e = &f.edges[0];
    assert_eq!(e.stat(r#"ankusa_overrides_polls_total{result="ok"}"#), 0.0);
    assert_eq!(
        e.stat(r#"ankusa_overrides_polls_total{result="failed"}"#),
        0.0
    );
}

#[test]
fn an_unreadable_list_answer_is_counted_and_the_edge_answers_from_its_config() {
    let garbage = FakeStore::start(Fault::Garbage);
    let intake = Intake::start();
    let e = edge("edge-g", intake.port, garbage.port, node_with_store());
    polls_fail_and_log(
        &e,
        &["override list poll failed, the last good list stays until stale"],
    );
    let (ok, _) = admitted(&e, "g", 10);
    assert_eq!(ok, 10, "the configuration's burst of 1000");
    assert_eq!(e.stat(r#"ankusa_overrides_polls_total{result="ok"}"#), 0.0);
}

#[test]
fn an_edge_without_a_token_is_refused_the_list_and_keeps_its_config() {
    let f = fleet(0, node_with_store());
    f.set(r#"{"rate": 1, "burst": 3, "ttl_ms": 600000}"#);
    let spec = ankusa_testkit::envoy::EdgeSpec::new(
        "edge-bare",
        f.intake.port,
        f.store().port,
        node_with_store(),
    );
    let e = Edge::start_with_token(spec, None);
    polls_fail_and_log(
        &e,
        &[
            "override list polls carry no token",
            "the store answered 401 to the override list",
        ],
    );
    let (ok, _) = admitted(&e, "bare", 10);
    assert_eq!(
        ok, 10,
        "the override never reached it: the configuration's burst"
    );
}

/// The store's count of list answers of `kind` (full, delta, gap).
fn lists(store: &Store, kind: &str) -> f64 {
    store.metric(&format!(
        r#"ankusa_store_requests_total{{endpoint="overrides",result="{kind}"}}"#
    ))
}

#[test]
fn an_override_changed_after_start_reaches_the_edge_through_the_delta_path() {
    let f = fleet(1, node_with_store());
    let e = &f.edges[0];
    assert!(
        eventually(PICKED_UP * 2, || e
            .stat(r#"ankusa_overrides_polls_total{result="ok"}"#)
            >= 2.0),
        "{}",
        e.log_tail()
    );
    f.set(r#"{"rate": 1, "burst": 3, "ttl_ms": 600000}"#);
    std::thread::sleep(PICKED_UP);
    assert_held("set after start", admitted(e, "delta", 10), 1, 3);
    let gone = store_call(f.store(), "DELETE", "/v1/overrides/acme", "");
    assert_eq!(gone.status, 200, "{}", gone.text());
    std::thread::sleep(PICKED_UP);
    let (ok, _) = admitted(e, "deleted", 10);
    assert_eq!(ok, 10, "the deletion reached it: the configuration's burst");
    assert_eq!(
        lists(f.store(), "full"),
        1.0,
        "the whole list once, at start"
    );
    assert!(lists(f.store(), "delta") >= 3.0, "then the changes");
    assert_eq!(lists(f.store(), "gap"), 0.0);
}

#[test]
fn crowding_overrides_named_to_sort_first_do_not_push_a_configured_tenants_override_off() {
    // The edge's budget for a list call is the default 25 ms.
    let mut config = node_config(1000);
    config["fleet"] = json!({"timeout_ms": 25});
    let f = fleet(0, config.clone());
    f.set(r#"{"rate": 1, "burst": 3, "ttl_ms": 600000}"#);
    let crowd = 2 * MAX_OVERRIDES;
    for i in 0..crowd {
        let r = store_call(
            f.store(),
            "PUT",
            &format!("/v1/overrides/aaa-{i:05}"),
            r#"{"shadow": true, "ttl_ms": 600000}"#,
        );
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let e = edge("edge-crowded", f.intake.port, f.store().port, config);
    assert!(
        eventually(PICKED_UP * 3, || e.stat("ankusa_overrides_listed")
            == MAX_OVERRIDES as f64),
        "{}",
        e.log_tail()
    );
    assert_held("acme among 2 000 crowders", admitted(&e, "crowd", 10), 1, 3);
    let left_out = crowd + 1 - MAX_OVERRIDES;
    assert_eq!(e.stat("ankusa_overrides_left_out"), left_out as f64);
    assert!(e.stat("ankusa_overrides_cut_total") >= left_out as f64);
    let log = e.log();
    assert!(
        log.contains(
            "overrides left out past the cap of 1000 (the configured tenants' \
                       first, then the most recently changed): aaa-0"
        ),
        "no line naming the tenants left out:\n{}",
        e.log_tail()
    );
}
