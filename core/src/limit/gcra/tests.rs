use super::*;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const NOW: u64 = 1_796_000_000_000_000;

fn admit(v: Verdict) -> Bucket {
    match v {
        Verdict::Admit { bucket } => bucket,
        other => panic!("expected an admit, got {other:?}"),
    }
}

fn wait(v: Verdict) -> u64 {
    match v {
        Verdict::Deny { retry_after_us, .. } => retry_after_us,
        other => panic!("expected a denial, got {other:?}"),
    }
}

/// A greedy sender asking for `body` units every `gap_us` over `span_us`,
/// from an idle bucket: (units admitted, times of the admits).
fn greedy(q: Quota, body: u64, gap_us: u64, span_us: u64) -> (u64, Vec<u64>) {
    let mut bucket = None;
    let (mut total, mut at) = (0, Vec::new());
    let mut now = NOW;
    while now <= NOW + span_us {
        if let Verdict::Admit { bucket: b } = check(bucket, now, body, q.rate, q.burst) {
            bucket = Some(b);
            total += body;
            at.push(now);
        }
        now += gap_us;
    }
    (total, at)
}

#[test]
fn idle_bucket_admits_a_whole_burst_then_waits_exactly_one_interval() {
    let (rate, burst) = (100, 5);
    let mut bucket = None;
    for _ in 0..5 {
        bucket = Some(admit(check(bucket, NOW, 1, rate, burst)));
    }
    assert_eq!(wait(check(bucket, NOW, 1, rate, burst)), 10_000);
}

#[test]
fn retry_after_is_exact_for_rates_that_do_not_divide_a_second() {
    for (rate, burst, units) in [(3, 7, 2), (600_000, 600_000, 100_000), (999_999_937, 13, 5)] {
        let mut bucket = None;
        // Bounded: a burst admits burst / units at once, and a bucket that
        // never refuses fails below instead of looping.
        for _ in 0..=burst / units {
            match check(bucket, NOW, units, rate, burst) {
                Verdict::Admit { bucket: b } => bucket = Some(b),
                _ => break,
            }
        }
        let w = wait(check(bucket, NOW, units, rate, burst));
        assert!(matches!(
            check(bucket, NOW + w, units, rate, burst),
            Verdict::Admit { .. }
        ));
        assert!(matches!(
            check(bucket, NOW + w - 1, units, rate, burst),
            Verdict::Deny { .. }
        ));
    }
}

#[test]
fn a_bytes_rate_of_600000_admits_600000_per_second_not_a_million() {
    // Whole-µs intervals made this 1 µs per byte: 1 000 000 B/s.
    let q = Quota {
        rate: 600_000,
        burst: 600_000,
    };
    let (total, _) = greedy(q, 100_000, 1_000, 2_000_000);
    let bound = q.burst + q.rate * 2;
    assert!(total <= bound, "{total} B admitted in 2 s, bound {bound}");
    assert!(total >= bound - 100_000, "{total} B admitted in 2 s");
}

#[test]
fn rates_above_a_million_per_second_are_not_capped() {
    let q = Quota {
        rate: 1_000_000_000,
        burst: 1_000,
    };
    // 1 000 units per µs: after the burst, 1 000 more every µs.
    let (total, _) = greedy(q, 1_000, 1, 1_000);
    assert_eq!(total, q.burst + 1_000 * 1_000);
}

#[test]
fn check_all_is_all_or_nothing_and_reports_the_longest_wait() {
    let q = Quota {
        rate: 100,
        burst: 5,
    };
    let c = |units| q.charge(ChargeKind::Hooks, "acme", units).unwrap().unwrap();
    let full = Some(Bucket {
        stamp_us: NOW,
        level: 5 * MICRO,
    });
    assert_eq!(
        check_all(&[None, full], NOW, &[c(1), c(2)]),
        Err(Denied {
            retry_after_us: 20_000,
            restamps: vec![None, None]
        })
    );
    let fresh = Bucket {
        stamp_us: NOW,
        level: MICRO,
    };
    assert_eq!(
        check_all(&[None, None], NOW, &[c(1), c(1)]),
        Ok(vec![fresh, fresh])
    );
}

#[test]
fn quota_charges_carry_what_the_user_wrote() {
    let q = Quota {
        rate: 600_000,
        burst: 600_000,
    };
    let c = q
        .charge(ChargeKind::Bytes, "acme", 100_000)
        .unwrap()
        .unwrap();
    assert_eq!((c.units, c.rate, c.burst), (100_000, 600_000, 600_000));
}

#[test]
fn body_over_the_bytes_burst_is_too_large_not_admitted() {
    let q = Quota {
        rate: 1024,
        burst: 4096,
    };
    assert_eq!(
        q.charge(ChargeKind::Bytes, "acme", 4097),
        Err(ChargeError::TooLarge {
            size: 4097,
            burst: 4096
        })
    );
    assert_eq!(q.charge(ChargeKind::Bytes, "acme", 0), Ok(None));
    assert!(q.charge(ChargeKind::Bytes, "acme", 4096).unwrap().is_some());
    assert_eq!(wait(check(None, NOW, 4097, 1024, 4096)), u64::MAX);
}

#[test]
fn huge_numbers_saturate_instead_of_overflowing() {
    let b = Some(Bucket {
        stamp_us: u64::MAX,
        level: u64::MAX,
    });
    assert!(matches!(
        check(b, 5, u64::MAX, u64::MAX, u64::MAX),
        Verdict::Deny { .. } | Verdict::Admit { .. }
    ));
    assert!(matches!(check(b, u64::MAX, 1, 1, 1), Verdict::Deny { .. }));
}

#[test]
fn a_level_above_the_capacity_counts_as_full_not_more() {
    // Written under a larger burst, then the limit was lowered to 5.
    let b = Some(Bucket {
        stamp_us: NOW,
        level: 1_000 * MICRO,
    });
    assert_eq!(wait(check(b, NOW, 1, 100, 5)), 10_000);
}

#[test]
fn a_backward_clock_step_keeps_the_level_and_does_not_stop_the_drain() {
    let (rate, burst) = (100, 5);
    let full = Bucket {
        stamp_us: NOW,
        level: 5 * MICRO,
    };
    // The clock steps back an hour: the full bucket still drains from now,
    // so the next hook waits one interval, not an hour.
    let back = NOW - 3_600_000_000;
    let restamped = Bucket {
        stamp_us: back,
        level: 5 * MICRO,
    };
    assert_eq!(
        check(Some(full), back, 1, rate, burst),
        Verdict::Deny {
            retry_after_us: 10_000,
            restamp: Some(restamped)
        }
    );
    let b = admit(check(Some(restamped), back + 10_000, 1, rate, burst));
    assert_eq!(b.stamp_us, back + 10_000);
    // And it admits no more than a full bucket allows: nothing was forgotten.
    assert!(matches!(
        check(Some(b), back + 10_000, 1, rate, burst),
        Verdict::Deny { .. }
    ));
}

#[test]
fn a_forward_clock_step_only_drains_the_bucket() {
    let (rate, burst) = (100, 5);
    let full = Some(Bucket {
        stamp_us: NOW,
        level: 5 * MICRO,
    });
    let mut b = full;
    let later = NOW + 3_600_000_000;
    for _ in 0..5 {
        b = Some(admit(check(b, later, 1, rate, burst)));
    }
    assert_eq!(wait(check(b, later, 1, rate, burst)), 10_000);
}

#[test]
fn workers_reading_the_clock_microseconds_apart_drain_nothing_twice() {
    // rate 10⁹/s: one µs is 1 000 units, so a µs counted twice would show.
    let (rate, burst) = (1_000_000_000, 1_000);
    let mut b = Bucket {
        stamp_us: NOW,
        level: 1_000 * MICRO,
    };
    let mut admitted = 0;
    // Two workers alternate, one always 3 µs behind the other.
    for i in 0..100 {
        for now in [NOW + i, NOW + i - 3] {
            if let Verdict::Admit { bucket } = check(Some(b), now, 1_000, rate, burst) {
                b = bucket;
                admitted += 1_000;
            }
        }
    }
    // 99 µs passed: at most 99 000 units, whatever the order of the reads.
    assert!(admitted <= 99 * 1_000, "{admitted} admitted in 99 µs");
    assert!(admitted >= 96 * 1_000, "{admitted} admitted in 99 µs");
}

#[test]
fn a_stamp_slightly_ahead_gives_an_exact_wait_from_it() {
    let (rate, burst) = (100, 5);
    let b = Some(Bucket {
        stamp_us: NOW + 500,
        level: 5 * MICRO,
    });
    let w = wait(check(b, NOW, 1, rate, burst));
    assert_eq!(w, 500 + 10_000);
    assert!(matches!(
        check(b, NOW + w, 1, rate, burst),
        Verdict::Admit { .. }
    ));
    assert!(matches!(
        check(b, NOW + w - 1, 1, rate, burst),
        Verdict::Deny { .. }
    ));
}

/// The clock-lead bound is inclusive: a stamp exactly [`MAX_LEAD_US`] ahead
/// is still trusted (kept, nothing restamped); one µs more is stale. The
/// store's `gcra.lua` draws the line at the same place (its parity test).
#[test]
fn a_stamp_exactly_max_lead_ahead_is_kept_one_more_is_restamped() {
    let (rate, burst) = (100, 5);
    let at_bound = Bucket {
        stamp_us: NOW + MAX_LEAD_US,
        level: 5 * MICRO,
    };
    assert_eq!(
        check(Some(at_bound), NOW, 1, rate, burst),
        Verdict::Deny {
            retry_after_us: MAX_LEAD_US + 10_000,
            restamp: None
        }
    );
    let past_bound = Bucket {
        stamp_us: NOW + MAX_LEAD_US + 1,
        ..at_bound
    };
    assert_eq!(
        check(Some(past_bound), NOW, 1, rate, burst),
        Verdict::Deny {
            retry_after_us: 10_000,
            restamp: Some(Bucket {
                stamp_us: NOW,
                level: 5 * MICRO
            })
        }
    );
}

/// The properties of `core/tests/proptests.rs` on a few fixed cases, so they
/// run as wasm too (proptest does not build for wasm32-unknown-unknown).
#[test]
fn fixed_cases_keep_the_window_bound_and_the_99_percent_sender() {
    for (rate, burst, body) in [
        (1, 1, 1),
        (3, 10, 7),
        (600_000, 600_000, 100_000),
        (1_048_576, 4_194_304, 65_536),
        (1_000_000_000, 1 << 32, 1 << 20),
    ] {
        let q = Quota { rate, burst };
        let gap = (body * 1_000_000 / rate / 4).max(1);
        let (_, at) = greedy(q, body, gap, gap * 400);
        for i in 0..at.len() {
            for j in i..at.len() {
                let got = u128::from((j - i + 1) as u64 * body);
                let bound = u128::from(burst)
                    + (u128::from(rate) * u128::from(at[j] - at[i])).div_ceil(1_000_000)
                    + 1;
                assert!(got <= bound, "rate {rate} burst {burst}: {got} > {bound}");
            }
        }
        // A sender at 99 % of the rate, after the burst drained, is never refused.
        let period = (u128::from(body) * 1_000_000 * 100).div_ceil(u128::from(rate) * 99) as u64;
        let mut bucket = None;
        let mut now = NOW;
        for _ in 0..200 {
            match check(bucket, now, body, rate, burst) {
                Verdict::Admit { bucket: b } => bucket = Some(b),
                d => panic!("rate {rate} burst {burst} body {body}: {d:?}"),
            }
            now += period;
        }
    }
}

#[test]
fn a_wait_in_us_is_told_in_whole_ms_rounded_up_and_never_zero() {
    assert_eq!(wait_ms(0), 1);
    assert_eq!(wait_ms(1), 1);
    assert_eq!(wait_ms(1_000), 1);
    assert_eq!(wait_ms(1_001), 2);
    assert_eq!(wait_ms(u64::MAX), u64::MAX.div_ceil(1_000));
}
