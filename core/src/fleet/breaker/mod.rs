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
//! The whole state is one shared-data value (see `record.rs` for its bytes);
//! `since` is when the breaker opened (Open) or the probe was issued (Probing).
//!
//! Wall-clock steps: a `since` more than `open_ms` ahead of now was stamped by
//! a clock that has since stepped back, and is due (see [`crate::node::clock`]);
//! window sub-buckets stamped with a future epoch read as empty.

use crate::config::BreakerPolicy;
use crate::node::cas::{self, Cas, CasStore};
use crate::node::clock;
use record::{Bucket, Record};
use std::cell::Cell;

mod record;

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

/// How long a worker keeps the successes of its plain calls before writing
/// them to the node's breaker (µs). Writing an outcome is a shared-data read
/// and compare-and-swap; a success alone can't open the breaker, so a worker
/// adds up its successes and writes them together: with its next failure
/// (which is judged with them), or with the first success made once this
/// much time has passed since the oldest kept one. Another worker judging a
/// failure meanwhile misses at most this long of this worker's successes,
/// 1 % of the default 10 s window.
pub const SUCCESSES_KEPT_US: u64 = 100_000;

/// The successes of a worker's plain calls not yet written, and when the
/// oldest of them was made (µs). One per worker VM, kept across its hooks.
#[derive(Debug, Default)]
pub struct KeptSuccesses {
    calls: Cell<u32>,
    since_us: Cell<u64>,
}

impl KeptSuccesses {
    /// Keeps one more at `now_us`; false when the kept ones are due a write.
    fn keep(&self, now_us: u64) -> bool {
        let calls = self.calls.get().saturating_add(1);
        self.calls.set(calls);
        if calls == 1 {
            self.since_us.set(now_us);
        }
        let since = self.since_us.get();
        now_us >= since && now_us - since < SUCCESSES_KEPT_US
    }

    /// Takes every kept success.
    fn take(&self) -> u32 {
        self.since_us.set(0);
        self.calls.replace(0)
    }

    /// Successes kept, not yet written.
    pub fn len(&self) -> u32 {
        self.calls.get()
    }

    pub fn is_empty(&self) -> bool {
        self.calls.get() == 0
    }
}

/// Sub-buckets in the sliding window: finer would cost bytes copied on every
/// call, coarser would let a whole tenth of old outcomes linger or vanish at once.
pub const BUCKETS: usize = 10;

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

/// The node's breaker over one key of a [`CasStore`].
pub struct Breaker<'s, S: CasStore> {
    store: &'s S,
    key: String,
    policy: BreakerPolicy,
}

impl<'s, S: CasStore> Breaker<'s, S> {
    /// `key` must be pre-created with the filter's other keys (see
    /// [`crate::node::cas::ensure_keys`]), so that the first probe race is a real CAS.
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
            // equivalent mutant: `>` as `>=` would also count a bucket exactly BUCKETS epochs old, which sits in the current epoch's slot, and `record` has just reset that slot (`count`) before it reads the totals.
            .filter(|b| b.epoch <= current && b.epoch.saturating_add(BUCKETS as u64) > current)
            .fold((0u32, 0u32), |(c, f), b| {
                (c.saturating_add(b.calls), f.saturating_add(b.failures))
            })
    }

    /// Adds `calls` outcomes, `failures` of them failed, to the sub-bucket of `now_us`.
    fn count(&self, ring: &mut [Bucket; BUCKETS], now_us: u64, calls: u32, failures: u32) {
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
        bucket.calls = bucket.calls.saturating_add(calls);
        bucket.failures = bucket.failures.saturating_add(failures);
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
        cas::update(self.store, &self.key, |value| {
            let record = Record::decode(value);
            if record.state == BreakerState::Closed {
                return Cas::Keep(CallPermit::Call);
            }
            if !self.due(record.since_us, now_us) {
                return Cas::Keep(CallPermit::Skip);
            }
            let probing = Record {
                state: BreakerState::Probing,
                since_us: now_us,
                ..record
            };
            Cas::Write(probing.encode(), CallPermit::Probe)
        })
        .unwrap_or(CallPermit::Skip)
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
        self.record_calls(now_us, permit, u32::from(ok), u32::from(!ok))
    }

    /// [`Breaker::record`] for a worker that keeps the successes of its
    /// plain calls in `kept` ([`KeptSuccesses`]): a success is written only
    /// once the kept ones are due, a failure with every kept success, and a
    /// probe's outcome as it comes (kept successes were made while the
    /// breaker was closed; a probe means it has opened since, and they are
    /// dropped as [`Breaker::record`] drops any late report).
    pub fn record_kept(
        &self,
        now_us: u64,
        permit: CallPermit,
        ok: bool,
        kept: &KeptSuccesses,
    ) -> Option<Transition> {
        if permit != CallPermit::Call {
            kept.take();
            return self.record(now_us, permit, ok);
        }
        if ok && kept.keep(now_us) {
            return None;
        }
        let successes = kept.take();
        self.record_calls(now_us, permit, successes, u32::from(!ok))
    }

    /// Reports `successes + failures` calls made under `permit` (a probe
    /// is one call: ok when `failures` is 0).
    fn record_calls(
        &self,
        now_us: u64,
        permit: CallPermit,
        successes: u32,
        failures: u32,
    ) -> Option<Transition> {
        let ok = failures == 0;
        if permit == CallPermit::Skip {
            return None;
        }
        cas::update(self.store, &self.key, |value| {
            let record = Record::decode(value);
            let (next, transition) = match (record.state, permit) {
                (BreakerState::Closed, CallPermit::Call) => {
                    let mut ring = record.ring;
                    self.count(
                        &mut ring,
                        now_us,
                        successes.saturating_add(failures),
                        failures,
                    );
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
                _ => return Cas::Keep(None),
            };
            Cas::Write(next.encode(), transition)
        })
        .flatten()
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

/// For tests elsewhere in the crate: calls failed 1 ms apart from
/// `now_us` until the breaker opens (bounded, so a breaker that never
/// opens fails the test instead of hanging it); the time it opened.
#[cfg(test)]
pub(crate) fn fail_until_open<S: CasStore>(breaker: &Breaker<'_, S>, mut now_us: u64) -> u64 {
    for _ in 0..1_000 {
        if breaker.state(now_us) == BreakerState::Open {
            break;
        }
        let permit = breaker.admit_call(now_us);
        breaker.record(now_us, permit, false);
        now_us += 1_000;
    }
    assert_eq!(breaker.state(now_us), BreakerState::Open);
    now_us
}

#[cfg(test)]
mod tests;
