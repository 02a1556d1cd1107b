//! SIGTERM stops the binary cleanly, after flushing the settles it queued.

use ankusa_testkit::http::request;
use ankusa_testkit::metrics::metric_value;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::auth_header;
use serde_json::json;
use std::time::Duration;

#[test]
fn sigterm_flushes_queued_settles_and_exits_0() {
    let redis = Redis::start();
    // A window far longer than the test: only the shutdown can flush.
    let mut store = Store::start_on(
        free_port(),
        &redis.url(),
        // The queued promote carries no receipt: the upgrade's setting
        // commits it (receipts are store-service/tests/it/receipts.rs's).
        &[
            "--settle-window-ms",
            "60000",
            "--max-budget-ms",
            "30000",
            "--receipts",
            "accept-missing",
        ],
    );
    assert!(store.wait_ready(Duration::from_secs(10)));
    let url = store.url_of("/v1/settle");
    let claim = json!({"tenant": "acme", "source_id": "gh", "key": "k", "hook_id": "h1",
        "node": "edge-1", "ttl_ms": 60_000, "pending_ttl_ms": 30_000});
    // The claim the settle promotes: a promote moves only a held one.
    let (name, value) = auth_header();
    let held = request(
        "POST",
        &store.url_of("/v1/hit"),
        &[(name, value.as_str())],
        json!({"charges": [], "claim": claim})
            .to_string()
            .as_bytes(),
        Duration::from_secs(30),
    )
    .expect("hit answered");
    assert_eq!(held.json()["result"], "ok", "{}", held.text());
    assert_eq!(
        redis.cli(&["GET", "ankusa:{acme}:claim:gh:k"]),
        "p:h1:edge-1"
    );
    let body = json!({"ops": [{"op": "promote", "hook_id": "h1", "claim": claim}]});
    let client = std::thread::spawn(move || {
        let (name, value) = auth_header();
        request(
            "POST",
            &url,
            &[(name, value.as_str())],
            body.to_string().as_bytes(),
            Duration::from_secs(30),
        )
        .expect("settle answered")
    });
    // Wait for the op to sit in the batcher's window (its queue gauge).
    let metrics = store.url_of("/metrics");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        let text = request("GET", &metrics, &[], b"", Duration::from_secs(5))
            .map(|r| r.text())
            .unwrap_or_default();
        if metric_value(&text, "ankusa_store_settle_queued_ops") >= 1.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        redis.cli(&["GET", "ankusa:{acme}:claim:gh:k"]),
        "p:h1:edge-1",
        "flushed before the window or the signal"
    );

    assert_eq!(
        store.proc.stop(Duration::from_secs(15)),
        Some(0),
        "{}",
        store.proc.log_tail()
    );
    let res = client.join().expect("client thread");
    assert_eq!(
        (res.status, res.json()["applied"].as_u64()),
        (200, Some(1)),
        "{}",
        res.text()
    );
    assert_eq!(
        crate::common::committed_at(|a| redis.cli(a), "ankusa:{acme}:claim:gh:k"),
        "c:h1"
    );
}
