//! Properties of the node buckets' arithmetic over arbitrary request times,
//! checked against plain GCRA and against the bound any GCRA must keep.
#![cfg(not(target_arch = "wasm32"))]

use ankusa_core::cas::{ensure_keys, MapStore};
use ankusa_core::gcra::{self, Verdict};
use ankusa_core::node_buckets::{NodeBuckets, NodeVerdict};
use ankusa_core::wire::{Charge, ChargeKind};
use proptest::prelude::*;

const START: u64 = 1_000_000_000;

fn charge(kind: ChargeKind, increment_us: u64, capacity_us: u64) -> Charge {
    Charge {
        kind,
        tenant: String::new(),
        increment_us,
        capacity_us,
    }
}

/// A hooks quota: (T µs, burst).
fn quota() -> impl Strategy<Value = (u64, u64)> {
    (1u64..50_000, 1u64..20)
}

/// Gaps between requests, from a burst at one instant to pauses of a few T.
fn gaps(t: u64) -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(prop_oneof![Just(0u64), 0..t, 0..4 * t], 1..150)
}

fn ring(store: &MapStore, slots: usize) -> NodeBuckets<'_, MapStore> {
    let nb = NodeBuckets::new(store, "rl:", slots);
    ensure_keys(store, nb.keys());
    nb
}

/// Every window of admitted requests holds at most `burst + elapsed / T` of them.
fn assert_within_bound(admitted_at: &[u64], t: u64, burst: u64) -> Result<(), TestCaseError> {
    for i in 0..admitted_at.len() {
        for j in i..admitted_at.len() {
            let count = (j - i + 1) as u64;
            let bound = burst + (admitted_at[j] - admitted_at[i]) / t;
            prop_assert!(
                count <= bound,
                "{count} admitted between {} and {} µs, bound {bound}",
                admitted_at[i],
                admitted_at[j]
            );
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn a_tenant_never_gets_more_than_burst_plus_elapsed_over_t(
        (t, burst, gaps) in quota().prop_flat_map(|(t, b)| (Just(t), Just(b), gaps(t)))
    ) {
        let store = MapStore::new();
        let nb = ring(&store, 16);
        let c = [charge(ChargeKind::Hooks, t, t * burst)];
        let mut now = START;
        let mut admitted_at = Vec::new();
        for gap in gaps {
            now += gap;
            if nb.charge("acme", now, &c) == NodeVerdict::Admit {
                admitted_at.push(now);
            }
        }
        assert_within_bound(&admitted_at, t, burst)?;
    }

    #[test]
    fn a_denials_retry_after_is_exact_and_it_changes_nothing(
        (t, burst, gaps) in quota().prop_flat_map(|(t, b)| (Just(t), Just(b), gaps(t))),
        bytes_burst in 1u64..10_000,
        sizes in prop::collection::vec(1u64..10_000, 150),
    ) {
        let store = MapStore::new();
        let nb = ring(&store, 4);
        let mut now = START;
        for (gap, size) in gaps.into_iter().zip(sizes) {
            now += gap;
            let charges = [
                charge(ChargeKind::Hooks, t, t * burst),
                // One µs per byte; a body over the burst is refused before it
                // gets here, so clamp it.
                charge(ChargeKind::Bytes, size.min(bytes_burst), bytes_burst),
            ];
            let before = store.clone();
            match nb.charge("acme", now, &charges) {
                NodeVerdict::Admit => {}
                NodeVerdict::RateLimited { retry_after_us } => {
                    prop_assert_eq!(&store, &before, "a denial wrote something");
                    prop_assert!(retry_after_us >= 1);
                    let early = before.clone();
                    let on_time = before.clone();
                    prop_assert!(matches!(
                        ring(&early, 4).charge("acme", now + retry_after_us - 1, &charges),
                        NodeVerdict::RateLimited { .. }
                    ), "admitted 1 µs before the retry-after");
                    prop_assert_eq!(
                        ring(&on_time, 4).charge("acme", now + retry_after_us, &charges),
                        NodeVerdict::Admit,
                        "denied at now + retry_after"
                    );
                }
                NodeVerdict::Contended => prop_assert!(false, "contention with one thread"),
            }
        }
    }

    #[test]
    fn node_buckets_agree_with_plain_gcra(
        (t, burst, gaps) in quota().prop_flat_map(|(t, b)| (Just(t), Just(b), gaps(t))),
        bytes_cap in 1u64..10_000,
        sizes in prop::collection::vec(0u64..10_000, 150),
    ) {
        let store = MapStore::new();
        let nb = ring(&store, 8);
        let (mut hooks_tat, mut bytes_tat) = (None, None);
        let mut now = START;
        for (gap, size) in gaps.into_iter().zip(sizes) {
            now += gap;
            let n = size.min(bytes_cap);
            let got = nb.charge(
                "acme",
                now,
                &[charge(ChargeKind::Hooks, t, t * burst), charge(ChargeKind::Bytes, n.max(1), bytes_cap)],
            );
            // The reference: each bucket on its own, then all-or-nothing.
            let h = gcra::check(hooks_tat, now, t, t * burst);
            let b = gcra::check(bytes_tat, now, n.max(1), bytes_cap);
            let want = match (h, b) {
                (Verdict::Admit { new_tat: h }, Verdict::Admit { new_tat: b }) => {
                    hooks_tat = Some(h);
                    bytes_tat = Some(b);
                    NodeVerdict::Admit
                }
                (h, b) => {
                    let wait = |v: Verdict| match v {
                        Verdict::Deny { retry_after_us } => retry_after_us,
                        Verdict::Admit { .. } => 0,
                    };
                    NodeVerdict::RateLimited { retry_after_us: wait(h).max(wait(b)) }
                }
            };
            prop_assert_eq!(got, want, "at {} µs", now);
        }
    }
}

proptest! {
    // Many cases: the interesting run (every slot live, a tenant shares its
    // home slot, then moves to a slot that just went idle) is a narrow one.
    #![proptest_config(ProptestConfig::with_cases(1_000))]
    #[test]
    fn sharing_a_small_ring_never_under_counts_a_tenant(
        (t, burst) in (1u64..50_000, 2u64..6),
        slots in 1usize..4,
        requests in prop::collection::vec((0usize..6, 0u64..1_000), 1..120),
    ) {
        let store = MapStore::new();
        let nb = ring(&store, slots);
        let c = [charge(ChargeKind::Hooks, t, t * burst)];
        let mut now = START;
        let mut admitted_at = vec![Vec::new(); 6];
        for (tenant, gap) in requests {
            // Gaps up to a whole interval, so slots go idle one at a time.
            now += gap * t / 1_000;
            if nb.charge(&format!("tenant-{tenant}"), now, &c) == NodeVerdict::Admit {
                admitted_at[tenant].push(now);
            }
        }
        for times in &admitted_at {
            assert_within_bound(times, t, burst)?;
        }
        prop_assert!(store.len() <= slots);
    }
}
