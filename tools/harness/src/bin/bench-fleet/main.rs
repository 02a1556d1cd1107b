//! `bench-fleet settle [--rates 100,1000,5000] [--seconds S]`
//! `bench-fleet memory [--hooks N] [--keys K]`
//!
//! What a fleet costs the store and Redis, and whether it stays flat: two
//! Envoy edges on fleet scopes in front of a release `ankusa-store`, a real
//! Redis and the intake (which answers 201 without storing), all on free
//! loopback ports and stopped by PID when the run ends, fails or is signalled.
//!
//! - `settle`: for each rate, hooks paced at that rate over both edges, each
//!   a fresh delivery; once their settles are in, the store's settle
//!   operations and the Redis round trips it took for them
//!   (`ankusa_store_pipeline_round_trips_total`), per 100 settled hooks.
//! - `memory`: N hooks over K distinct delivery ids (the ids cycle), the
//!   edges' and the store's resident memory after every K hooks, and the last
//!   figure against the first.
//!
//! A benchmark, not a test: run by scripts/bench-fleet.sh, which builds the
//! release artefacts first.

use ankusa_testkit::envoy::fleet_filter_config;
use ankusa_tools::children::stop_children_on_exit;
use ankusa_tools::fleet::{Fleet, FleetSpec};
use clap::{Parser, Subcommand};
use std::time::Duration;

mod memory;
mod settle;

#[derive(Parser)]
#[command(name = "bench-fleet", version)]
struct Args {
    #[command(subcommand)]
    run: Run,
    /// Envoy worker threads per edge.
    #[arg(long, default_value_t = 1, global = true)]
    concurrency: u32,
}

#[derive(Subcommand)]
enum Run {
    /// Redis round trips per 100 settled hooks at set rates.
    Settle {
        /// Hooks per second over both edges, one step each.
        #[arg(long, value_delimiter = ',', default_value = "100,1000,5000")]
        rates: Vec<f64>,
        /// Seconds per step.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Clients per edge (the rate is split evenly between them).
        #[arg(long, default_value_t = 16)]
        clients: usize,
    },
    /// Resident memory after every `keys` hooks, up to `hooks`.
    Memory {
        #[arg(long, default_value_t = 1_000_000)]
        hooks: u64,
        /// Distinct delivery ids; the ids cycle through them.
        #[arg(long, default_value_t = 100_000)]
        keys: u64,
        /// Clients per edge.
        #[arg(long, default_value_t = 16)]
        clients: usize,
    },
}

/// The source the hooks are sent to, and its path.
pub const PATH: &str = "/webhooks/gh";
pub const BODY: &str = r#"{"zen":"Keep it logically awesome.","n":{i}}"#;

fn main() {
    let args = Args::parse();
    std::env::set_var("ANKUSA_PROFILE", "release");
    if let Err(e) = stop_children_on_exit("bench-fleet") {
        eprintln!("bench-fleet: {e}");
        std::process::exit(1);
    }
    let result = match &args.run {
        Run::Settle {
            rates,
            seconds,
            clients,
        } => check_rates(rates).and_then(|()| {
            let step = Duration::try_from_secs_f64(*seconds)
                .map_err(|_| format!("--seconds must be seconds > 0, got {seconds}"))?;
            let fleet = start(args.concurrency);
            settle::run(&fleet, rates, step, *clients)
        }),
        Run::Memory {
            hooks,
            keys,
            clients,
        } => {
            if *keys == 0 || *hooks < *keys {
                Err(format!(
                    "--keys must be at least 1 and at most --hooks, got keys {keys}, hooks {hooks}"
                ))
            } else {
                let fleet = start(args.concurrency);
                memory::run(&fleet, *hooks, *keys, *clients)
            }
        }
    };
    match result {
        Ok(problems) if problems.is_empty() => {}
        Ok(problems) => {
            for p in problems {
                eprintln!("bench-fleet: {p}");
            }
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("bench-fleet: {e}");
            std::process::exit(1);
        }
    }
}

fn check_rates(rates: &[f64]) -> Result<(), String> {
    match rates.iter().find(|r| !(r.is_finite() && **r > 0.0)) {
        Some(bad) => Err(format!("--rates: each must be hooks/s > 0, got {bad}")),
        None if rates.is_empty() => Err("--rates names no rate".to_string()),
        None => Ok(()),
    }
}

/// Two edges on fleet scopes, a quota nothing reaches, a budget a loaded
/// machine keeps (a fallback would not settle through the store).
fn start(concurrency: u32) -> Fleet {
    let mut config = fleet_filter_config();
    config["rate_limits"]["tenants"]["acme"] =
        serde_json::json!({"rate": 1_000_000, "burst": 1_000_000});
    config["fleet"]["timeout_ms"] = serde_json::json!(1_000);
    let mut spec = FleetSpec::new(2, config);
    spec.concurrency = concurrency;
    // The hooks carry `x-intake-status: 201` (answered without storing).
    spec.obey_test_headers = true;
    let fleet = Fleet::start(&spec);
    println!(
        "fleet: 2 edges (--concurrency {concurrency}), ankusa-store and Redis {} on loopback; load average {}",
        fleet
            .redis
            .info("server", "redis_version")
            .unwrap_or_else(|| "?".to_string()),
        ankusa_testkit::process::load_average()
    );
    fleet
}

/// What every client sends to `url`: a GitHub hook whose delivery id is
/// `{prefix}-{i}`.
pub fn hooks(url: String, prefix: &str, clients: usize) -> ankusa_tools::load::LoadSpec {
    ankusa_tools::load::LoadSpec {
        url,
        method: "POST".to_string(),
        headers: vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("x-github-delivery".to_string(), format!("{prefix}-{{i}}")),
            ("x-intake-status".to_string(), "201".to_string()),
        ],
        body: BODY.to_string(),
        clients,
        duration: Duration::from_secs(3_600),
        expect_body: None,
        timeout: Duration::from_secs(10),
        rate: None,
        max_requests: None,
    }
}

/// Hooks through every edge at once, `{prefix}-e{edge}-{i}` the delivery
/// ids, each edge's load as `shape` sets it; the reports (edge order) and
/// the seconds the whole took.
pub fn through_each_edge(
    fleet: &Fleet,
    prefix: &str,
    clients: usize,
    shape: impl Fn(usize, &mut ankusa_tools::load::LoadSpec),
) -> Result<(Vec<ankusa_tools::load::Report>, f64), String> {
    let specs = fleet
        .edges
        .iter()
        .enumerate()
        .map(|(e, edge)| {
            let mut spec = hooks(edge.url(PATH), &format!("{prefix}-e{e}"), clients);
            shape(e, &mut spec);
            spec
        })
        .collect();
    let started = std::time::Instant::now();
    let reports = ankusa_tools::load::run_all(specs)?;
    Ok((reports, started.elapsed().as_secs_f64()))
}
