//! The live edge count a node last heard from the store.
//!
//! Every hit carries the calling node's name; the store counts the names it
//! heard from in the last few seconds and returns that count in its answers
//! (`edges`, see [`crate::wire::HitReply`]). A node keeps the last count it
//! was told in its shared data ([`EDGES_KEY`], a u64; 0: never heard), so
//! every worker divides by the same number while the store is away (see
//! [`crate::limit::share`]).
//!
//! Shared-data operations are costly, so the key is written only when the
//! count changes: each worker remembers the value it last read or wrote
//! ([`EdgesSeen`]) and compares an answer's count with that, reading the key
//! again at most once a second (another worker may have changed it).

use crate::config::FleetConfig;
use crate::limit::share::{self, Share};
use crate::node::cas::{read_u64, update_u64, CasStore};
use crate::node::edge_keys::EDGES_KEY;
use std::cell::Cell;

/// How long a worker trusts its copy of the node's count before reading it again.
pub const REREAD_MS: u64 = 1_000;

/// One worker's copy of the node's live edge count.
#[derive(Debug, Default)]
pub struct EdgesSeen {
    count: Cell<u64>,
    /// When `count` was last read from shared data (ms; 0: never).
    read_ms: Cell<u64>,
}

impl EdgesSeen {
    /// An answer said `heard` edges are live (None or 0: it said nothing).
    /// Writes the node's count when it changed and returns the new count
    /// (for the gauges); None when nothing changed.
    pub fn learn<S: CasStore + ?Sized>(
        &self,
        store: &S,
        heard: Option<u64>,
        now_ms: u64,
    ) -> Option<u64> {
        let heard = heard.filter(|n| *n > 0)?;
        if now_ms.abs_diff(self.read_ms.get()) >= REREAD_MS {
            self.count.set(read_u64(store, EDGES_KEY).0);
            self.read_ms.set(now_ms);
        }
        if self.count.get() == heard {
            return None;
        }
        self.count.set(heard);
        match update_u64(store, EDGES_KEY, |current| {
            (current != heard).then_some(heard)
        }) {
            Some(Ok(n)) => Some(n),
            // Another worker wrote it first, or the key is contended: the
            // next answer tries again.
            _ => None,
        }
    }
}

/// The node's live edge count as last heard (0: never).
pub fn heard<S: CasStore + ?Sized>(store: &S) -> u64 {
    read_u64(store, EDGES_KEY).0
}

/// The share this node applies to a fleet quota it answers alone, given the
/// count it last heard (0: never).
pub fn share_of(fleet: &FleetConfig, heard: u64) -> Share {
    share::resolve(fleet.degraded_share_ppm(), heard, fleet.nodes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::cas::{ensure_keys, MapStore};
    use std::cell::Cell as Counter;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// Counts compare-and-swaps.
    #[derive(Default)]
    struct Probe {
        inner: MapStore,
        sets: Counter<u32>,
    }

    impl CasStore for Probe {
        fn get(&self, key: &str) -> (Vec<u8>, u32) {
            self.inner.get(key)
        }
        fn compare_and_set(&self, key: &str, value: &[u8], version: u32) -> bool {
            self.sets.set(self.sets.get() + 1);
            self.inner.compare_and_set(key, value, version)
        }
    }

    #[test]
    fn the_count_is_written_on_change_only() {
        let store = Probe::default();
        ensure_keys(&store.inner, [EDGES_KEY.to_string()]);
        let seen = EdgesSeen::default();
        assert_eq!(seen.learn(&store, Some(2), 5_000), Some(2));
        assert_eq!(heard(&store), 2);
        let writes = store.sets.get();
        for ms in 5_001..5_100 {
            assert_eq!(seen.learn(&store, Some(2), ms), None);
        }
        assert_eq!(store.sets.get(), writes, "an unchanged count was written");
        assert_eq!(seen.learn(&store, Some(3), 5_200), Some(3));
        assert_eq!(heard(&store), 3);
        // An answer without a count (an older store) changes nothing.
        assert_eq!(seen.learn(&store, None, 5_300), None);
        assert_eq!(seen.learn(&store, Some(0), 5_300), None);
        assert_eq!(heard(&store), 3);
    }

    #[test]
    fn a_worker_reads_again_what_another_wrote() {
        let store = MapStore::new();
        ensure_keys(&store, [EDGES_KEY.to_string()]);
        let (a, b) = (EdgesSeen::default(), EdgesSeen::default());
        assert_eq!(a.learn(&store, Some(2), 10_000), Some(2));
        assert_eq!(b.learn(&store, Some(3), 10_001), Some(3));
        // `a` still believes 2; within a second it may not notice that 2 is
        // no longer written, but after REREAD_MS it reads 3 and writes 2.
        assert_eq!(a.learn(&store, Some(2), 10_002), None);
        assert_eq!(heard(&store), 3);
        assert_eq!(a.learn(&store, Some(2), 10_000 + REREAD_MS), Some(2));
        assert_eq!(heard(&store), 2);
    }

    #[test]
    fn the_share_follows_the_pin_then_the_count_then_the_configuration() {
        let mut fleet = FleetConfig::default();
        assert_eq!(share_of(&fleet, 0), Share::WHOLE);
        fleet.nodes = 3;
        assert_eq!(share_of(&fleet, 0), Share::of_edges(3));
        assert_eq!(share_of(&fleet, 2), Share::of_edges(2));
        fleet.degraded_share = Some(0.5);
        assert_eq!(share_of(&fleet, 2), Share::of_edges(2));
        assert_eq!(share_of(&fleet, 5), Share::of_edges(2));
    }
}
