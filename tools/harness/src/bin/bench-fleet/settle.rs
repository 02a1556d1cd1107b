//! `bench-fleet settle`: Redis round trips per 100 settled hooks at set rates.
//!
//! Every hook admitted on fleet scopes leaves one settle operation (a promote
//! on the intake's 201). The edges gather them into batches on their tick and
//! the store gathers the batches of every edge into one pipeline per Redis
//! node; `ankusa_store_pipeline_round_trips_total` counts those pipelines.

use super::through_each_edge;
use ankusa_testkit::metrics::metric_value;
use ankusa_tools::fleet::Fleet;
use std::time::{Duration, Instant};

/// The rate from which the goal applies, and the goal.
const GOAL_FROM_RATE: f64 = 2_000.0;
const GOAL_PER_100: f64 = 1.0;

#[derive(Clone, Copy, Default)]
struct Counts {
    settled: f64,
    round_trips: f64,
    edge_batches: f64,
    redis_cmds: f64,
}

impl Counts {
    fn read(fleet: &Fleet) -> Counts {
        let text = ankusa_testkit::http::get(&fleet.store.url_of("/metrics"))
            .map(|r| r.text())
            .unwrap_or_default();
        let op = |op: &str| {
            metric_value(
                &text,
                &format!(r#"ankusa_store_settle_ops_total{{op="{op}"}}"#),
            )
        };
        Counts {
            settled: op("promote") + op("release"),
            round_trips: metric_value(&text, "ankusa_store_pipeline_round_trips_total"),
            edge_batches: fleet
                .edges
                .iter()
                .map(|e| e.stat(r#"ankusa_fleet_settle_batches_total{result="ok"}"#))
                .sum(),
            redis_cmds: fleet.redis.info_number("stats", "total_commands_processed"),
        }
    }

    fn since(self, before: Counts) -> Counts {
        Counts {
            settled: self.settled - before.settled,
            round_trips: self.round_trips - before.round_trips,
            edge_batches: self.edge_batches - before.edge_batches,
            redis_cmds: self.redis_cmds - before.redis_cmds,
        }
    }
}

/// Waits (up to `limit`) until the store has settled `want` operations since `before`.
fn wait_settled(fleet: &Fleet, before: Counts, want: f64, limit: Duration) -> Counts {
    let started = Instant::now();
    loop {
        let now = Counts::read(fleet).since(before);
        if now.settled >= want || started.elapsed() >= limit {
            return now;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn run(
    fleet: &Fleet,
    rates: &[f64],
    step: Duration,
    clients: usize,
) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    println!(
        "{:>8} {:>9} {:>7} {:>6} {:>8} {:>8} {:>11} {:>12} {:>11} {:>11}",
        "target/s",
        "achieved",
        "2xx",
        "other",
        "settled",
        "redis_rt",
        "rt/100hooks",
        "ops/pipeline",
        "edge_calls",
        "redis_cmd/hk"
    );
    let mut goal_rows = Vec::new();
    for (n, &rate) in rates.iter().enumerate() {
        let before = Counts::read(fleet);
        let edges = fleet.edges.len() as f64;
        let (reports, elapsed) =
            through_each_edge(fleet, &format!("settle{n}"), clients, |_, spec| {
                spec.rate = Some(rate / edges);
                spec.duration = step;
            })?;
        let ok: u64 = reports.iter().map(|r| r.ok).sum();
        let other: u64 = reports.iter().map(|r| r.non_2xx + r.errors).sum();
        let c = wait_settled(fleet, before, ok as f64, Duration::from_secs(15));
        let achieved = ok as f64 / elapsed;
        let per_100 = 100.0 * c.round_trips / c.settled.max(1.0);
        println!(
            "{:>8.0} {:>9.0} {:>7} {:>6} {:>8.0} {:>8.0} {:>11.2} {:>12.1} {:>11.0} {:>11.2}",
            rate,
            achieved,
            ok,
            other,
            c.settled,
            c.round_trips,
            per_100,
            c.settled / c.round_trips.max(1.0),
            c.edge_batches,
            c.redis_cmds / (ok.max(1) as f64)
        );
        if other > 0 {
            problems.push(format!(
                "at {rate}/s: {other} hooks not answered 2xx (the quota is out of reach: look at the edges' logs)"
            ));
        }
        if c.settled < ok as f64 {
            problems.push(format!(
                "at {rate}/s: {} of {ok} hooks settled within 15 s",
                c.settled
            ));
        }
        if achieved >= GOAL_FROM_RATE {
            goal_rows.push((achieved, per_100));
        }
    }
    println!();
    if goal_rows.is_empty() {
        println!(
            "goal: ≤ {GOAL_PER_100} Redis round trip per 100 settled hooks at ≥ {GOAL_FROM_RATE} hooks/s: no step reached {GOAL_FROM_RATE} hooks/s on this machine"
        );
    }
    for (achieved, per_100) in goal_rows {
        println!(
            "goal: ≤ {GOAL_PER_100} Redis round trip per 100 settled hooks at {achieved:.0} hooks/s: {per_100:.2} {}",
            if per_100 <= GOAL_PER_100 { "met" } else { "NOT met" }
        );
    }
    Ok(problems)
}
