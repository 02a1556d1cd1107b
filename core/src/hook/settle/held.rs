//! A worker's own settle operations, held for its next batched hit call.
//!
//! A hook's settle is made on its worker. Carried on that worker's next
//! hit call (batched, or a lone hit sent as a batch of one), it costs no
//! call of its own and no trip through the node's queue — at light load
//! too, where hooks come one at a time. So a worker holds what its hooks
//! settle until: a batch's worth is held (`settle_batch_max`: it goes to the
//! node's queue at once), or the oldest has waited `settle_interval_ms` with
//! no hit call leaving to carry it (the worker went quiet) — then they go to
//! the node's queue, where any worker's tick drains them. A hit call takes
//! the oldest first.

use crate::hook::settle::Queued;

/// The settle operations a worker holds, and when the oldest was made.
#[derive(Debug, Default)]
pub struct Held {
    items: Vec<Queued>,
    oldest_us: u64,
}

impl Held {
    /// Holds `item`, made at `now_us`; true when a batch's worth
    /// (`batch_max`) is held and should go to the node's queue now.
    pub fn hold(&mut self, item: Queued, now_us: u64, batch_max: usize) -> bool {
        if self.items.is_empty() {
            self.oldest_us = now_us;
        }
        self.items.push(item);
        self.items.len() >= batch_max
    }

    /// Up to `max` of the held operations, oldest first, to ride on a call.
    pub fn take(&mut self, max: usize) -> Vec<Queued> {
        let n = self.items.len().min(max);
        self.items.drain(..n).collect()
    }

    /// Every held operation, for the node's queue.
    pub fn take_all(&mut self) -> Vec<Queued> {
        std::mem::take(&mut self.items)
    }

    /// Whether the held operations go to the node's queue now: some are held
    /// and the oldest has waited `interval_ms` for a hit call to carry it.
    pub fn spill_due(&self, now_us: u64, interval_ms: u64) -> bool {
        !self.items.is_empty()
            && now_us.saturating_sub(self.oldest_us) >= interval_ms.saturating_mul(1_000)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Claim, SettleOp};
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const NOW: u64 = 1_700_000_000_000_000;

    fn op(n: u32) -> Queued {
        Queued {
            retries: n,
            op: SettleOp::Release {
                claim: Claim {
                    tenant: "acme".into(),
                    source_id: "stripe".into(),
                    key: format!("k{n}"),
                    hook_id: format!("h{n}"),
                    node: "edge-1".into(),
                    ttl_ms: 60_000,
                    pending_ttl_ms: 5_000,
                },
            },
        }
    }

    #[test]
    fn a_batch_worth_asks_to_spill_and_not_one_less() {
        let mut held = Held::default();
        for n in 0..3 {
            assert!(!held.hold(op(n), NOW, 4), "{n} held of 4");
        }
        assert!(held.hold(op(3), NOW, 4));
        assert_eq!(held.len(), 4);
    }

    #[test]
    fn a_call_takes_the_oldest_first_and_no_more_than_it_carries() {
        let mut held = Held::default();
        for n in 0..5 {
            held.hold(op(n), NOW + u64::from(n), 100);
        }
        assert!(!held.is_empty());
        let taken: Vec<u32> = held.take(3).iter().map(|q| q.retries).collect();
        assert_eq!(taken, [0, 1, 2]);
        let rest: Vec<u32> = held.take_all().iter().map(|q| q.retries).collect();
        assert_eq!(rest, [3, 4]);
        assert!(held.is_empty());
        assert!(held.take(3).is_empty());
    }

    #[test]
    fn held_operations_wait_the_interval_for_a_call_to_carry_them() {
        let mut held = Held::default();
        assert!(!held.spill_due(NOW, 20), "nothing held");
        held.hold(op(0), NOW, 100);
        // No call in flight: the next hit, alone or not, may still carry it.
        assert!(!held.spill_due(NOW, 20));
        assert!(!held.spill_due(NOW + 19_999, 20));
        assert!(held.spill_due(NOW + 20_000, 20));
        // The interval runs from the oldest: a newer one doesn't restart it.
        held.hold(op(1), NOW + 15_000, 100);
        assert!(held.spill_due(NOW + 20_000, 20));
    }

    #[test]
    fn the_interval_restarts_once_everything_held_was_taken() {
        let mut held = Held::default();
        held.hold(op(0), NOW, 100);
        held.take(1);
        held.hold(op(1), NOW + 30_000, 100);
        assert!(!held.spill_due(NOW + 40_000, 20));
        assert!(held.spill_due(NOW + 50_000, 20));
    }

    #[test]
    fn a_clock_stepped_back_does_not_underflow() {
        let mut held = Held::default();
        held.hold(op(0), NOW, 100);
        assert!(!held.spill_due(NOW - 1_000_000, 20));
    }
}
