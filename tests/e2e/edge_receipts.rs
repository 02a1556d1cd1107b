//! Receipts through real Envoy, store, Redis and intake (issue 35, item 1).
//!
//! Before receipts, anyone holding the edge token could make a real delivery
//! vanish in two calls: claim its event key under a made-up hook id
//! (`/v1/hit`), promote that claim (`/v1/settle`); the real, correctly signed
//! delivery was then answered `201 {"duplicate": true}` with the made-up id and
//! never stored. Now the store commits a claim only with the intake's receipt
//! for the hook: the made-up commit is refused (and counted), the claim
//! expires pending, and the real delivery is stored. A normal delivery is
//! committed with its receipt, which never reaches the sender; and an edge
//! whose store has no receipt key works as before.

use ankusa_core::verify::{body_mac, replay, Encoding};
use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::http::{self, Response};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::auth_header;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const SECRET: &str = "receipts-gh-secret";
/// How long the attacker's claims stay pending: what the real delivery is
/// told to wait before it is admitted.
const ATTACK_PENDING_MS: u64 = 3_000;
/// Longest a test waits for something that should happen within seconds.
const WITHIN: Duration = Duration::from_secs(30);

/// Fleet scopes; `gh` keys on the GitHub delivery id, `guarded` also
/// verifies the signature and claims the signed body (the replay guard).
fn config() -> Value {
    json!({
        "sources": {
            "gh": {"tenant": "acme", "dedupe": "github"},
            "guarded": {"tenant": "acme", "dedupe": "github",
                        "verify": {"scheme": "github", "secret_env": "ANKUSA_T_RECEIPTS",
                                   "replay_guard": {}}}
        },
        "rate_limits": {"scope": "fleet", "default": {"rate": 1000, "burst": 1000}},
        "dedupe": {"scope": "fleet"},
        "fleet": {"cluster": "ankusa_store", "timeout_ms": 1000, "settle_interval_ms": 5}
    })
}

pub(crate) fn edge(name: &str, intake: &Intake, store: &Store) -> Edge {
    let mut spec = EdgeSpec::new(
        &format!("{name}-{}", free_port()),
        intake.port,
        store.port,
        config(),
    );
    spec.vm_env = vec![("ANKUSA_T_RECEIPTS".into(), SECRET.into())];
    Edge::start(spec)
}

/// A GitHub delivery `delivery` of `body` to `path`, signed.
pub(crate) fn deliver(edge: &Edge, path: &str, delivery: &str, body: &[u8]) -> Response {
    let sig = body_mac::sign(SECRET.as_bytes(), "sha256=", Encoding::Hex, body);
    edge.post(
        path,
        &[
            ("content-type", "application/json"),
            ("x-github-delivery", delivery),
            ("x-hub-signature-256", sig.as_str()),
        ],
        body,
    )
    .unwrap_or_else(|e| panic!("POST {path}: {e}\n{}", edge.log_tail()))
}

/// POSTs `body` to the store's `path` as an edge does, with the edge token.
fn as_an_edge(store: &Store, path: &str, body: &Value) -> Value {
    let (name, value) = auth_header();
    let answer = http::request(
        "POST",
        &store.url_of(path),
        &[(name, &value), ("content-type", "application/json")],
        body.to_string().as_bytes(),
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(answer.status, 200, "{path}: {}", answer.text());
    answer.json()
}

/// The attacker's claim on `key` of `source` under a made-up hook id.
pub(crate) fn made_up_claim(source: &str, key: &str) -> Value {
    json!({"tenant": "acme", "source_id": source, "key": key, "hook_id": "made-up-hook",
           "node": "attacker", "ttl_ms": 3_600_000, "pending_ttl_ms": ATTACK_PENDING_MS})
}

/// The two calls: claim (as `field`: `claim` or the replay guard's `replay`),
/// then promote it under the made-up id. The store's `applied` for the promote.
pub(crate) fn attack(store: &Store, field: &str, claim: &Value) -> Value {
    let mut hit = json!({"charges": [], "claim": null});
    hit[field] = claim.clone();
    let answer = as_an_edge(store, "/v1/hit", &hit);
    assert_eq!(answer["result"], "ok", "{answer}");
    let promote = json!({"ops": [{"op": "promote", "claim": claim, "hook_id": "made-up-hook"}]});
    as_an_edge(store, "/v1/settle", &promote)["applied"].clone()
}

/// Delivers until the edge answers something other than 409 (a claim still
/// pending: the attacker's, or the first copy's until its promote lands);
/// every answer before it was a 409. The answers, in order.
fn deliver_while_pending(edge: &Edge, path: &str, delivery: &str, body: &[u8]) -> Vec<Response> {
    let deadline = Instant::now() + WITHIN;
    let mut answers = Vec::new();
    loop {
        let answer = deliver(edge, path, delivery, body);
        let pending = answer.status == 409;
        answers.push(answer);
        if !pending {
            return answers;
        }
        assert!(Instant::now() < deadline, "still 409:\n{}", edge.log_tail());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first answer to `delivery` that isn't a 409.
pub(crate) fn settled_answer(edge: &Edge, path: &str, delivery: &str, body: &[u8]) -> Response {
    let mut answers = deliver_while_pending(edge, path, delivery, body);
    answers.pop().expect("an answer")
}

/// A 201 naming hook `id` a duplicate.
pub(crate) fn assert_duplicate_of(answer: &Response, id: &str) {
    assert_eq!(
        (
            answer.status,
            &answer.json()["duplicate"],
            &answer.json()["id"]
        ),
        (201, &json!(true), &json!(id)),
        "{}",
        answer.text()
    );
}

/// What the intake stored under `event_key`: the hooks' ids.
pub(crate) fn stored_ids(intake: &Intake, event_key: &str) -> Vec<String> {
    intake
        .hooks()
        .iter()
        .filter(|h| h["event_key"] == event_key)
        .map(|h| h["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The real delivery after an attack: told to come back while the made-up
/// claim is pending, then admitted and stored — never a duplicate of the
/// made-up hook.
fn assert_real_delivery_stored(
    edge: &Edge,
    intake: &Intake,
    path: &str,
    delivery: &str,
    body: &[u8],
) {
    let answers = deliver_while_pending(edge, path, delivery, body);
    let (last, before) = answers.split_last().expect("an answer");
    assert_eq!(
        (last.status, last.json().get("duplicate").cloned()),
        (201, None),
        "{delivery}: the real delivery was answered {}",
        last.text()
    );
    assert!(
        !before.is_empty(),
        "{delivery}: admitted at once, so the made-up claim was not pending: {}",
        last.text()
    );
    for answer in before {
        assert_eq!(
            answer.json()["error"],
            "dedupe_pending",
            "{}",
            answer.text()
        );
    }
    let id = last.json()["id"].as_str().unwrap_or_default().to_string();
    assert_ne!(id, "made-up-hook");
    assert_eq!(
        stored_ids(intake, delivery),
        std::slice::from_ref(&id),
        "{delivery}"
    );
    // Its own promote, with the intake's receipt, commits it: a redelivery
    // is now its duplicate.
    assert_duplicate_of(&settled_answer(edge, path, delivery, body), &id);
    assert_eq!(stored_ids(intake, delivery), [id], "stored once");
}

fn receipts(store: &Store, result: &str, applied: bool) -> f64 {
    store.metric(&format!(
        "ankusa_store_receipts_total{{applied=\"{applied}\",result=\"{result}\"}}"
    ))
}

#[test]
fn attack_a_made_up_commit_with_the_edge_token_leaves_the_real_delivery_stored() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let edge = edge("edge-receipts", &intake, &store);

    // The event key's claim.
    let applied = attack(&store, "claim", &made_up_claim("gh", "d-victim"));
    assert_real_delivery_stored(&edge, &intake, "/webhooks/gh", "d-victim", b"{}");
    assert_eq!(applied, 0, "the made-up commit is refused");
    assert_eq!(receipts(&store, "missing", false), 1.0, "and counted");

    // The replay guard's claim on the signed body, under a fresh event id.
    let body = br#"{"action":"opened","number":35}"#;
    let body_claim = made_up_claim(replay::CLAIM_SOURCE, &replay::body_key("guarded", body));
    let applied = attack(&store, "replay", &body_claim);
    assert_real_delivery_stored(&edge, &intake, "/webhooks/guarded", "d-body", body);
    assert_eq!(applied, 0);
    assert_eq!(receipts(&store, "missing", false), 2.0);
    assert!(
        receipts(&store, "valid", true) >= 2.0,
        "the real ones, proven"
    );
    assert_eq!(receipts(&store, "invalid", false), 0.0);
}

#[test]
fn a_delivery_is_committed_with_its_receipt_and_the_sender_never_sees_one() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let (a, b) = (
        edge("edge-a", &intake, &store),
        edge("edge-b", &intake, &store),
    );
    let first = deliver(&a, "/webhooks/gh", "d-1", b"{}");
    assert_eq!(first.status, 201, "{}", first.text());
    assert_eq!(
        first.header("x-ankusa-receipt"),
        None,
        "stripped by the edge"
    );
    let id = first.json()["id"].as_str().unwrap_or_default().to_string();
    // The provider redelivers to the other edge: a duplicate of the first
    // once its promote, proven, is applied (a 409 until then).
    let again = settled_answer(&b, "/webhooks/gh", "d-1", b"{}");
    assert_duplicate_of(&again, &id);
    assert_eq!(again.header("x-ankusa-receipt"), None);
    assert_eq!(stored_ids(&intake, "d-1"), [id]);
    assert_eq!(receipts(&store, "valid", true), 1.0);
    assert_eq!(receipts(&store, "missing", false), 0.0);
    // Each edge heard the store's wire 2, so the promote carried the receipt.
    assert_eq!(a.stat("ankusa_fleet_store_wire"), 2.0);
}

#[test]
fn an_edge_whose_store_has_no_receipt_key_works_as_before() {
    let redis = Redis::start();
    let store = Store::start_without_receipts(&redis.url());
    let intake = Intake::start();
    let edge = edge("edge-keyless", &intake, &store);
    let first = deliver(&edge, "/webhooks/gh", "d-1", b"{}");
    assert_eq!(first.status, 201, "{}", first.text());
    let id = first.json()["id"].as_str().unwrap_or_default().to_string();
    assert_duplicate_of(&settled_answer(&edge, "/webhooks/gh", "d-1", b"{}"), &id);
    for (result, applied) in [("valid", true), ("missing", false), ("missing", true)] {
        assert_eq!(receipts(&store, result, applied), 0.0, "nothing checked");
    }
}
