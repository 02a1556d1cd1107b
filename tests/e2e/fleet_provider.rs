//! The mock provider against a real two-edge fleet with fleet scopes: a fifth
//! of the events delivered again to the other edge (half after the first 2xx,
//! half racing it) — none lost, none stored twice.

use ankusa_testkit::envoy::fleet_filter_config;
use ankusa_tools::fleet::{Fleet, FleetSpec};
use std::process::Command;

#[test]
fn redeliveries_across_edges_are_stored_once_and_nothing_is_lost() {
    let mut config = fleet_filter_config();
    // A racing copy is told to come back when the claim's pending time runs
    // out; 5 s instead of 30 keeps the test short without changing what it checks.
    config["fleet"]["pending_ttl_ms"] = 5000.into();
    let fleet = Fleet::start(&FleetSpec::new(2, config));
    let out = Command::new(ankusa_testkit::paths::workspace_bin("mock-provider"))
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

/// The same fleet verifying GitHub signatures, with a third of the events
/// also forged (wrong secret, stale, unsigned; same event id): every forgery
/// is a 401, every real delivery is acknowledged, nothing lost or stored twice.
#[test]
fn forgeries_mixed_in_are_all_refused_and_nothing_real_is_lost() {
    let mut config = fleet_filter_config();
    config["fleet"]["pending_ttl_ms"] = 5000.into();
    config["sources"]["gh"]["verify"] =
        serde_json::json!({"scheme": "github", "secret_env": ["ANKUSA_GH_SECRET"]});
    let secret = "gh-fleet-provider-secret";
    let mut spec = FleetSpec::new(2, config);
    spec.vm_env = vec![("ANKUSA_GH_SECRET".into(), secret.into())];
    let fleet = Fleet::start(&spec);
    let out = Command::new(ankusa_testkit::paths::workspace_bin("mock-provider"))
        .env("ANKUSA_GH_SECRET", secret)
        .args(["--edges", &fleet.edge_urls().join(",")])
        .args(["--intake", &fleet.intake.url()])
        .args(["--profile", "github", "--tenant", "acme", "--source", "gh"])
        .args(["--events", "300", "--rate", "200", "--redeliver", "0.2"])
        .args(["--deadline-s", "120", "--seed", "7"])
        .args(["--secret-env", "ANKUSA_GH_SECRET", "--forge", "0.3"])
        .args(["--json", "--quiet"])
        .output()
        .expect("run mock-provider");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let table = String::from_utf8_lossy(&out.stderr);
    let s: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("--json printed no JSON object ({e}): {stdout}\n{table}"));
    eprintln!("{table}");
    let forged = s["forged_sent"].as_u64().unwrap_or(0);
    assert!(forged > 50, "about 30% of 300 forged: {s}");
    assert_eq!(s["forged_rejected"], forged, "{s}");
    assert_eq!(s["acknowledged"], s["sent"], "{s}");
    assert_eq!(s["lost"], 0, "{s}");
    assert_eq!(s["stored_duplicates"], 0, "{s}");
    assert_eq!(s["stored"], 300, "{s}");
    assert_eq!(out.status.code(), Some(0), "{s}");
    let unverified: f64 = fleet
        .edges
        .iter()
        .map(|e| e.stat("ankusa_admissions_total{outcome=\"unverified\"}"))
        .sum();
    assert_eq!(unverified, forged as f64);
    fleet.stop();
}
