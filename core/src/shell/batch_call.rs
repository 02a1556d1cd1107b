//! The root's side of a worker's micro-batched hits: the calls it sends for
//! the hooks parked in [`crate::shell::batch`], and the answer it hands each of
//! them in its own context. See [`crate::shell::batch`] for why the root sends them.
//!
//! What the root needs of its host is the [`Root`] trait: Envoy through
//! proxy-wasm (the filter's `ProxyRoot`), or the filter tests' mock, so
//! batching is unit-tested without Envoy too.

use crate::hook::batch::{split, with_settle};
use crate::hook::machine::{self, Flow, Step};
use crate::hook::settle::{refused_receipts, Queued};
use crate::shell::batch;
use crate::shell::host::{perform, Host};
use crate::wire::version::StoreWire;
use std::rc::Rc;

/// What the root's batched calls need of the host.
pub trait Root {
    /// The host a parked hook's step is performed on.
    type HookHost: Host;
    fn now_us(&self) -> u64;
    /// Sends a batched call for the hooks of streams `members` (a shell
    /// whose calls belong to a stream sends it from one of theirs); its
    /// token, or None when the host refused it.
    fn send(&self, path: &str, body: &[u8], timeout_ms: u64, members: &[u32]) -> Option<u32>;
    /// Settle operations to ride on a call: this worker's own first, then
    /// any waiting in the node's queue, `settle_batch_max` at most.
    fn riding_settles(&self) -> Vec<Queued>;
    /// The riding settles' fate: counted, and on failure held again or dropped.
    fn settled(&self, settles: Vec<Queued>, ok: bool);
    /// The store's wire version as the node last heard it: what riding
    /// settles may carry.
    fn store_wire(&self) -> StoreWire;
    /// The store refused a call for the receipts it carried: the node and
    /// this worker take it as wire 1 ([`StoreWire::refused`]), reported.
    fn store_refused(&self);
    /// The answer of the call being answered: `:status` and body.
    fn call_answer(&self, body_size: usize) -> (Option<String>, Option<Vec<u8>>);
    /// Hook `id`'s context made the effective one, and its host (None: gone).
    fn enter(&self, id: u32) -> Option<Self::HookHost>;
}

/// The root is woken (its wake queue was read): the waiting hooks leave.
pub fn on_wake<R: Root>(root: &R) {
    flush(root);
}

/// Sends every waiting hook (in calls of up to `MAX_BATCH`); those with too
/// little budget left are answered from the node.
fn flush<R: Root>(root: &R) {
    loop {
        let now = root.now_us();
        let flush = batch::with(|s| s.batcher.flush(now));
        for id in flush.expired {
            answer(root, id, true, now, |m, env, now| {
                m.on_dispatch_failed(env, now)
            });
        }
        let Some(call) = flush.call else {
            break;
        };
        let settles = root.riding_settles();
        let settles_for = if settles.is_empty() {
            StoreWire::default()
        } else {
            root.store_wire()
        };
        let (path, body) = with_settle(call.path, call.body, &settles, settles_for);
        match root.send(path, &body, call.timeout_ms, &call.members) {
            Some(token) => batch::with(|s| {
                let sent = batch::Sent {
                    path,
                    members: call.members,
                    settles,
                    settles_for,
                };
                s.calls.insert(token, sent);
            }),
            None => {
                root.settled(settles, false);
                batch::with(|s| s.batcher.done(now));
                let mut counted = false;
                for id in call.members {
                    counted |= answer(root, id, counted, now, |m, env, now| {
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

/// `on_http_call_response` of the root: true if `token` is a batched call.
pub fn on_call_answer<R: Root>(root: &R, token: u32, body_size: usize) -> bool {
    let Some(sent) = batch::with(|s| s.calls.remove(&token)) else {
        return false;
    };
    let batch::Sent {
        path,
        members,
        settles,
        settles_for,
    } = sent;
    // One clock read answers every hook of the call.
    let now = root.now_us();
    batch::with(|s| s.batcher.done(now));
    let (status, body) = root.call_answer(body_size);
    if refused_receipts(status.as_deref(), &settles, settles_for) {
        // An older store: they go again without their receipts.
        root.store_refused();
    }
    let (shares, settled) = split(path, members.len(), status.as_deref(), body.as_deref());
    if !settles.is_empty() {
        let ok = settled == Some(settles.len());
        root.settled(settles, ok);
    }
    let mut counted = false;
    for (id, share) in members.into_iter().zip(shares) {
        counted |= answer(root, id, counted, now, |m, env, now| {
            m.on_store_reply(env, share, now)
        });
    }
    flush(root);
    true
}

/// Runs `event` on hook `id`'s parked machine in its own context and
/// performs the step there at `now` (µs); `shared`: the breaker counted this
/// call already. False when the hook is gone.
fn answer<R: Root>(
    root: &R,
    id: u32,
    shared: bool,
    now: u64,
    event: impl FnOnce(&mut machine::Hook, &machine::Env<'_, <R::HookHost as Host>::Store>, u64) -> Step,
) -> bool {
    let Some(mut parked) = batch::with(|s| s.parked.remove(&id)) else {
        return false;
    };
    let Some(host) = root.enter(id) else {
        return false;
    };
    if shared {
        parked.machine.share_call();
    }
    let step = event(&mut parked.machine, &host.env(), now);
    let flow = perform(&host, &mut parked.machine, step);
    parked.answered = true;
    batch::with(|s| s.parked.insert(id, parked));
    if flow == Flow::Continue {
        host.resume();
    }
    true
}

/// A shared root is the root.
impl<R: Root> Root for Rc<R> {
    type HookHost = R::HookHost;

    fn now_us(&self) -> u64 {
        R::now_us(self)
    }

    fn send(&self, path: &str, body: &[u8], timeout_ms: u64, members: &[u32]) -> Option<u32> {
        R::send(self, path, body, timeout_ms, members)
    }

    fn riding_settles(&self) -> Vec<Queued> {
        R::riding_settles(self)
    }

    fn settled(&self, settles: Vec<Queued>, ok: bool) {
        R::settled(self, settles, ok)
    }

    fn store_wire(&self) -> StoreWire {
        R::store_wire(self)
    }

    fn store_refused(&self) {
        R::store_refused(self)
    }

    fn call_answer(&self, body_size: usize) -> (Option<String>, Option<Vec<u8>>) {
        R::call_answer(self, body_size)
    }

    fn enter(&self, id: u32) -> Option<Self::HookHost> {
        R::enter(self, id)
    }
}
