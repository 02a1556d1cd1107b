//! One worker's micro-batched fleet hits: the host glue around
//! [`ankusa_core::hook::batch`], which decides.
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

use crate::host::{Host, ProxyHost};
use crate::http::perform;
use crate::runtime::{call_store, Runtime, HOST};
use crate::shared::now_us;
use ankusa_core::cas::read_u64;
use ankusa_core::edge_keys::DEPTH_KEY;
use ankusa_core::hook::batch::{split, with_settle, Batcher, Submitted, Waiting};
use ankusa_core::hook::machine::{self, Flow, Step};
use ankusa_core::hook::settle::Queued;
use ankusa_core::wire_batch::HITS_PATH;
use proxy_wasm::hostcalls;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// A parked machine: waiting for (or riding in) a batched call, or answered
/// and waiting for its context to take it back.
struct Parked {
    machine: machine::Hook,
    answered: bool,
}

#[derive(Default)]
struct State {
    batcher: Batcher,
    parked: HashMap<u32, Parked>,
    /// Batched calls in flight: token → the context ids of their hooks, in
    /// order, and the settle operations riding on the call.
    calls: HashMap<u32, (Vec<u32>, Vec<Queued>)>,
    /// This worker's wake queue (None: batching is off, every hook calls alone).
    wake: Option<u32>,
    wake_pending: bool,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Registers this worker's wake queue (a name no other worker uses).
/// Without one, every hook sends its own call as before.
pub fn init(random: [u8; 10]) {
    let name = hex::encode(random);
    let queue = hostcalls::register_shared_queue(&format!("ankusa.hits.{name}")).ok();
    STATE.with(|s| s.borrow_mut().wake = queue);
}

/// A hook (context `id`) wants to send `body` within `timeout_ms`.
pub fn submit(id: u32, body: &[u8], timeout_ms: u64) -> Submitted {
    let submitted = STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.wake.is_none() {
            return Submitted::SendNow;
        }
        s.batcher.submit(Waiting {
            id,
            body: body.to_vec(),
            arrived_us: now_us(),
            budget_ms: timeout_ms,
        })
    });
    // A full queue leaves now; so does a queue with no call in flight to
    // wait for (a wake that could not be queued earlier).
    let idle = STATE.with(|s| {
        let s = s.borrow();
        s.batcher.in_flight() == 0 && !s.wake_pending
    });
    if submitted == Submitted::QueuedFlush || (submitted == Submitted::Queued && idle) {
        wake();
    }
    submitted
}

/// A hook's own call was answered, refused, or will never be answered.
pub fn own_call_done() {
    let waiting = STATE.with(|s| s.borrow_mut().batcher.done(now_us()));
    if waiting {
        wake();
    }
}

fn wake() {
    STATE.with(|s| {
        let mut s = s.borrow_mut();
        if s.wake_pending {
            return;
        }
        if let Some(queue) = s.wake {
            s.wake_pending = hostcalls::enqueue_shared_queue(queue, Some(b"w")).is_ok();
        }
    });
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

/// `on_queue_ready` of the root: true if `queue` is the wake queue.
pub fn on_queue_ready(rt: &Rc<Runtime>, queue: u32) -> bool {
    let ours = STATE.with(|s| s.borrow().wake == Some(queue));
    if !ours {
        return false;
    }
    while let Ok(Some(_)) = hostcalls::dequeue_shared_queue(queue) {}
    STATE.with(|s| s.borrow_mut().wake_pending = false);
    flush(rt);
    true
}

/// Sends every waiting hook (in calls of up to `MAX_BATCH`); those with too
/// little budget left are answered from the node.
fn flush(rt: &Rc<Runtime>) {
    loop {
        let now = now_us();
        let flush = STATE.with(|s| s.borrow_mut().batcher.flush(now));
        for id in flush.expired {
            answer(rt, id, true, now, |m, env, now| {
                m.on_dispatch_failed(env, now)
            });
        }
        let Some(call) = flush.call else {
            break;
        };
        let settles = riding_settles(rt, call.path);
        let body = with_settle(call.body, &settles);
        match call_store(&rt.config.fleet, call.path, &body, call.timeout_ms) {
            Ok(token) => STATE.with(|s| {
                s.borrow_mut().calls.insert(token, (call.members, settles));
            }),
            Err(_) => {
                crate::drain::settled(rt, settles, false);
                STATE.with(|s| s.borrow_mut().batcher.done(now));
                let mut counted = false;
                for id in call.members {
                    counted |= answer(rt, id, counted, now, |m, env, now| {
                        m.on_dispatch_failed(env, now)
                    });
                }
            }
        }
        if STATE.with(|s| s.borrow().batcher.waiting()) == 0 {
            break;
        }
    }
}

/// Settle operations ride on a batched call (`/v1/hits`), up to
/// `settle_batch_max`: this worker's own first, then any waiting in the
/// node's queue. The store applies them in the same pipelines, and the
/// tick's drainer finds fewer to send alone.
fn riding_settles(rt: &Runtime, path: &str) -> Vec<Queued> {
    if path != HITS_PATH {
        return Vec::new();
    }
    let max = rt.config.fleet.settle_batch_max;
    let mut batch = rt.take_pending(max);
    let Some(queue_id) = rt.queue_id else {
        return batch;
    };
    let (queued, garbage) = crate::settle::dequeue_batch(&HOST, queue_id, max - batch.len());
    rt.metrics.settle_dropped(garbage);
    if !queued.is_empty() {
        rt.metrics.settle_depth(read_u64(&HOST, DEPTH_KEY).0);
    }
    batch.extend(queued);
    batch
}

/// Whether this worker has a hit call in flight or hooks waiting for one.
pub fn busy() -> bool {
    STATE.with(|s| {
        let s = s.borrow();
        s.batcher.in_flight() > 0 || s.batcher.waiting() > 0
    })
}

/// `on_http_call_response` of the root: true if `token` is a batched call.
pub fn on_call_answer(rt: &Rc<Runtime>, token: u32, body_size: usize) -> bool {
    let Some((members, settles)) = STATE.with(|s| s.borrow_mut().calls.remove(&token)) else {
        return false;
    };
    let host = ProxyHost(Rc::clone(rt));
    // One clock read answers every hook of the call.
    let now = host.now_us();
    STATE.with(|s| s.borrow_mut().batcher.done(now));
    let (status, body) = host.call_answer(body_size);
    let (shares, settled) = split(members.len(), status.as_deref(), body.as_deref());
    if !settles.is_empty() {
        let ok = settled == Some(settles.len());
        crate::drain::settled(rt, settles, ok);
    }
    let mut counted = false;
    for (id, share) in members.into_iter().zip(shares) {
        counted |= answer(rt, id, counted, now, |m, env, now| {
            m.on_store_reply(env, share, now)
        });
    }
    flush(rt);
    true
}

/// Runs `event` on hook `id`'s parked machine in its own context and
/// performs the step there at `now` (µs); `shared`: the breaker counted this
/// call already. False when the hook is gone.
fn answer(
    rt: &Rc<Runtime>,
    id: u32,
    shared: bool,
    now: u64,
    event: impl FnOnce(&mut machine::Hook, &machine::Env<'_, crate::shared::HostStore>, u64) -> Step,
) -> bool {
    let Some(mut parked) = STATE.with(|s| s.borrow_mut().parked.remove(&id)) else {
        return false;
    };
    if hostcalls::set_effective_context(id).is_err() {
        return false;
    }
    if shared {
        parked.machine.share_call();
    }
    let host = ProxyHost(Rc::clone(rt));
    let step = event(&mut parked.machine, &host.env(), now);
    let flow = perform(&host, &mut parked.machine, step);
    parked.answered = true;
    STATE.with(|s| s.borrow_mut().parked.insert(id, parked));
    if flow == Flow::Continue {
        host.resume();
    }
    true
}
