//! GCRA (the generic cell rate algorithm) on a theoretical arrival time.
//!
//! A bucket is one number, its TAT (µs on the caller's clock). A charge of
//! `increment` µs against `capacity` µs is admitted when
//! `max(tat, now) + increment − capacity ≤ now`; the new TAT is then
//! `max(tat, now) + increment`. A denial changes nothing and says exactly how
//! long to wait: admitted at `now + retry_after`, denied one µs earlier.
//!
//! The store's Lua script runs the same arithmetic on Redis's clock; its tests
//! compare the two on the same inputs.

use crate::wire::{Charge, ChargeKind};

/// µs in a second.
const US_PER_S: u64 = 1_000_000;

/// The outcome of one charge against one bucket.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verdict {
    /// Write `new_tat` back; the bucket can be forgotten once `now` passes it.
    Admit { new_tat: u64 },
    /// Nothing changes; the same charge is admitted `retry_after_us` from now.
    Deny { retry_after_us: u64 },
}

/// Charges `increment_us` against a bucket at `tat` (None: never charged).
///
/// Computed in u128, so no input can overflow, wrap into an admit, or panic;
/// a TAT past `u64::MAX` is denied (its wait is clamped to `u64::MAX`).
pub fn check(tat: Option<u64>, now_us: u64, increment_us: u64, capacity_us: u64) -> Verdict {
    let base = u128::from(tat.unwrap_or(0).max(now_us));
    let new_tat = base + u128::from(increment_us);
    let allow_at = new_tat.saturating_sub(u128::from(capacity_us));
    let now = u128::from(now_us);
    match u64::try_from(new_tat) {
        Ok(new_tat) if allow_at <= now => Verdict::Admit { new_tat },
        _ => Verdict::Deny {
            retry_after_us: u64::try_from(allow_at.saturating_sub(now).max(1)).unwrap_or(u64::MAX),
        },
    }
}

/// Charges every bucket or none: the first denial wins and nothing is written.
/// `tats[i]` is the TAT of `charges[i]`'s bucket; on admit, the new TATs in
/// the same order.
pub fn check_all(
    tats: &[Option<u64>],
    now_us: u64,
    charges: &[(u64, u64)],
) -> Result<Vec<u64>, u64> {
    let mut out = Vec::with_capacity(charges.len());
    let mut worst_wait = 0;
    for (tat, &(increment, capacity)) in tats.iter().zip(charges) {
        match check(*tat, now_us, increment, capacity) {
            Verdict::Admit { new_tat } => out.push(new_tat),
            Verdict::Deny { retry_after_us } => worst_wait = worst_wait.max(retry_after_us),
        }
    }
    if worst_wait > 0 {
        Err(worst_wait)
    } else {
        Ok(out)
    }
}

/// A configured limit: `rate` units per second with room for `burst` at once.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Quota {
    /// Units per second (hooks, or bytes); ≥ 1.
    pub rate: u64,
    /// Units admitted at once from an idle bucket; ≥ 1.
    pub burst: u64,
}

/// Why a hook can't be charged at all, whatever the bucket holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ChargeError {
    /// A body of `size` bytes is larger than the bytes burst: it could never be
    /// admitted, so retrying is pointless (413, not 429).
    TooLarge { size: u64, burst: u64 },
}

impl Quota {
    /// Emission interval `T` in µs per unit, at least 1 µs (rates above
    /// 1 000 000/s are treated as 1 000 000/s rather than free).
    pub fn interval_us(&self) -> u64 {
        (US_PER_S / self.rate.max(1)).max(1)
    }

    /// `T × burst`.
    pub fn capacity_us(&self) -> u64 {
        self.interval_us().saturating_mul(self.burst)
    }

    /// The charge for `units` (1 for a hook, the body length for bytes).
    /// Zero units (an empty body) charges nothing: `Ok(None)`.
    pub fn charge(
        &self,
        kind: ChargeKind,
        tenant: &str,
        units: u64,
    ) -> Result<Option<Charge>, ChargeError> {
        if units == 0 {
            return Ok(None);
        }
        if units > self.burst {
            return Err(ChargeError::TooLarge {
                size: units,
                burst: self.burst,
            });
        }
        Ok(Some(Charge {
            kind,
            tenant: tenant.to_string(),
            increment_us: self.interval_us().saturating_mul(units),
            capacity_us: self.capacity_us(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const T: u64 = 10_000; // 100/s

    #[test]
    fn idle_bucket_admits_a_whole_burst_then_denies() {
        let (inc, cap) = (T, 5 * T);
        let mut tat = None;
        for _ in 0..5 {
            match check(tat, 1_000_000, inc, cap) {
                Verdict::Admit { new_tat } => tat = Some(new_tat),
                other => panic!("burst not admitted: {other:?}"),
            }
        }
        assert_eq!(
            check(tat, 1_000_000, inc, cap),
            Verdict::Deny { retry_after_us: T }
        );
    }

    #[test]
    fn denial_retry_after_is_exact() {
        let tat = Some(1_000_000 + 5 * T);
        let Verdict::Deny { retry_after_us } = check(tat, 1_000_000, T, 5 * T) else {
            panic!("expected a denial")
        };
        assert!(matches!(
            check(tat, 1_000_000 + retry_after_us, T, 5 * T),
            Verdict::Admit { .. }
        ));
        assert!(matches!(
            check(tat, 1_000_000 + retry_after_us - 1, T, 5 * T),
            Verdict::Deny { .. }
        ));
    }

    #[test]
    fn check_all_is_all_or_nothing_and_reports_the_longest_wait() {
        let now = 1_000_000;
        let full = Some(now + 5 * T);
        assert_eq!(
            check_all(&[None, full], now, &[(T, 5 * T), (2 * T, 5 * T)]),
            Err(2 * T)
        );
        assert_eq!(
            check_all(&[None, None], now, &[(T, 5 * T), (T, 5 * T)]),
            Ok(vec![now + T, now + T])
        );
    }

    #[test]
    fn quota_turns_into_increment_and_capacity() {
        let q = Quota {
            rate: 50,
            burst: 100,
        };
        assert_eq!(q.interval_us(), 20_000);
        let c = q.charge(ChargeKind::Hooks, "acme", 1).unwrap().unwrap();
        assert_eq!((c.increment_us, c.capacity_us), (20_000, 2_000_000));
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
    }

    #[test]
    fn huge_numbers_saturate_instead_of_overflowing() {
        assert!(matches!(
            check(Some(u64::MAX), 5, u64::MAX, u64::MAX),
            Verdict::Deny { .. }
        ));
        let q = Quota {
            rate: u64::MAX,
            burst: u64::MAX,
        };
        assert_eq!(q.interval_us(), 1);
        assert_eq!(q.capacity_us(), u64::MAX);
    }
}
