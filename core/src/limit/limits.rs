//! Every numeric bound, in one place: the config parser and the store's wire
//! `validate` check the same ranges, so a config that loads never sends a
//! request the store refuses.
//!
//! The store keeps its numbers in Lua doubles (exact below 2⁵³) and passes
//! TTLs to Redis as PX values; the bounds keep every product the GCRA forms
//! (`burst × 10⁶ × 2`, `elapsed × rate` below the drain time) exact there.

/// An inclusive range of accepted values.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Bound {
    pub min: u64,
    pub max: u64,
}

impl Bound {
    /// `Err("must be between {min} and {max}, got {value}")` outside the range.
    pub fn check(&self, value: u64) -> Result<(), String> {
        if (self.min..=self.max).contains(&value) {
            Ok(())
        } else {
            Err(format!(
                "must be between {} and {}, got {value}",
                self.min, self.max
            ))
        }
    }
}

/// Units per second of a quota (`rate`, `bytes_rate`): up to 10⁹/s.
pub const RATE: Bound = Bound {
    min: 1,
    max: 1_000_000_000,
};
/// Units at once of a quota (`burst`, `bytes_burst`): up to 2³² (4 GiB of
/// bytes), so a level in micro-units stays below 2⁵³ with room for a charge.
pub const BURST: Bound = Bound {
    min: 1,
    max: 1 << 32,
};
/// How long a committed event key is remembered (`sources.*.ttl_ms`, a
/// claim's `ttl_ms`): up to 30 days.
pub const TTL_MS: Bound = Bound {
    min: 1,
    max: 30 * 24 * 3_600_000,
};
/// How long a claim may stay pending (`fleet.pending_ttl_ms`, a claim's
/// `pending_ttl_ms`): up to one day.
pub const PENDING_TTL_MS: Bound = Bound {
    min: 1,
    max: 24 * 3_600_000,
};
/// Budget of one store call (`fleet.timeout_ms`): it holds the hook, so it
/// stays short.
pub const TIMEOUT_MS: Bound = Bound {
    min: 1,
    max: 10_000,
};
/// Breaker window and open time (`fleet.breaker_window_ms`,
/// `fleet.breaker_open_ms`): up to one day.
pub const BREAKER_MS: Bound = Bound {
    min: 1,
    max: 24 * 3_600_000,
};
/// How often queued settle operations drain (`fleet.settle_interval_ms`): up
/// to one minute (a claim stays pending until then).
pub const SETTLE_INTERVAL_MS: Bound = Bound {
    min: 1,
    max: 60_000,
};

/// Live edges a node divides a fleet quota by while it answers alone
/// (`fleet.nodes`, a hit answer's `edges`): up to 1 000, so a share is at
/// least 1/1 000 and a degraded charge (units × 10⁶ / share, see
/// [`crate::limit::share`]) stays below 2⁶⁴ for the largest burst.
pub const EDGES: Bound = Bound { min: 1, max: 1_000 };
/// `fleet.degraded_share` in parts per million: 1/1 000 to the whole quota.
pub const SHARE_PPM: Bound = Bound {
    min: 1_000,
    max: 1_000_000,
};

/// Longest tenant name, source id or node id (bytes), in the config and on
/// the wire.
pub const MAX_NAME_LEN: usize = 64;
/// A tenant name or source id: 1 to [`MAX_NAME_LEN`] bytes of
/// `[A-Za-z0-9_-]`. It is a URL path segment an edge routes
/// (`/webhooks/{tenant}/{source}`), so no dots (`..` must never name
/// anything); the config parser and the store's wire checks use this one rule,
/// so the store holds no tenant an edge can't route.
pub fn is_valid_id(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A node name: 1..=64 bytes of `[A-Za-z0-9_.-]` (an Envoy node id may hold
/// dots). Tenants and sources follow [`is_valid_id`] (no dots).
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// What [`is_valid_id`] asks for, to end an error message with.
pub const ID_CHARS: &str = "characters of [A-Za-z0-9_-]";

/// Longest event key on the wire (bytes); longer keys are hashed by the filter
/// before they are sent (see [`crate::hook::event_key`]).
pub const MAX_KEY_LEN: usize = 200;
/// Longest hook id on the wire (bytes).
pub const MAX_HOOK_ID_LEN: usize = 64;
/// Most operations one settle request may carry, and so the largest
/// `fleet.settle_batch_max`.
pub const MAX_SETTLE_OPS: usize = 10_000;

// Checked when the crate compiles: the largest level plus the largest charge,
// and a level plus one µs of drain below the drain time, stay exact in a
// double; TTLs are exact PX values.
const _: () = assert!(BURST.max * 1_000_000 * 2 < 1 << 53);
const _: () = assert!(BURST.max * 1_000_000 + RATE.max < 1 << 53);
const _: () = assert!((BURST.max as u128) * 1_000_000 * (EDGES.max as u128) < 1 << 64);
const _: () = assert!(TTL_MS.max < 1 << 53 && PENDING_TTL_MS.max <= TTL_MS.max);

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn a_bound_names_its_range_and_the_value() {
        assert_eq!(RATE.check(1), Ok(()));
        assert_eq!(RATE.check(1_000_000_000), Ok(()));
        assert_eq!(
            RATE.check(1_000_000_001).unwrap_err(),
            "must be between 1 and 1000000000, got 1000000001"
        );
        assert_eq!(
            BURST.check(0).unwrap_err(),
            "must be between 1 and 4294967296, got 0"
        );
    }
}
