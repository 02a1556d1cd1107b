//! A root's settle batches: off the node's queue each tick when one is due,
//! and their answers. When a batch may leave and what a failed one becomes
//! are [`crate::hook::settle`]'s; here are the call and the counting, for
//! every shell ([`Background`]).

use crate::hook::machine::Metric;
use crate::hook::settle::{
    after_failure, answered_ok, drain_due, refused_receipts, request_body, Queued,
};
use crate::hook::worker::Worker;
use crate::node::cas::read_u64;
use crate::node::edge_keys::DEPTH_KEY;
use crate::shell::background::Background;
use crate::shell::metrics::{Metrics, Stats};
use crate::wire::version::StoreWire;
use crate::wire::SETTLE_PATH;
use std::collections::HashMap;

/// A settle batch may take longer than one hit: it carries up to
/// `settle_batch_max` operations and nobody waits on it.
pub const BACKGROUND_TIMEOUT_MS: u64 = 2_000;

/// The settle batches in flight from one root, and what each was written for.
#[derive(Default, Debug)]
pub struct Drainer {
    inflight: HashMap<u64, (Vec<Queued>, StoreWire)>,
    /// The node's queue held operations when this root last read it.
    queued: bool,
    /// Batches this root may have in flight at once (0: one, the default).
    parallel: usize,
}

impl Drainer {
    /// A root that is the node's only one (the native module's) sends up to
    /// `parallel` batches at once, as that many wasm workers' roots would;
    /// the node's lease still paces them to one per settle interval.
    pub fn parallel(parallel: usize) -> Drainer {
        Drainer {
            parallel,
            ..Drainer::default()
        }
    }

    /// Whether this root may send no batch now: as many as it may are in flight.
    fn busy(&self) -> bool {
        self.inflight.len() >= self.parallel.max(1)
    }

    /// One tick: a settle batch leaves if one is due.
    pub fn tick<B: Background>(&mut self, host: &B) {
        let fleet = &host.config().fleet;
        let store = host.store();
        let depth = read_u64(store, DEPTH_KEY).0;
        self.queued = depth > 0;
        let now_us = || host.now_us();
        let due = drain_due(
            store,
            self.busy(),
            depth,
            fleet.breaker,
            now_us,
            fleet.settle_interval_ms,
        );
        if !due {
            return;
        }
        let batch = host.dequeue(fleet.settle_batch_max);
        if batch.is_empty() {
            return;
        }
        let depth = read_u64(store, DEPTH_KEY).0;
        self.queued = depth > 0;
        host.metrics().settle_depth(depth);
        // Written for the store as the node hears it now, not as it was
        // when each operation was queued (a receipt only to wire 2).
        let wire = StoreWire::of_node(store);
        let body = request_body(&batch, wire);
        match host.call(SETTLE_PATH, Some(&body), BACKGROUND_TIMEOUT_MS) {
            Ok(token) => {
                self.inflight.insert(token, (batch, wire));
            }
            Err(_) => settled(host, batch, false),
        }
    }

    /// The store's answer (`status`) to call `token`, if it is one of this
    /// root's batches (false: not ours). `worker`: whose view of the
    /// store's wire a refusal updates.
    pub fn answered<B: Background>(
        &mut self,
        host: &B,
        worker: &Worker,
        token: u64,
        status: Option<&str>,
    ) -> bool {
        let Some((batch, wire)) = self.inflight.remove(&token) else {
            return false;
        };
        if refused_receipts(status, &batch, wire) {
            // An older store: the batch goes again without receipts.
            let version = StoreWire::refused(host.store(), &worker.store_wire);
            host.metrics().apply(Metric::StoreWire(u64::from(version)));
        }
        settled(host, batch, answered_ok(status));
        true
    }

    /// Whether a settle batch of this root is in flight.
    pub fn in_flight(&self) -> bool {
        !self.inflight.is_empty()
    }

    /// Whether the node's queue held operations when this root last read it.
    pub fn queued(&self) -> bool {
        self.queued
    }
}

/// A batch's fate: counted, and on failure queued again or dropped.
pub fn settled<B: Background>(host: &B, batch: Vec<Queued>, ok: bool) {
    let retries = host.config().fleet.settle_retries;
    settled_with(host.metrics(), retries, batch, ok, |item| {
        host.requeue(item)
    });
}

/// [`settled`] for a shell that holds no [`Background`] where the batch
/// came back (a hit call's riding operations): `requeue` queues one again.
pub fn settled_with<S: Stats>(
    metrics: &Metrics<S>,
    retries: u32,
    batch: Vec<Queued>,
    ok: bool,
    mut requeue: impl FnMut(Queued),
) {
    metrics.settle_batch(ok);
    if ok {
        return;
    }
    let (again, dropped) = after_failure(batch, retries);
    metrics.settle_dropped(dropped);
    for item in again {
        requeue(item);
    }
}
