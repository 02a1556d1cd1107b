//! One row's run against its target fleet, whatever it is made of: the
//! mock provider's deliveries, the metered tenant pushed past its quota
//! through every edge, the edges' gauges and their workers' waits for a CPU
//! read meanwhile, and the fault injected and healed on the plan's time.

use super::gauges::{Gauges, Sample};
use super::metered::{self, Attempts};
use super::plan::{Plan, SAMPLE_EVERY};
use super::stalls::{self, Series};
use super::target::Target;
use crate::provider::options::Options;
use crate::provider::profile::Profile;
use crate::provider::run::{self, Outcome};
use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the edges' pids are looked up again, for a fleet that has a
/// way to (see [`Target::edge_pid_finder`]).
const FIND_PIDS_EVERY: Duration = Duration::from_secs(1);

/// What a row's run left to sum up.
pub(crate) struct Run {
    pub options: Options,
    pub outcome: Outcome,
    /// Per edge pid, how long its worker waited for a CPU.
    pub stalls: HashMap<u32, Series>,
    pub samples: Vec<Sample>,
    /// When the heal was done (from the start of the run).
    pub heal_at: Duration,
    /// The store's own hit errors when the heal was done.
    pub errors_at_heal: u64,
    pub start_unix_ms: u64,
    pub metered: Attempts,
}

/// The deliveries of every row: GitHub hooks of tenant `acme` (source `gh`)
/// signed with `secret`, a fifth of them delivered again to another edge
/// (half racing the first delivery), at the plan's rate.
pub fn deliveries(edges: Vec<String>, plan: &Plan, seed: u64, secret: &str) -> Options {
    Options {
        edges,
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
        secret: secret.into(),
        forge: 0.0,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Delivers `options` through `fleet`, `inject` at the plan's fault time and
/// `heal` at its heal time (or as soon as `inject` returns, when it took
/// longer), until the provider is done. The metered senders, the gauges and
/// the CPU-wait watcher run alongside, and `beside` (a fault's own helper)
/// until the flag it is handed is set; the watcher follows the edges' pids
/// as they are after the fault and after the heal.
pub(crate) fn drive<F: Target>(
    fleet: &mut F,
    plan: &Plan,
    options: Options,
    beside: impl FnOnce(&AtomicBool) + Send,
    inject: impl FnOnce(&mut F),
    heal: impl FnOnce(&mut F),
) -> Run {
    let (edge_urls, admin) = (fleet.edge_urls(), fleet.admin_urls());
    let pids = Mutex::new(fleet.edge_pids());
    let finder = fleet.edge_pid_finder();
    let samples = Mutex::new(Vec::new());
    let done = AtomicBool::new(false);
    let metered_attempts = Attempts::default();
    let mut heal_at = plan.heal_at;
    let mut errors_at_heal = 0;
    let start = Instant::now();
    let start_unix_ms = stalls::unix_ms();
    let (outcome, stalls) = std::thread::scope(|s| {
        for url in &edge_urls {
            for _ in 0..metered::SENDERS {
                let (done, into) = (&done, &metered_attempts);
                s.spawn(move || metered::send(url, start, done, into));
            }
        }
        // Done even when the provider panics, so no thread waits for ever.
        let provider = s.spawn(|| {
            let outcome = catch_unwind(AssertUnwindSafe(|| run::run(&options)));
            done.store(true, Ordering::SeqCst);
            outcome.unwrap_or_else(|p| resume_unwind(p))
        });
        s.spawn(|| beside(&done));
        let watcher = s.spawn(|| stalls::watch_live(|| lock(&pids).clone(), &done));
        if let Some(find) = finder {
            let (done, pids) = (&done, &pids);
            s.spawn(move || {
                while !done.load(Ordering::SeqCst) {
                    std::thread::sleep(FIND_PIDS_EVERY);
                    let found = find();
                    *lock(pids) = found;
                }
            });
        }
        s.spawn(|| {
            let mut gauges = Gauges::new(admin);
            while !done.load(Ordering::SeqCst) {
                let got = gauges.sample(start.elapsed());
                lock(&samples).push(got);
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        std::thread::sleep(plan.fault_at.saturating_sub(start.elapsed()));
        inject(fleet);
        *lock(&pids) = fleet.edge_pids();
        std::thread::sleep(plan.heal_at.saturating_sub(start.elapsed()));
        heal(fleet);
        heal_at = heal_at.max(start.elapsed());
        errors_at_heal = fleet.store_hit_errors();
        *lock(&pids) = fleet.edge_pids();
        let outcome = provider.join().unwrap_or_else(|p| resume_unwind(p));
        (outcome, watcher.join().unwrap_or_default())
    });
    Run {
        options,
        outcome,
        stalls,
        samples: samples.into_inner().unwrap_or_else(|p| p.into_inner()),
        heal_at,
        errors_at_heal,
        start_unix_ms,
        metered: metered_attempts,
    }
}
