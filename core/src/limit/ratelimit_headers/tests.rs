use super::*;
use crate::limit::gcra::{check, Verdict};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const T0: u64 = 1_796_000_000_000_000;

fn q(rate: u64, burst: u64) -> Quota {
    Quota { rate, burst }
}

fn admit(bucket: Option<Bucket>, now: u64, quota: Quota) -> Option<Bucket> {
    match check(bucket, now, 1, quota.rate, quota.burst) {
        Verdict::Admit { bucket } => Some(bucket),
        Verdict::Deny { .. } => None,
    }
}

#[test]
fn the_draft_examples_for_a_quota_of_100_per_50_per_second() {
    let quota = q(50, 100);
    // 63 hooks at once: 37 left, and 63 units drain in 1.26 s -> t=2.
    let mut b = None;
    for _ in 0..63 {
        b = admit(b, T0, quota);
    }
    let s = standing(quota, b, T0);
    assert_eq!(
        s,
        Standing {
            remaining: 37,
            reset_s: 2
        }
    );
    assert_eq!(policy_item(Policy::Hooks, quota), "\"hooks\";q=100;w=2");
    assert_eq!(ratelimit_item(Policy::Hooks, s), "\"hooks\";r=37;t=2");
}

#[test]
fn an_untouched_bucket_has_the_whole_burst_and_nothing_to_reset() {
    let s = standing(q(3, 10), None, T0);
    assert_eq!(
        s,
        Standing {
            remaining: 10,
            reset_s: 0
        }
    );
    assert_eq!(window_s(q(3, 10)), 4);
    assert_eq!(window_s(q(1000, 10)), 1);
}

#[test]
fn remaining_counts_whole_units_after_draining_to_now() {
    let quota = q(2, 5);
    let mut b = None;
    for _ in 0..5 {
        b = admit(b, T0, quota);
    }
    assert_eq!(standing(quota, b, T0).remaining, 0);
    // Half a unit drained is no unit; a whole one is.
    assert_eq!(standing(quota, b, T0 + 250_000).remaining, 0);
    assert_eq!(standing(quota, b, T0 + 500_000).remaining, 1);
    assert_eq!(standing(quota, b, T0 + 500_000).reset_s, 2);
    assert_eq!(
        standing(quota, b, T0 + 2_500_000),
        Standing {
            remaining: 5,
            reset_s: 0
        }
    );
}

#[test]
fn a_hook_is_admitted_exactly_when_remaining_is_at_least_one() {
    // A sweep over rates, bursts and times, against the GCRA itself.
    for (rate, burst) in [(1, 1), (1, 3), (7, 5), (1000, 2), (3, 1000)] {
        let quota = q(rate, burst);
        let mut b = None;
        let mut now = T0;
        for step in 0..400u64 {
            now += (step * 7919) % 400_000;
            let s = standing(quota, b, now);
            let level = level_at(b, now, quota);
            assert_eq!(s.remaining, (burst * MICRO - level) / MICRO);
            match admit(b, now, quota) {
                Some(next) => {
                    assert!(s.remaining >= 1, "{quota:?} at {now}: admitted with r=0");
                    b = Some(next);
                    // Reset: the bucket is full again at its empty time.
                    let after = standing(quota, b, now);
                    let empty_at = next.empty_at(rate);
                    assert_eq!(after.reset_s, (empty_at - now).div_ceil(MICRO));
                    assert_eq!(standing(quota, b, empty_at).remaining, burst);
                }
                None => assert_eq!(s.remaining, 0, "{quota:?} at {now}: denied with r>0"),
            }
        }
    }
}

#[test]
fn a_stale_level_above_a_lowered_burst_counts_as_full() {
    let b = Some(Bucket {
        stamp_us: T0,
        level: 50 * MICRO,
    });
    assert_eq!(
        standing(q(1, 10), b, T0),
        Standing {
            remaining: 0,
            reset_s: 10
        }
    );
}

#[test]
fn a_fleet_denial_shows_nothing_left_until_its_wait() {
    assert_eq!(
        denied(1),
        Standing {
            remaining: 0,
            reset_s: 1
        }
    );
    assert_eq!(
        denied(1500),
        Standing {
            remaining: 0,
            reset_s: 2
        }
    );
}

#[test]
fn each_mode_sends_its_set() {
    let hooks = (
        q(50, 100),
        Standing {
            remaining: 37,
            reset_s: 2,
        },
    );
    let bytes = Some((
        q(1024, 4096),
        Standing {
            remaining: 4000,
            reset_s: 1,
        },
    ));
    let ietf = headers(HeadersMode::Ietf, hooks, bytes);
    assert_eq!(
        ietf,
        vec![
            (
                "ratelimit-policy",
                "\"hooks\";q=100;w=2, \"bytes\";q=4096;qu=\"content-bytes\";w=4".to_string()
            ),
            (
                "ratelimit",
                "\"hooks\";r=37;t=2, \"bytes\";r=4000;t=1".to_string()
            ),
        ]
    );
    let legacy = headers(HeadersMode::Legacy, hooks, None);
    assert_eq!(
        legacy,
        vec![
            ("x-ratelimit-limit", "100".to_string()),
            ("x-ratelimit-remaining", "37".to_string()),
            ("x-ratelimit-reset", "2".to_string()),
        ]
    );
    assert_eq!(headers(HeadersMode::Both, hooks, None).len(), 5);
    assert!(headers(HeadersMode::None, hooks, bytes).is_empty());
}

#[test]
fn modes_parse_their_spellings_only() {
    for m in [
        HeadersMode::Ietf,
        HeadersMode::Legacy,
        HeadersMode::Both,
        HeadersMode::None,
    ] {
        assert_eq!(HeadersMode::parse(m.as_str()), Some(m));
    }
    assert_eq!(HeadersMode::parse("IETF"), None);
    assert_eq!(HeadersMode::default(), HeadersMode::Ietf);
}

#[test]
fn numbers_are_written_in_decimal_from_zero_to_u64_max() {
    for n in [0, 7, 10, 99, 100, 1_000_000, 18_446_744_073_709_551_615] {
        assert_eq!(decimal(n), n.to_string());
    }
    let quota = q(u64::MAX, u64::MAX);
    assert_eq!(
        policy_item(Policy::Bytes, quota),
        "\"bytes\";q=18446744073709551615;qu=\"content-bytes\";w=1"
    );
}
