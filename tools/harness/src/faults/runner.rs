//! One row of the fault suite: start the fleet, deliver, break, heal, then
//! sum up the figures.

use super::figures::{figures, store_hit_errors, Run};
use super::fleet::{row_config, FaultFleet};
use super::gauges::sample;
use super::inject::{flap_intake, heal, inject};
use super::metered::{self, Attempts};
use super::plan::{Plan, SAMPLE_EVERY};
use super::row::Row;
use super::scenario::Fault;
use super::stalls;
use crate::provider::options::Options;
use crate::provider::profile::{Profile, DEFAULT_SECRET};
use crate::provider::run;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Runs `fault` as one row and returns its figures. Panics only when the
/// fleet can't start or the audit can't read the intake.
pub fn run_row(fault: Fault, plan: &Plan, seed: u64) -> Row {
    run_row_with(fault, plan, seed, |_| {})
}

/// [`run_row`], with `tweak` applied to the fleet before traffic starts
/// (the suite's own check that the audit catches a loss uses it).
pub fn run_row_with(
    fault: Fault,
    plan: &Plan,
    seed: u64,
    tweak: impl FnOnce(&mut FaultFleet),
) -> Row {
    let mut fleet = FaultFleet::start(&row_config(fault), fault);
    tweak(&mut fleet);
    let options = Options {
        edges: fleet.edge_urls(),
        events: plan.events,
        rate: plan.rate,
        profile: Profile::Github,
        tenant: "acme".into(),
        source: "gh".into(),
        redeliver: 0.2,
        concurrent: 0.5,
        deadline: plan.deadline,
        concurrency: 32,
        seed,
        progress: false,
        secret: DEFAULT_SECRET.into(),
        forge: 0.0,
    };
    let admin = fleet.admin_urls();
    let samples = Mutex::new(Vec::new());
    let (done, flap) = (AtomicBool::new(false), AtomicBool::new(false));
    let mut heal_at = plan.heal_at;
    let mut errors_at_heal = 0;
    let start = Instant::now();
    let start_unix_ms = stalls::unix_ms();
    let pids: Vec<u32> = fleet.edges.iter().map(|e| e.proc.pid()).collect();
    let metered_attempts = Attempts::default();
    let edge_urls = fleet.edge_urls();
    let (outcome, stalls) = std::thread::scope(|s| {
        for url in &edge_urls {
            for _ in 0..metered::SENDERS {
                let (done, into) = (&done, &metered_attempts);
                s.spawn(move || metered::send(url, start, done, into));
            }
        }
        let provider = s.spawn(|| {
            let outcome = run::run(&options);
            done.store(true, Ordering::SeqCst);
            outcome
        });
        let watcher = s.spawn(|| stalls::watch(&pids, &done));
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                let at = start.elapsed();
                let got = sample(&admin, at);
                samples.lock().unwrap_or_else(|p| p.into_inner()).push(got);
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        let proxy = fleet.intake_proxy.clone();
        let (done, flap) = (&done, &flap);
        s.spawn(move || flap_intake(&proxy, done, flap));
        std::thread::sleep(plan.fault_at.saturating_sub(start.elapsed()));
        inject(fault, &mut fleet, flap);
        std::thread::sleep(plan.heal_at.saturating_sub(start.elapsed()));
        heal(fault, &mut fleet, flap);
        heal_at = heal_at.max(start.elapsed());
        errors_at_heal = store_hit_errors(&fleet.store);
        let outcome = provider
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (outcome, watcher.join().unwrap_or_default())
    });
    let samples = samples.into_inner().unwrap_or_else(|p| p.into_inner());
    let run = Run {
        options,
        outcome,
        stalls,
        samples,
        heal_at,
        errors_at_heal,
        start_unix_ms,
        metered: metered_attempts,
    };
    let row = figures(fault, plan, &mut fleet, &run);
    for edge in &mut fleet.edges {
        let _ = edge.proc.stop(Duration::from_secs(5));
    }
    row
}
