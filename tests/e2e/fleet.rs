//! Two real edges, one tenant: with fleet scopes the quota holds as one limit
//! across both; with node scopes each edge admits its own quota, about twice
//! as much together.

use ankusa_testkit::envoy::fleet_filter_config;
use ankusa_testkit::http;
use ankusa_tools::fleet::{Fleet, FleetSpec};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const RATE: u64 = 20;
const BURST: u64 = 10;
/// How long each edge is pressed with more than the quota.
const WINDOW: Duration = Duration::from_secs(4);
/// Senders per edge: enough to ask for far more than `RATE`.
const SENDERS_PER_EDGE: usize = 6;

fn config(scope: &str) -> serde_json::Value {
    let mut config = fleet_filter_config();
    config["rate_limits"]["scope"] = scope.into();
    config["dedupe"]["scope"] = scope.into();
    config["rate_limits"]["tenants"]["acme"] = serde_json::json!({"rate": RATE, "burst": BURST});
    // A generous budget: a store call that timed out would be answered from
    // the node alone, which is right in production but not what this measures.
    config["fleet"]["timeout_ms"] = 2000.into();
    config
}

#[derive(Debug)]
struct Pressed {
    admitted: u64,
    rate_limited: u64,
    other: u64,
    /// From the first request sent to the last answer read.
    elapsed: Duration,
}

/// Sends distinct GitHub deliveries to every edge at once for `WINDOW`.
fn press(fleet: &Fleet) -> Pressed {
    let (admitted, limited, other) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let seq = AtomicU64::new(0);
    let start = Instant::now();
    let last_answer = std::sync::Mutex::new(start);
    std::thread::scope(|s| {
        for url in fleet.edge_urls() {
            for _ in 0..SENDERS_PER_EDGE {
                let url = format!("{url}/webhooks/acme/gh");
                let (admitted, limited, other, seq, last_answer) =
                    (&admitted, &limited, &other, &seq, &last_answer);
                s.spawn(move || {
                    while start.elapsed() < WINDOW {
                        let delivery = format!(
                            "quota-{}-{}",
                            std::process::id(),
                            seq.fetch_add(1, Ordering::Relaxed)
                        );
                        let headers = [
                            ("x-github-delivery", delivery.as_str()),
                            ("x-github-event", "push"),
                        ];
                        let answer =
                            http::request("POST", &url, &headers, b"{}", Duration::from_secs(10));
                        let counter = match answer.map(|a| a.status) {
                            Ok(200..=299) => admitted,
                            Ok(429) => limited,
                            _ => other,
                        };
                        counter.fetch_add(1, Ordering::Relaxed);
                        let mut last = last_answer.lock().unwrap_or_else(|p| p.into_inner());
                        *last = (*last).max(Instant::now());
                    }
                });
            }
        }
    });
    let elapsed = last_answer
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .duration_since(start);
    Pressed {
        admitted: admitted.into_inner(),
        rate_limited: limited.into_inner(),
        other: other.into_inner(),
        elapsed,
    }
}

/// The most one GCRA limit can admit over `elapsed`: the burst, plus one per
/// emission interval, plus one for the edges of the window.
fn one_limit_bound(elapsed: Duration) -> f64 {
    BURST as f64 + elapsed.as_secs_f64() * RATE as f64 + 1.0
}

fn fallbacks(fleet: &Fleet) -> f64 {
    fleet
        .edges
        .iter()
        .map(|e| e.stat("ankusa_fleet_fallback_total"))
        .sum()
}

#[test]
fn fleet_scope_is_one_quota_across_edges_and_node_scope_is_one_per_edge() {
    let fleet = Fleet::start(&FleetSpec::new(2, config("fleet")));
    let shared = press(&fleet);
    let bound = one_limit_bound(shared.elapsed);
    eprintln!("fleet scope: {shared:?}, one limit allows {bound:.1}");
    assert_eq!(
        fallbacks(&fleet),
        0.0,
        "a store call failed and was answered node-local; the bound below assumes none did"
    );
    assert_eq!(shared.other, 0, "only 2xx and 429 expected");
    assert!(
        shared.rate_limited > 0,
        "the edges were not pressed past the quota"
    );
    assert!(
        shared.admitted as f64 <= bound,
        "fleet scope admitted {} over {:?}, more than one limit allows ({bound:.1})",
        shared.admitted,
        shared.elapsed
    );
    let stored = fleet.intake.hooks().len() as u64;
    assert_eq!(
        stored, shared.admitted,
        "every admitted hook reached the intake"
    );
    fleet.stop();

    let fleet = Fleet::start(&FleetSpec::new(2, config("node")));
    let apart = press(&fleet);
    let one_limit = one_limit_bound(apart.elapsed);
    eprintln!("node scope: {apart:?}, one limit allows {one_limit:.1}");
    assert_eq!(apart.other, 0, "only 2xx and 429 expected");
    assert!(
        apart.rate_limited > 0,
        "the edges were not pressed past the quota"
    );
    assert!(
        apart.admitted as f64 > 1.5 * one_limit,
        "node scope admitted {} over {:?}; two separate limits should admit about twice {one_limit:.1}",
        apart.admitted,
        apart.elapsed
    );
    assert!(
        apart.admitted as f64 <= 2.0 * one_limit,
        "node scope admitted {} — more than two limits",
        apart.admitted
    );
    eprintln!(
        "fleet scope: {} admitted in {:?} (one limit: {bound:.1}); node scope: {} admitted in {:?} (one limit: {one_limit:.1})",
        shared.admitted, shared.elapsed, apart.admitted, apart.elapsed
    );
    fleet.stop();
}
