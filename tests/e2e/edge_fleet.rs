//! Fleet scope through real Envoy: two edges sharing one store and Redis hold
//! one tenant limit and one dedupe window.

use ankusa_testkit::intake::Intake;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use std::time::{Duration, Instant};

#[test]
fn two_edges_sharing_a_store_hold_one_limit() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let burst = 30;
    let a = edge("edge-a", intake.port, store.port, fleet_config(burst, 5));
    let b = edge("edge-b", intake.port, store.port, fleet_config(burst, 5));
    let urls = [a.url("/webhooks/gh"), b.url("/webhooks/gh")];
    let started = Instant::now();
    let statuses = concurrently(16, 120, move |i| {
        let r = ankusa_testkit::http::request(
            "POST",
            &urls[i % 2],
            &[("x-github-delivery", &format!("limit-{i}"))],
            b"{}",
            Duration::from_secs(10),
        )
        .expect("edge answers");
        r.status
    });
    let elapsed_s = started.elapsed().as_secs();
    let admitted = statuses.iter().filter(|s| **s == 201).count() as u64;
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 429),
        "{statuses:?}"
    );
    // One bucket for both edges: never burst per edge (60), at most the refill on top.
    assert!(
        admitted >= burst && admitted <= burst + elapsed_s + 1,
        "admitted {admitted} of 120 with burst {burst} over {elapsed_s} s"
    );
    assert_eq!(
        a.stat("ankusa_fleet_fallback_total") + b.stat("ankusa_fleet_fallback_total"),
        0.0
    );
    // Every hook reached the store once, alone or in a batch.
    let hits = ankusa_testkit::metrics::metric_value(
        &ankusa_testkit::http::get(&store.url_of("/metrics"))
            .map(|r| r.text())
            .unwrap_or_default(),
        "ankusa_store_hits_per_call_sum",
    );
    assert_eq!(hits, 120.0, "one store hit per hook");
}

#[test]
fn a_promoted_key_makes_the_other_edge_answer_duplicate_with_the_original_id() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let a = edge("edge-a", intake.port, store.port, fleet_config(100, 5));
    let b = edge("edge-b", intake.port, store.port, fleet_config(100, 5));
    let first = deliver(&a, "/webhooks/gh", "dup-1");
    assert_eq!(first.status, 201, "{}", first.text());
    let id = first.json()["id"].as_str().unwrap().to_string();
    let committed = format!("c:{id}");
    assert!(
        eventually(Duration::from_secs(10), || claim_value(&redis, "dup-1")
            == committed),
        "the claim was never promoted: {}",
        claim_value(&redis, "dup-1")
    );
    let again = deliver(&b, "/webhooks/gh", "dup-1");
    assert_eq!(again.status, 201, "{}", again.text());
    assert_eq!(
        again.json(),
        serde_json::json!({"status": "accepted", "id": id, "duplicate": true})
    );
    assert_eq!(
        intake.hooks().len(),
        1,
        "the duplicate never reached the upstream"
    );
    assert_eq!(
        b.stat(r#"ankusa_admissions_total{outcome="duplicate"}"#),
        1.0
    );
}

#[test]
fn a_pending_key_answers_409_with_retry_after() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start_obeying();
    let a = edge("edge-a", intake.port, store.port, fleet_config(100, 5));
    let b = edge("edge-b", intake.port, store.port, fleet_config(100, 5));
    // The first copy is slow upstream, so its claim stays pending meanwhile.
    let slow_url = a.url("/webhooks/gh");
    let slow = std::thread::spawn(move || {
        ankusa_testkit::http::request(
            "POST",
            &slow_url,
            &[
                ("x-github-delivery", "pend-1"),
                ("x-intake-delay-ms", "3000"),
            ],
            b"{}",
            Duration::from_secs(20),
        )
    });
    assert!(
        eventually(Duration::from_secs(10), || claim_value(&redis, "pend-1")
            .starts_with("p:")),
        "the first copy never claimed its key"
    );
    let second = deliver(&b, "/webhooks/gh", "pend-1");
    assert_eq!(second.status, 409, "{}", second.text());
    assert_eq!(
        second.json(),
        serde_json::json!({"error": "dedupe_pending"})
    );
    let retry: u64 = second
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!(retry >= 1);
    let first = slow.join().unwrap().expect("the slow copy is answered");
    assert_eq!(first.status, 201, "{}", first.text());
    assert_eq!(intake.hooks().len(), 1);
}

#[test]
fn fleet_dedupe_with_node_rate_spends_no_charge_on_a_duplicate_and_releases_a_denied_claim() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let mut config = fleet_config(2, 5);
    config["rate_limits"]["scope"] = serde_json::json!("node");
    let a = edge("edge-a", intake.port, store.port, config.clone());
    let b = edge("edge-b", intake.port, store.port, config);
    let first = deliver(&a, "/webhooks/gh", "mixed-1");
    assert_eq!(first.status, 201, "{}", first.text());
    assert!(
        eventually(Duration::from_secs(10), || claim_value(&redis, "mixed-1")
            .starts_with("c:")),
        "never promoted"
    );
    // Duplicates on edge b: answered from the claim, no node charge spent.
    for _ in 0..5 {
        let dup = deliver(&b, "/webhooks/gh", "mixed-1");
        assert_eq!(dup.json()["duplicate"], true, "{}", dup.text());
    }
    // Edge b's bucket (burst 2) is whole: two new hooks pass, the third is limited.
    assert_eq!(deliver(&b, "/webhooks/gh", "mixed-2").status, 201);
    assert_eq!(deliver(&b, "/webhooks/gh", "mixed-3").status, 201);
    // The bucket refills at 1/s: spend until it says no.
    let denied = (4..20)
        .map(|i| format!("mixed-{i}"))
        .find(|key| deliver(&b, "/webhooks/gh", key).status == 429)
        .expect("edge b limits acme within 16 hooks");
    // Its claim was taken before the node said no, so it is released.
    assert!(
        eventually(Duration::from_secs(10), || redis
            .cli(&["EXISTS", &claim_key(&denied)])
            == "0"),
        "the denied hook's claim is still held: {}",
        claim_value(&redis, &denied)
    );
}
