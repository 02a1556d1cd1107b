//! Properties of the GCRA and the node buckets over arbitrary request times,
//! starting from what the user writes (`Quota { rate, burst }`): rates 1 to
//! 10⁹ per second, bodies 1 to `burst`.
#![cfg(not(target_arch = "wasm32"))]

mod quotas;

use ankusa_core::limit::gcra::{self, Quota, Verdict};
use ankusa_core::node::cas::{ensure_keys, MapStore};
use ankusa_core::node::node_buckets::{NodeBuckets, NodeVerdict};
use ankusa_core::wire::ChargeKind;
use proptest::prelude::*;
use quotas::{charge, quota, START};

/// A quota and a body size in 1..=burst.
fn quota_and_body() -> impl Strategy<Value = (Quota, u64)> {
    quota().prop_flat_map(|q| (Just(q), 1..=q.burst))
}

/// µs one body takes to drain, at least 1.
fn body_time(q: Quota, body: u64) -> u64 {
    ((u128::from(body) * 1_000_000).div_ceil(u128::from(q.rate)) as u64).max(1)
}

/// Gaps between requests, from a burst at one instant to pauses of a few
/// body times.
fn gaps(t: u64) -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(prop_oneof![Just(0u64), 0..t, 0..4 * t], 1..150)
}

fn ring(store: &MapStore, slots: usize) -> NodeBuckets<'_, MapStore> {
    let nb = NodeBuckets::new(store, "rl:", slots);
    ensure_keys(store, nb.keys());
    nb
}

/// Over every window of admits, the units admitted are at most
/// `burst + rate × elapsed` (in exact micro-units, no rounding at all).
fn assert_within_bound(admits: &[(u64, u64)], q: Quota) -> Result<(), TestCaseError> {
    for i in 0..admits.len() {
        let mut units = 0u128;
        for j in i..admits.len() {
            units += u128::from(admits[j].1);
            let elapsed = u128::from(admits[j].0 - admits[i].0);
            let bound = u128::from(q.burst) * 1_000_000 + u128::from(q.rate) * elapsed;
            prop_assert!(
                units * 1_000_000 <= bound,
                "{} units admitted between {} and {} µs; rate {} burst {}",
                units,
                admits[i].0,
                admits[j].0,
                q.rate,
                q.burst
            );
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn admitted_units_never_exceed_burst_plus_rate_times_elapsed(
        (q, body, gaps) in quota_and_body()
            .prop_flat_map(|(q, b)| (Just(q), Just(b), gaps(body_time(q, b))))
    ) {
        let store = MapStore::new();
        let nb = ring(&store, 16);
        let c = [charge(ChargeKind::Bytes, q, body)];
        let mut now = START;
        let mut admits = Vec::new();
        for gap in gaps {
            now += gap;
            if nb.charge("acme", now, &c) == NodeVerdict::Admit {
                admits.push((now, body));
            }
        }
        assert_within_bound(&admits, q)?;
    }

    #[test]
    fn a_sender_at_99_percent_of_the_rate_is_never_refused_once_the_burst_drained(
        (q, body) in quota_and_body(),
        jitter in prop::collection::vec(0u64..100, 100),
    ) {
        let mut bucket = None;
        // Spend the whole burst (burst / body at once; bounded, so a bucket
        // that never refuses fails below instead of looping), then wait for
        // it to drain.
        for _ in 0..=q.burst / body {
            match gcra::check(bucket, START, body, q.rate, q.burst) {
                Verdict::Admit { bucket: b } => bucket = Some(b),
                _ => break,
            }
        }
        prop_assert!(
            !matches!(gcra::check(bucket, START, body, q.rate, q.burst), Verdict::Admit { .. }),
            "the burst is spent"
        );
        let drained = START + body_time(q, q.burst);
        // One body per `period`, 99 % of the rate; late by up to 1 % at times.
        let period = (u128::from(body) * 1_000_000 * 100).div_ceil(u128::from(q.rate) * 99) as u64;
        let mut now = drained;
        for late in jitter {
            match gcra::check(bucket, now, body, q.rate, q.burst) {
                Verdict::Admit { bucket: b } => bucket = Some(b),
                denied => prop_assert!(false, "refused at {} µs: {:?}", now - drained, denied),
            }
            now += period + period * late / 10_000;
        }
    }

    #[test]
    fn a_denials_retry_after_is_exact_and_it_writes_nothing(
        (hooks, bytes, gaps) in (quota(), quota())
            .prop_flat_map(|(h, b)| (Just(h), Just(b), gaps(body_time(h, 1)))),
        sizes in prop::collection::vec(1u64..=u64::MAX, 150),
    ) {
        let store = MapStore::new();
        let nb = ring(&store, 4);
        let mut now = START;
        for (gap, size) in gaps.into_iter().zip(sizes) {
            now += gap;
            let charges = [
                charge(ChargeKind::Hooks, hooks, 1),
                // A body over the burst is refused before it gets here.
                charge(ChargeKind::Bytes, bytes, 1 + size % bytes.burst),
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
        (hooks, bytes, gaps) in (quota(), quota())
            .prop_flat_map(|(h, b)| (Just(h), Just(b), gaps(body_time(h, 1)))),
        sizes in prop::collection::vec(1u64..=u64::MAX, 150),
    ) {
        let store = MapStore::new();
        let nb = ring(&store, 8);
        let (mut hooks_b, mut bytes_b) = (None, None);
        let mut now = START;
        for (gap, size) in gaps.into_iter().zip(sizes) {
            now += gap;
            let n = 1 + size % bytes.burst;
            let got = nb.charge(
                "acme",
                now,
                &[charge(ChargeKind::Hooks, hooks, 1), charge(ChargeKind::Bytes, bytes, n)],
            );
            // The reference: each bucket on its own, then all-or-nothing.
            let h = gcra::check(hooks_b, now, 1, hooks.rate, hooks.burst);
            let b = gcra::check(bytes_b, now, n, bytes.rate, bytes.burst);
            let want = match (h, b) {
                (Verdict::Admit { bucket: h }, Verdict::Admit { bucket: b }) => {
                    hooks_b = Some(h);
                    bytes_b = Some(b);
                    NodeVerdict::Admit
                }
                (h, b) => {
                    let wait = |v: Verdict| match v {
                        Verdict::Deny { retry_after_us, .. } => retry_after_us,
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
    /// Two workers of one node, one reading the clock up to 1 s behind the
    /// other (or a clock that stepped back by as much): the bucket never
    /// drains a µs twice, so over any window of true time the admitted units
    /// stay within `burst + rate × (elapsed + skew)`.
    #[test]
    fn workers_with_skewed_clocks_never_admit_more_than_the_skew_allows(
        (q, body, gaps) in quota_and_body()
            .prop_flat_map(|(q, b)| (Just(q), Just(b), gaps(body_time(q, b)))),
        skew in 0u64..=1_000_000,
        behind in prop::collection::vec(any::<bool>(), 150),
    ) {
        let store = MapStore::new();
        let nb = ring(&store, 4);
        let c = [charge(ChargeKind::Bytes, q, body)];
        let mut now = START;
        let mut admits = Vec::new();
        for (gap, late) in gaps.into_iter().zip(behind) {
            now += gap;
            let clock = if late { now - skew } else { now };
            if nb.charge("acme", clock, &c) == NodeVerdict::Admit {
                admits.push(now);
            }
        }
        for i in 0..admits.len() {
            for j in i..admits.len() {
                let units = u128::from((j - i + 1) as u64) * u128::from(body);
                let elapsed = u128::from(admits[j] - admits[i] + skew);
                let bound = u128::from(q.burst) * 1_000_000 + u128::from(q.rate) * elapsed;
                prop_assert!(
                    units * 1_000_000 <= bound,
                    "{} units in {} µs of true time with skew {}",
                    units, admits[j] - admits[i], skew
                );
            }
        }
    }
}

proptest! {
    // Many cases: the interesting run (every slot live, a tenant shares its
    // home slot, then moves to a slot that just went idle) is a narrow one.
    #![proptest_config(ProptestConfig::with_cases(1_000))]
    #[test]
    fn sharing_a_small_ring_never_under_counts_a_tenant(
        (rate, burst) in (20u64..1_000_000, 2u64..6),
        slots in 1usize..4,
        requests in prop::collection::vec((0usize..6, 0u64..1_000), 1..120),
    ) {
        let q = Quota { rate, burst };
        let t = body_time(q, 1);
        let store = MapStore::new();
        let nb = ring(&store, slots);
        let c = [charge(ChargeKind::Hooks, q, 1)];
        let mut now = START;
        let mut admits = vec![Vec::new(); 6];
        for (tenant, gap) in requests {
            // Gaps up to a whole interval, so slots go idle one at a time.
            now += gap * t / 1_000;
            if nb.charge(&format!("tenant-{tenant}"), now, &c) == NodeVerdict::Admit {
                admits[tenant].push((now, 1));
            }
        }
        for a in &admits {
            assert_within_bound(a, q)?;
        }
        prop_assert!(store.len() <= slots);
    }
}
