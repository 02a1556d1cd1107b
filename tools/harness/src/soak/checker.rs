//! The soak's verdict from what its run left: each check with its figure
//! and its bound. Pure: the run gathers the evidence, this only judges it.

use super::samples::{Process, Rss};
use super::windows::{Window, WINDOW};
use crate::faults::metered;
use crate::faults::promise::{metered_limit, BUDGET_MARGIN_MS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How much a process's memory may grow from its level after warm-up.
pub const RSS_GROWTH: f64 = 0.10;

/// What a run left to judge.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Evidence {
    pub events: u64,
    pub acknowledged_events: u64,
    /// Acknowledged events the intake doesn't hold.
    pub lost: u64,
    pub lost_keys: Vec<String>,
    /// Events the intake stored more than once.
    pub stored_duplicates: u64,
    /// Copies the intake's own index caught (fine: reported).
    pub intake_duplicates_caught: u64,
    pub forged_sent: u64,
    pub forged_rejected: u64,
    /// Forgeries that got no answer at all (sent to an edge a fault killed).
    pub forged_unanswered: u64,
    pub windows: Vec<Window>,
    pub rss: Vec<Rss>,
    /// The warm-up's length (s): a process's level is its first reading
    /// this long after it started (after traffic started, for the first ones).
    pub warm_up_s: f64,
    /// When traffic ended (s).
    pub end_s: f64,
    /// The p99 of the time the edges held a hook, and the same less the
    /// time the edge's worker waited for a CPU.
    pub p99_edge_ms: f64,
    pub p99_edge_running_ms: f64,
    pub timeout_ms: u64,
}

/// One check: its figure against its bound.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub figure: String,
    pub bound: String,
}

/// A process's memory over the run, as the check saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub process: Process,
    /// (s, KiB) at the end of its warm-up; None when it didn't live that long.
    pub level: Option<(f64, u64)>,
    /// (s, KiB) of its last reading.
    pub last: (f64, u64),
    pub peak_kib: u64,
    /// Whether it lived to the end of the run (else a fault ended it).
    pub to_the_end: bool,
}

impl Memory {
    /// Judged: it lived to the end with a level to compare with.
    pub fn judged(&self) -> Option<(u64, u64)> {
        let (at, level) = self.level?;
        (self.to_the_end && self.last.0 > at).then_some((level, self.last.1))
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Verdict {
    pub checks: Vec<Check>,
    pub memory: Vec<Memory>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    pub fn failures(&self) -> Vec<&Check> {
        self.checks.iter().filter(|c| !c.passed).collect()
    }
}

/// The metered tenant's fleet quota over a window: `burst + rate × 10 s`.
pub fn window_quota() -> u64 {
    metered::quota(WINDOW)
}

/// The most the fleet may admit of a window's quota while edges answered
/// alone: the others spend the whole quota, one cut off its share on top,
/// `quota × (1 + 1 / live edges)` (docs/admission.md, partial outage).
pub fn degraded_quota(live_edges: u64) -> u64 {
    metered::quota_and_shares(window_quota(), 1, live_edges)
}

fn check(name: &str, passed: bool, figure: String, bound: String) -> Check {
    Check {
        name: name.into(),
        passed,
        figure,
        bound,
    }
}

pub fn judge(e: &Evidence) -> Verdict {
    let mut checks = vec![
        check(
            "lost",
            e.lost == 0,
            format!("{} (e.g. {:?})", e.lost, e.lost_keys),
            "0".into(),
        ),
        check(
            "stored duplicates",
            e.stored_duplicates == 0,
            format!(
                "{} ({} more copies caught by the intake's own index)",
                e.stored_duplicates, e.intake_duplicates_caught
            ),
            "0".into(),
        ),
        check(
            "events acknowledged",
            e.acknowledged_events == e.events,
            e.acknowledged_events.to_string(),
            format!("{} (every event)", e.events),
        ),
        check(
            "forgeries refused",
            e.forged_rejected + e.forged_unanswered == e.forged_sent,
            format!(
                "{} answered 401 ({} got no answer: no edge listening)",
                e.forged_rejected, e.forged_unanswered
            ),
            format!("{} (every one sent)", e.forged_sent),
        ),
    ];
    checks.extend(window_checks(&e.windows));
    let memory = memory(e);
    // Redis Cluster nodes are judged together: a reshard or a failover moves
    // a slot's keys (a busy tenant's whole dedupe window) from one node to
    // another, so a node's memory follows the slots it holds.
    let (redis, others): (Vec<&Memory>, Vec<&Memory>) = memory
        .iter()
        .partition(|m| m.process.role.starts_with("redis"));
    checks.extend(others.iter().filter_map(|m| {
        let (level, last) = m.judged()?;
        Some(rss_check(&format!("rss {}", m.process.role), level, last))
    }));
    let nodes: Vec<(u64, u64)> = redis.iter().filter_map(|m| m.judged()).collect();
    if !nodes.is_empty() {
        let level = nodes.iter().map(|(l, _)| l).sum();
        let last = nodes.iter().map(|(_, l)| l).sum();
        let name = format!("rss redis, its {} nodes together", nodes.len());
        checks.push(rss_check(&name, level, last));
    }
    let budget = e.timeout_ms + BUDGET_MARGIN_MS;
    checks.push(check(
        "edge p99",
        e.p99_edge_running_ms <= budget as f64,
        format!(
            "{} ms ({} ms with the workers' CPU waits)",
            e.p99_edge_running_ms, e.p99_edge_ms
        ),
        format!(
            "{budget} ms (fleet.timeout_ms {} + {BUDGET_MARGIN_MS})",
            e.timeout_ms
        ),
    ));
    Verdict { checks, memory }
}

/// A process's (or processes') memory at the end against its level after
/// warm-up, plus [`RSS_GROWTH`].
fn rss_check(name: &str, level: u64, last: u64) -> Check {
    let bound = (level as f64 * (1.0 + RSS_GROWTH)).floor() as u64;
    check(
        name,
        last <= bound,
        format!("{last} KiB at the end"),
        format!(
            "{bound} KiB ({level} KiB after warm-up + {:.0} %)",
            RSS_GROWTH * 100.0
        ),
    )
}

/// The worst window while the store answered, against the GCRA bound, and
/// the worst while it didn't, against the degraded one (each with the fault
/// rows' allowance, `promise::metered_limit`).
fn window_checks(windows: &[Window]) -> Vec<Check> {
    let mut out = Vec::new();
    let answered = windows.iter().filter(|w| w.store_answered);
    if let Some(w) = answered.max_by_key(|w| w.admitted) {
        let allowed = metered_limit(window_quota(), false);
        out.push(check(
            "metered per 10 s, store answering",
            w.admitted <= allowed,
            format!(
                "{}, the most of any such window (from {} s)",
                w.admitted, w.from_s
            ),
            format!(
                "{allowed} (burst + rate × 10 s = {}, + 10 % + 2)",
                window_quota()
            ),
        ));
    }
    let alone = windows.iter().filter(|w| !w.store_answered);
    if let Some(w) = alone.max_by_key(|w| {
        w.admitted as i64 - metered_limit(degraded_quota(w.live_edges), false) as i64
    }) {
        let quota = degraded_quota(w.live_edges);
        let allowed = metered_limit(quota, false);
        out.push(check(
            "metered per 10 s, store not answering",
            w.admitted <= allowed,
            format!(
                "{} in the window nearest its bound (from {} s, {} live edges)",
                w.admitted, w.from_s, w.live_edges
            ),
            format!("{allowed} (quota × (1 + 1/live edges) = {quota}, + 10 % + 2)"),
        ));
    }
    out
}

/// Each process's level after its warm-up, its last and its peak reading.
pub fn memory(e: &Evidence) -> Vec<Memory> {
    let mut by_process: BTreeMap<&Process, Vec<&Rss>> = BTreeMap::new();
    for r in &e.rss {
        by_process.entry(&r.process).or_default().push(r);
    }
    let latest = e.rss.iter().map(|r| r.at_s).fold(0.0, f64::max);
    by_process
        .into_iter()
        .filter_map(|(process, readings)| {
            let first = readings.first()?.at_s;
            let last = readings.last()?;
            let level = readings
                .iter()
                .find(|r| r.at_s >= first.max(0.0) + e.warm_up_s - 0.5)
                .map(|r| (r.at_s, r.kib));
            Some(Memory {
                process: process.clone(),
                level,
                last: (last.at_s, last.kib),
                peak_kib: readings.iter().map(|r| r.kib).max().unwrap_or(0),
                to_the_end: last.at_s >= latest,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
