//! Settling claims off the request path: a node-wide queue of promote and
//! release operations, drained in batches by the root contexts' ticks.
//!
//! The queue is an Envoy shared queue (node-wide, FIFO, unbounded), so its
//! bound is a counter in shared data that every enqueue and drain moves by
//! compare-and-swap. A lease in shared data makes the drains node-wide: at
//! most one batch leaves every `settle_interval_ms`, whichever worker ticks
//! first, so batches grow with the load instead of each worker sending its own
//! trickle.

use crate::shared::{read_u64, update_u64};
use ankusa_core::cas::CasStore;
use ankusa_core::wire::{SettleOp, SettleRequest};
use proxy_wasm::hostcalls;
use serde::{Deserialize, Serialize};

/// The shared queue's name (one per `vm_id`).
pub const QUEUE: &str = "ankusa_settle";
/// Operations queued and not yet drained, node-wide (u64 LE).
pub const DEPTH_KEY: &str = "ankusa:settle:depth";
/// The earliest ms the next batch may leave (u64 LE).
pub const LEASE_KEY: &str = "ankusa:settle:lease";

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
/// taken: see `ankusa_core::clock::lease_due`.
pub fn take_lease(store: &impl CasStore, now_ms: u64, interval_ms: u64) -> bool {
    let (next, version) = read_u64(store, LEASE_KEY);
    ankusa_core::clock::lease_due(next, now_ms, interval_ms)
        && store.compare_and_set(LEASE_KEY, &(now_ms + interval_ms).to_le_bytes(), version)
}

/// Queues `item` on the shared queue `queue_id` within the node-wide bound.
pub fn enqueue(store: &impl CasStore, queue_id: u32, max: usize, item: &Queued) -> Enqueued {
    let Ok(bytes) = serde_json::to_vec(item) else {
        return Enqueued::Dropped;
    };
    let Some(depth) = reserve(store, max) else {
        return Enqueued::Dropped;
    };
    if hostcalls::enqueue_shared_queue(queue_id, Some(&bytes)).is_ok() {
        Enqueued::Queued(depth)
    } else {
        release_places(store, 1);
        Enqueued::Dropped
    }
}

/// Takes up to `max` operations off the queue (unparsable items are skipped
/// and counted in the second value).
pub fn dequeue_batch(store: &impl CasStore, queue_id: u32, max: usize) -> (Vec<Queued>, u64) {
    let mut batch = Vec::new();
    let mut taken = 0u64;
    let mut garbage = 0u64;
    while batch.len() < max {
        match hostcalls::dequeue_shared_queue(queue_id) {
            Ok(Some(bytes)) => {
                taken += 1;
                match serde_json::from_slice::<Queued>(&bytes) {
                    Ok(item) => batch.push(item),
                    Err(_) => garbage += 1,
                }
            }
            _ => break,
        }
    }
    if taken > 0 {
        release_places(store, taken);
    }
    (batch, garbage)
}

/// The request body for a batch.
pub fn request_body(batch: &[Queued]) -> Vec<u8> {
    let req = SettleRequest {
        ops: batch.iter().map(|q| q.op.clone()).collect(),
    };
    serde_json::to_vec(&req).unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_core::cas::{ensure_keys, MapStore};
    use ankusa_core::wire::Claim;

    fn store() -> MapStore {
        let s = MapStore::new();
        ensure_keys(&s, [DEPTH_KEY.to_string(), LEASE_KEY.to_string()]);
        s
    }

    fn release(n: u32) -> Queued {
        let claim = Claim {
            tenant: "acme".into(),
            source_id: "gh".into(),
            key: format!("k{n}"),
            hook_id: "0190a5b2-7c1d-7aaa-8bbb-0123456789ab".into(),
            node: "edge-1".into(),
            ttl_ms: 1,
            pending_ttl_ms: 1,
        };
        Queued {
            retries: n,
            op: SettleOp::Release { claim },
        }
    }

    #[test]
    fn the_queue_bound_is_node_wide_and_places_come_back() {
        let s = store();
        assert_eq!(reserve(&s, 2), Some(1));
        assert_eq!(reserve(&s, 2), Some(2));
        assert_eq!(reserve(&s, 2), None);
        assert_eq!(release_places(&s, 5), 0, "never below zero");
        assert_eq!(reserve(&s, 2), Some(1));
    }

    #[test]
    fn one_lease_per_interval_node_wide() {
        let s = store();
        assert!(take_lease(&s, 1_000, 50));
        assert!(
            !take_lease(&s, 1_010, 50),
            "a second worker in the same interval waits"
        );
        assert!(take_lease(&s, 1_050, 50));
    }

    #[test]
    fn a_backward_clock_step_does_not_stop_the_drain() {
        let s = store();
        assert!(take_lease(&s, 3_600_000, 50));
        // A worker a little behind still waits for the interval.
        assert!(!take_lease(&s, 3_599_990, 50));
        // The clock steps back an hour: the lease is stale and taken.
        assert!(take_lease(&s, 10, 50));
        assert!(!take_lease(&s, 20, 50));
        assert!(take_lease(&s, 60, 50));
    }

    #[test]
    fn failed_batches_are_retried_a_bounded_number_of_times() {
        let (again, dropped) = after_failure(vec![release(0), release(2), release(3)], 3);
        assert_eq!(dropped, 1);
        assert_eq!(again.iter().map(|q| q.retries).collect::<Vec<_>>(), [1, 3]);
    }

    #[test]
    fn a_batch_is_one_settle_request() {
        let body = request_body(&[release(0), release(1)]);
        let req: SettleRequest = serde_json::from_slice(&body).unwrap();
        assert_eq!(req.ops.len(), 2);
        assert_eq!(req.ops[1].claim().key, "k1", "in queue order");
        assert!(req.validate().is_ok(), "{:?}", req.validate());
    }
}
