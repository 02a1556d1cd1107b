//! Fleet overrides through real Envoy: an override set on the store holds
//! across two edges from the next hook, with no edge restarted or
//! reconfigured, and its deletion gives the configuration's limit back.

use ankusa_testkit::envoy::Edge;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use std::time::{Duration, Instant};

/// Delivers `count` distinct hooks alternately to the edges; the statuses.
fn send(edges: [&Edge; 2], tag: &str, count: usize) -> Vec<u16> {
    (0..count)
        .map(|i| deliver(edges[i % 2], "/webhooks/gh", &format!("{tag}-{i}")).status)
        .collect()
}

#[test]
fn a_lowered_limit_holds_across_two_edges_from_the_next_hook() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    assert!(store.wait_ready(Duration::from_secs(10)));
    let intake = Intake::start();
    // The configuration: tenant acme, 1 hook/s, burst 1000, fleet scope.
    let a = edge("edge-a", intake.port, store.port, fleet_config(1000, 5));
    let b = edge("edge-b", intake.port, store.port, fleet_config(1000, 5));

    let before = send([&a, &b], "before", 20);
    assert!(before.iter().all(|s| *s == 201), "{before:?}");

    // Lowered to a burst of 25 fleet-wide: 20 are spent, so at most 5 more
    // (plus 1 a second of refill) pass, whichever edge they reach.
    let set = store_call(
        &store,
        "PUT",
        "/v1/overrides/acme",
        r#"{"rate": 1, "burst": 25, "ttl_ms": 600000}"#,
    );
    assert_eq!(set.status, 200, "{}", set.text());
    let started = Instant::now();
    let after = send([&a, &b], "after", 30);
    let elapsed_s = started.elapsed().as_secs();
    let admitted = after.iter().filter(|s| **s == 201).count() as u64;
    assert!(after.iter().all(|s| *s == 201 || *s == 429), "{after:?}");
    assert!(
        (5..=5 + elapsed_s + 1).contains(&admitted),
        "admitted {admitted} of 30 after the override, over {elapsed_s} s: {after:?}"
    );
    for (name, e) in [("edge-a", &a), ("edge-b", &b)] {
        assert_eq!(
            e.stat("ankusa_fleet_fallback_total"),
            0.0,
            "{name} fell back"
        );
    }

    // Deleted: the configuration's burst of 1000 admits again.
    let gone = store_call(&store, "DELETE", "/v1/overrides/acme", "");
    assert_eq!(gone.status, 200, "{}", gone.text());
    let back = send([&a, &b], "back", 10);
    assert!(back.iter().all(|s| *s == 201), "{back:?}");
}
