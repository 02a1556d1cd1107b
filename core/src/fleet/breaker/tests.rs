use super::*;
use crate::node::cas::{ensure_keys, MapStore};
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

/// Pins the window's lower edge where the stale sub-bucket sits in a
/// different ring slot from the current one: moving by exactly one window
/// lands in the same slot and overwrites it, which hid a filter that kept
/// every past epoch (old failures counting until their slot was reused).
#[test]
fn stale_sub_buckets_in_other_slots_do_not_count() {
    let store = store();
    let b = Breaker::new(&store, KEY, policy());
    feed(&b, T0, 3, false);
    // 1.5 windows later: those three sit in a slot nothing has reused.
    let later = T0 + 1_500 * MS;
    assert_eq!(feed(&b, later, 3, false), None);
    assert_eq!(b.state(later), BreakerState::Closed);
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
    assert_eq!(store.get(KEY).0.len(), record::VALUE_LEN);
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

/// The window's (calls, failures) as stored, at `now_us`.
fn stored(b: &Breaker<'_, MapStore>, store: &MapStore, now_us: u64) -> (u32, u32) {
    b.totals(&Record::decode(&store.get(KEY).0).ring, now_us)
}

#[test]
fn a_workers_successes_are_kept_and_written_together() {
    let store = store();
    let b = Breaker::new(&store, KEY, policy());
    let kept = KeptSuccesses::default();
    for i in 0..3 {
        assert_eq!(
            b.record_kept(T0 + i * MS, CallPermit::Call, true, &kept),
            None
        );
    }
    assert_eq!(kept.len(), 3);
    assert_eq!(
        stored(&b, &store, T0 + 3 * MS),
        (0, 0),
        "nothing written yet"
    );
    // The first success once the oldest kept one is SUCCESSES_KEPT_US old writes them all.
    let due = T0 + SUCCESSES_KEPT_US;
    assert_eq!(b.record_kept(due, CallPermit::Call, true, &kept), None);
    assert!(kept.is_empty());
    assert_eq!(stored(&b, &store, due), (4, 0));
}

#[test]
fn a_failure_is_judged_with_the_successes_kept_before_it() {
    let store = store();
    let b = Breaker::new(&store, KEY, policy());
    let kept = KeptSuccesses::default();
    b.record_kept(T0, CallPermit::Call, true, &kept);
    b.record_kept(T0 + MS, CallPermit::Call, true, &kept);
    // 1 failure in 3 calls: fewer than min_calls (4), nothing trips.
    assert_eq!(
        b.record_kept(T0 + 2 * MS, CallPermit::Call, false, &kept),
        None
    );
    assert!(kept.is_empty());
    assert_eq!(stored(&b, &store, T0 + 2 * MS), (3, 1));
    // 2 of 4: the rate is reached with the kept successes counted.
    assert_eq!(
        b.record_kept(T0 + 3 * MS, CallPermit::Call, false, &kept),
        Some(Transition::Opened {
            calls: 4,
            failures: 2
        })
    );
}

#[test]
fn a_probe_drops_successes_kept_from_before_the_breaker_opened() {
    let store = store();
    let b = opened(&store);
    let kept = KeptSuccesses::default();
    kept.keep(T0);
    let later = T0 + 600 * MS;
    assert_eq!(b.admit_call(later), CallPermit::Probe);
    assert_eq!(
        b.record_kept(later, CallPermit::Probe, true, &kept),
        Some(Transition::Closed)
    );
    assert!(kept.is_empty());
    assert_eq!(
        stored(&b, &store, later),
        (0, 0),
        "closed with an empty window"
    );
}
