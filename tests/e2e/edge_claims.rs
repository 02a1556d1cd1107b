//! A hit the store runs after the edge gave up leaves no stuck claim.
//!
//! Edge A reaches the store through a fault proxy that delays each request
//! just past `fleet.timeout_ms`, so A answers from the node while the store
//! still runs the hit and writes A's pending claim late. A keeps that claim
//! and settles it like any other: promoted when the upstream stored the hook
//! (the redelivery to edge B is a duplicate), released when it didn't (the
//! redelivery is admitted). Before, A fell back holding no claim and the key
//! stood pending for `pending_ttl_ms` (30 s): every redelivery got 409.
//! The same holds when the sender hangs up while A's hit is in flight: A
//! releases the claim the hit wrote.

use ankusa_testkit::fault::{FaultProxy, Mode};
use ankusa_testkit::http::Response;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use std::time::{Duration, Instant};

/// `fleet_config`'s budget: the proxy holds each store call this much longer.
const TIMEOUT_MS: u64 = 1_000;
const PAST_THE_BUDGET: Duration = Duration::from_millis(TIMEOUT_MS + 300);
/// Far inside the 30 s a stuck claim would stand.
const SETTLED_WITHIN: Duration = Duration::from_secs(10);

struct Fleet {
    redis: Redis,
    _store: Store,
    intake: Intake,
    proxy: FaultProxy,
    a: ankusa_testkit::envoy::Edge,
    b: ankusa_testkit::envoy::Edge,
}

/// A (through the slow proxy) and B (straight to the store), one Redis, one intake.
fn fleet() -> Fleet {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    // One test forces the intake's status (`x-intake-status`).
    let intake = Intake::start_obeying();
    let proxy = FaultProxy::start(store.port);
    let config = fleet_config(100, 5);
    assert_eq!(config["fleet"]["timeout_ms"], TIMEOUT_MS);
    assert_eq!(
        config["fleet"].get("pending_ttl_ms"),
        None,
        "the default 30 s pending window"
    );
    let a = edge("edge-a", intake.port, proxy.port, config.clone());
    let b = edge("edge-b", intake.port, store.port, config);
    proxy.set_mode(Mode::DelayRequest(PAST_THE_BUDGET));
    Fleet {
        redis,
        _store: store,
        intake,
        proxy,
        a,
        b,
    }
}

/// Waits until the store has written the late claim (pending, or already settled).
fn wait_for_the_late_write(f: &Fleet, delivery: &str) -> String {
    let mut seen = String::new();
    let written = eventually(SETTLED_WITHIN, || {
        seen = claim_value(&f.redis, delivery);
        seen.starts_with("p:") || seen.starts_with("c:")
    });
    assert!(written, "the store never ran A's late hit: {seen:?}");
    seen
}

/// Waits for A's late claim on `delivery` to be written, then released;
/// B's redelivery is then admitted (201), and returned.
fn released_then_admitted(f: &Fleet, delivery: &str) -> Response {
    wait_for_the_late_write(f, delivery);
    assert!(
        eventually(SETTLED_WITHIN, || f
            .redis
            .cli(&["EXISTS", &claim_key(delivery)])
            == "0"),
        "A's claim on {delivery}, of a hook nobody will store, was never released: {:?}",
        claim_value(&f.redis, delivery)
    );
    let again = deliver(&f.b, "/webhooks/gh", delivery);
    assert_eq!(again.status, 201, "{}", again.text());
    again
}

/// Redelivers to B until it is answered anything but 409 (at most `SETTLED_WITHIN`).
fn redeliver_until_settled(f: &Fleet, delivery: &str) -> Response {
    let started = Instant::now();
    loop {
        let r = deliver(&f.b, "/webhooks/gh", delivery);
        if r.status != 409 || started.elapsed() > SETTLED_WITHIN {
            return r;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_late_claim_is_promoted_when_the_fallen_back_hook_was_stored() {
    let f = fleet();
    let first = deliver(&f.a, "/webhooks/gh", "late-ok");
    assert_eq!(first.status, 201, "{}", first.text());
    assert_eq!(f.a.stat("ankusa_fleet_fallback_total"), 1.0);
    let id = first.json()["id"].as_str().unwrap().to_string();
    wait_for_the_late_write(&f, "late-ok");
    let again = redeliver_until_settled(&f, "late-ok");
    assert_eq!(
        (again.status, again.json()),
        (
            201,
            serde_json::json!({"status": "accepted", "id": id, "duplicate": true})
        ),
        "the redelivery to B must be a duplicate, not stuck pending; key {:?}",
        claim_value(&f.redis, "late-ok")
    );
    assert_eq!(claim_value(&f.redis, "late-ok"), format!("c:{id}"));
    assert_eq!(f.intake.hooks().len(), 1, "stored once");
    assert!(
        f.proxy.connections() >= 2,
        "the hit and the settle went through the proxy"
    );
}

#[test]
fn a_late_claim_is_released_when_the_upstream_refused_the_hook() {
    let f = fleet();
    let first =
        f.a.post(
            "/webhooks/gh",
            &[
                ("x-github-delivery", "late-500"),
                ("x-intake-status", "500"),
            ],
            b"{}",
        )
        .expect("edge A answers");
    assert_eq!(first.status, 500, "{}", first.text());
    assert_eq!(f.a.stat("ankusa_fleet_fallback_total"), 1.0);
    let again = released_then_admitted(&f, "late-500");
    let body = again.json();
    assert_eq!(body.get("duplicate"), None, "{body}");
    let hooks = f.intake.hooks();
    assert_eq!(hooks.len(), 1, "stored once, by B: {hooks:?}");
    assert_eq!(hooks[0]["id"], body["id"]);
    let committed = format!("c:{}", body["id"].as_str().unwrap());
    assert!(
        eventually(SETTLED_WITHIN, || claim_value(&f.redis, "late-500")
            == committed),
        "B's claim was never promoted"
    );
}

#[test]
fn a_sender_that_hangs_up_while_its_hit_is_in_flight_leaves_no_stuck_claim() {
    let f = fleet();
    // The store runs A's hit at once; its answer is held past the sender's patience.
    f.proxy.set_mode(Mode::DelayResponse(PAST_THE_BUDGET));
    let gone = ankusa_testkit::http::request(
        "POST",
        &f.a.url("/webhooks/gh"),
        &[("x-github-delivery", "hung-up")],
        b"{}",
        Duration::from_millis(300),
    );
    assert!(gone.is_err(), "the sender was meant to give up: {gone:?}");
    released_then_admitted(&f, "hung-up");
    assert_eq!(f.intake.hooks().len(), 1, "stored once, by the redelivery");
}
