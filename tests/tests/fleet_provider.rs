//! The mock provider against a real two-edge fleet with fleet scopes: a fifth
//! of the events delivered again to the other edge (half after the first 2xx,
//! half racing it) — none lost, none stored twice.

use ankusa_testkit::envoy::fleet_filter_config;
use ankusa_tests::fleet::{Fleet, FleetSpec};
use std::process::Command;

#[test]
fn redeliveries_across_edges_are_stored_once_and_nothing_is_lost() {
    let mut config = fleet_filter_config();
    // A racing copy is told to come back when the claim's pending time runs
    // out; 5 s instead of 30 keeps the test short without changing what it checks.
    config["fleet"]["pending_ttl_ms"] = 5000.into();
    let fleet = Fleet::start(&FleetSpec::new(2, config));
    let out = Command::new(env!("CARGO_BIN_EXE_mock-provider"))
        .args([
            "--edges",
            &fleet.edge_urls().join(","),
            "--intake",
            &fleet.intake.url(),
        ])
        .args(["--profile", "github", "--tenant", "acme", "--source", "gh"])
        .args([
            "--events",
            "600",
            "--rate",
            "200",
            "--redeliver",
            "0.2",
            "--deadline-s",
            "120",
        ])
        .args(["--json", "--quiet"])
        .output()
        .expect("run mock-provider");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let table = String::from_utf8_lossy(&out.stderr);
    let s: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("--json printed no JSON object ({e}): {stdout}\n{table}"));
    eprintln!("{table}");
    let redeliveries = s["redeliveries"].as_u64().unwrap_or(0);
    assert!(redeliveries > 60, "about 20% of 600 redelivered: {s}");
    assert_eq!(
        s["acknowledged"], s["sent"],
        "every delivery acknowledged before the deadline: {s}"
    );
    assert_eq!(s["lost"], 0, "{s}");
    assert_eq!(s["stored_duplicates"], 0, "{s}");
    assert_eq!(s["stored"], 600, "{s}");
    assert!(
        s["duplicate_answers"].as_u64() >= Some(redeliveries / 2),
        "redeliveries answered as duplicates: {s}"
    );
    assert_eq!(out.status.code(), Some(0), "{s}");
    let by_edge: Vec<f64> = fleet
        .edges
        .iter()
        .map(|e| e.stat("ankusa_admissions_total{outcome=\"duplicate\"}"))
        .collect();
    assert!(
        by_edge.iter().sum::<f64>() > 0.0,
        "no edge answered a duplicate itself: {by_edge:?}"
    );
    fleet.stop();
}
