//! Event ids that aren't UTF-8 still dedupe across the fleet.
//!
//! HTTP allows obs-text bytes in a header value. The filter used to read the
//! dedupe header as UTF-8, so such an id gave no key: both copies were
//! admitted and stored (`event_key: null`). The key is now taken from the
//! bytes, hashed to `sha256:<hex>` because they can't travel as is.

use ankusa_core::hook::event_key::normalize_key;
use ankusa_testkit::http::request_bytes;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use std::time::Duration;

#[test]
fn a_delivery_id_that_is_not_utf8_dedupes_across_two_edges() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let a = edge("edge-a", intake.port, store.port, fleet_config(100, 5));
    let b = edge("edge-b", intake.port, store.port, fleet_config(100, 5));
    let delivery: &[u8] = b"\xff\xfe-delivery-\x80\x81";
    let send = |edge: &ankusa_testkit::envoy::Edge| {
        request_bytes(
            "POST",
            &edge.url("/webhooks/gh"),
            &[
                ("content-type", b"application/json"),
                ("x-github-delivery", delivery),
            ],
            b"{}",
            Duration::from_secs(10),
        )
        .unwrap_or_else(|e| panic!("edge answers: {e}\n{}", edge.log_tail()))
    };
    let key = normalize_key(delivery).unwrap();
    assert!(key.starts_with("sha256:"), "{key}");

    let first = send(&a);
    assert_eq!(first.status, 201, "{}", first.text());
    let id = first.json()["id"].as_str().unwrap().to_string();
    let committed = format!("c:{id}");
    assert!(
        eventually(Duration::from_secs(10), || claim_value(&redis, &key)
            == committed),
        "no claim under {key}: {:?}",
        redis.cli(&["KEYS", "ankusa:*claim*"])
    );

    let again = send(&b);
    assert_eq!(
        (again.status, again.json()),
        (
            201,
            serde_json::json!({"status": "accepted", "id": id, "duplicate": true})
        )
    );
    let hooks = intake.hooks();
    assert_eq!(hooks.len(), 1, "stored once: {hooks:?}");
    assert_eq!(
        hooks[0]["event_key"],
        key.as_str(),
        "the upstream got the key"
    );
}
