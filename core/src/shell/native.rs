//! What the native module keeps process-wide where the proxy-wasm filter
//! keeps it per worker or in Envoy's shared queue: the settle operations
//! held for the next hit call ([`Held`], as a wasm worker holds its own) and
//! the node's settle queue they spill to, which the node's background tick
//! (on Envoy's main thread) sends in batches. The queue's depth is bounded
//! node-wide by the core's counter ([`crate::hook::settle::reserve`]), as
//! the wasm filter's queue is.

use crate::hook::settle::held::Held;
use crate::hook::settle::{release_places, reserve, Enqueued, Queued};
use crate::node::cas::CasStore;
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

/// The node's settle operations, oldest first.
#[derive(Debug, Default)]
pub struct SettleQueue {
    items: Mutex<VecDeque<Queued>>,
    held: Mutex<Option<Held>>,
}

/// A panic elsewhere never stops settles: the data behind a lock is plain.
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SettleQueue {
    pub const fn new() -> SettleQueue {
        SettleQueue {
            items: Mutex::new(VecDeque::new()),
            held: Mutex::new(None),
        }
    }

    fn items(&self) -> MutexGuard<'_, VecDeque<Queued>> {
        locked(&self.items)
    }

    fn with_held<R>(&self, f: impl FnOnce(&mut Held) -> R) -> R {
        f(locked(&self.held).get_or_insert_with(Held::default))
    }

    /// Holds `item` (made at `now_us`) for the next hit call; a batch's
    /// worth (`batch_max`) is handed back to go to the queue now.
    pub fn hold(&self, item: Queued, now_us: u64, batch_max: usize) -> Vec<Queued> {
        self.with_held(|h| {
            if h.hold(item, now_us, batch_max) {
                h.take_all()
            } else {
                Vec::new()
            }
        })
    }

    /// Up to `max` held operations, oldest first, to ride on a hit call.
    pub fn take_held(&self, max: usize) -> Vec<Queued> {
        self.with_held(|h| h.take(max))
    }

    /// The held operations, when the oldest has waited `interval_ms` for a
    /// hit call to carry it: they go to the queue.
    pub fn spill_due(&self, now_us: u64, interval_ms: u64) -> Vec<Queued> {
        self.with_held(|h| {
            if h.spill_due(now_us, interval_ms) {
                h.take_all()
            } else {
                Vec::new()
            }
        })
    }

    /// Whether operations are held for a hit call.
    pub fn holds(&self) -> bool {
        self.with_held(|h| !h.is_empty())
    }

    /// Queues `item` within the node-wide bound `max` (counted in `store`).
    pub fn enqueue(&self, store: &impl CasStore, max: usize, item: Queued) -> Enqueued {
        let Some(depth) = reserve(store, max) else {
            return Enqueued::Dropped;
        };
        self.items().push_back(item);
        Enqueued::Queued(depth)
    }

    /// Takes up to `max` operations, oldest first, and frees their places.
    pub fn dequeue(&self, store: &impl CasStore, max: usize) -> Vec<Queued> {
        let batch: Vec<Queued> = {
            let mut items = self.items();
            let n = max.min(items.len());
            items.drain(..n).collect()
        };
        if !batch.is_empty() {
            release_places(store, batch.len() as u64);
        }
        batch
    }

    /// Operations waiting.
    pub fn len(&self) -> usize {
        self.items().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::cas::{read_u64, MapStore};
    use crate::node::edge_keys::DEPTH_KEY;
    use crate::wire::{Claim, SettleOp};

    fn release(key: &str) -> Queued {
        Queued {
            retries: 0,
            op: SettleOp::Release {
                claim: Claim {
                    tenant: "acme".into(),
                    source_id: "gh".into(),
                    key: key.into(),
                    hook_id: "h".into(),
                    node: "edge-1".into(),
                    ttl_ms: 60_000,
                    pending_ttl_ms: 5_000,
                },
            },
        }
    }

    #[test]
    fn the_queue_is_bounded_node_wide_and_gives_back_places_oldest_first() {
        let store = MapStore::new();
        let queue = SettleQueue::new();
        assert_eq!(queue.enqueue(&store, 2, release("a")), Enqueued::Queued(1));
        assert_eq!(queue.enqueue(&store, 2, release("b")), Enqueued::Queued(2));
        assert_eq!(queue.enqueue(&store, 2, release("c")), Enqueued::Dropped);
        assert_eq!(read_u64(&store, DEPTH_KEY).0, 2);
        let batch = queue.dequeue(&store, 1);
        assert_eq!(batch, vec![release("a")]);
        assert_eq!(read_u64(&store, DEPTH_KEY).0, 1);
        assert_eq!(queue.dequeue(&store, 10), vec![release("b")]);
        assert!(queue.is_empty());
        assert_eq!(read_u64(&store, DEPTH_KEY).0, 0);
    }

    #[test]
    fn held_operations_ride_first_and_spill_when_a_batch_is_held_or_they_waited() {
        let queue = SettleQueue::new();
        assert!(queue.hold(release("a"), 0, 2).is_empty());
        assert!(queue.holds());
        assert_eq!(
            queue.hold(release("b"), 10, 2),
            vec![release("a"), release("b")]
        );
        assert!(!queue.holds());
        assert!(queue.hold(release("c"), 1_000, 2).is_empty());
        assert!(queue.spill_due(5_999, 5).is_empty(), "not waited 5 ms yet");
        assert_eq!(queue.spill_due(6_000, 5), vec![release("c")]);
        assert!(queue.hold(release("d"), 0, 10).is_empty());
        assert_eq!(queue.take_held(1), vec![release("d")]);
    }
}
