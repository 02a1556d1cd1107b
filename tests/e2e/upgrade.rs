//! The upgrade from the old claim layout through real Envoy: a Redis holding
//! claims as a 0.2.0 store writes them (one key per event, `c:<hook id>`
//! committed, `p:<hook id>:<node>` pending) when this release's store
//! starts. Its edges answer the committed ones `duplicate` with their hook
//! ids until they expire and the pending one 409; an event stored now is
//! committed in the compact layout only (`compact`), or in both
//! (`--committed-layout dual`, what a 0.2.0 store sharing the Redis reads),
//! and its redelivery to the other edge is a duplicate either way. And the
//! window's bound through Envoy (docs/admission.md, "The dedupe window").

use ankusa_testkit::intake::Intake;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use std::time::Duration;

const OLD_HOOK: &str = "0190a0b1-1111-7aaa-8bbb-0123456789ab";

fn run(args: &[&str]) -> (Redis, Store, Intake, [ankusa_testkit::envoy::Edge; 2]) {
    let redis = Redis::start();
    redis.cli(&[
        "SET",
        &claim_key("old-1"),
        &format!("c:{OLD_HOOK}"),
        "PX",
        "3600000",
    ]);
    redis.cli(&[
        "SET",
        &claim_key("old-short"),
        "c:hook-old-2",
        "PX",
        "15000",
    ]);
    redis.cli(&[
        "SET",
        &claim_key("old-pending"),
        "p:hook-old-3:edge-9",
        "PX",
        "60000",
    ]);
    let store = Store::start_with_args(&redis.url(), args);
    assert!(store.wait_ready(Duration::from_secs(10)));
    let intake = Intake::start();
    let a = edge("edge-a", intake.port, store.port, fleet_config(1000, 5));
    let b = edge("edge-b", intake.port, store.port, fleet_config(1000, 5));
    (redis, store, intake, [a, b])
}

fn duplicate_id(edge: &ankusa_testkit::envoy::Edge, delivery: &str) -> Option<String> {
    let r = deliver(edge, "/webhooks/gh", delivery);
    assert_eq!(r.status, 201, "{delivery}: {}", r.text());
    let body = r.json();
    (body["duplicate"] == true).then(|| body["id"].as_str().unwrap_or_default().to_string())
}

fn the_window_holds_across_the_switch(dual: bool) {
    let args: &[&str] = if dual {
        &["--committed-layout", "dual"]
    } else {
        &[]
    };
    let (redis, _store, intake, [a, b]) = run(args);
    // Claims the old layout wrote answer as they did.
    assert_eq!(duplicate_id(&a, "old-1").as_deref(), Some(OLD_HOOK));
    assert_eq!(duplicate_id(&b, "old-short").as_deref(), Some("hook-old-2"));
    let pending = deliver(&a, "/webhooks/gh", "old-pending");
    assert_eq!(pending.status, 409, "{}", pending.text());
    // A new event, stored through edge A, is a duplicate at edge B.
    let first = deliver(&a, "/webhooks/gh", "new-1");
    assert_eq!(first.status, 201, "{}", first.text());
    let id = first.json()["id"].as_str().unwrap_or_default().to_string();
    assert!(
        eventually(Duration::from_secs(10), || claim_value(&redis, "new-1")
            == format!("c:{id}")),
        "never committed: {}",
        claim_value(&redis, "new-1")
    );
    assert_eq!(duplicate_id(&b, "new-1"), Some(id.clone()));
    // Where it is written: the old key only under dual.
    let old = redis.cli(&["GET", &claim_key("new-1")]);
    if dual {
        assert_eq!(old, format!("c:{id}"));
    } else {
        assert_eq!(old, "", "compact leaves no old-layout key");
    }
    // The old claims expire on their own time: then the event is admitted.
    assert!(
        eventually(Duration::from_secs(30), || redis
            .cli(&["EXISTS", &claim_key("old-short")])
            == "0"),
        "the old claim never expired"
    );
    assert_eq!(duplicate_id(&b, "old-short"), None);
    // Stored once each: new-1 and old-short (after its window), nothing lost.
    let stored: Vec<String> = intake
        .hooks()
        .iter()
        .map(|h| h["event_key"].as_str().unwrap_or_default().to_string())
        .collect();
    let mut sorted = stored.clone();
    sorted.sort();
    assert_eq!(sorted, ["new-1", "old-short"], "{stored:?}");
    assert_eq!(
        a.stat("ankusa_fleet_fallback_total") + b.stat("ankusa_fleet_fallback_total"),
        0.0
    );
}

#[test]
fn a_new_store_on_a_redis_of_old_claims_keeps_the_window_compact() {
    the_window_holds_across_the_switch(false);
}

#[test]
fn a_new_store_on_a_redis_of_old_claims_keeps_the_window_dual() {
    the_window_holds_across_the_switch(true);
}

/// Redis's clock in ms.
fn redis_ms(redis: &Redis) -> u64 {
    let out = redis.cli(&["TIME"]);
    let mut parts = out.lines().map(|l| l.trim().parse::<u64>().unwrap_or(0));
    let (s, us) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    s * 1000 + us / 1000
}

/// Sleeps until Redis's clock reads at least `at_ms`.
fn until(redis: &Redis, at_ms: u64) {
    loop {
        let now = redis_ms(redis);
        if now >= at_ms {
            return;
        }
        std::thread::sleep(Duration::from_millis((at_ms - now).min(200)));
    }
}

/// docs/admission.md, "The dedupe window", through Envoy: a source with
/// `ttl_ms` 4 000 (partitions of 2 000 ms). An event stored at c is still a
/// duplicate at the other edge once c + ttl_ms has passed, and admitted
/// again once c + ttl_ms + ⌈ttl_ms / 2⌉ has.
#[test]
fn an_event_is_a_duplicate_for_its_ttl_and_at_most_half_of_it_more() {
    const TTL: u64 = 4_000;
    let part = ankusa_store::committed::partition_ms(TTL);
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let mut config = fleet_config(1000, 5);
    config["sources"]["gh"]["ttl_ms"] = TTL.into();
    let a = edge("edge-a", intake.port, store.port, config.clone());
    let b = edge("edge-b", intake.port, store.port, config);
    // Stored early in a partition, so the entry outlives c + ttl_ms by most of one.
    let now = redis_ms(&redis);
    until(&redis, (now / part + 1) * part + 20);
    let from = redis_ms(&redis);
    let first = deliver(&a, "/webhooks/gh", "ttl-1");
    assert_eq!(first.status, 201, "{}", first.text());
    let id = first.json()["id"].as_str().unwrap_or_default().to_string();
    assert!(
        eventually(Duration::from_secs(5), || claim_value(&redis, "ttl-1")
            == format!("c:{id}")),
        "never committed: {}",
        claim_value(&redis, "ttl-1")
    );
    let by = redis_ms(&redis);
    assert!(
        by - from < part - 200,
        "the commit took {} ms: too slow to tell",
        by - from
    );
    // Edge B's decisions: the store's `duplicate` answers, and its admits
    // (a copy it admits may still be answered as a duplicate by the intake's
    // own index, which is why its answer alone can't tell).
    let decided =
        |outcome: &str| b.stat(&format!("ankusa_admissions_total{{outcome=\"{outcome}\"}}"));
    // Lower edge: ttl_ms after the latest the commit can have run.
    until(&redis, by + TTL + 1);
    let dup_before = decided("duplicate");
    assert_eq!(duplicate_id(&b, "ttl-1"), Some(id));
    assert_eq!(
        decided("duplicate"),
        dup_before + 1.0,
        "the store's duplicate"
    );
    // Upper edge: one partition past ttl_ms after the earliest it can have run.
    until(&redis, from + TTL + part + 1);
    let admitted_before = decided("admitted");
    deliver(&b, "/webhooks/gh", "ttl-1");
    assert_eq!(
        decided("admitted"),
        admitted_before + 1.0,
        "the window had ended"
    );
    assert_eq!(decided("duplicate"), dup_before + 1.0);
}
