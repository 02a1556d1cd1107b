//! One worker's micro-batched fleet hits: the host glue around
//! [`crate::hook::batch`], which decides.
//!
//! A hook whose worker has no hit call in flight sends its own call from its
//! own context, as before. A hook that arrives while one is in flight parks
//! its state machine here, keyed by its context id, and waits paused. When
//! the call in flight is answered, the waiting hooks leave as one call
//! dispatched by the root context: Envoy owns every callout by the root
//! context, but the SDK hands the answer to the context that was active when
//! it left, and drops it if that context is gone; a call the root sends
//! comes back to the root, whichever hooks went away meanwhile. A hook's own
//! callback can't act as the root, so it wakes the root through a shared
//! queue of this worker's own (`on_queue_ready`, one event-loop turn later).
//!
//! The root answers each hook by its context id: it makes the hook's
//! context the effective one, feeds the hook's share of the answer to its
//! machine, performs the effects there, and resumes it. The machine stays
//! parked until the hook's context takes it back on its next callback.

use crate::hook::batch::{Batcher, Submitted, Waiting};
use crate::hook::machine;
use crate::hook::settle::Queued;
use crate::shell::host::Host;
use crate::wire::version::StoreWire;
use std::cell::RefCell;
use std::collections::HashMap;

/// A parked machine: waiting for (or riding in) a batched call, or answered
/// and waiting for its context to take it back.
pub(crate) struct Parked {
    pub machine: machine::Hook,
    pub answered: bool,
}

/// A batched call in flight.
pub(crate) struct Sent {
    pub path: &'static str,
    /// The context ids of its hooks, in order.
    pub members: Vec<u32>,
    /// The settle operations riding on it, and the store's wire they were
    /// written for.
    pub settles: Vec<Queued>,
    pub settles_for: StoreWire,
}

#[derive(Default)]
pub(crate) struct State {
    pub batcher: Batcher,
    pub parked: HashMap<u32, Parked>,
    /// Batched calls in flight, by token.
    pub calls: HashMap<u32, Sent>,
    /// This worker's wake queue (None: batching is off, every hook calls alone).
    pub wake: Option<u32>,
    pub wake_pending: bool,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Turns batching on with `queue`, this worker's wake queue (a name no
/// other worker uses; see the shell's root). Without one, every hook sends
/// its own call.
pub fn init(queue: Option<u32>) {
    STATE.with(|s| s.borrow_mut().wake = queue);
}

/// Whether `queue` is this worker's wake queue; if so the wake is taken.
pub fn woken(queue: u32) -> bool {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        let ours = s.wake == Some(queue);
        if ours {
            s.wake_pending = false;
        }
        ours
    })
}

/// A hook (context `id`) wants to send `body` within `timeout_ms`.
pub fn submit<H: Host>(host: &H, id: u32, body: &[u8], timeout_ms: u64) -> Submitted {
    let now_us = host.now_us();
    let (submitted, wakes) = STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.wake.is_none() {
            return (Submitted::SendNow, false);
        }
        let submitted = s.batcher.submit(Waiting {
            id,
            body: body.to_vec(),
            arrived_us: now_us,
            budget_ms: timeout_ms,
        });
        (
            submitted,
            submitted.wakes_root(s.batcher.in_flight(), s.wake_pending),
        )
    });
    if wakes {
        wake(host);
    }
    submitted
}

/// A hook's own call was answered, refused, or will never be answered.
pub fn own_call_done<H: Host>(host: &H) {
    let waiting = STATE.with(|s| s.borrow_mut().batcher.done(host.now_us()));
    if waiting {
        wake(host);
    }
}

/// Wakes the root (once until it runs): a hook's own callback can't act as
/// the root, so it queues a wake the root reads one event-loop turn later.
fn wake<H: Host>(host: &H) {
    let queue = STATE.with(|s| {
        let s = s.borrow();
        s.wake.filter(|_| !s.wake_pending)
    });
    if let Some(queue) = queue {
        let queued = host.wake_root(queue);
        STATE.with(|s| s.borrow_mut().wake_pending = queued);
    }
}

/// Parks a waiting hook's machine.
pub fn park(id: u32, machine: machine::Hook) {
    STATE.with(|s| {
        s.borrow_mut().parked.insert(
            id,
            Parked {
                machine,
                answered: false,
            },
        )
    });
}

/// The machine of a hook still waiting, to feed it an event of its own
/// stream (the rest of its body); [`park`] it again after.
pub fn take_waiting(id: u32) -> Option<machine::Hook> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.parked.get(&id).is_some_and(|p| !p.answered) {
            return s.parked.remove(&id).map(|p| p.machine);
        }
        None
    })
}

/// The hook's machine, once answered.
pub fn reclaim(id: u32) -> Option<machine::Hook> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.parked.get(&id).is_some_and(|p| p.answered) {
            return s.parked.remove(&id).map(|p| p.machine);
        }
        None
    })
}

/// The hook's stream ended: its machine, answered or not; a waiting hook
/// leaves the queue and a call in flight answers it no more.
pub fn forget(id: u32) -> Option<machine::Hook> {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        s.batcher.forget(id);
        s.parked.remove(&id).map(|p| p.machine)
    })
}

/// This worker's batching state, for the root's sender ([`crate::shell::batch_call`]).
pub(crate) fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    STATE.with(|s| f(&mut s.borrow_mut()))
}
