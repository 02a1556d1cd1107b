//! A worker's batched hit calls over the dynamic-module ABI: the core's
//! [`Root`] as [`NativeRoot`]. Which hooks leave together, the calls sent
//! for them and each hook's share of the answer are the core's
//! ([`ankusa_core::shell::batch_call`], [`ankusa_core::shell::batch`]).
//!
//! Envoy's module ABI has no per-worker context to send from: a callout
//! belongs to a stream (answered on its worker, cancelled if the stream is
//! destroyed first), or to the configuration (answered on the main thread).
//! So a batched call leaves from the stream of one of its own waiting hooks,
//! which is paused until the answer, and this worker's registry of live
//! streams finds every member's stream to answer it there. Should the
//! carrying stream end first, the call is answered as reset to the others
//! (they fall back as on any failed call) rather than left waiting.
#![deny(unsafe_code)]

use crate::abi::Answer;
use crate::host::{now_us, NativeHost, Runtime, NODE};
use crate::store;
use ankusa_core::hook::machine::Metric;
use ankusa_core::hook::settle::Queued;
use ankusa_core::shell::batch;
use ankusa_core::shell::batch_call::{self, Root};
use ankusa_core::wire::version::StoreWire;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

/// This worker's wake queue, as the core's batching names it: the module's
/// wakes go through a stream's scheduler, so one name serves every worker.
pub const WAKE_QUEUE: u32 = 1;

thread_local! {
    /// This worker's live streams that may take part in a batched call.
    static STREAMS: RefCell<HashMap<u32, Rc<NativeHost>>> = RefCell::new(HashMap::new());
    /// Batched calls in flight: (carrying stream, its callout id) → the core's token.
    static CARRIED: RefCell<HashMap<(u32, u64), u32>> = RefCell::new(HashMap::new());
    static TOKENS: Cell<u32> = const { Cell::new(0) };
}

/// Turns this worker's batching on (once a fleet configuration runs here).
pub fn init() {
    batch::init(Some(WAKE_QUEUE));
}

/// Stream `id` may take part in batched calls.
pub fn register(id: u32, host: Rc<NativeHost>) {
    STREAMS.with(|s| s.borrow_mut().insert(id, host));
}

/// Stream `id` is over: no batched call is sent from it or answered to it.
pub fn deregister(id: u32) {
    STREAMS.with(|s| s.borrow_mut().remove(&id));
}

/// The core's token of the batched call stream `id` carries as callout `callout`.
fn carried(id: u32, callout: u64) -> Option<u32> {
    CARRIED.with(|c| c.borrow_mut().remove(&(id, callout)))
}

/// Hands `answer` to the batched call stream `id` carried as callout
/// `callout`; false when it is no batched call.
pub fn answer(rt: &Rc<Runtime>, id: u32, callout: u64, answer: Answer) -> bool {
    let Some(token) = carried(id, callout) else {
        return false;
    };
    store::answering(answer, |len| {
        batch_call::on_call_answer(&NativeRoot(Rc::clone(rt)), token, len)
    })
}

/// Stream `id` ends: the batched calls it carries will never be answered
/// (Envoy cancels them), so their hooks are answered as on a reset now.
pub fn abandon(rt: &Rc<Runtime>, id: u32) {
    let tokens: Vec<u32> = CARRIED.with(|c| {
        let mut c = c.borrow_mut();
        let mine: Vec<(u32, u64)> = c.keys().filter(|(s, _)| *s == id).copied().collect();
        mine.iter().filter_map(|k| c.remove(k)).collect()
    });
    for token in tokens {
        store::answering(Answer::default(), |len| {
            batch_call::on_call_answer(&NativeRoot(Rc::clone(rt)), token, len)
        });
    }
}

/// The worker's wake ran (`queue`): its waiting hooks leave.
pub fn wake(rt: &Rc<Runtime>, queue: u32) {
    if batch::woken(queue) {
        batch_call::on_wake(&NativeRoot(Rc::clone(rt)));
    }
}

/// The root of one worker's batched calls.
pub struct NativeRoot(pub Rc<Runtime>);

impl Root for NativeRoot {
    type HookHost = Rc<NativeHost>;

    fn now_us(&self) -> u64 {
        now_us()
    }

    /// From the first member whose stream lives.
    fn send(&self, path: &str, body: &[u8], timeout_ms: u64, members: &[u32]) -> Option<u32> {
        let (id, host) = STREAMS.with(|s| {
            let s = s.borrow();
            members.iter().find_map(|id| {
                s.get(id)
                    .filter(|h| h.envoy().is_some())
                    .map(|h| (*id, Rc::clone(h)))
            })
        })?;
        let callout = host.call(path, body, timeout_ms)?;
        let token = TOKENS.with(|t| {
            let next = t.get().wrapping_add(1);
            t.set(next);
            next
        });
        CARRIED.with(|c| c.borrow_mut().insert((id, callout), token));
        Some(token)
    }

    fn riding_settles(&self) -> Vec<Queued> {
        self.0.riding()
    }

    fn settled(&self, settles: Vec<Queued>, ok: bool) {
        self.0.settled(settles, ok);
    }

    fn store_wire(&self) -> StoreWire {
        StoreWire::of_node(&*NODE)
    }

    fn store_refused(&self) {
        let version = StoreWire::refused(&*NODE, &self.0.worker.store_wire);
        self.0.metrics.apply(Metric::StoreWire(u64::from(version)));
    }

    fn call_answer(&self, body_size: usize) -> (Option<String>, Option<Vec<u8>>) {
        store::answer(body_size)
    }

    fn enter(&self, id: u32) -> Option<Rc<NativeHost>> {
        STREAMS.with(|s| s.borrow().get(&id).cloned())
    }
}
