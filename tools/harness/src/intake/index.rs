//! The intake's dedupe index: each stored event's key, with the id it was
//! stored under and when. An entry is held for the dedupe window; expired
//! ones are dropped now and then, and the table shrinks with them, so the
//! index's memory follows what arrived within the last two windows rather
//! than the busiest moment since the intake started (a backlog draining
//! after an `intake-timeout` doubles the table once; the soak's memory
//! check would see that table forever).

use std::collections::HashMap;

/// (tenant, source, event key): the scope a provider's event id is unique in.
pub type DedupeKey = (String, String, String);

/// A sweep runs at least every this many stores, whatever the time.
const SWEEP_EVERY: usize = 10_000;

pub struct Index {
    entries: HashMap<DedupeKey, (String, u64)>,
    ttl_ms: u64,
    since_sweep: usize,
    /// When the index was last swept (Unix ms).
    swept_ms: u64,
}

impl Index {
    pub fn new(ttl_ms: u64, now_ms: u64) -> Self {
        Index {
            entries: HashMap::new(),
            ttl_ms,
            since_sweep: 0,
            swept_ms: now_ms,
        }
    }

    /// The id `key` was stored under, if that was within the window.
    pub fn held(&self, key: &DedupeKey, now_ms: u64) -> Option<&str> {
        self.entries
            .get(key)
            .filter(|(_, at)| now_ms.saturating_sub(*at) < self.ttl_ms)
            .map(|(id, _)| id.as_str())
    }

    pub fn insert(&mut self, key: DedupeKey, id: String, at_ms: u64) {
        self.entries.insert(key, (id, at_ms));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// The entries the table has room for without growing.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// `added` entries were stored at `now_ms`: drops the expired ones once
    /// a window has passed since the last sweep or [`SWEEP_EVERY`] stores
    /// were made, and shrinks the table to twice what is left (room for the
    /// next window without growing).
    pub fn stored(&mut self, now_ms: u64, added: usize) {
        self.since_sweep += added;
        if self.since_sweep < SWEEP_EVERY && now_ms.saturating_sub(self.swept_ms) < self.ttl_ms {
            return;
        }
        self.since_sweep = 0;
        self.swept_ms = now_ms;
        let ttl = self.ttl_ms;
        self.entries
            .retain(|_, (_, at)| now_ms.saturating_sub(*at) < ttl);
        self.entries.shrink_to(self.entries.len() * 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000;
    const TTL: u64 = 60_000;

    fn key(i: usize) -> DedupeKey {
        ("acme".into(), "gh".into(), format!("evt-{i}"))
    }

    fn fill(index: &mut Index, range: std::ops::Range<usize>, at: u64) {
        for i in range.clone() {
            index.insert(key(i), format!("id-{i}"), at);
        }
        index.stored(at, range.len());
    }

    #[test]
    fn an_entry_is_held_for_the_window_and_not_after() {
        let mut index = Index::new(TTL, T0);
        fill(&mut index, 0..1, T0);
        assert_eq!(index.held(&key(0), T0 + TTL - 1), Some("id-0"));
        assert_eq!(index.held(&key(0), T0 + TTL), None);
        assert_eq!(index.held(&key(1), T0), None);
    }

    #[test]
    fn a_window_after_the_last_sweep_the_expired_entries_go_and_the_live_stay() {
        let mut index = Index::new(TTL, T0);
        fill(&mut index, 0..100, T0);
        fill(&mut index, 100..150, T0 + TTL / 2);
        // Less than a window since the index was made: nothing swept.
        fill(&mut index, 150..151, T0 + TTL - 1);
        assert_eq!(index.len(), 151);
        // A window on: the first 100 expired; the rest are within it.
        fill(&mut index, 151..152, T0 + TTL);
        assert_eq!(index.len(), 52);
        assert_eq!(index.held(&key(100), T0 + TTL), Some("id-100"));
    }

    #[test]
    fn ten_thousand_stores_sweep_before_a_window_has_passed() {
        let mut index = Index::new(TTL, T0);
        fill(&mut index, 0..10, T0 + TTL / 2);
        // A window after the index was made: swept, nothing expired yet.
        fill(&mut index, 10..11, T0 + TTL);
        assert_eq!(index.len(), 11);
        // Half a window later the first 10 have expired, but the last sweep
        // was less than a window ago: only the count sweeps.
        let later = T0 + TTL + TTL / 2 + 1;
        fill(&mut index, 11..10_010, later);
        assert_eq!(index.len(), 10_010, "no sweep before 10 000 stores");
        fill(&mut index, 10_010..10_011, later);
        assert_eq!(index.len(), 10_001, "the 10 expired ones went");
        assert_eq!(index.held(&key(10), later), Some("id-10"));
    }

    #[test]
    fn the_table_shrinks_once_a_burst_has_expired() {
        let mut index = Index::new(TTL, T0);
        fill(&mut index, 0..9_000, T0);
        let burst = index.capacity();
        assert!(burst >= 9_000);
        fill(&mut index, 9_000..9_100, T0 + TTL);
        assert_eq!(index.len(), 100);
        assert!(
            index.capacity() < burst / 8,
            "capacity {} after the burst of {burst} expired",
            index.capacity()
        );
        assert!(index.capacity() >= 200, "room for a window like the last");
    }
}
