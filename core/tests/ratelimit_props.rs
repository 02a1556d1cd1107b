//! The rate-limit headers against the GCRA state, over arbitrary quotas and
//! request times: `r` is the whole units left after draining, a hook is
//! admitted exactly when `r >= 1`, and `t` is the seconds until the bucket
//! is full again.
#![cfg(not(target_arch = "wasm32"))]

use ankusa_core::limit::gcra::{self, Bucket, Quota, Verdict, MICRO};
use ankusa_core::limit::ratelimit_headers::{level_at, standing};
use proptest::prelude::*;

const START: u64 = 1_796_000_000_000_000;

proptest! {
    #[test]
    fn remaining_and_reset_match_the_gcra(
        rate in 1u64..=1_000_000_000,
        burst in 1u64..=1_000_000,
        gaps in prop::collection::vec(0u64..3_000_000, 1..60),
    ) {
        let quota = Quota { rate, burst };
        let mut bucket: Option<Bucket> = None;
        let mut now = START;
        for gap in gaps {
            now += gap;
            let s = standing(quota, bucket, now);
            let level = level_at(bucket, now, quota);
            prop_assert_eq!(s.remaining, (burst * MICRO - level) / MICRO);
            prop_assert_eq!(s.reset_s, level.div_ceil(rate).div_ceil(MICRO));
            match gcra::check(bucket, now, 1, rate, burst) {
                Verdict::Admit { bucket: next } => {
                    prop_assert!(s.remaining >= 1, "admitted with r=0");
                    // After the charge: one unit fewer, and full at its empty time.
                    prop_assert_eq!(standing(quota, Some(next), now).remaining, s.remaining - 1);
                    let full_at = next.empty_at(rate);
                    prop_assert_eq!(
                        standing(quota, Some(next), now).reset_s,
                        (full_at - now).div_ceil(MICRO)
                    );
                    prop_assert_eq!(standing(quota, Some(next), full_at).remaining, burst);
                    bucket = Some(next);
                }
                Verdict::Deny { .. } => prop_assert_eq!(s.remaining, 0, "denied with r>0"),
            }
        }
    }
}
