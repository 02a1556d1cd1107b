//! Settling a hook's claim, and the bounds of the node-wide settle queue.
//!
//! A forwarded hook that holds a claim settles it once: promoted when the
//! upstream answered 2xx (under the upstream's own hook id if it reported an
//! older copy), released otherwise (a non-2xx, a reset, a sender gone). The
//! operations wait in a node-wide queue (an Envoy shared queue, FIFO,
//! unbounded), so its bound is a counter in shared data that every enqueue
//! and drain moves by compare-and-swap. A lease in shared data makes the
//! drains node-wide: at most one batch leaves every `settle_interval_ms`,
//! whichever worker ticks first, so batches grow with the load instead of
//! each worker sending its own trickle.

use crate::config::BreakerPolicy;
use crate::fleet::breaker::{Breaker, BreakerState};
use crate::hook::plan::committed_id;
use crate::node::cas::{read_u64, update_u64, CasStore};
use crate::node::edge_keys::{BREAKER_KEY, DEPTH_KEY, LEASE_KEY};
use crate::wire::version::StoreWire;
use crate::wire::{receipt, Claim, SettleOp, SettleRequest};
use serde::{Deserialize, Serialize};

/// What the upstream's response said about a hook that holds a claim.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpstreamAnswer<'a> {
    /// `:status`; None: no answer, the stream ended first.
    pub status: Option<&'a str>,
    /// `x-ankusa-hook-id`: the id of an older copy the upstream already held.
    pub hook_id: Option<&'a str>,
    /// `x-ankusa-receipt`: its proof that it stored the hook ([`receipt`]).
    pub receipt: Option<&'a str>,
}

/// The operation that settles `claim` once the upstream answered: promote
/// on a 2xx (under the upstream's id when it reported an older copy, with
/// its receipt when it sent a well-formed one), else release.
pub fn settle_op(claim: Claim, upstream: UpstreamAnswer<'_>) -> SettleOp {
    if answered_ok(upstream.status) {
        let hook_id = committed_id(&claim.hook_id, upstream.hook_id).to_string();
        let receipt = receipt::from_header(upstream.receipt);
        SettleOp::Promote {
            claim,
            hook_id,
            receipt,
        }
    } else {
        SettleOp::Release { claim }
    }
}

/// One queued operation and how many times a batch carrying it has failed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Queued {
    pub retries: u32,
    pub op: SettleOp,
}

/// What became of an operation offered to the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enqueued {
    /// Queued; the node-wide depth after it.
    Queued(u64),
    /// The queue is full (or unusable): dropped, to be counted.
    Dropped,
}

/// Claims a place in the bounded queue: Some(new depth), or None when full.
pub fn reserve(store: &impl CasStore, max: usize) -> Option<u64> {
    let max = u64::try_from(max).unwrap_or(u64::MAX);
    match update_u64(store, DEPTH_KEY, |n| (n < max).then_some(n + 1)) {
        Some(Ok(depth)) => Some(depth),
        Some(Err(_)) => None,
        // A CAS storm: admit it uncounted rather than drop a settle over contention.
        None => Some(read_u64(store, DEPTH_KEY).0),
    }
}

/// Gives back `n` places after a drain (or a failed enqueue); the depth left.
pub fn release_places(store: &impl CasStore, n: u64) -> u64 {
    match update_u64(store, DEPTH_KEY, |d| Some(d.saturating_sub(n))) {
        Some(Ok(depth)) | Some(Err(depth)) => depth,
        None => read_u64(store, DEPTH_KEY).0,
    }
}

/// Whether a batch may leave now; if so, the lease moves `interval_ms` ahead.
/// A lease further ahead than that is stale (the clock stepped back) and is
/// taken: see `crate::node::clock::lease_due`.
pub fn take_lease(store: &impl CasStore, now_ms: u64, interval_ms: u64) -> bool {
    let (next, version) = read_u64(store, LEASE_KEY);
    crate::node::clock::lease_due(next, now_ms, interval_ms)
        && store.compare_and_set(LEASE_KEY, &(now_ms + interval_ms).to_le_bytes(), version)
}

/// The request body for a batch, as a store of wire `store` may be sent it
/// (see [`SettleOp::for_store`]).
pub fn request_body(batch: &[Queued], store: StoreWire) -> Vec<u8> {
    let req = SettleRequest {
        ops: batch.iter().map(|q| q.op.for_store(store)).collect(),
    };
    serde_json::to_vec(&req).unwrap_or_default()
}

/// The store's wire as the node heard it, for a call carrying `ops`: read
/// only when some ride, so a call without any costs no shared-data read.
pub fn wire_for<S: CasStore + ?Sized>(store: &S, ops: &[Queued]) -> StoreWire {
    if ops.is_empty() {
        StoreWire::default()
    } else {
        StoreWire::of_node(store)
    }
}

/// After the store answered `status` to a call that carried `ops`, sent for
/// the store the node had heard then (`sent_for`): whether the answer says
/// the store is older than their receipts. A v0.1.0 store refuses any field
/// it doesn't know, and the whole call with it (400); the edge's own
/// requests are otherwise well-formed, so a 400 to a call that carried a
/// receipt is that. The caller then lowers the node's wire
/// ([`StoreWire::refused`]) and queues the operations again, as after any
/// failed call: they go without receipts next time.
pub fn refused_receipts(status: Option<&str>, ops: &[Queued], sent_for: StoreWire) -> bool {
    status == Some("400")
        && sent_for.sends(receipt::SINCE)
        && ops.iter().any(|q| {
            matches!(
                &q.op,
                SettleOp::Promote {
                    receipt: Some(_),
                    ..
                }
            )
        })
}

/// After a failed batch: the operations to queue again, and how many ran out of retries.
pub fn after_failure(batch: Vec<Queued>, max_retries: u32) -> (Vec<Queued>, u64) {
    let mut again = Vec::with_capacity(batch.len());
    let mut dropped = 0;
    for mut item in batch {
        item.retries += 1;
        if item.retries > max_retries {
            dropped += 1;
        } else {
            again.push(item);
        }
    }
    (again, dropped)
}

/// Whether this worker sends a settle batch now: it has none in flight (a
/// slow store makes batches bigger, not more), something is queued
/// (`depth`, the node's queue as read this tick: an idle node costs one
/// read per tick, not a lease write), the breaker is not open (operations
/// are held, within the same bound, until the store is back), and it took
/// the node-wide lease. `now_us` is read only past the first two.
pub fn drain_due<S: CasStore>(
    store: &S,
    batch_in_flight: bool,
    depth: u64,
    breaker: BreakerPolicy,
    now_us: impl FnOnce() -> u64,
    interval_ms: u64,
) -> bool {
    if batch_in_flight || depth == 0 {
        return false;
    }
    let now = now_us();
    if Breaker::new(store, BREAKER_KEY, breaker).state(now) == BreakerState::Open {
        return false;
    }
    take_lease(store, now / 1_000, interval_ms)
}

/// Whether the store took a background call (settle batch or reset): a 2xx.
pub fn answered_ok(status: Option<&str>) -> bool {
    status.is_some_and(|s| s.starts_with('2'))
}

pub mod held;
pub mod tick;

pub use tick::{tick_ms, MAX_TICK_MS};

#[cfg(test)]
mod tests;
