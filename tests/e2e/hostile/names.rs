//! Made-up node names (issue 35, item 2): 2 000 names sent in hits made every
//! edge count 2 001 live edges and take 1/2 001 of a quota while the store
//! was away, so 9 of 10 real hooks were refused in an outage (0 of 10
//! before). Each edge token now speaks only for its own node: the leaked
//! token of one edge spraying 2 000 names gets 2 000 refusals (counted), and
//! the real edges keep their shares and admit every real hook in an outage.

use ankusa_testkit::envoy::{fleet_filter_config, Edge};
use ankusa_testkit::http::request;
use ankusa_tests::edge_support::{deliver, eventually};
use ankusa_tools::fleet::{Fleet, FleetSpec};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const NAMES: usize = 2_000;
/// `acme`'s burst: each of 2 edges answering alone may admit half of it.
const BURST: u64 = 40;
/// Real hooks per edge during the outage: within its share (20).
const REAL_HOOKS: u64 = 10;

fn config() -> serde_json::Value {
    let mut config = fleet_filter_config();
    config["sources"]["any"] = json!({"dedupe": "github"});
    config["rate_limits"]["tenants"]["acme"] = json!({"rate": 1, "burst": BURST});
    config["fleet"]["timeout_ms"] = json!(250);
    config["fleet"]["breaker_min_calls"] = json!(5);
    config["fleet"]["breaker_failure_rate"] = json!(0.5);
    config["fleet"]["breaker_window_ms"] = json!(60_000);
    config["fleet"]["breaker_open_ms"] = json!(60_000);
    config
}

/// One hook of tenant `warm` (its own buckets): the status.
fn warm(edge: &Edge, tag: &str) -> u16 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let i = NEXT.fetch_add(1, Ordering::SeqCst);
    deliver(edge, "/webhooks/warm/any", &format!("names-{tag}-{i}")).status
}

/// Warm hooks through every edge until each reports `live` edges.
fn edges_report(edges: &[Edge], live: f64) -> Vec<f64> {
    eventually(Duration::from_secs(20), || {
        edges.iter().all(|e| warm(e, "count") == 201)
            && edges
                .iter()
                .all(|e| e.stat("ankusa_fleet_live_edges") == live)
    });
    edges
        .iter()
        .map(|e| e.stat("ankusa_fleet_live_edges"))
        .collect()
}

#[test]
fn a_leaked_edge_token_spraying_two_thousand_names_leaves_the_shares_and_outage_admissions() {
    let fleet = Fleet::start(&FleetSpec::new(2, config()));
    assert_eq!(edges_report(&fleet.edges, 2.0), [2.0, 2.0]);

    // edge-1's token leaks: 2 000 hits, each naming a made-up node.
    let leaked = format!("Bearer {}", fleet.edge_tokens[0]);
    let mut statuses = std::collections::BTreeMap::new();
    for i in 0..NAMES {
        // The real edges keep taking hooks meanwhile (a slow spray must not
        // outlast their names' TTL in the store's count).
        if i % 100 == 0 {
            for edge in &fleet.edges {
                assert_eq!(warm(edge, "during"), 201);
            }
        }
        let hit = json!({"charges": [{"kind": "hooks", "tenant": "spray", "units": 1,
                                      "rate": 1000, "burst": 1000}],
                         "claim": null, "node": format!("made-up-{i}")});
        let status = request(
            "POST",
            &fleet.store.url_of("/v1/hit"),
            &[
                ("authorization", leaked.as_str()),
                ("content-type", "application/json"),
            ],
            hit.to_string().as_bytes(),
            Duration::from_secs(10),
        )
        .map_or(0, |r| r.status);
        *statuses.entry(status).or_insert(0usize) += 1;
    }
    assert_eq!(statuses.into_iter().collect::<Vec<_>>(), [(403, NAMES)]);
    assert_eq!(
        fleet
            .store
            .metric(r#"ankusa_store_forbidden_total{endpoint="hit",reason="node"}"#),
        NAMES as f64
    );

    // Past a refresh, while the names sprayed would still be live (within
    // the store's 5 s TTL), the edges still count 2 and hold half the quota
    // each: read once, not waited for.
    for edge in &fleet.edges {
        assert_eq!(warm(edge, "after"), 201);
    }
    std::thread::sleep(Duration::from_millis(1_200));
    for edge in &fleet.edges {
        assert_eq!(warm(edge, "after"), 201);
        assert_eq!(edge.stat("ankusa_fleet_live_edges"), 2.0);
        assert_eq!(edge.stat("ankusa_fleet_degraded_share_ppm"), 500_000.0);
    }
    assert_eq!(fleet.redis.cli(&["ZCARD", "ankusa:{edges}:live"]), "2");

    // The store goes away: each edge answers alone, and admits every real hook.
    fleet.store.proc.signal("STOP");
    for edge in &fleet.edges {
        let opened = eventually(Duration::from_secs(30), || {
            assert_eq!(warm(edge, "trip"), 201, "refused while the store is away");
            edge.stat("ankusa_fleet_breaker_state") == 1.0
        });
        assert!(opened, "the breaker never opened:\n{}", edge.log_tail());
    }
    let mut refused = Vec::new();
    for (n, edge) in fleet.edges.iter().enumerate() {
        let statuses: Vec<u16> = (0..REAL_HOOKS)
            .map(|i| deliver(edge, "/webhooks/gh", &format!("names-real-{n}-{i}")).status)
            .collect();
        assert!(
            statuses.iter().all(|s| *s == 201 || *s == 429),
            "{statuses:?}"
        );
        refused.push(statuses.iter().filter(|s| **s == 429).count());
    }
    fleet.store.proc.signal("CONT");
    assert_eq!(
        refused,
        [0, 0],
        "real hooks refused in the outage, per edge"
    );
}
