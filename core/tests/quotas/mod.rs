//! What the property tests of the core share: a charge built from what the
//! user writes (`Quota { rate, burst }`), quotas anywhere in the core's
//! limits, and a start time.

use ankusa_core::limit::gcra::Quota;
use ankusa_core::wire::{Charge, ChargeKind};
use proptest::prelude::*;

pub const START: u64 = 1_796_000_000_000_000;

pub fn charge(kind: ChargeKind, q: Quota, units: u64) -> Charge {
    Charge {
        kind,
        tenant: String::new(),
        units,
        rate: q.rate,
        burst: q.burst,
    }
}

/// A quota anywhere in the core's limits, often small, sometimes at the top.
pub fn quota() -> impl Strategy<Value = Quota> {
    let rate = prop_oneof![1u64..1_000, 1u64..=1_000_000_000, Just(1_000_000_000)];
    let burst = prop_oneof![1u64..100, 1u64..10_000_000, Just(1u64 << 32)];
    (rate, burst).prop_map(|(rate, burst)| Quota { rate, burst })
}
