//! A fleet override's shadow and quota through real Envoy: the store's hit
//! answer carries the tenant's override, and the edge applies its shadow and
//! describes its quota in the RateLimit headers of that same hook; deleted,
//! the configuration's enforcement is back.

use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use std::time::Duration;

fn shadowed_429s(edge: &ankusa_testkit::envoy::Edge) -> f64 {
    metric_sum(
        &edge.admin_url("/stats/prometheus"),
        "ankusa_admissions_total",
        "shadow=\"true\"",
    )
}

#[test]
fn an_overrides_shadow_forwards_fleet_denials_and_its_deletion_enforces_again() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    assert!(store.wait_ready(Duration::from_secs(10)));
    let intake = Intake::start();
    // The configuration: acme 1 hook/s, burst 1, fleet scope, no shadow.
    let edge = edge("edge-os", intake.port, store.port, fleet_config(1, 200));

    let set = store_call(
        &store,
        "PUT",
        "/v1/overrides/acme",
        r#"{"rate": 1, "burst": 2, "shadow": true, "ttl_ms": 600000}"#,
    );
    assert_eq!(set.status, 200, "{}", set.text());
    let mut statuses = Vec::new();
    for i in 0..6 {
        let r = deliver(&edge, "/webhooks/gh", &format!("o-{i}-{}", free_port()));
        assert_eq!(
            r.header("ratelimit-policy"),
            Some("\"hooks\";q=2;w=2"),
            "the override's quota: {:?}",
            r.headers
        );
        statuses.push(r.status);
    }
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    assert_eq!(intake.hooks().len(), 6, "every hook forwarded");
    assert!(
        shadowed_429s(&edge) >= 3.0,
        "denials past the override's burst of 2 were counted: {}",
        shadowed_429s(&edge)
    );
    assert_eq!(
        edge.stat(r#"ankusa_admissions_total{outcome="rate_limited"}"#),
        0.0
    );

    let gone = store_call(&store, "DELETE", "/v1/overrides/acme", "");
    assert_eq!(gone.status, 200, "{}", gone.text());
    let mut after = Vec::new();
    for i in 0..4 {
        after.push(deliver(&edge, "/webhooks/gh", &format!("p-{i}-{}", free_port())).status);
    }
    assert!(after.contains(&429), "enforced again: {after:?}");
}
