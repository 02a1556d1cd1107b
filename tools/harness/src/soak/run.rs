//! The soak's run: the fleet, the traffic, the faults of the schedule one
//! after another, the progress line; then the evidence for the checker.

use super::checker::{judge, Evidence};
use super::report::{Applied, Report};
use super::samples::{self, Process};
use super::schedule::{self, Slot};
use super::windows::windows;
use crate::faults::fleet::{fault_fleet_config, Backing, FaultFleet, Shape, TIMEOUT_MS};
use crate::faults::gauges::{Gauges, Sample};
use crate::faults::inject::{flap_intake, heal, inject};
use crate::faults::latency::{held_within, p99_at_edge_ms};
use crate::faults::metered::{self, Attempts};
use crate::faults::target::Target;
use crate::faults::{figures, stalls};
use crate::provider::options::Options;
use crate::provider::profile::Profile;
use crate::provider::report::Tally;
use crate::provider::{audit, run as provider};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Edges of the soak's fleet.
pub const EDGES: usize = 3;
/// The provider's tenant's quota (`acme`), and the share of it the
/// provider's deliveries (redeliveries included) use.
pub const ACME_RATE: u64 = 50;
pub const ACME_BURST: u64 = 100;
pub const LOAD: f64 = 0.8;
/// Share of events delivered again to another edge, and forged once.
pub const REDELIVER: f64 = 0.2;
pub const FORGE: f64 = 0.05;
/// The longest dedupe window of the edges and of the intake (a run shorter
/// than 20 minutes gets a quarter of its traffic). It must be longer than
/// any copy of an event takes to come after the first was stored: a 30 s
/// window let 117 events be stored twice in a 30-minute run, their copies
/// 30–77 s apart, retried behind the 429s of a backlog (after the intake
/// timing out, at 80 % of the quota a backlog drains at 20 % of it). And it
/// must be short enough that what Redis and the intake hold for it reaches
/// its steady size within the warm-up.
pub const DEDUPE_TTL_MAX: Duration = Duration::from_secs(300);
/// The secret the provider signs with and the edges verify `gh` with
/// (a test value, the soak's own).
const SECRET: &str = "soak-github-webhook-secret";
/// The VM environment variable the edges read it from.
const SECRET_ENV: &str = "ANKUSA_GH_SECRET";

/// No fault in the last stretch of traffic, so the last heal's retries land.
pub const TAIL: Duration = Duration::from_secs(15);
/// How long after traffic stops the provider may still retry.
const GRACE: Duration = Duration::from_secs(90);
/// How often the edges' gauges are read, and the progress line printed.
const GAUGES_EVERY: Duration = Duration::from_secs(1);
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// The dedupe window of a run with `traffic`: [`DEDUPE_TTL_MAX`], or a
/// quarter of the traffic when that is shorter.
pub fn dedupe_ttl(traffic: Duration) -> Duration {
    (traffic / 4).min(DEDUPE_TTL_MAX)
}

/// The warm-up: a third of the traffic, at least two dedupe windows, with no
/// fault in it. Connections, scripts and Envoy's stats are made by then, and
/// Redis and the intake hold as many keys as they will (the intake sweeps
/// its index once a window, so it holds up to two; Redis nodes were seen
/// growing for the first 12–15 minutes of a 30-minute run, then flat): a
/// process's memory at its end is the level the check compares with.
pub fn warm_up(traffic: Duration) -> Duration {
    (traffic / 3).max(2 * dedupe_ttl(traffic))
}

/// The plugin configuration of the soak: the fault rows' (metered tenant
/// included), with `acme` at [`ACME_RATE`], the dedupe window `ttl` and
/// GitHub signatures verified (so forgeries are refused).
pub fn soak_config(ttl: Duration) -> serde_json::Value {
    let mut config = fault_fleet_config();
    config["rate_limits"]["tenants"]["acme"] =
        serde_json::json!({"rate": ACME_RATE, "burst": ACME_BURST});
    config["sources"]["gh"]["ttl_ms"] = (ttl.as_millis() as u64).into();
    config["sources"]["gh"]["verify"] =
        serde_json::json!({"scheme": "github", "secret_env": [SECRET_ENV]});
    config
}

/// What a soak runs: how long, from which seed.
#[derive(Clone, Debug)]
pub struct Plan {
    pub traffic: Duration,
    pub seed: u64,
}

impl Plan {
    pub fn schedule(&self) -> Vec<Slot> {
        schedule::draw(
            self.seed,
            warm_up(self.traffic),
            self.traffic.saturating_sub(TAIL),
        )
    }
}

/// What the threads of the run share while it goes.
#[derive(Default)]
struct Live {
    tally: Mutex<Tally>,
    fault: Mutex<Option<&'static str>>,
    gauges: Mutex<Vec<Sample>>,
    metered: Attempts,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn processes_of(fleet: &FaultFleet) -> Vec<Process> {
    let of = |role: String, pid: u32| Process { role, pid };
    let mut out: Vec<Process> = fleet
        .edges
        .iter()
        .map(|e| of(e.spec.node.clone(), e.proc.pid()))
        .collect();
    out.push(of("store".into(), fleet.store.proc.pid()));
    out.push(of("intake".into(), fleet.intake.proc.pid()));
    for node in fleet.cluster.iter().flat_map(|c| &c.nodes) {
        out.push(of(format!("redis:{}", node.port), node.proc.pid()));
    }
    out
}

/// Runs the soak of `plan`. Panics only when the fleet can't start or the
/// audit can't read the intake.
pub fn run(plan: &Plan) -> Report {
    let slots = plan.schedule();
    let (warm, ttl) = (warm_up(plan.traffic), dedupe_ttl(plan.traffic));
    let shape = Shape {
        backing: Backing::Cluster,
        edges: EDGES,
        intake_args: vec!["--dedupe-ttl-ms".into(), ttl.as_millis().to_string()],
        vm_env: vec![(SECRET_ENV.into(), SECRET.into())],
    };
    let mut fleet = FaultFleet::start_shaped(&soak_config(ttl), &shape);
    let rate = LOAD * ACME_RATE as f64 / (1.0 + REDELIVER);
    let options = Options {
        edges: fleet.edge_urls(),
        events: (rate * plan.traffic.as_secs_f64()) as usize,
        rate,
        profile: Profile::Github,
        tenant: "acme".into(),
        source: "gh".into(),
        redeliver: REDELIVER,
        concurrent: 0.5,
        deadline: plan.traffic + GRACE,
        concurrency: 32,
        seed: plan.seed,
        progress: false,
        secret: SECRET.into(),
        forge: FORGE,
    };
    let (admin, edge_urls) = (fleet.admin_urls(), fleet.edge_urls());
    let processes = Mutex::new(processes_of(&fleet));
    let edge_pids = || {
        lock(&processes)
            .iter()
            .filter(|p| p.role.starts_with("edge"))
            .map(|p| p.pid)
            .collect::<Vec<_>>()
    };
    let live = Live::default();
    let (done, flap) = (AtomicBool::new(false), AtomicBool::new(false));
    let mut applied = Vec::new();
    let start = Instant::now();
    let start_unix_ms = stalls::unix_ms();
    let (outcome, waits, rss) = std::thread::scope(|s| {
        for url in &edge_urls {
            let (done, into) = (&done, &live.metered);
            s.spawn(move || metered::send(url, start, done, into));
        }
        let provider = s.spawn(|| {
            let outcome = provider::run_observed(&options, |t| *lock(&live.tally) = t.clone());
            done.store(true, Ordering::SeqCst);
            outcome
        });
        let waits = s.spawn(|| stalls::watch_live(edge_pids, &done));
        let rss = s.spawn(|| samples::watch(&processes, start, &done));
        s.spawn(|| {
            let mut gauges = Gauges::new(admin);
            while !done.load(Ordering::SeqCst) {
                let got = gauges.sample(start.elapsed());
                lock(&live.gauges).push(got);
                std::thread::sleep(GAUGES_EVERY);
            }
        });
        let (proxy, done_ref, flap_ref) = (fleet.intake_proxy.clone(), &done, &flap);
        s.spawn(move || flap_intake(&proxy, done_ref, flap_ref));
        s.spawn(|| progress(&live, start, &done));
        for slot in &slots {
            std::thread::sleep(slot.start.saturating_sub(start.elapsed()));
            *lock(&live.fault) = Some(slot.fault.name());
            let from = start.elapsed();
            inject(slot.fault, &mut fleet, &flap);
            std::thread::sleep(slot.end().saturating_sub(start.elapsed()));
            heal(slot.fault, &mut fleet, &flap);
            *lock(&live.fault) = None;
            applied.push(Applied::new(slot, from, start.elapsed(), &mut fleet.notes));
            *lock(&processes) = processes_of(&fleet);
        }
        let outcome = provider
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (
            outcome,
            waits.join().unwrap_or_default(),
            rss.join().unwrap_or_default(),
        )
    });
    let audit = audit::audit(
        &fleet.intake.url(),
        &options.tenant,
        &options.source,
        &outcome.events,
        &outcome.acknowledged,
    )
    .unwrap_or_else(|e| panic!("soak: audit failed: {e}"));
    let held = held_within(
        &fleet.held(),
        start_unix_ms,
        warm,
        plan.traffic + GRACE,
        None,
    );
    let (p99_edge, p99_edge_running) = p99_at_edge_ms(&held, &waits, &[]);
    let gauges = std::mem::take(&mut *lock(&live.gauges));
    let evidence = Evidence {
        events: outcome.events.len() as u64,
        acknowledged_events: outcome.acknowledged.iter().filter(|a| **a).count() as u64,
        lost: audit.lost,
        lost_keys: audit.lost_keys,
        stored_duplicates: audit.stored_duplicates,
        intake_duplicates_caught: figures::intake_duplicates_caught(&fleet.intake_url()),
        forged_sent: outcome.tally.forged_sent,
        forged_rejected: outcome.tally.forged_rejected,
        forged_unanswered: outcome.tally.forged_unanswered,
        windows: windows(&live.metered.all(), &gauges, plan.traffic),
        rss,
        warm_up_s: warm.as_secs_f64(),
        end_s: plan.traffic.as_secs_f64(),
        p99_edge_ms: p99_edge,
        p99_edge_running_ms: p99_edge_running,
        timeout_ms: TIMEOUT_MS,
    };
    for edge in &mut fleet.edges {
        let _ = edge.proc.stop(Duration::from_secs(5));
    }
    let verdict = judge(&evidence);
    Report {
        seed: plan.seed,
        minutes: plan.traffic.as_secs_f64() / 60.0,
        dedupe_ttl_s: ttl.as_secs_f64(),
        schedule: slots,
        applied,
        fallbacks: gauges.last().map_or(0.0, |g| g.fallback_sum) as u64,
        tally: outcome.tally,
        evidence,
        verdict,
    }
}

/// A line every [`PROGRESS_EVERY`]: elapsed, hooks sent and admitted, the
/// metered tenant's admitted, the fault in force, the edges' fall-backs.
fn progress(live: &Live, start: Instant, done: &AtomicBool) {
    let mut next = start + PROGRESS_EVERY;
    while !done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(200));
        if Instant::now() < next {
            continue;
        }
        next += PROGRESS_EVERY;
        let tally = lock(&live.tally).clone();
        let fault = lock(&live.fault).unwrap_or("-");
        let fallbacks = lock(&live.gauges).last().map_or(0.0, |g| g.fallback_sum);
        let metered = live.metered.admitted_within(Duration::ZERO, Duration::MAX);
        eprintln!(
            "[{:>6.0}s] hooks sent {} admitted {} (429 {}, 409 {}, other non-2xx {}) | metered admitted {} | fault: {} | fallbacks {}",
            start.elapsed().as_secs_f64(),
            tally.requests,
            tally.acknowledged,
            tally.rate_limited,
            tally.pending,
            tally.other_non_2xx,
            metered,
            fault,
            fallbacks
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_run_warms_up_for_a_third_and_a_short_one_for_two_dedupe_windows() {
        let min = |m: u64| Duration::from_secs(60 * m);
        assert_eq!((dedupe_ttl(min(30)), warm_up(min(30))), (min(5), min(10)));
        assert_eq!((dedupe_ttl(min(60)), warm_up(min(60))), (min(5), min(20)));
        let two = min(2);
        assert_eq!(
            (dedupe_ttl(two), warm_up(two)),
            (Duration::from_secs(30), Duration::from_secs(60))
        );
    }
}
