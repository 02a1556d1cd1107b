//! The two-call attack where receipts are not required (issue 35, item 2):
//! under `--receipts accept-missing` the store applies a promote that
//! carries no receipt, so a leaked edge token can still commit a made-up
//! claim, and the real delivery is answered as its duplicate and never
//! stored. The operator lists the commits the attacker's node made unproven
//! (`GET /v1/commits?node=…`) and releases them; the real delivery is then
//! admitted and stored, and its own promote, proven, commits it.

use crate::edge_receipts::{
    assert_duplicate_of, attack, deliver, edge, made_up_claim, settled_answer, stored_ids,
};
use ankusa_core::config::DEFAULT_TTL_MS;
use ankusa_testkit::http;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::operator_auth_header;
use serde_json::{json, Value};
use std::time::Duration;

/// An operator's call to the store: its JSON answer (200 asserted).
fn as_an_operator(store: &Store, method: &str, path: &str, body: &Value) -> Value {
    let (name, value) = operator_auth_header();
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let answer = http::request(
        method,
        &store.url_of(path),
        &[(name, &value), ("content-type", "application/json")],
        &body,
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    assert_eq!(answer.status, 200, "{method} {path}: {}", answer.text());
    answer.json()
}

#[test]
fn attack_an_unproven_commit_is_listed_by_node_and_released_and_the_real_delivery_stored() {
    let redis = Redis::start();
    let store = Store::start_with_args(&redis.url(), &["--receipts", "accept-missing"]);
    let intake = Intake::start();
    let edge = edge("edge-unproven", &intake, &store);

    // The made-up claim under the source's own window, the series the
    // edge's lookups read.
    let mut made_up = made_up_claim("gh", "d-victim");
    made_up["ttl_ms"] = DEFAULT_TTL_MS.into();
    assert_eq!(
        attack(&store, "claim", &made_up),
        1,
        "applied without a receipt"
    );
    let lost = deliver(&edge, "/webhooks/gh", "d-victim", b"{}");
    assert_duplicate_of(&lost, "made-up-hook");
    assert!(stored_ids(&intake, "d-victim").is_empty());

    // The edge token can't list what it did; the operator can.
    let (name, value) = ankusa_testkit::token::auth_header();
    let refused = http::request(
        "GET",
        &store.url_of("/v1/commits?node=attacker"),
        &[(name, &value)],
        b"",
        Duration::from_secs(10),
    )
    .expect("an answer");
    assert_eq!(refused.status, 403, "{}", refused.text());
    let page = as_an_operator(&store, "GET", "/v1/commits?node=attacker", &Value::Null);
    let listed = page["commits"].as_array().cloned().unwrap_or_default();
    assert_eq!(listed.len(), 1, "{page}");
    assert_eq!(
        (
            &listed[0]["tenant"],
            &listed[0]["source_id"],
            &listed[0]["key"],
            &listed[0]["hook_id"]
        ),
        (
            &json!("acme"),
            &json!("gh"),
            &json!("d-victim"),
            &json!("made-up-hook")
        ),
        "{page}"
    );
    let released = as_an_operator(
        &store,
        "POST",
        "/v1/commits/release",
        &json!({ "commits": listed }),
    );
    assert_eq!(released, json!({"released": 1, "kept": 0}));

    // The sender's retry is admitted and stored; its promote carries the
    // intake's receipt, so it is committed and not listed.
    let stored = deliver(&edge, "/webhooks/gh", "d-victim", b"{}");
    assert_eq!(
        (stored.status, stored.json().get("duplicate").cloned()),
        (201, None),
        "{}",
        stored.text()
    );
    let id = stored.json()["id"].as_str().unwrap_or_default().to_string();
    assert_ne!(id, "made-up-hook");
    assert_eq!(stored_ids(&intake, "d-victim"), std::slice::from_ref(&id));
    assert_duplicate_of(
        &settled_answer(&edge, "/webhooks/gh", "d-victim", b"{}"),
        &id,
    );
    assert_eq!(stored_ids(&intake, "d-victim"), [id], "stored once");
    let page = as_an_operator(&store, "GET", "/v1/commits?node=attacker", &Value::Null);
    assert_eq!(page["commits"], json!([]), "{page}");
    // The attack's promote was applied unproven and counted as such.
    let missing = store.metric(r#"ankusa_store_receipts_total{applied="true",result="missing"}"#);
    assert_eq!(missing, 1.0);
}
