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

use crate::breaker::{Breaker, BreakerState};
use crate::cas::{read_u64, update_u64, CasStore};
use crate::config::BreakerPolicy;
use crate::edge_keys::{BREAKER_KEY, DEPTH_KEY, LEASE_KEY};
use crate::hook::plan::committed_id;
use crate::wire::{Claim, SettleOp, SettleRequest};
use serde::{Deserialize, Serialize};

/// The operation that settles `claim` once the upstream answered `status`
/// (None: no answer, the stream ended first): promote on a 2xx, else release.
pub fn settle_op(claim: Claim, status: Option<&str>, upstream_id: Option<&str>) -> SettleOp {
    if answered_ok(status) {
        let hook_id = committed_id(&claim.hook_id, upstream_id).to_string();
        SettleOp::Promote { claim, hook_id }
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
/// taken: see `crate::clock::lease_due`.
pub fn take_lease(store: &impl CasStore, now_ms: u64, interval_ms: u64) -> bool {
    let (next, version) = read_u64(store, LEASE_KEY);
    crate::clock::lease_due(next, now_ms, interval_ms)
        && store.compare_and_set(LEASE_KEY, &(now_ms + interval_ms).to_le_bytes(), version)
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

/// Whether this worker sends a settle batch now: it has none in flight (a
/// slow store makes batches bigger, not more), something is queued (an idle
/// node costs one read per tick, not a lease write), the breaker is not open
/// (operations are held, within the same bound, until the store is back),
/// and it took the node-wide lease. `now_us` is read only past the first two.
pub fn drain_due<S: CasStore>(
    store: &S,
    batch_in_flight: bool,
    breaker: BreakerPolicy,
    now_us: impl FnOnce() -> u64,
    interval_ms: u64,
) -> bool {
    if batch_in_flight || read_u64(store, DEPTH_KEY).0 == 0 {
        return false;
    }
    let now = now_us();
    if Breaker::new(store, BREAKER_KEY, breaker).state(now) == BreakerState::Open {
        return false;
    }
    take_lease(store, now / 1_000, interval_ms)
}

/// The longest wait between two ticks of a root context (ms).
pub const MAX_TICK_MS: u64 = 50;

/// The tick period (ms): the lease paces batches to `settle_interval_ms`
/// node-wide; the tick itself stays short so store resets leave promptly too.
pub fn tick_ms(settle_interval_ms: u64) -> u64 {
    settle_interval_ms.clamp(1, MAX_TICK_MS)
}

/// Whether the store took a background call (settle batch or reset): a 2xx.
pub fn answered_ok(status: Option<&str>) -> bool {
    status.is_some_and(|s| s.starts_with('2'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::{ensure_keys, MapStore};
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

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

    #[test]
    fn a_batch_leaves_only_when_queued_idle_closed_and_leased() {
        let s = store();
        ensure_keys(&s, [BREAKER_KEY.to_string()]);
        let policy = BreakerPolicy::default();
        let due = |in_flight, now_us| drain_due(&s, in_flight, policy, || now_us, 50);
        assert!(!due(false, 1_000_000), "nothing queued");
        reserve(&s, 10);
        assert!(
            !due(true, 1_000_000),
            "a batch of this worker's is in flight"
        );
        assert!(due(false, 1_000_000));
        assert!(!due(false, 1_010_000), "the lease is another's for 50 ms");
        assert!(due(false, 1_050_000));
        let breaker = Breaker::new(&s, BREAKER_KEY, policy);
        let mut now = 2_000_000;
        while breaker.state(now) != BreakerState::Open {
            let permit = breaker.admit_call(now);
            breaker.record(now, permit, false);
            now += 1_000;
        }
        assert!(!due(false, now + 100_000), "held while the breaker is open");
    }

    #[test]
    fn ticks_are_short_whatever_the_interval() {
        assert_eq!(tick_ms(0), 1);
        assert_eq!(tick_ms(20), 20);
        assert_eq!(tick_ms(1_000), MAX_TICK_MS);
    }

    #[test]
    fn only_a_2xx_settles_or_promotes() {
        assert!(answered_ok(Some("200")) && answered_ok(Some("204")));
        assert!(!answered_ok(Some("500")) && !answered_ok(Some("404")) && !answered_ok(None));
        let claim = release(0).op.claim().clone();
        assert!(
            matches!(settle_op(claim.clone(), Some("201"), None), SettleOp::Promote { hook_id, .. } if hook_id == claim.hook_id)
        );
        assert!(
            matches!(settle_op(claim.clone(), Some("201"), Some("bad id!")), SettleOp::Promote { hook_id, .. } if hook_id == claim.hook_id)
        );
        assert!(
            matches!(settle_op(claim.clone(), Some("201"), Some("up_1")), SettleOp::Promote { hook_id, .. } if hook_id == "up_1")
        );
        assert!(matches!(
            settle_op(claim, Some("409"), Some("up_1")),
            SettleOp::Release { .. }
        ));
    }
}
