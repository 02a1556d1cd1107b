//! The root's side of a worker's micro-batched hits: the calls it sends for
//! the hooks parked in [`crate::batch`], and the answer it hands each of
//! them in its own context. See [`crate::batch`] for why the root sends them.

use crate::batch;
use crate::host::{perform, Host, ProxyHost};
use crate::runtime::{call_store, Runtime, HOST};
use crate::shared::now_us;
use ankusa_core::cas::read_u64;
use ankusa_core::edge_keys::DEPTH_KEY;
use ankusa_core::hook::batch::{split, with_settle};
use ankusa_core::hook::machine::{self, Flow, Step};
use ankusa_core::hook::settle::Queued;
use ankusa_core::wire_batch::HITS_PATH;
use proxy_wasm::hostcalls;
use std::rc::Rc;

/// `on_queue_ready` of the root: true if `queue` is the wake queue.
pub fn on_queue_ready(rt: &Rc<Runtime>, queue: u32) -> bool {
    let ours = batch::with(|s| s.wake == Some(queue));
    if !ours {
        return false;
    }
    while let Ok(Some(_)) = hostcalls::dequeue_shared_queue(queue) {}
    batch::with(|s| s.wake_pending = false);
    flush(rt);
    true
}

/// Sends every waiting hook (in calls of up to `MAX_BATCH`); those with too
/// little budget left are answered from the node.
fn flush(rt: &Rc<Runtime>) {
    loop {
        let now = now_us();
        let flush = batch::with(|s| s.batcher.flush(now));
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
            Ok(token) => batch::with(|s| {
                s.calls.insert(token, (call.members, settles));
            }),
            Err(_) => {
                crate::drain::settled(rt, settles, false);
                batch::with(|s| s.batcher.done(now));
                let mut counted = false;
                for id in call.members {
                    counted |= answer(rt, id, counted, now, |m, env, now| {
                        m.on_dispatch_failed(env, now)
                    });
                }
            }
        }
        if batch::with(|s| s.batcher.waiting()) == 0 {
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

/// `on_http_call_response` of the root: true if `token` is a batched call.
pub fn on_call_answer(rt: &Rc<Runtime>, token: u32, body_size: usize) -> bool {
    let Some((members, settles)) = batch::with(|s| s.calls.remove(&token)) else {
        return false;
    };
    let host = ProxyHost(Rc::clone(rt));
    // One clock read answers every hook of the call.
    let now = host.now_us();
    batch::with(|s| s.batcher.done(now));
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
    let Some(mut parked) = batch::with(|s| s.parked.remove(&id)) else {
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
    batch::with(|s| s.parked.insert(id, parked));
    if flow == Flow::Continue {
        host.resume();
    }
    true
}
