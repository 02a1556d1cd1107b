//! Figures, not assertions: `cargo test -p ankusa-tests --test edge_measure -- --ignored --nocapture`
//! prints how many hooks per second one edge admits with each scope on this machine.

mod edge_support;

use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use edge_support::*;
use serde_json::json;
use std::time::{Duration, Instant};

fn rate(edge: &ankusa_testkit::envoy::Edge, hooks: usize) -> f64 {
    let url = edge.url("/webhooks/gh");
    let started = Instant::now();
    let answers = concurrently(32, hooks, move |i| {
        ankusa_testkit::http::request(
            "POST",
            &url,
            // The intake answers without storing: this measures the edge.
            &[
                ("x-github-delivery", &format!("m-{i}")),
                ("x-intake-status", "201"),
            ],
            b"{}",
            Duration::from_secs(10),
        )
        .map(|r| r.status)
        .unwrap_or(0)
    });
    let ok = answers.iter().filter(|s| **s == 201).count();
    assert_eq!(ok, hooks, "every hook admitted");
    hooks as f64 / started.elapsed().as_secs_f64()
}

#[test]
#[ignore = "prints figures; run on a quiet machine"]
fn admissions_per_second_by_scope() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let mut node = node_config(1_000_000);
    node["rate_limits"]["tenants"]["acme"] = json!({"rate": 1_000_000, "burst": 1_000_000});
    let mut fleet = fleet_config(1_000_000, 5);
    fleet["rate_limits"]["tenants"]["acme"] = json!({"rate": 1_000_000, "burst": 1_000_000});
    for (name, config, store_port) in [("node", node, free_port()), ("fleet", fleet, store.port)] {
        let edge = edge(&format!("edge-{name}"), intake.port, store_port, config);
        rate(&edge, 500); // warm up
        let per_s = rate(&edge, 3_000);
        let fallbacks = edge.stat("ankusa_fleet_fallback_total");
        eprintln!("{name} scope: {per_s:.0} hooks/s over 3000 hooks, 32 clients, 2 workers ({fallbacks} fallbacks)");
    }
}
