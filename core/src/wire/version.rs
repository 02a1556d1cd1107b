//! The wire's version and its compatibility rule (docs/deploy.md, "Upgrading").
//!
//! An edge and a store one release apart, in either direction, work
//! together. What makes that hold:
//!
//! - **A reader skips a field it doesn't know, and counts it**
//!   ([`super::tolerant`]): the store as `ankusa_store_wire_unknown_total{field}`,
//!   the edge as `ankusa_fleet_wire_unknown_total`. An unknown field is never
//!   a refusal, neither of its message nor of the batch it rides in.
//! - **A field never changes meaning**: a new meaning gets a new name, or a
//!   version bump both sides negotiate.
//! - **A sender sends a field only to a peer that knows it.** Every store
//!   answer names the store's wire version (`"wire"`); an answer without one
//!   is from a store of wire 1 (v0.1.0), which refuses every field it doesn't
//!   know. A field of a request introduced at version N goes only to a store
//!   that said N or more ([`StoreWire::speaks`]); the edge's reader of the
//!   store's version starts at [`FIRST`] and follows every answer.
//! - **Refusals stay where they protect something**: the token and its role,
//!   names and ids, bounds (`validate`), and the operators' API, where a
//!   misspelled limit must not pass unnoticed.
//!
//! | wire | release | what it added |
//! |---|---|---|
//! | 1 | v0.1.0 | (no version named; every reader refuses unknown fields) |
//! | 2 | v0.2.0 | `wire` in every store answer; unknown fields skipped and counted on both sides; a promote's `receipt` ([`super::receipt`]) |
//!
//! Settle operations wait in the node's queue and leave from whichever
//! worker drains it or makes a call they ride on, so what they may carry is
//! decided by the node's view of the store: each worker writes the version
//! it hears to the node's shared data when it changes
//! ([`StoreWire::share`]), and a batch is written for the version found
//! there when it leaves ([`StoreWire::of_node`]), not when it was queued.
//! A settle's field also goes to a store not heard yet
//! ([`StoreWire::sends`]: only hooks whose calls failed settle before any
//! answer, and their late claims need it); an older store refuses that call
//! (400), and the node then takes it as wire 1 ([`StoreWire::refused`]).

use crate::node::cas::{read_u64, update_u64, CasStore};
use crate::node::edge_keys::STORE_WIRE_KEY;

/// The wire version this code speaks.
pub const WIRE_VERSION: u32 = 2;

/// The version of a store whose answers name none: v0.1.0's.
pub const FIRST: u32 = 1;

/// The store's wire version as an edge last heard it: [`FIRST`] until an
/// answer names one, then whatever the latest answer said (a store rolled
/// back to an older release is followed back down).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreWire {
    /// 0 until the first answer.
    heard: u32,
}

impl StoreWire {
    /// Notes the version an answer named (None: a store of wire 1).
    /// Returns whether it differs from what was heard before (the first
    /// answer always does), so the edge reports it once per change.
    pub fn heard(&mut self, named: Option<u32>) -> bool {
        let now = named.unwrap_or(FIRST).max(FIRST);
        let changed = now != self.heard;
        self.heard = now;
        changed
    }

    pub fn version(self) -> u32 {
        self.heard.max(FIRST)
    }

    /// Whether a field introduced at wire `since` may be sent to this store.
    pub fn speaks(self, since: u32) -> bool {
        self.version() >= since
    }

    /// Whether a settle operation's field introduced at wire `since` goes
    /// out now: to a store that said `since` or more, and to one not heard
    /// at all yet. Settles are made after their hook's store call, so only
    /// a hook whose call failed (the store unreachable, or slower than the
    /// budget while it still ran the call) settles before anything was
    /// heard, and its late claim needs the receipt to commit. A store older
    /// than `since` refuses such a call (400): [`StoreWire::refused`] then
    /// takes it as [`FIRST`], and the call's settles go again without the field.
    pub fn sends(self, since: u32) -> bool {
        self.heard == 0 || self.version() >= since
    }

    /// The store refused a call carrying a field it was sent on
    /// [`StoreWire::sends`]: the node and this worker (`worker`) take it as
    /// [`FIRST`] until an answer names more. Returns the version to report.
    pub fn refused<S: CasStore + ?Sized>(store: &S, worker: &std::cell::Cell<StoreWire>) -> u32 {
        let mut wire = worker.get();
        wire.heard(Some(FIRST));
        worker.set(wire);
        wire.share(store);
        wire.version()
    }

    /// The version the node's workers last heard ([`FIRST`] before any
    /// answer): one shared-data read.
    pub fn of_node<S: CasStore + ?Sized>(store: &S) -> StoreWire {
        let heard = read_u64(store, STORE_WIRE_KEY).0;
        StoreWire {
            heard: u32::try_from(heard).unwrap_or(u32::MAX),
        }
    }

    /// Writes this version as the node's (a worker calls it when what it
    /// heard changed). A write lost to a storm of compare-and-swaps leaves
    /// the node's older version, corrected by the next change any worker hears.
    pub fn share<S: CasStore + ?Sized>(self, store: &S) {
        let now = u64::from(self.version());
        let _ = update_u64(store, STORE_WIRE_KEY, |old| (old != now).then_some(now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_naming_no_version_is_wire_1_and_is_sent_only_wire_1_fields() {
        let mut store = StoreWire::default();
        assert_eq!(store.version(), 1);
        assert!(store.speaks(1) && !store.speaks(2));
        // The first answer is reported, whatever it names.
        assert!(store.heard(None));
        assert!(!store.heard(None));
        assert!(!store.speaks(2));
    }

    #[test]
    fn the_node_holds_the_version_its_workers_last_heard() {
        let node = crate::node::cas::MapStore::new();
        assert_eq!(StoreWire::of_node(&node).version(), FIRST, "never heard");
        let mut worker = StoreWire::default();
        worker.heard(Some(2));
        worker.share(&node);
        assert!(StoreWire::of_node(&node).speaks(2));
        // Another worker hears a store rolled back: the node follows it.
        let mut other = StoreWire::default();
        other.heard(None);
        other.share(&node);
        assert!(!StoreWire::of_node(&node).speaks(2));
    }

    #[test]
    fn a_settle_field_goes_to_a_store_that_speaks_it_or_is_not_heard_yet() {
        let node = crate::node::cas::MapStore::new();
        assert!(StoreWire::of_node(&node).sends(2), "nothing heard: sent");
        let mut worker = StoreWire::default();
        worker.heard(None);
        worker.share(&node);
        assert!(
            !StoreWire::of_node(&node).sends(2),
            "a v0.1.0 store: not sent"
        );
        worker.heard(Some(2));
        worker.share(&node);
        assert!(StoreWire::of_node(&node).sends(2));
        // A refusal of a call carrying it takes the node and the worker back
        // to wire 1, so the next answer naming 2 is a change to write again.
        let cell = std::cell::Cell::new(worker);
        assert_eq!(StoreWire::refused(&node, &cell), FIRST);
        assert!(!StoreWire::of_node(&node).sends(2));
        let mut again = cell.get();
        assert!(again.heard(Some(2)));
    }

    #[test]
    fn the_latest_answer_decides_up_and_down() {
        let mut store = StoreWire::default();
        assert!(store.heard(Some(2)));
        assert!(store.speaks(2));
        assert!(!store.heard(Some(2)));
        // A store rolled back to v0.1.0 names none again.
        assert!(store.heard(None));
        assert!(!store.speaks(2));
        // A nonsense 0 is read as the first version, never below it.
        store.heard(Some(0));
        assert_eq!(store.version(), 1);
    }
}
