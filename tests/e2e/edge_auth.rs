//! The store only answers callers holding its token, through real Envoy:
//! edges present the token they get from Envoy's environment (and it shows
//! nowhere Envoy prints its config), an edge without it is answered 401 and
//! falls back to its own buckets, and a forged promote sent straight to the
//! store — with no token, or with the edge token every edge holds — no
//! longer turns a real delivery into a `duplicate` nobody stored.

use ankusa_core::verify::{body_mac, Encoding};
use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::http::request;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::{fresh_token, run_token};
use ankusa_tests::edge_support::*;
use serde_json::json;
use std::time::Duration;

/// Attack 1 end to end. Before the store checked tokens, the forged promote
/// was applied: the real delivery was then answered
/// `201 {"duplicate":true}` with the forged id, and the intake never stored it.
#[test]
fn forged_promote_is_refused_and_the_real_delivery_is_stored() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let edge = edge("edge-a", intake.port, store.port, fleet_config(100, 5));

    let forged_id = "01a22a58-b525-7a36-ac16-fe50dd6137bd";
    let forged = json!({"ops": [{"op": "promote", "hook_id": forged_id, "claim": {
        "tenant": "acme", "source_id": "gh", "key": "forged-1", "hook_id": forged_id,
        "node": "edge-a", "ttl_ms": 259_200_000u64, "pending_ttl_ms": 30_000}}]});
    let attack = request(
        "POST",
        &store.url_of("/v1/settle"),
        &[("content-type", "application/json")],
        forged.to_string().as_bytes(),
        Duration::from_secs(10),
    )
    .expect("the store answers");
    assert_eq!(attack.status, 401, "{}", attack.text());
    assert_eq!(redis.cli(&["EXISTS", &claim_key("forged-1")]), "0");

    let delivered = deliver(&edge, "/webhooks/gh", "forged-1");
    assert_eq!(delivered.status, 201, "{}", delivered.text());
    assert_eq!(
        delivered.json()["duplicate"],
        json!(null),
        "{}",
        delivered.text()
    );
    let id = delivered.json()["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_ne!(id, forged_id);
    assert!(
        eventually(Duration::from_secs(10), || intake
            .hooks()
            .iter()
            .any(|h| h["event_key"] == "forged-1" && h["id"] == id.as_str())),
        "the intake never stored the real delivery: {:?}",
        intake.hooks()
    );
    assert_eq!(edge.stat("ankusa_fleet_fallback_total"), 0.0);
}

/// The same attack with the edge token, which every edge holds and which may
/// settle: before a settle checked who holds the claim, the promote
/// committed the never-claimed key and the real, correctly signed delivery
/// was answered `201 {"duplicate":true}` and never stored. Now the promote
/// changes nothing (it carries no receipt, so it doesn't even reach Redis;
/// a store without a receipt key finds the key free: store-service/tests/it/auth.rs);
/// nor may the token lift the tenant's quota or reset it.
#[test]
fn an_edge_tokens_promote_of_a_key_never_held_leaves_the_signed_delivery_to_be_stored() {
    const SECRET_ENV: &str = "ANKUSA_T_ROLES_GH";
    const SECRET: &str = "roles-gh-signing-secret";
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let mut config = fleet_config(100, 5);
    config["sources"]["gh"]["verify"] = json!({"scheme": "github", "secret_env": SECRET_ENV});
    let mut spec = EdgeSpec::new("edge-a", intake.port, store.port, config);
    spec.vm_env = vec![(SECRET_ENV.to_string(), SECRET.to_string())];
    let edge = Edge::start(spec);

    let bearer = format!("Bearer {}", run_token());
    let as_edge = |method: &str, path: &str, body: &serde_json::Value| {
        request(
            method,
            &store.url_of(path),
            &[
                ("content-type", "application/json"),
                ("authorization", bearer.as_str()),
            ],
            body.to_string().as_bytes(),
            Duration::from_secs(10),
        )
        .expect("the store answers")
    };
    let forged_id = "01a22a58-b525-7a36-ac16-fe50dd6137bd";
    let forged = json!({"ops": [{"op": "promote", "hook_id": forged_id, "claim": {
        "tenant": "acme", "source_id": "gh", "key": "forged-2", "hook_id": forged_id,
        "node": "edge-a", "ttl_ms": 259_200_000u64, "pending_ttl_ms": 30_000}}]});
    let attack = as_edge("POST", "/v1/settle", &forged);
    assert_eq!(attack.status, 200, "{}", attack.text());
    assert_eq!(redis.cli(&["EXISTS", &claim_key("forged-2")]), "0");
    assert_eq!(
        store.metric(r#"ankusa_store_receipts_total{applied="false",result="missing"}"#),
        1.0
    );
    let lift = as_edge(
        "PUT",
        "/v1/overrides/acme",
        &json!({"rate": 1_000_000, "burst": 1_000_000}),
    );
    assert_eq!(
        (lift.status, lift.json()["error"].clone()),
        (403, json!("forbidden")),
        "{}",
        lift.text()
    );
    let reset = as_edge("POST", "/v1/reset", &json!({"tenant": "acme"}));
    assert_eq!(reset.status, 403, "{}", reset.text());
    assert_eq!(redis.cli(&["EXISTS", "ankusa:{acme}:override"]), "0");

    let body = json!({"delivery": "forged-2"}).to_string();
    let signature = body_mac::sign(SECRET.as_bytes(), "sha256=", Encoding::Hex, body.as_bytes());
    let delivered = edge
        .post(
            "/webhooks/gh",
            &[
                ("content-type", "application/json"),
                ("x-github-delivery", "forged-2"),
                ("x-hub-signature-256", &signature),
            ],
            body.as_bytes(),
        )
        .expect("the edge answers");
    assert_eq!(delivered.status, 201, "{}", delivered.text());
    assert_eq!(
        delivered.json()["duplicate"],
        json!(null),
        "{}",
        delivered.text()
    );
    let id = delivered.json()["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_ne!(id, forged_id);
    assert!(
        eventually(Duration::from_secs(10), || intake
            .hooks()
            .iter()
            .any(|h| h["event_key"] == "forged-2" && h["id"] == id.as_str())),
        "the intake never stored the real delivery: {:?}",
        intake.hooks()
    );
    // Its own settle commits it: a redelivery is now the duplicate.
    assert!(
        eventually(Duration::from_secs(10), || claim_value(&redis, "forged-2")
            == format!("c:{id}")),
        "{}",
        claim_value(&redis, "forged-2")
    );
    assert_eq!(edge.stat("ankusa_fleet_fallback_total"), 0.0);
}

#[test]
fn edges_present_the_token_and_it_shows_in_no_dump_file_or_command_line() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let edge = edge("edge-a", intake.port, store.port, fleet_config(100, 5));
    let res = deliver(&edge, "/webhooks/gh", "with-token");
    assert_eq!(res.status, 201, "{}", res.text());
    assert_eq!(
        store.metric(r#"ankusa_store_requests_total{endpoint="hit",result="ok"}"#),
        1.0
    );
    assert_eq!(edge.stat("ankusa_fleet_fallback_total"), 0.0);
    assert_eq!(
        metric_sum(
            &store.url_of("/metrics"),
            "ankusa_store_unauthorized_total",
            ""
        ),
        0.0
    );

    let token = run_token();
    let dump = request(
        "GET",
        &edge.admin_url("/config_dump?include_eds"),
        &[],
        b"",
        Duration::from_secs(10),
    )
    .expect("admin answers");
    assert_eq!(dump.status, 200);
    assert!(
        dump.text().contains("ANKUSA_STORE_TOKEN"),
        "the dump names the variable"
    );
    assert!(
        !dump.text().contains(token),
        "the token is in Envoy's config dump"
    );
    let bootstrap = std::fs::read_to_string(edge.dir.join("edge.yaml")).expect("bootstrap");
    assert!(
        !bootstrap.contains(token),
        "the token is in the bootstrap file"
    );
    for pid in [edge.proc.pid(), store.proc.pid()] {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).expect("cmdline");
        assert!(
            !String::from_utf8_lossy(&cmdline).contains(token),
            "the token is on a command line"
        );
    }
    assert!(!edge.log().contains(token), "the token is in Envoy's log");
}

/// An edge with no token, or a stale one, still answers every hook (from its
/// own buckets); the store counts each refusal and the edge says why.
#[test]
fn an_edge_without_the_token_falls_back_and_is_counted() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let bare = Edge::start_with_token(
        EdgeSpec::new("edge-bare", intake.port, store.port, fleet_config(100, 5)),
        None,
    );
    let stale_token = fresh_token("stale");
    let stale = Edge::start_with_token(
        EdgeSpec::new("edge-stale", intake.port, store.port, fleet_config(100, 5)),
        Some(&stale_token),
    );
    for (edge, delivery) in [(&bare, "bare-1"), (&stale, "stale-1")] {
        let res = deliver(edge, "/webhooks/gh", delivery);
        assert_eq!(res.status, 201, "{}", res.text());
        assert!(
            edge.stat("ankusa_fleet_fallback_total") >= 1.0,
            "{}",
            edge.log_tail()
        );
    }
    assert!(
        bare.log().contains("ANKUSA_STORE_TOKEN is not set"),
        "{}",
        bare.log_tail()
    );
    assert!(store.metric(r#"ankusa_store_unauthorized_total{reason="missing"}"#) >= 1.0);
    assert!(store.metric(r#"ankusa_store_unauthorized_total{reason="invalid"}"#) >= 1.0);
    assert!(
        !stale.log().contains(&stale_token),
        "the token is in Envoy's log"
    );
    assert_eq!(redis.cli(&["EXISTS", &claim_key("bare-1")]), "0");
}

/// A token Envoy can't send as `Bearer <token>` (too short, a space inside)
/// refuses the configuration, naming the variable and never the token.
#[test]
fn a_malformed_token_refuses_the_configuration_naming_the_variable() {
    for bad in ["short-tok", "has a space inside it"] {
        let spec = EdgeSpec::new(
            "edge-badtoken",
            ankusa_testkit::ports::free_port(),
            ankusa_testkit::ports::free_port(),
            fleet_config(100, 5),
        );
        let mut edge = Edge::spawn_with_token(spec, Some(bad));
        let exited = edge.wait_exit(Duration::from_secs(30));
        let log = edge.log();
        let line = log
            .lines()
            .find(|l| l.contains("ankusa: configuration refused"))
            .unwrap_or_else(|| panic!("no refusal logged for {bad:?}:\n{}", edge.log_tail()));
        assert!(line.contains("ANKUSA_STORE_TOKEN: the token"), "{line}");
        assert!(!log.contains(bad), "the token is in Envoy's log");
        assert!(
            exited.is_some()
                || !eventually(Duration::from_secs(1), || {
                    ankusa_testkit::ports::is_listening(edge.spec.listen_port)
                }),
            "a refused config must not serve"
        );
    }
}
