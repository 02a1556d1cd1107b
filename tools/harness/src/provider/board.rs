//! The board every sender shares: each delivery of the run (first ones,
//! redeliveries, forgeries), one time-ordered queue of the attempts due,
//! and the tally so far.

use super::options::Options;
use super::profile::{Event, Forgery};
use super::report::Tally;
use crate::ids::Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The board and the signal that something on it changed.
pub(super) type Shared = (Mutex<Board>, Condvar);

/// One attempt of a real delivery: when it started and how it ended.
#[derive(Clone, Copy, Debug)]
pub struct Attempt {
    /// From the start of the run.
    pub started: Duration,
    /// Until the answer (or the transport error).
    pub took: Duration,
    /// The status, `None` when no HTTP answer came.
    pub status: Option<u16>,
}

/// Why a delivery of an event was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    First,
    /// Sent once the first delivery was acknowledged (a provider's manual or
    /// timeout-driven redelivery).
    AfterAck,
    /// Sent at the same moment as the first, to another edge (two provider
    /// workers racing).
    Concurrent,
    /// A forgery of the event: sent once, never retried, must be refused 401.
    Forged,
}

#[derive(Debug)]
pub(super) struct Delivery {
    pub(super) event: usize,
    pub(super) edge: usize,
    pub(super) kind: Kind,
    pub(super) started: bool,
    pub(super) acked: bool,
    /// Done, one way or another: acknowledged, given up, or never to be sent.
    pub(super) resolved: bool,
}

/// Everything the workers share, under one mutex.
pub(super) struct Board {
    pub(super) queue: BinaryHeap<Reverse<(Instant, u64, usize, u32)>>,
    pub(super) deliveries: Vec<Delivery>,
    /// The `AfterAck` delivery of each event, if it has one.
    pub(super) follow_up: Vec<Option<usize>>,
    pub(super) unresolved: usize,
    pub(super) order: u64,
    pub(super) tally: Tally,
    pub(super) rng: Rng,
    pub(super) last_resolved: Instant,
    /// When the run started.
    pub(super) start: Instant,
    pub(super) attempts: Vec<Attempt>,
}

impl Board {
    /// Lays out every delivery of `events`: first deliveries due at
    /// `options.rate` from `start`, round the edges; redeliveries to another
    /// edge, alongside or after the first; forgeries (appended to `events`)
    /// due with the event each copies. `rng` draws which, after signing.
    pub(super) fn lay_out(
        options: &Options,
        events: &mut Vec<Event>,
        rng: &mut Rng,
        unix_s: u64,
        start: Instant,
    ) -> Board {
        let real_events = events.len();
        let edges = options.edges.len().max(1);
        let mut board = Board {
            queue: BinaryHeap::new(),
            deliveries: Vec::new(),
            follow_up: vec![None; events.len()],
            unresolved: 0,
            order: 0,
            tally: Tally::default(),
            rng: Rng::new(rng.next_u64()),
            last_resolved: start,
            start,
            attempts: Vec::new(),
        };
        for event in 0..events.len() {
            let due = start + Duration::from_secs_f64(event as f64 / options.rate);
            let edge = event % edges;
            board.deliveries.push(Delivery {
                event,
                edge,
                kind: Kind::First,
                started: false,
                acked: false,
                resolved: false,
            });
            board.push(due, board.deliveries.len() - 1, 0);
            if rng.next_f64() < options.redeliver {
                let other = if edges > 1 {
                    (edge + 1 + rng.below(edges as u64 - 1) as usize) % edges
                } else {
                    edge
                };
                let kind = if rng.next_f64() < options.concurrent {
                    Kind::Concurrent
                } else {
                    Kind::AfterAck
                };
                board.deliveries.push(Delivery {
                    event,
                    edge: other,
                    kind,
                    started: false,
                    acked: false,
                    resolved: false,
                });
                let index = board.deliveries.len() - 1;
                match kind {
                    Kind::Concurrent => board.push(due, index, 0),
                    _ => board.follow_up[event] = Some(index),
                }
            }
        }
        board.tally.events = real_events as u64;
        board.tally.redeliveries = (board.deliveries.len() - real_events) as u64;
        // Forgeries go after the real events in `events`, each due with the event it copies.
        if options.forge > 0.0 {
            let mut forge_rng = Rng::new(rng.next_u64());
            for event in 0..real_events {
                if forge_rng.next_f64() >= options.forge {
                    continue;
                }
                let how = Forgery::ALL[forge_rng.below(Forgery::ALL.len() as u64) as usize];
                let forged = options
                    .profile
                    .forge(&events[event], &options.secret, unix_s, how);
                events.push(forged);
                board.deliveries.push(Delivery {
                    event: events.len() - 1,
                    edge: forge_rng.below(edges as u64) as usize,
                    kind: Kind::Forged,
                    started: false,
                    acked: false,
                    resolved: false,
                });
                let due = start + Duration::from_secs_f64(event as f64 / options.rate);
                board.push(due, board.deliveries.len() - 1, 0);
            }
        }
        board.unresolved = board.deliveries.len();
        board
    }

    pub(super) fn push(&mut self, due: Instant, delivery: usize, attempt: u32) {
        self.order += 1;
        self.queue
            .push(Reverse((due, self.order, delivery, attempt)));
    }

    pub(super) fn resolve(&mut self, delivery: usize, now: Instant) {
        if !self.deliveries[delivery].resolved {
            self.deliveries[delivery].resolved = true;
            self.unresolved -= 1;
            self.last_resolved = now;
        }
    }
}

pub(super) fn lock(shared: &Shared) -> MutexGuard<'_, Board> {
    shared.0.lock().unwrap_or_else(|p| p.into_inner())
}
