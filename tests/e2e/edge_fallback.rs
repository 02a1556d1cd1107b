//! A sick store never costs a hook: stopped, blackholed or answering garbage,
//! every hook is answered node-local, counted, and the breaker stops calling
//! the store until one probe finds it back.

use ankusa_testkit::envoy::Edge;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use serde_json::json;
use std::time::{Duration, Instant};

const OPEN_MS: u64 = 2_000;

/// Fleet scopes, a breaker that opens after 5 calls with half failed and stays open `OPEN_MS`.
fn config(timeout_ms: u64) -> serde_json::Value {
    let mut config = fleet_config(1_000, 5);
    config["fleet"]["timeout_ms"] = json!(timeout_ms);
    config["fleet"]["breaker_min_calls"] = json!(5);
    config["fleet"]["breaker_failure_rate"] = json!(0.5);
    config["fleet"]["breaker_window_ms"] = json!(60_000);
    config["fleet"]["breaker_open_ms"] = json!(OPEN_MS);
    config
}

/// Sends `n` hooks (distinct deliveries starting at `from`); every one must be admitted.
fn send_admitted(edge: &Edge, prefix: &str, n: usize) {
    for i in 0..n {
        let r = deliver(edge, "/webhooks/gh", &format!("{prefix}-{i}"));
        assert_eq!(
            r.status,
            201,
            "hook {prefix}-{i}: {}\n{}",
            r.text(),
            edge.log_tail()
        );
    }
}

/// Both degraded gauges read `value` (1: answered node-local, 0: by the fleet).
fn assert_gauges(edge: &Edge, value: f64) {
    for kind in ["rate_limit", "dedupe"] {
        let name = format!(r#"ankusa_fleet_limiter_degraded{{kind="{kind}"}}"#);
        assert_eq!(edge.stat(&name), value, "{name}");
    }
}

fn assert_degraded(edge: &Edge) {
    assert_gauges(edge, 1.0);
    assert_eq!(edge.stat("ankusa_fleet_breaker_state"), 1.0, "open");
}

#[test]
fn a_stopped_store_admits_every_hook_node_local_and_opens_the_breaker() {
    let intake = Intake::start();
    let edge = edge("edge-stopped", intake.port, free_port(), config(500));
    send_admitted(&edge, "stopped", 20);
    assert_eq!(intake.hooks().len(), 20, "no hook lost");
    assert!(edge.stat("ankusa_fleet_fallback_total") >= 20.0);
    assert_degraded(&edge);
    let warnings = edge.log().matches("fleet limiter degraded").count();
    assert_eq!(warnings, 1, "one warning a minute, not one per hook");
}

#[test]
fn a_blackholed_store_costs_at_most_the_budget_and_the_breaker_stops_calling_it() {
    let intake = Intake::start();
    let hole = FakeStore::start(Fault::Blackhole);
    let edge = edge("edge-blackhole", intake.port, hole.port, config(100));
    send_admitted(&edge, "hole", 8);
    assert_degraded(&edge);
    assert!(edge.stat("ankusa_fleet_fallback_total") >= 8.0);
    let calls_when_open =
        ankusa_tests::edge_support::eventually(Duration::from_secs(2), || hole.hits() >= 5);
    assert!(calls_when_open, "the blackhole saw {} calls", hole.hits());
    open_breaker_sends_no_calls(&edge, || hole.hits(), "hole-open");
    assert_eq!(intake.hooks().len(), 8 + 10);
}

/// While open, hooks go node-local with no store call; over `elapsed`, at most
/// one probe per `OPEN_MS` (a failed probe reopens it).
fn open_breaker_sends_no_calls(edge: &Edge, calls: impl Fn() -> u64, prefix: &str) {
    let before = calls();
    let started = Instant::now();
    send_admitted(edge, prefix, 10);
    let probes_allowed = started.elapsed().as_millis() as u64 / OPEN_MS + 1;
    let during = calls() - before;
    assert!(
        during <= probes_allowed,
        "{during} store calls while open (allowed {probes_allowed} probes)"
    );
}

#[test]
fn a_store_answering_garbage_is_a_failure_and_one_probe_closes_the_breaker_when_it_is_back() {
    let intake = Intake::start();
    let garbage = FakeStore::start(Fault::Garbage);
    let port = garbage.port;
    let edge = edge("edge-garbage", intake.port, port, config(500));
    send_admitted(&edge, "junk", 8);
    assert_degraded(&edge);
    assert_eq!(
        garbage.hits(),
        5,
        "hit calls until the breaker opened after min_calls failures (the claims they \
         sent are settled too, and a settle batch is no breaker call)"
    );
    open_breaker_sends_no_calls(&edge, || garbage.hits(), "junk-open");
    drop(garbage);

    // The real store comes back on the same port.
    let redis = Redis::start();
    let store = Store::start_on(port, &redis.url(), &[]);
    let closed = eventually(Duration::from_secs(3 * OPEN_MS / 1000 + 10), || {
        let r = deliver(&edge, "/webhooks/gh", &format!("back-{}", free_port()));
        assert_eq!(r.status, 201, "{}", r.text());
        edge.stat("ankusa_fleet_breaker_state") == 0.0
    });
    assert!(closed, "the breaker never closed:\n{}", edge.log_tail());
    let hits = metric_sum(
        &store.url_of("/metrics"),
        "ankusa_store_requests_total",
        r#"endpoint="hit""#,
    );
    assert!(hits >= 1.0, "the probe reached the store");
    // The next hook is answered by the fleet again and the gauges return to 0.
    let r = deliver(&edge, "/webhooks/gh", "after-close");
    assert_eq!(r.status, 201);
    assert_gauges(&edge, 0.0);
    assert!(edge.log().contains("Closed"), "the close is logged");
}
