//! Delivering a run of events like a real provider: at a rate, to several
//! edges, redelivering some, retrying every non-2xx until a deadline.
//!
//! Attempts wait in one time-ordered queue ([`super::board`]), so a hook
//! backing off for its `Retry-After` holds no worker thread; `concurrency`
//! threads (`send`) send whatever is due, each request on its own
//! connection (as providers do).

use super::board::{lock, Attempt, Board, Kind, Shared};
use super::options::Options;
use super::profile::Event;
use super::report::{Progress, Tally, Waiting};
use super::send::worker;
use crate::ids::Rng;
use std::cmp::Reverse;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// What a run produced: the counts, and which events were acknowledged.
pub struct Outcome {
    /// Every real attempt, in the order answers came.
    pub attempts: Vec<Attempt>,
    pub tally: Tally,
    pub events: Vec<Event>,
    /// Per event: whether any of its deliveries got a 2xx.
    pub acknowledged: Vec<bool>,
    pub elapsed: Duration,
}

pub fn run(options: &Options) -> Outcome {
    run_observed(options, |_| {})
}

/// [`run`], handing `observe` the tally so far every 200 ms while
/// the run goes (a long run's progress line).
pub fn run_observed(options: &Options, observe: impl Fn(&Tally) + Sync) -> Outcome {
    let mut rng = Rng::new(options.seed);
    let unix_s = crate::ids::now_ms() / 1000;
    let mut events: Vec<Event> = (0..options.events)
        .map(|i| {
            options
                .profile
                .event_signed(&mut rng, i, unix_s, &options.secret)
        })
        .collect();
    let real_events = events.len();
    let start = Instant::now();
    let deadline = start + options.deadline;
    let board = Board::lay_out(options, &mut events, &mut rng, unix_s, start);

    let shared: Shared = (Mutex::new(board), Condvar::new());
    let path = options.path();
    let finished = AtomicBool::new(false);
    std::thread::scope(|s| {
        if options.progress {
            s.spawn(|| report_progress(&shared, start, deadline));
        }
        s.spawn(|| {
            while !finished.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(200));
                let tally = lock(&shared).tally.clone();
                observe(&tally);
            }
        });
        let workers: Vec<_> = (0..options.concurrency.max(1))
            .map(|_| s.spawn(|| worker(&shared, options, &events, &path, deadline)))
            .collect();
        let panicked = workers.into_iter().find_map(|w| w.join().err());
        finished.store(true, Ordering::SeqCst);
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
    });
    let board = shared.0.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut acknowledged = vec![false; events.len()];
    let mut tally = board.tally;
    for d in &board.deliveries {
        if d.kind == Kind::Forged {
            continue;
        }
        acknowledged[d.event] |= d.acked;
        match (d.started, d.acked) {
            (true, false) => tally.unacknowledged += 1,
            (false, _) => tally.not_sent += 1,
            _ => {}
        }
    }
    events.truncate(real_events);
    acknowledged.truncate(real_events);
    Outcome {
        attempts: board.attempts,
        tally,
        events,
        acknowledged,
        elapsed: board.last_resolved.duration_since(start),
    }
}

fn report_progress(shared: &Shared, start: Instant, deadline: Instant) {
    let mut progress = Progress::new();
    let mut next = start + Duration::from_secs(1);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let (tally, waiting, done) = {
            let board = lock(shared);
            let now = Instant::now();
            let done = board.unresolved == 0 || now >= deadline && board.tally.in_flight == 0;
            // Retries waiting out a Retry-After or a backoff (first deliveries
            // not yet due don't count).
            let retries = board
                .queue
                .iter()
                .filter(|Reverse((_, _, _, attempt))| *attempt > 0);
            let next = retries
                .clone()
                .map(|Reverse((due, _, _, _))| due.saturating_duration_since(now))
                .min();
            (
                board.tally.clone(),
                Waiting {
                    count: retries.count(),
                    next,
                },
                done,
            )
        };
        if done {
            progress.finish(start.elapsed(), &tally, &waiting);
            return;
        }
        if Instant::now() >= next {
            progress.show(start.elapsed(), &tally, &waiting);
            next += Duration::from_secs(1);
        }
    }
}
