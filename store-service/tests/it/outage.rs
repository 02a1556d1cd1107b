//! Redis outages under the running binary: quick 503s, `/readyz` false, and
//! recovery without a restart (also once Redis has lost its script cache).

use ankusa_testkit::http::{get, request, Response};
use ankusa_testkit::ports::free_port;
use ankusa_testkit::process::scratch_dir;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::auth_header;
use serde_json::json;
use std::time::{Duration, Instant};

fn hit_body(key: &str) -> Vec<u8> {
    json!({
        "charges": [{"kind": "hooks", "tenant": "acme", "units": 1, "rate": 1000, "burst": 1_000_000}],
        "claim": {"tenant": "acme", "source_id": "gh", "key": key, "hook_id": "h1", "node": "edge-1",
                  "ttl_ms": 60_000, "pending_ttl_ms": 30_000}
    })
    .to_string()
    .into_bytes()
}

fn post(store: &Store, path: &str, body: &[u8], budget_ms: &str) -> (Response, Duration) {
    let started = Instant::now();
    let (name, value) = auth_header();
    let res = request(
        "POST",
        &store.url_of(path),
        &[("x-ankusa-budget-ms", budget_ms), (name, value.as_str())],
        body,
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    (res, started.elapsed())
}

/// Redis answers again: `/readyz` turns 200 and a hit on `key` is `ok`.
fn assert_recovered(store: &Store, key: &str) {
    assert!(
        store.wait_ready(Duration::from_secs(15)),
        "never ready again:\n{}",
        store.proc.log_tail()
    );
    assert_hit_ok(store, key);
}

fn assert_hit_ok(store: &Store, key: &str) {
    let (res, _) = post(store, "/v1/hit", &hit_body(key), "1000");
    assert_eq!(
        (res.status, res.json()["result"].as_str()),
        (200, Some("ok")),
        "{}",
        res.text()
    );
}

/// A 503 that came back in the order of the budget (loosely: no timing is pinned).
fn assert_quick_503(res: &Response, took: Duration, codes: &[&str]) {
    assert_eq!(res.status, 503, "{}", res.text());
    let code = res.json()["error"].as_str().unwrap_or_default().to_string();
    assert!(
        codes.contains(&code.as_str()),
        "error {code:?}, expected one of {codes:?}"
    );
    assert!(
        took < Duration::from_secs(5),
        "a 503 took {took:?} with a 200 ms budget"
    );
}

#[test]
fn starts_without_redis_and_serves_once_it_appears() {
    let port = free_port();
    let store = Store::start_on(
        free_port(),
        &format!("redis://127.0.0.1:{port}/"),
        &["--max-budget-ms", "500"],
    );
    assert_eq!(get(&store.url_of("/healthz")).expect("healthz").status, 200);
    assert_eq!(get(&store.url_of("/readyz")).expect("readyz").status, 503);
    let (res, took) = post(&store, "/v1/hit", &hit_body("a"), "200");
    assert_quick_503(&res, took, &["redis_unavailable"]);
    assert_eq!(store.metric("ankusa_store_redis_up"), 0.0);

    let _redis = Redis::start_on(port, &scratch_dir("redis-late"));
    assert_recovered(&store, "a");
    assert_eq!(store.metric("ankusa_store_redis_up"), 1.0);
}

#[test]
fn redis_killed_and_restarted_under_the_service() {
    let dir = scratch_dir("redis-restart");
    let mut redis = Redis::start_on(free_port(), &dir);
    let port = redis.port;
    let store = Store::start_on(free_port(), &redis.url(), &["--max-budget-ms", "1000"]);
    assert!(store.wait_ready(Duration::from_secs(10)));
    let (res, _) = post(&store, "/v1/hit", &hit_body("before"), "200");
    assert_eq!(res.status, 200, "{}", res.text());

    redis.proc.kill();
    for i in 0..5 {
        let (res, took) = post(&store, "/v1/hit", &hit_body(&format!("down-{i}")), "200");
        assert_quick_503(&res, took, &["redis_unavailable", "timeout"]);
    }
    assert_eq!(get(&store.url_of("/readyz")).expect("readyz").status, 503);
    assert!(store.metric("ankusa_store_errors_total{cause=\"redis_unavailable\"}") >= 1.0);

    // Same port, empty data and an empty script cache.
    let redis = Redis::start_on(port, &dir);
    assert_recovered(&store, "after");

    assert_eq!(redis.cli(&["SCRIPT", "FLUSH"]), "OK");
    assert_hit_ok(&store, "flushed");
    assert_eq!(redis.cli(&["SCRIPT", "FLUSH"]), "OK");
    let release = json!({"ops": [{"op": "release", "claim": {"tenant": "acme", "source_id": "gh", "key": "flushed",
        "hook_id": "h1", "node": "edge-1", "ttl_ms": 60_000, "pending_ttl_ms": 30_000}}]});
    let (res, _) = post(&store, "/v1/settle", release.to_string().as_bytes(), "1000");
    assert_eq!(
        (res.status, res.json()["applied"].as_u64()),
        (200, Some(1)),
        "{}",
        res.text()
    );
    assert_eq!(
        redis.cli(&["EXISTS", "ankusa:{acme}:claim:gh:flushed"]),
        "0"
    );
}

#[test]
fn a_stalled_redis_gets_a_timeout_within_the_budget_never_a_late_answer() {
    let redis = Redis::start();
    let store = Store::start_on(free_port(), &redis.url(), &["--max-budget-ms", "300"]);
    assert!(store.wait_ready(Duration::from_secs(10)));
    redis.proc.signal("STOP");
    let (res, took) = post(&store, "/v1/hit", &hit_body("stalled"), "200");
    // A caller asking for a minute still gets the service's ceiling.
    let (capped, capped_took) = post(&store, "/v1/hit", &hit_body("stalled-2"), "60000");
    redis.proc.signal("CONT");
    assert_quick_503(&res, took, &["timeout"]);
    assert_quick_503(&capped, capped_took, &["timeout"]);
    assert!(capped.text().contains("300 ms"), "{}", capped.text());
    assert!(store.metric("ankusa_store_errors_total{cause=\"timeout\"}") >= 1.0);
    assert_recovered(&store, "resumed");
}
