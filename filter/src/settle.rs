//! The settle queue on the host: an Envoy shared queue of JSON
//! [`Queued`] operations, bounded by the core's node-wide depth counter
//! ([`ankusa_core::hook::settle`]).

use ankusa_core::hook::settle::{release_places, reserve, Enqueued, Queued};
use ankusa_core::node::cas::CasStore;
use proxy_wasm::hostcalls;

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
