//! The fleet breaker: when the store keeps failing, stop calling it and
//! answer from the node alone, then let one probe decide when to return.
//!
//! States, for the whole node (every worker reads and writes one CAS value
//! under one key, so they agree and only one of them probes):
//!
//! 1. **Closed**: every hook calls the store; each outcome lands in a sliding
//!    window. When the window holds at least `min_calls` calls and the failed
//!    fraction is at least `failure_rate`, the breaker opens.
//! 2. **Open**: no store calls at all for `open_ms`.
//! 3. **Probing**: after `open_ms` the first caller to win the CAS makes the
//!    one probe call; everyone else keeps answering node-local. Success
//!    closes the breaker with an empty window, failure opens it again for
//!    another `open_ms`. A probe that never reports (its worker died, its
//!    callback was lost) is re-issued once another `open_ms` has passed.
//!
//! The window is a ring of [`BUCKETS`] sub-buckets of `window_ms / BUCKETS`
//! each, stamped with their epoch so a stale one reads as empty: it covers the
//! current sub-bucket and the ones before it, between 0.9 and 1 × `window_ms`.
//! The value, little-endian:
//!
//! ```text
//! [FORMAT][state: u8][since µs: u64][BUCKETS × (epoch: u64, calls: u32, failures: u32)]
//! ```
//!
//! `since` is when the breaker opened (Open) or the probe was issued (Probing).
//!
//! Wall-clock steps: a `since` more than `open_ms` ahead of now was stamped by
//! a clock that has since stepped back, and is due (see [`crate::clock`]);
//! window sub-buckets stamped with a future epoch read as empty.

use crate::cas::CasStore;
use crate::clock;
use crate::config::BreakerPolicy;
use std::cell::Cell;

/// How long a worker takes the breaker it read closed as still closed
/// without reading it again (µs). A breaker another worker opens meanwhile
/// lets this worker's hooks of that millisecond still call the store: each
/// with its own budget and fall-back, and its outcome no longer counted
/// (see [`Breaker::record`]).
pub const CLOSED_TRUSTED_US: u64 = 1_000;

/// When this worker last read the breaker closed (µs since the epoch; 0: not
/// known closed). One per worker VM, kept across its hooks.
#[derive(Debug, Default)]
pub struct SeenClosed(Cell<u64>);

impl SeenClosed {
    /// Forgets the closed breaker: the next hook reads it again.
    pub fn forget(&self) {
        self.0.set(0);
    }
}

/// Sub-buckets in the sliding window: finer would cost bytes copied on every
/// call, coarser would let a whole tenth of old outcomes linger or vanish at once.
pub const BUCKETS: usize = 10;

/// Compare-and-swap attempts per call before giving up (see [`Breaker::admit_call`]
/// and [`Breaker::record`] for what giving up means).
pub const MAX_CAS_TRIES: u32 = 32;

const FORMAT: u8 = 1;
const BUCKET_LEN: usize = 16;
const VALUE_LEN: usize = 10 + BUCKETS * BUCKET_LEN;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BreakerState {
    /// Every hook calls the store.
    Closed,
    /// No store calls; hooks are answered node-local.
    Open,
    /// One probe call is testing the store; other hooks are answered node-local.
    Probing,
}

/// What a hook may do about the store right now.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CallPermit {
    /// Call the store and report the outcome.
    Call,
    /// Call the store as the node's one probe and report the outcome.
    Probe,
    /// Don't call the store: answer node-local. Nothing to report.
    Skip,
}

/// A state change worth a log line and a gauge update.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Transition {
    /// Closed → Open: `failures` of the window's `calls` failed.
    Opened { calls: u32, failures: u32 },
    /// Probing → Closed: the probe succeeded.
    Closed,
    /// Probing → Open: the probe failed; open for another `open_ms`.
    Reopened,
}

impl Transition {
    pub fn from(self) -> BreakerState {
        match self {
            Transition::Opened { .. } => BreakerState::Closed,
            Transition::Closed | Transition::Reopened => BreakerState::Probing,
        }
    }

    pub fn to(self) -> BreakerState {
        match self {
            Transition::Closed => BreakerState::Closed,
            Transition::Opened { .. } | Transition::Reopened => BreakerState::Open,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
struct Bucket {
    epoch: u64,
    calls: u32,
    failures: u32,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Record {
    state: BreakerState,
    since_us: u64,
    ring: [Bucket; BUCKETS],
}

impl Record {
    fn closed() -> Self {
        Record {
            state: BreakerState::Closed,
            since_us: 0,
            ring: [Bucket::default(); BUCKETS],
        }
    }

    /// An empty or unreadable value is a closed breaker with an empty window:
    /// the worst it costs is calls to a store that may be down, each bounded
    /// by the call budget, until the window fills and opens it.
    fn decode(value: &[u8]) -> Self {
        if value.len() != VALUE_LEN || value[0] != FORMAT {
            return Record::closed();
        }
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&value[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let u32_at = |at: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&value[at..at + 4]);
            u32::from_le_bytes(b)
        };
        let state = match value[1] {
            1 => BreakerState::Open,
            2 => BreakerState::Probing,
            _ => BreakerState::Closed,
        };
        let mut ring = [Bucket::default(); BUCKETS];
        for (i, bucket) in ring.iter_mut().enumerate() {
            let at = 10 + i * BUCKET_LEN;
            *bucket = Bucket {
                epoch: u64_at(at),
                calls: u32_at(at + 8),
                failures: u32_at(at + 12),
            };
        }
        Record {
            state,
            since_us: u64_at(2),
            ring,
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(VALUE_LEN);
        out.push(FORMAT);
        out.push(match self.state {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::Probing => 2,
        });
        out.extend_from_slice(&self.since_us.to_le_bytes());
        for b in &self.ring {
            out.extend_from_slice(&b.epoch.to_le_bytes());
            out.extend_from_slice(&b.calls.to_le_bytes());
            out.extend_from_slice(&b.failures.to_le_bytes());
        }
        out
    }
}

/// The node's breaker over one key of a [`CasStore`].
pub struct Breaker<'s, S: CasStore> {
    store: &'s S,
    key: String,
    policy: BreakerPolicy,
}

impl<'s, S: CasStore> Breaker<'s, S> {
    /// `key` must be pre-created with the filter's other keys (see
    /// [`crate::cas::ensure_keys`]), so that the first probe race is a real CAS.
    pub fn new(store: &'s S, key: &str, policy: BreakerPolicy) -> Self {
        Breaker {
            store,
            key: key.to_string(),
            policy,
        }
    }

    fn open_us(&self) -> u64 {
        self.policy.open_ms.saturating_mul(1_000)
    }

    /// Whether an Open or Probing breaker stamped `since_us` is due a probe:
    /// `open_ms` has passed, or `since_us` lies more than `open_ms` ahead (the
    /// clock stepped back; waiting for it would hold the breaker open for the
    /// length of the step).
    fn due(&self, since_us: u64, now_us: u64) -> bool {
        let open = self.open_us();
        clock::reached(
            since_us.saturating_add(open),
            now_us,
            open.saturating_mul(2),
        )
    }

    /// µs per sub-bucket, at least 1.
    fn width_us(&self) -> u64 {
        (self.policy.window_ms.saturating_mul(1_000) / BUCKETS as u64).max(1)
    }

    /// (calls, failures) in the window ending at `now_us`.
    fn totals(&self, ring: &[Bucket; BUCKETS], now_us: u64) -> (u32, u32) {
        let current = now_us / self.width_us();
        ring.iter()
            .filter(|b| b.epoch <= current && b.epoch.saturating_add(BUCKETS as u64) > current)
            .fold((0u32, 0u32), |(c, f), b| {
                (c.saturating_add(b.calls), f.saturating_add(b.failures))
            })
    }

    fn count(&self, ring: &mut [Bucket; BUCKETS], now_us: u64, ok: bool) {
        let epoch = now_us / self.width_us();
        // The remainder is below BUCKETS, so it fits a usize.
        let bucket = &mut ring[(epoch % BUCKETS as u64) as usize];
        if bucket.epoch != epoch {
            *bucket = Bucket {
                epoch,
                calls: 0,
                failures: 0,
            };
        }
        bucket.calls = bucket.calls.saturating_add(1);
        if !ok {
            bucket.failures = bucket.failures.saturating_add(1);
        }
    }

    fn trips(&self, calls: u32, failures: u32) -> bool {
        calls >= self.policy.min_calls
            && f64::from(failures) >= self.policy.failure_rate * f64::from(calls)
    }

    /// Whether this hook calls the store. Closed costs one read. When an open
    /// or probing breaker is due a probe, callers race one CAS and the winner
    /// alone gets [`CallPermit::Probe`]. If the CAS keeps conflicting the
    /// answer is [`CallPermit::Skip`]: each conflict is another worker's
    /// write, most likely the probe itself.
    pub fn admit_call(&self, now_us: u64) -> CallPermit {
        for _ in 0..MAX_CAS_TRIES {
            let (value, version) = self.store.get(&self.key);
            let record = Record::decode(&value);
            if record.state == BreakerState::Closed {
                return CallPermit::Call;
            }
            if !self.due(record.since_us, now_us) {
                return CallPermit::Skip;
            }
            let probing = Record {
                state: BreakerState::Probing,
                since_us: now_us,
                ..record
            };
            if self
                .store
                .compare_and_set(&self.key, &probing.encode(), version)
            {
                return CallPermit::Probe;
            }
        }
        CallPermit::Skip
    }

    /// [`Breaker::admit_call`], without reading the breaker when this
    /// worker read it closed less than [`CLOSED_TRUSTED_US`] ago (`seen`).
    pub fn admit_call_seen(&self, now_us: u64, seen: &SeenClosed) -> CallPermit {
        let at = seen.0.get();
        if at != 0 && now_us >= at && now_us - at < CLOSED_TRUSTED_US {
            return CallPermit::Call;
        }
        let permit = self.admit_call(now_us);
        // A plain call is only ever permitted by a closed breaker.
        seen.0.set(if permit == CallPermit::Call {
            now_us.max(1)
        } else {
            0
        });
        permit
    }

    /// Reports the outcome of a call made under `permit`; `ok` is false for
    /// any failure (error, timeout, 5xx, garbage). Returns the state change it
    /// caused, if any.
    ///
    /// A report that no longer fits the state (a call issued before the
    /// breaker opened, a probe overtaken by a re-issued one that already
    /// decided) is dropped: the state it would judge has passed. So is a
    /// report whose CAS keeps conflicting: one outcome more or less only
    /// nudges the window.
    pub fn record(&self, now_us: u64, permit: CallPermit, ok: bool) -> Option<Transition> {
        if permit == CallPermit::Skip {
            return None;
        }
        for _ in 0..MAX_CAS_TRIES {
            let (value, version) = self.store.get(&self.key);
            let record = Record::decode(&value);
            let (next, transition) = match (record.state, permit) {
                (BreakerState::Closed, CallPermit::Call) => {
                    let mut ring = record.ring;
                    self.count(&mut ring, now_us, ok);
                    let (calls, failures) = self.totals(&ring, now_us);
                    if self.trips(calls, failures) {
                        (
                            Record {
                                state: BreakerState::Open,
                                since_us: now_us,
                                ..Record::closed()
                            },
                            Some(Transition::Opened { calls, failures }),
                        )
                    } else {
                        (Record { ring, ..record }, None)
                    }
                }
                (BreakerState::Probing, CallPermit::Probe) if ok => {
                    (Record::closed(), Some(Transition::Closed))
                }
                (BreakerState::Probing, CallPermit::Probe) => (
                    Record {
                        state: BreakerState::Open,
                        since_us: now_us,
                        ..Record::closed()
                    },
                    Some(Transition::Reopened),
                ),
                _ => return None,
            };
            if self
                .store
                .compare_and_set(&self.key, &next.encode(), version)
            {
                return transition;
            }
        }
        None
    }

    /// The state for gauges and logs. A probe overdue by `open_ms` reads as
    /// Open: no call is testing the store, and the next caller will probe.
    pub fn state(&self, now_us: u64) -> BreakerState {
        let record = Record::decode(&self.store.get(&self.key).0);
        match record.state {
            BreakerState::Probing if self.due(record.since_us, now_us) => BreakerState::Open,
            state => state,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::{ensure_keys, MapStore};
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const KEY: &str = "ankusa:breaker";
    const MS: u64 = 1_000;
    const T0: u64 = 1_000_000_000;

    fn policy() -> BreakerPolicy {
        BreakerPolicy {
            failure_rate: 0.5,
            min_calls: 4,
            window_ms: 1_000,
            open_ms: 500,
        }
    }

    fn store() -> MapStore {
        let store = MapStore::new();
        ensure_keys(&store, [KEY.to_string()]);
        store
    }

    /// Feeds `n` outcomes as Closed calls at `now_us`, returning the last transition.
    fn feed(b: &Breaker<'_, MapStore>, now_us: u64, n: u32, ok: bool) -> Option<Transition> {
        let mut last = None;
        for _ in 0..n {
            let permit = b.admit_call(now_us);
            assert_eq!(permit, CallPermit::Call);
            last = b.record(now_us, permit, ok).or(last);
        }
        last
    }

    fn opened(store: &MapStore) -> Breaker<'_, MapStore> {
        let b = Breaker::new(store, KEY, policy());
        assert_eq!(
            feed(&b, T0, 4, false),
            Some(Transition::Opened {
                calls: 4,
                failures: 4
            })
        );
        b
    }

    /// Every compare-and-swap conflicts.
    struct Contended(MapStore);

    impl CasStore for Contended {
        fn get(&self, key: &str) -> (Vec<u8>, u32) {
            self.0.get(key)
        }
        fn compare_and_set(&self, _: &str, _: &[u8], _: u32) -> bool {
            false
        }
    }

    #[test]
    fn fresh_breaker_is_closed_and_lets_calls_through() {
        let store = store();
        let b = Breaker::new(&store, KEY, policy());
        assert_eq!(b.state(T0), BreakerState::Closed);
        assert_eq!(b.admit_call(T0), CallPermit::Call);
    }

    #[test]
    fn breaker_needs_min_calls_before_it_opens() {
        let store = store();
        let b = Breaker::new(&store, KEY, policy());
        assert_eq!(feed(&b, T0, 3, false), None);
        assert_eq!(b.state(T0), BreakerState::Closed);
        assert_eq!(
            feed(&b, T0, 1, false),
            Some(Transition::Opened {
                calls: 4,
                failures: 4
            })
        );
        assert_eq!(b.state(T0), BreakerState::Open);
    }

    #[test]
    fn breaker_opens_at_the_failure_rate_not_below() {
        let store = store();
        let b = Breaker::new(&store, KEY, policy());
        feed(&b, T0, 3, true);
        feed(&b, T0, 2, false);
        // 2 of 5 failed: 40 % < 50 %.
        assert_eq!(b.state(T0), BreakerState::Closed);
        // 3 of 6 failed: exactly 50 % opens.
        assert_eq!(
            feed(&b, T0, 1, false),
            Some(Transition::Opened {
                calls: 6,
                failures: 3
            })
        );
    }

    #[test]
    fn old_outcomes_slide_out_of_the_window() {
        let store = store();
        let b = Breaker::new(&store, KEY, policy());
        feed(&b, T0, 3, false);
        // A whole window later those three no longer count toward min_calls.
        assert_eq!(feed(&b, T0 + 1_000 * MS, 3, false), None);
        assert_eq!(b.state(T0 + 1_000 * MS), BreakerState::Closed);
        assert!(feed(&b, T0 + 1_000 * MS, 1, false).is_some());
    }

    #[test]
    fn outcomes_inside_the_window_still_count() {
        let store = store();
        let b = Breaker::new(&store, KEY, policy());
        feed(&b, T0, 3, false);
        // 800 ms later (8 sub-buckets of 100 ms) they are still in the window.
        assert_eq!(
            feed(&b, T0 + 800 * MS, 1, false),
            Some(Transition::Opened {
                calls: 4,
                failures: 4
            })
        );
    }

    #[test]
    fn open_breaker_skips_the_store_until_open_ms() {
        let store = store();
        let b = opened(&store);
        assert_eq!(b.admit_call(T0), CallPermit::Skip);
        assert_eq!(b.admit_call(T0 + 500 * MS - 1), CallPermit::Skip);
        assert_eq!(b.state(T0 + 500 * MS - 1), BreakerState::Open);
    }

    #[test]
    fn breaker_sends_one_probe_after_open_ms() {
        let store = store();
        let b = opened(&store);
        // Four workers sharing the key ask at once; one probes.
        let workers: Vec<_> = (0..4)
            .map(|_| Breaker::new(&store, KEY, policy()))
            .collect();
        let permits: Vec<_> = workers
            .iter()
            .map(|w| w.admit_call(T0 + 500 * MS))
            .collect();
        assert_eq!(
            permits,
            [
                CallPermit::Probe,
                CallPermit::Skip,
                CallPermit::Skip,
                CallPermit::Skip
            ]
        );
        assert_eq!(b.state(T0 + 500 * MS), BreakerState::Probing);
        assert_eq!(b.admit_call(T0 + 900 * MS), CallPermit::Skip);
    }

    #[test]
    fn successful_probe_closes_with_a_clean_window() {
        let store = store();
        let b = opened(&store);
        let now = T0 + 500 * MS;
        let permit = b.admit_call(now);
        assert_eq!(b.record(now, permit, true), Some(Transition::Closed));
        assert_eq!(b.state(now), BreakerState::Closed);
        // The failures that opened it are gone: three more don't reopen it.
        assert_eq!(feed(&b, now, 3, false), None);
    }

    #[test]
    fn failed_probe_reopens_for_another_open_ms() {
        let store = store();
        let b = opened(&store);
        let now = T0 + 500 * MS;
        let permit = b.admit_call(now);
        assert_eq!(
            b.record(now + 10 * MS, permit, false),
            Some(Transition::Reopened)
        );
        assert_eq!(b.state(now + 10 * MS), BreakerState::Open);
        assert_eq!(b.admit_call(now + 509 * MS), CallPermit::Skip);
        assert_eq!(b.admit_call(now + 510 * MS), CallPermit::Probe);
    }

    #[test]
    fn lost_probe_is_reissued_after_another_open_ms() {
        let store = store();
        let b = opened(&store);
        let first = T0 + 500 * MS;
        assert_eq!(b.admit_call(first), CallPermit::Probe);
        assert_eq!(b.admit_call(first + 499 * MS), CallPermit::Skip);
        assert_eq!(b.state(first + 499 * MS), BreakerState::Probing);
        assert_eq!(b.state(first + 500 * MS), BreakerState::Open);
        assert_eq!(b.admit_call(first + 500 * MS), CallPermit::Probe);
        assert_eq!(b.admit_call(first + 500 * MS), CallPermit::Skip);
    }

    #[test]
    fn a_backward_clock_step_does_not_hold_the_breaker_open() {
        let store = store();
        let b = opened(&store);
        // A worker a little behind the one that opened it still waits.
        assert_eq!(b.admit_call(T0 - 400 * MS), CallPermit::Skip);
        assert_eq!(b.state(T0 - 400 * MS), BreakerState::Open);
        // The clock steps back ten minutes: `since` is stale, a probe goes now.
        let back = T0 - 600_000 * MS;
        assert_eq!(b.admit_call(back), CallPermit::Probe);
        assert_eq!(b.admit_call(back), CallPermit::Skip);
        assert_eq!(b.state(back), BreakerState::Probing);
        assert_eq!(
            b.record(back, CallPermit::Probe, true),
            Some(Transition::Closed)
        );
        assert_eq!(b.admit_call(back), CallPermit::Call);
    }

    #[test]
    fn a_probe_stamped_before_a_backward_step_is_reissued_at_once() {
        let store = store();
        let b = opened(&store);
        assert_eq!(b.admit_call(T0 + 500 * MS), CallPermit::Probe);
        let back = T0 - 600_000 * MS;
        assert_eq!(b.state(back), BreakerState::Open);
        assert_eq!(b.admit_call(back), CallPermit::Probe);
    }

    #[test]
    fn a_forward_clock_step_makes_the_probe_due() {
        let store = store();
        let b = opened(&store);
        assert_eq!(b.admit_call(T0 + 3_600_000 * MS), CallPermit::Probe);
    }

    #[test]
    fn window_buckets_from_before_a_backward_step_read_as_empty() {
        let store = store();
        let b = Breaker::new(&store, KEY, policy());
        // Three failures stamped an hour ahead of the clock after the step.
        feed(&b, T0 + 3_600_000 * MS, 3, false);
        // They are in no window of the stepped-back clock: one more failure
        // is one call, below min_calls.
        assert_eq!(feed(&b, T0, 1, false), None);
        assert_eq!(b.state(T0), BreakerState::Closed);
        assert_eq!(feed(&b, T0, 2, false), None);
        assert!(feed(&b, T0, 1, false).is_some());
    }

    #[test]
    fn late_reports_from_before_a_transition_are_ignored() {
        let store = store();
        let b = Breaker::new(&store, KEY, policy());
        let early = b.admit_call(T0);
        feed(&b, T0, 4, false);
        let before = store.clone();
        // A call admitted while closed reports after the breaker opened.
        assert_eq!(b.record(T0, early, true), None);
        // A probe report with no probe in flight.
        assert_eq!(b.record(T0, CallPermit::Probe, true), None);
        assert_eq!(store, before);
    }

    #[test]
    fn skip_permits_report_nothing() {
        let store = store();
        let b = Breaker::new(&store, KEY, policy());
        let before = store.clone();
        assert_eq!(b.record(T0, CallPermit::Skip, false), None);
        assert_eq!(store, before);
    }

    #[test]
    fn all_state_lives_in_one_key() {
        let store = store();
        let b = opened(&store);
        let now = T0 + 500 * MS;
        let permit = b.admit_call(now);
        b.record(now, permit, true);
        assert_eq!(store.keys(), [KEY]);
        assert_eq!(store.get(KEY).0.len(), VALUE_LEN);
    }

    #[test]
    fn contended_probe_race_skips_and_contended_report_is_dropped() {
        let inner = store();
        opened(&inner);
        let store = Contended(inner);
        let b = Breaker::new(&store, KEY, policy());
        assert_eq!(b.admit_call(T0 + 500 * MS), CallPermit::Skip);
        let closed = Contended(self::store());
        let b = Breaker::new(&closed, KEY, policy());
        assert_eq!(b.record(T0, CallPermit::Call, false), None);
    }

    #[test]
    fn unreadable_value_reads_as_closed() {
        let store = store();
        store.compare_and_set(KEY, b"\x07junk", 0);
        let b = Breaker::new(&store, KEY, policy());
        assert_eq!(b.state(T0), BreakerState::Closed);
        assert_eq!(b.admit_call(T0), CallPermit::Call);
    }

    #[test]
    fn transitions_name_both_ends() {
        let opened = Transition::Opened {
            calls: 20,
            failures: 10,
        };
        assert_eq!(
            (opened.from(), opened.to()),
            (BreakerState::Closed, BreakerState::Open)
        );
        assert_eq!(
            (Transition::Closed.from(), Transition::Closed.to()),
            (BreakerState::Probing, BreakerState::Closed)
        );
        assert_eq!(
            (Transition::Reopened.from(), Transition::Reopened.to()),
            (BreakerState::Probing, BreakerState::Open)
        );
    }

    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn concurrent_workers_win_exactly_one_probe() {
        let store = store();
        opened(&store);
        let probes = std::sync::atomic::AtomicU32::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let b = Breaker::new(&store, KEY, policy());
                    for _ in 0..50 {
                        if b.admit_call(T0 + 500 * MS) == CallPermit::Probe {
                            probes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(probes.into_inner(), 1);
    }

    #[test]
    fn a_worker_trusts_a_closed_breaker_for_a_millisecond_then_reads_it_again() {
        let s = store();
        let b = Breaker::new(&s, KEY, policy());
        let seen = SeenClosed::default();
        assert_eq!(b.admit_call_seen(T0, &seen), CallPermit::Call);
        // Another worker opens it (four failed calls on its own reads).
        let other = Breaker::new(&s, KEY, policy());
        assert!(feed(&other, T0, 4, false).is_some());
        assert_eq!(b.admit_call(T0), CallPermit::Skip);
        // This worker still calls for what is left of the millisecond...
        assert_eq!(
            b.admit_call_seen(T0 + CLOSED_TRUSTED_US - 1, &seen),
            CallPermit::Call
        );
        // ...then reads the open breaker, and stays off it.
        assert_eq!(
            b.admit_call_seen(T0 + CLOSED_TRUSTED_US, &seen),
            CallPermit::Skip
        );
        assert_eq!(
            b.admit_call_seen(T0 + CLOSED_TRUSTED_US + 1, &seen),
            CallPermit::Skip
        );
        // A clock that steps back reads it again at once.
        let fresh = SeenClosed::default();
        let s2 = store();
        let closed = Breaker::new(&s2, KEY, policy());
        assert_eq!(closed.admit_call_seen(T0, &fresh), CallPermit::Call);
        assert!(feed(&Breaker::new(&s2, KEY, policy()), T0, 4, false).is_some());
        assert_eq!(closed.admit_call_seen(T0 - 1, &fresh), CallPermit::Skip);
        // Forgetting it does the same.
        let s3 = store();
        let third = Breaker::new(&s3, KEY, policy());
        let seen3 = SeenClosed::default();
        assert_eq!(third.admit_call_seen(T0, &seen3), CallPermit::Call);
        assert!(feed(&Breaker::new(&s3, KEY, policy()), T0, 4, false).is_some());
        seen3.forget();
        assert_eq!(third.admit_call_seen(T0, &seen3), CallPermit::Skip);
    }
}
