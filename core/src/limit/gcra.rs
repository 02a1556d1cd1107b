//! GCRA (the generic cell rate algorithm), exact for every rate.
//!
//! A bucket is `(stamp_us, level)`: at `stamp_us` it held `level` micro-units
//! (units × 10⁶), and it drains `rate` micro-units per µs (a rate of `rate`
//! units/s). This is GCRA's theoretical arrival time written relative to the
//! stamp and scaled by the rate (`TAT = stamp + level / rate`), so the
//! arithmetic is integer-exact for any rate: a charge of `n` units adds
//! `n × 10⁶`, the capacity is `burst × 10⁶`, and only the wait is a division.
//!
//! A charge of `n` at `now` is admitted when `drained + n × 10⁶ ≤ capacity`;
//! the bucket becomes `(now, drained + n × 10⁶)`. A denial writes nothing and
//! says exactly how long to wait: admitted at `now + retry_after`, denied one
//! µs earlier.
//!
//! Clock steps: a level above the capacity is stale (a lowered limit, a foreign
//! write) and counts as full. A stamp ahead of `now` (another worker read the
//! clock a moment later, or the clock stepped back) is kept while it leads by
//! at most [`MAX_LEAD_US`], so nothing drains twice; a stamp further ahead is
//! stale and restarts at `now` with its level (a denial then writes that
//! restamp back, spending nothing), so a backward step never stops the drain
//! for longer than that.
//!
//! The store's Lua script runs the same arithmetic on Redis's clock; its tests
//! compare the two on the same inputs. The bounds in [`crate::limit::limits`] keep
//! every intermediate below 2⁵³, where Lua's doubles are exact.

use crate::wire::{Charge, ChargeKind};

/// Micro-units in a unit.
pub const MICRO: u64 = 1_000_000;
/// The longest a stamp may lead `now` and still count (1 s): workers of one
/// node read their clocks microseconds apart, a stepped clock jumps further.
pub const MAX_LEAD_US: u64 = 1_000_000;

/// A wait in µs as the whole ms a caller is told (`retry_after_ms`):
/// rounded up, so a retry at the told time is admitted, and at least 1, so
/// no caller is told to retry at once.
pub fn wait_ms(wait_us: u64) -> u64 {
    wait_us.div_ceil(1_000).max(1)
}

/// A wait in ms as the whole seconds a sender is told (`Retry-After`, the
/// RateLimit headers' reset): rounded up, at least 1.
pub fn wait_secs(wait_ms: u64) -> u64 {
    wait_ms.div_ceil(1_000).max(1)
}

/// One bucket's state.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Bucket {
    /// When `level` was measured (µs on the caller's clock).
    pub stamp_us: u64,
    /// Micro-units held at `stamp_us`.
    pub level: u64,
}

impl Bucket {
    /// When the bucket is empty at `rate`: its TAT, rounded up to a µs.
    pub fn empty_at(&self, rate: u64) -> u64 {
        self.stamp_us
            .saturating_add(self.level.div_ceil(rate.max(1)))
    }
}

/// The outcome of one charge against one bucket.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verdict {
    /// Write `bucket` back; it can be forgotten once it is empty.
    Admit { bucket: Bucket },
    /// Nothing is spent; the same charge is admitted `retry_after_us` from
    /// now. `restamp`: the bucket's stamp was stale (see the module docs);
    /// write this back (same level, stamped now) so the drain starts, or the
    /// bucket would stay full until the clock caught up.
    Deny {
        retry_after_us: u64,
        restamp: Option<Bucket>,
    },
}

fn capacity(burst: u64) -> u64 {
    burst.saturating_mul(MICRO)
}

/// Charges `units` against `bucket` (None: never charged) of a `rate`/`burst`
/// quota at `now_us`.
///
/// Saturating arithmetic, so no input can wrap into an admit or panic; within
/// [`crate::limit::limits`] every value is exact. More units than `burst` can never
/// be admitted: denied with the longest wait (callers refuse them earlier).
pub fn check(bucket: Option<Bucket>, now_us: u64, units: u64, rate: u64, burst: u64) -> Verdict {
    check_cost(
        bucket,
        now_us,
        units.saturating_mul(MICRO),
        rate,
        capacity(burst),
    )
}

/// [`check`] in micro-units: a charge costing `cost` against a capacity of
/// `cap`, draining `rate` micro-units per µs. A node's share of a fleet quota
/// ([`crate::limit::share`]) prices a unit above 10⁶ instead of scaling the rate, so
/// every share stays exact; a cost over the capacity is never admitted.
pub fn check_cost(bucket: Option<Bucket>, now_us: u64, cost: u64, rate: u64, cap: u64) -> Verdict {
    let rate = rate.max(1);
    let b = bucket.unwrap_or_default();
    let level = b.level.min(cap);
    // A stamp leading `now` by a little is kept (elapsed 0); by more, stale.
    let lead = b.stamp_us.saturating_sub(now_us);
    if lead > MAX_LEAD_US {
        let restamped = Bucket {
            stamp_us: now_us,
            level,
        };
        return match check_cost(Some(restamped), now_us, cost, rate, cap) {
            Verdict::Deny { retry_after_us, .. } => Verdict::Deny {
                retry_after_us,
                restamp: Some(restamped),
            },
            admit => admit,
        };
    }
    let (base, elapsed) = if lead == 0 {
        (now_us, now_us - b.stamp_us)
    } else {
        (b.stamp_us, 0)
    };
    let drained = if elapsed >= level.div_ceil(rate) {
        0
    } else {
        level - elapsed * rate
    };
    if cost > cap {
        return Verdict::Deny {
            retry_after_us: u64::MAX,
            restamp: None,
        };
    }
    let need = drained.saturating_add(cost);
    if need <= cap {
        return Verdict::Admit {
            bucket: Bucket {
                stamp_us: base,
                level: need,
            },
        };
    }
    let wait_from_base = (need - cap).div_ceil(rate);
    Verdict::Deny {
        retry_after_us: (base - now_us).saturating_add(wait_from_base),
        restamp: None,
    }
}

/// A charge priced in micro-units: what [`check_cost`] takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Priced {
    pub kind: ChargeKind,
    /// Micro-units this charge adds.
    pub cost: u64,
    /// Micro-units drained per µs (the quota's rate per second).
    pub rate: u64,
    /// Micro-units the bucket holds at most.
    pub cap: u64,
}

impl Priced {
    /// A charge at its full price: `units × 10⁶` against `burst × 10⁶`.
    pub fn whole(c: &Charge) -> Priced {
        Priced {
            kind: c.kind,
            cost: c.units.saturating_mul(MICRO),
            rate: c.rate,
            cap: capacity(c.burst),
        }
    }
}

/// Why [`check_all`] refused: the longest wait, and the stale buckets to
/// write back restamped (`restamps[i]` for `buckets[i]`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Denied {
    pub retry_after_us: u64,
    pub restamps: Vec<Option<Bucket>>,
}

/// Charges every bucket or none: any denial spends nothing.
/// `buckets[i]` is the bucket of `charges[i]`; on admit, the new buckets in
/// the same order; on denial, the longest wait and the stale buckets.
pub fn check_all(
    buckets: &[Option<Bucket>],
    now_us: u64,
    charges: &[Charge],
) -> Result<Vec<Bucket>, Denied> {
    let priced: Vec<Priced> = charges.iter().map(Priced::whole).collect();
    check_all_priced(buckets, now_us, &priced)
}

/// [`check_all`] over priced charges (a node's share, see [`crate::limit::share`]).
pub fn check_all_priced(
    buckets: &[Option<Bucket>],
    now_us: u64,
    charges: &[Priced],
) -> Result<Vec<Bucket>, Denied> {
    let mut out = Vec::with_capacity(charges.len());
    let mut restamps = Vec::with_capacity(charges.len());
    let mut worst_wait = 0;
    for (bucket, c) in buckets.iter().zip(charges) {
        match check_cost(*bucket, now_us, c.cost, c.rate, c.cap) {
            Verdict::Admit { bucket } => {
                out.push(bucket);
                restamps.push(None);
            }
            Verdict::Deny {
                retry_after_us,
                restamp,
            } => {
                worst_wait = worst_wait.max(retry_after_us.max(1));
                restamps.push(restamp);
            }
        }
    }
    if worst_wait > 0 {
        Err(Denied {
            retry_after_us: worst_wait,
            restamps,
        })
    } else {
        Ok(out)
    }
}

/// A configured limit: `rate` units per second with room for `burst` at once.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Quota {
    /// Units per second (hooks, or bytes); within [`crate::limit::limits::RATE`].
    pub rate: u64,
    /// Units admitted at once from an idle bucket; within [`crate::limit::limits::BURST`].
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
            units,
            rate: self.rate,
            burst: self.burst,
        }))
    }
}

#[cfg(test)]
mod tests;
