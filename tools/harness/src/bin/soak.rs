//! `soak [--minutes N] [--seed S] [--out DIR]`: three edges on a Redis
//! Cluster under the mock provider's traffic and a seeded random schedule of
//! faults, then the checks (see `RELIABILITY.md`, "Soak"). Exits 1 when a
//! check fails, naming each with its figure and bound.

use ankusa_tools::ids::Rng;
use ankusa_tools::soak::report::opening;
use ankusa_tools::soak::run::{run, Plan};
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(about = "A long run of the fleet under traffic and random faults, then its checks")]
struct Args {
    /// Minutes of traffic (the warm-up included).
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// The seed of the schedule and the traffic (default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Folder for the run as JSON (`soak-SEED.json`).
    #[arg(long)]
    out: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    if !(args.minutes.is_finite() && args.minutes >= 1.0) {
        eprintln!("soak: --minutes must be at least 1, got {}", args.minutes);
        std::process::exit(2);
    }
    if let Err(e) = ankusa_tools::children::stop_children_on_exit("soak") {
        eprintln!("soak: {e}");
        std::process::exit(2);
    }
    let seed = args
        .seed
        .unwrap_or_else(|| Rng::from_entropy().next_u64() % 1_000_000_000);
    let plan = Plan {
        traffic: Duration::from_secs_f64(args.minutes * 60.0),
        seed,
    };
    eprintln!("{}", opening(args.minutes, seed, &plan.schedule()));
    let report = run(&plan);
    println!("{}", report.summary());
    if let Some(dir) = &args.out {
        if let Err(e) = report.save(dir) {
            eprintln!("soak: {e}");
        }
    }
    let failures = report.verdict.failures();
    if !failures.is_empty() {
        for c in failures {
            eprintln!(
                "soak: check failed: {}: {} (bound {})",
                c.name, c.figure, c.bound
            );
        }
        std::process::exit(1);
    }
}
