//! A root context's background calls: settle batches off the node-wide
//! queue, each tick; and their answers. (A reload resets only node buckets:
//! `/v1/reset` is an operator's call, see `ankusa_core::node::reload`.)
//! When a batch may leave, and what a failed one becomes, is the core's
//! ([`ankusa_core::hook::settle`]).

use crate::runtime::{call_store, Runtime, SHARED};
use crate::settle;
use crate::shared::now_us;
use ankusa_core::hook::machine::Metric;
use ankusa_core::hook::settle::{
    after_failure, answered_ok, drain_due, refused_receipts, request_body, Queued,
};
use ankusa_core::node::cas::read_u64;
use ankusa_core::node::edge_keys::DEPTH_KEY;
use ankusa_core::wire::version::StoreWire;
use ankusa_core::wire::SETTLE_PATH;
use std::collections::HashMap;

/// A settle batch may take longer than one hit: it carries up to
/// `settle_batch_max` operations and nobody waits on it.
pub const BACKGROUND_TIMEOUT_MS: u64 = 2_000;

/// A background call in flight.
enum Background {
    /// A settle batch, and the store's wire it was written for.
    Settle(Vec<Queued>, StoreWire),
}

/// The background calls in flight from one root context.
#[derive(Default)]
pub struct Drainer {
    inflight: HashMap<u32, Background>,
    /// The node's queue held operations when this root last read it.
    queued: bool,
}

impl Drainer {
    /// One tick: a settle batch leaves if one is due.
    pub fn tick(&mut self, rt: &Runtime) {
        self.drain(rt);
    }

    fn drain(&mut self, rt: &Runtime) {
        let fleet = &rt.config().fleet;
        let Some(queue_id) = rt.queue_id else { return };
        let in_flight = self.in_flight();
        let depth = read_u64(&SHARED, DEPTH_KEY).0;
        self.queued = depth > 0;
        if !drain_due(
            &SHARED,
            in_flight,
            depth,
            fleet.breaker,
            now_us,
            fleet.settle_interval_ms,
        ) {
            return;
        }
        let (batch, garbage) = settle::dequeue_batch(&SHARED, queue_id, fleet.settle_batch_max);
        rt.metrics.settle_dropped(garbage);
        if batch.is_empty() {
            return;
        }
        let depth = read_u64(&SHARED, DEPTH_KEY).0;
        self.queued = depth > 0;
        rt.metrics.settle_depth(depth);
        // Written for the store as the node hears it now, not as it was
        // when each operation was queued (a receipt only to wire 2).
        let wire = StoreWire::of_node(&SHARED);
        let body = request_body(&batch, wire);
        match call(rt, SETTLE_PATH, &body) {
            Some(token) => {
                self.inflight.insert(token, Background::Settle(batch, wire));
            }
            None => settled(rt, batch, false),
        }
    }

    /// The store's answer (`status`) to the background call `token`, if it is ours.
    pub fn answered(&mut self, rt: &Runtime, token: u32, status: Option<&str>) {
        let Some(background) = self.inflight.remove(&token) else {
            return;
        };
        let ok = answered_ok(status);
        match background {
            Background::Settle(batch, wire) => {
                if refused_receipts(status, &batch, wire) {
                    // An older store: the batch goes again without receipts.
                    let version = StoreWire::refused(&SHARED, &rt.worker.store_wire);
                    rt.metrics.apply(Metric::StoreWire(u64::from(version)));
                }
                settled(rt, batch, ok)
            }
        }
    }

    /// Whether a settle batch of this root is in flight.
    pub fn in_flight(&self) -> bool {
        self.inflight
            .values()
            .any(|b| matches!(b, Background::Settle(..)))
    }

    /// Whether the node's queue held operations when this root last read it.
    pub fn queued(&self) -> bool {
        self.queued
    }

    /// Whether `token` is one of this context's calls.
    pub fn owns(&self, token: u32) -> bool {
        self.inflight.contains_key(&token)
    }
}

fn call(rt: &Runtime, path: &str, body: &[u8]) -> Option<u32> {
    call_store(&rt.config().fleet, path, body, BACKGROUND_TIMEOUT_MS).ok()
}

/// A batch's fate: counted, and on failure queued again or dropped.
pub(crate) fn settled(rt: &Runtime, batch: Vec<Queued>, ok: bool) {
    rt.metrics.settle_batch(ok);
    if ok {
        return;
    }
    let (again, dropped) = after_failure(batch, rt.config().fleet.settle_retries);
    rt.metrics.settle_dropped(dropped);
    for item in again {
        rt.settle(item);
    }
}
