//! What the native module keeps process-wide where the proxy-wasm filter
//! uses Envoy's shared queue: the node's settle queue. Every worker thread
//! queues its hooks' settle operations here; hit calls carry them, and the
//! node's background tick (on Envoy's main thread) sends what is left in
//! batches. Its depth is bounded node-wide by the core's counter
//! ([`crate::hook::settle::reserve`]), as the wasm filter's queue is.

use crate::hook::settle::{release_places, reserve, Enqueued, Queued};
use crate::node::cas::CasStore;
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

/// The node's settle operations, oldest first.
#[derive(Debug, Default)]
pub struct SettleQueue {
    items: Mutex<VecDeque<Queued>>,
}

impl SettleQueue {
    pub const fn new() -> SettleQueue {
        SettleQueue {
            items: Mutex::new(VecDeque::new()),
        }
    }

    /// A panic elsewhere never stops settles: the queue's items are plain data.
    fn items(&self) -> MutexGuard<'_, VecDeque<Queued>> {
        self.items.lock().unwrap_or_else(|p| p.into_inner())
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
}
