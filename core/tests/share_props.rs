//! A node's share of a fleet quota ([`ankusa_core::limit::share`]) over arbitrary
//! quotas, live edge counts, pinned shares and request times: the shared
//! bucket never admits more than `max(burst × share, one charge) + rate ×
//! share × t` (exact, with the rounding of a unit's price), a sender within
//! the share is never refused once its burst drained, and the RateLimit
//! headers of a shared answer say `r ≥ 1` exactly when the next hook passes.
#![cfg(not(target_arch = "wasm32"))]

mod quotas;

use ankusa_core::config::Limits;
use ankusa_core::hook::rate_headers::node_share;
use ankusa_core::limit::gcra::{self, Bucket, Quota, Verdict, MICRO};
use ankusa_core::limit::ratelimit_headers::HeadersMode;
use ankusa_core::limit::share::Share;
use ankusa_core::node::cas::{ensure_keys, MapStore};
use ankusa_core::node::node_buckets::{NodeBuckets, NodeVerdict};
use ankusa_core::wire::ChargeKind;
use proptest::prelude::*;
use quotas::{charge, quota, START};

/// A share and its exact fraction (num, den): one of 1..=1000 live edges,
/// or a pinned share in parts per million (what `fleet.degraded_share` takes).
fn share() -> impl Strategy<Value = (Share, u64, u64)> {
    prop_oneof![
        (1u64..=8).prop_map(|n| (Share::of_edges(n), 1, n)),
        (1u64..=1_000).prop_map(|n| (Share::of_edges(n), 1, n)),
        (1_000u64..=1_000_000).prop_map(|ppm| (Share::from_ppm(ppm), ppm, 1_000_000)),
    ]
}

/// µs one charge of `units` takes to drain under the share, at least 1.
fn charge_time(q: Quota, units: u64, num: u64, den: u64) -> u64 {
    let t = (u128::from(units) * u128::from(MICRO) * u128::from(den))
        .div_ceil(u128::from(q.rate) * u128::from(num));
    u64::try_from(t)
        .unwrap_or(u64::MAX / 4)
        .clamp(1, u64::MAX / 4)
}

fn gaps(t: u64) -> impl Strategy<Value = Vec<u64>> {
    let t = t.min(1 << 40);
    prop::collection::vec(prop_oneof![Just(0u64), 0..t, 0..4 * t], 1..150)
}

proptest! {
    #[test]
    fn a_shared_bucket_never_admits_more_than_its_share(
        (q, units, (share, num, den), gaps) in (quota(), share())
            .prop_flat_map(|(q, s)| (Just(q), 1..=q.burst.min(1 << 20), Just(s)))
            .prop_flat_map(|(q, u, s)| (Just(q), Just(u), Just(s), gaps(charge_time(q, u, s.1, s.2))))
    ) {
        let store = MapStore::new();
        let nb = NodeBuckets::new(&store, "rl:", 16);
        ensure_keys(&store, nb.keys());
        let c = [charge(ChargeKind::Bytes, q, units)];
        let mut now = START;
        let mut admits = Vec::new();
        for gap in gaps {
            now += gap;
            if nb.charge_share("acme", now, &c, share).0 == NodeVerdict::Admit {
                admits.push(now);
            }
        }
        // Over every window: admitted × units ≤ max(burst × share, units)
        // + rate × share × elapsed, times den/num and 10⁶ to stay whole.
        let floor = (u128::from(q.burst) * u128::from(num)).max(u128::from(units) * u128::from(den));
        for i in 0..admits.len() {
            for j in i..admits.len() {
                let count = (j - i + 1) as u128;
                let elapsed = u128::from(admits[j] - admits[i]);
                let spent = count * u128::from(units) * u128::from(MICRO) * u128::from(den);
                let bound = floor * u128::from(MICRO) + u128::from(q.rate) * u128::from(num) * elapsed;
                prop_assert!(
                    spent <= bound,
                    "{} charges of {} in {} µs; rate {} burst {} share {}/{}",
                    count, units, elapsed, q.rate, q.burst, num, den
                );
            }
        }
    }

    #[test]
    fn a_sender_within_its_share_is_never_refused_once_the_burst_drained(
        q in quota(),
        (share, num, den) in share(),
        jitter in prop::collection::vec(0u64..100, 100),
    ) {
        let priced = share.price(&charge(ChargeKind::Hooks, q, 1));
        // The whole share of the burst spent at START (up to 2³² hooks: set, not looped).
        let mut bucket = Some(Bucket { stamp_us: START, level: priced.cap });
        let drained = START + priced.cap.div_ceil(q.rate) + 1;
        // One hook per period at 99 % of rate × share (the price rounds up by
        // at most one micro-unit, well inside that 1 %).
        let period = (u128::from(MICRO) * u128::from(den) * 100)
            .div_ceil(u128::from(q.rate) * u128::from(num) * 99) as u64 + 1;
        let mut now = drained;
        for late in jitter {
            match gcra::check_cost(bucket, now, priced.cost, priced.rate, priced.cap) {
                Verdict::Admit { bucket: b } => bucket = Some(b),
                denied => prop_assert!(false, "refused at {} µs: {:?}", now - drained, denied),
            }
            now += period + period * late / 10_000;
        }
    }

    #[test]
    fn shared_headers_say_r_at_least_one_exactly_when_the_next_hook_passes(
        rate in 1u64..10_000,
        burst in 1u64..10_000,
        (share, _, _) in share(),
        gaps in prop::collection::vec(0u64..2_000_000, 1..40),
    ) {
        let q = Quota { rate, burst };
        let limits = Limits { hooks: q, bytes: None };
        let c = [charge(ChargeKind::Hooks, q, 1)];
        let priced = share.price(&c[0]);
        let mut bucket = Bucket::default();
        let mut now = START;
        for gap in gaps {
            now += gap;
            let headers = node_share(HeadersMode::Legacy, &limits, &c, &[bucket], now, share);
            let remaining: u64 = headers
                .iter()
                .find(|(name, _)| *name == "x-ratelimit-remaining")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(u64::MAX);
            let limit: u64 = headers
                .iter()
                .find(|(name, _)| *name == "x-ratelimit-limit")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            prop_assert_eq!(limit, share.burst(burst));
            match gcra::check_cost(Some(bucket), now, priced.cost, priced.rate, priced.cap) {
                Verdict::Admit { bucket: b } => {
                    prop_assert!(remaining >= 1, "admitted with r=0");
                    bucket = b;
                }
                Verdict::Deny { .. } => prop_assert_eq!(remaining, 0, "denied with r>0"),
            }
        }
    }
}

#[test]
fn two_edges_at_half_share_admit_the_fleet_quota_once() {
    // Each of two edges alone, both at full speed for 10 s: the fleet admits
    // burst + rate × 10 s, as one store would (50/s, burst 50: 550).
    let q = Quota {
        rate: 50,
        burst: 50,
    };
    let c = [charge(ChargeKind::Hooks, q, 1)];
    let mut total = 0;
    for _ in 0..2 {
        let store = MapStore::new();
        let nb = NodeBuckets::new(&store, "rl:", 4);
        ensure_keys(&store, nb.keys());
        let mut now = START;
        while now <= START + 10_000_000 {
            if nb.charge_share("acme", now, &c, Share::of_edges(2)).0 == NodeVerdict::Admit {
                total += 1;
            }
            now += 1_000;
        }
    }
    assert_eq!(total, 550);
}
