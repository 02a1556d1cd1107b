//! The soak's short version: two minutes of the fleet the full soak runs
//! (three edges, a Redis Cluster with replicas, the mock provider at 80 % of
//! the quota with redeliveries and forgeries, the metered tenant past its
//! quota) with a fixed seed whose schedule takes the store away twice (its
//! place answering garbage, then the store killed and restarted), and the
//! checker's verdict. The
//! 30-minute run is `scripts/soak.sh` (see `RELIABILITY.md`, "Soak").

use ankusa_tools::soak::run::{run, Plan};
use std::time::Duration;

/// Its schedule: store-garbage 80.3 s – 86.7 s, store-killed 97.9 s – 104.9 s.
const SEED: u64 = 7979;

#[test]
fn two_minutes_of_traffic_and_faults_hold_every_check() {
    let plan = Plan {
        traffic: Duration::from_secs(120),
        seed: SEED,
    };
    let faults: Vec<&str> = plan.schedule().iter().map(|s| s.fault.name()).collect();
    assert_eq!(
        faults,
        ["store-garbage", "store-killed"],
        "the seed's schedule"
    );
    let report = run(&plan);
    eprintln!("{}", report.summary());
    let failures: Vec<String> = report
        .verdict
        .failures()
        .iter()
        .map(|c| format!("{}: {} (bound {})", c.name, c.figure, c.bound))
        .collect();
    assert!(
        failures.is_empty(),
        "soak checks failed:\n{}",
        failures.join("\n")
    );
    // The window checks judged both kinds of window: the faults made the
    // edges answer alone, and the metered tenant was refused meanwhile.
    let names: Vec<&str> = report
        .verdict
        .checks
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert!(
        names.contains(&"metered per 10 s, store not answering"),
        "no window without the store: {names:?}"
    );
    assert!(
        report.fallbacks > 0,
        "the store's faults made no edge answer alone"
    );
    assert!(report.tally.forged_sent > 0, "no forgery was sent");
}
