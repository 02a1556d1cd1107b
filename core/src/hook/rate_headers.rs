//! Which rate-limit headers a hook's answer carries (`rate_limits.headers`),
//! from the GCRA state that decided it, so the numbers are exact:
//!
//! - node scope (and a node-local fall-back): each charged quota's standing
//!   from the buckets the charge left (written on an admit, found on a
//!   denial);
//! - a fleet 429: the standing of a denial known by its wait
//!   ([`crate::limit::ratelimit_headers::denied`]);
//! - a fleet admit: the standing of the levels the store's answer reports
//!   for each charged bucket (the policy alone from a store that reports none);
//! - a duplicate (201) or pending (409) answer: nothing was charged, so the
//!   policy alone too.

use crate::config::Limits;
use crate::limit::gcra::{Bucket, Quota, MICRO};
use crate::limit::ratelimit_headers::HeadersMode;
use crate::limit::ratelimit_headers::{self as rl, Standing, Terms};
use crate::limit::share::Share;
use crate::wire::{Charge, ChargeKind};

/// A header's lower-case name and value.
pub type Header = (&'static str, String);

/// The policy headers of a tenant, without a standing.
pub fn policy_only(mode: HeadersMode, limits: &Limits) -> Vec<Header> {
    let unknown = Standing {
        remaining: 0,
        reset_s: 0,
    };
    rl::headers(
        mode,
        (limits.hooks, unknown),
        limits.bytes.map(|q| (q, unknown)),
    )
    .into_iter()
    .filter(|(name, _)| matches!(*name, "ratelimit-policy" | "x-ratelimit-limit"))
    .collect()
}

/// A node-local answer's headers: `buckets` are those the charge left, one
/// per `charges` (empty when contended: the policy alone). A bytes quota
/// without a charge (no body) is described by its policy alone.
pub fn node(
    mode: HeadersMode,
    limits: &Limits,
    charges: &[Charge],
    buckets: &[Bucket],
    now_us: u64,
) -> Vec<Header> {
    let of = |kind: ChargeKind, quota: Quota| {
        charges
            .iter()
            .zip(buckets)
            .find(|(c, _)| c.kind == kind)
            .map(|(_, b)| (quota, rl::standing(quota, Some(*b), now_us)))
    };
    let Some(hooks) = of(ChargeKind::Hooks, limits.hooks) else {
        return policy_only(mode, limits);
    };
    let bytes = limits.bytes.and_then(|q| of(ChargeKind::Bytes, q));
    rl::headers(mode, hooks, bytes)
}

/// [`node`] for a fleet quota answered node-local under `share` (see
/// [`crate::limit::share`]): the policy is the node's share (`q` = burst × share,
/// at least 1; `w` the time its bucket takes to refill), the standing what
/// that share has left.
pub fn node_share(
    mode: HeadersMode,
    limits: &Limits,
    charges: &[Charge],
    buckets: &[Bucket],
    now_us: u64,
    share: Share,
) -> Vec<Header> {
    if share == Share::WHOLE {
        return node(mode, limits, charges, buckets, now_us);
    }
    let of = |kind: ChargeKind, quota: Quota| {
        let (c, b) = charges.iter().zip(buckets).find(|(c, _)| c.kind == kind)?;
        let priced = share.price(c);
        let unit = share.cost(1);
        let cap = priced.cap.max(unit);
        // The bucket may hold more than the burst (one charge's floor).
        let room = Quota {
            burst: cap.div_ceil(MICRO),
            ..quota
        };
        let level = rl::level_at(Some(*b), now_us, room).min(cap);
        let terms = Terms {
            quota: share.burst(quota.burst),
            window_s: cap.div_ceil(quota.rate.max(1)).div_ceil(MICRO).max(1),
        };
        let standing = Standing {
            remaining: (cap - level) / unit,
            reset_s: level.div_ceil(quota.rate.max(1)).div_ceil(MICRO),
        };
        Some((terms, standing))
    };
    let Some(hooks) = of(ChargeKind::Hooks, limits.hooks) else {
        return policy_only(mode, limits);
    };
    let bytes = limits.bytes.and_then(|q| of(ChargeKind::Bytes, q));
    rl::headers(mode, hooks, bytes)
}

/// A fleet admit's headers: `levels` are what the store reports each of
/// `charges` left (in charge order), read as buckets measured now. Without
/// one level per charge (an older store), the policy alone.
pub fn fleet_admitted(
    mode: HeadersMode,
    limits: &Limits,
    charges: &[Charge],
    levels: &[u64],
    now_us: u64,
) -> Vec<Header> {
    if levels.len() != charges.len() {
        return policy_only(mode, limits);
    }
    let buckets: Vec<Bucket> = levels
        .iter()
        .map(|&level| Bucket {
            stamp_us: now_us,
            level,
        })
        .collect();
    node(mode, limits, charges, &buckets, now_us)
}

/// A fleet 429's headers: nothing remains until the store's wait is over.
pub fn fleet_denied(mode: HeadersMode, limits: &Limits, retry_after_ms: u64) -> Vec<Header> {
    let s = rl::denied(retry_after_ms);
    rl::headers(mode, (limits.hooks, s), limits.bytes.map(|q| (q, s)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn config(mode: &str) -> Config {
        let json = format!(
            r#"{{"sources":{{"gh":{{"tenant":"acme"}}}},
                "rate_limits":{{"headers":"{mode}","default":{{"rate":2,"burst":10}}}}}}"#
        );
        Config::parse(json.as_bytes()).unwrap()
    }

    fn hooks_charge(c: &Config) -> Charge {
        c.rate_limits
            .default
            .hooks
            .charge(ChargeKind::Hooks, "acme", 1)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn a_node_answer_reads_the_bucket_the_charge_wrote() {
        let c = config("both");
        // 3 hooks charged at t0: level 3 units; 3 remain of... 10 - 3 = 7.
        let bucket = Bucket {
            stamp_us: 1_000_000,
            level: 3 * MICRO,
        };
        let r = &c.rate_limits;
        let h = node(
            r.headers,
            &r.default,
            &[hooks_charge(&c)],
            &[bucket],
            1_000_000,
        );
        assert_eq!(
            h,
            [
                ("ratelimit-policy", "\"hooks\";q=10;w=5".to_string()),
                ("ratelimit", "\"hooks\";r=7;t=2".to_string()),
                ("x-ratelimit-limit", "10".to_string()),
                ("x-ratelimit-remaining", "7".to_string()),
                ("x-ratelimit-reset", "2".to_string()),
            ]
        );
    }

    #[test]
    fn a_fleet_denial_has_nothing_left_until_the_wait_and_an_admit_only_the_policy() {
        let c = config("ietf");
        let (mode, limits) = (c.rate_limits.headers, &c.rate_limits.default);
        assert_eq!(
            fleet_denied(mode, limits, 1_200),
            [
                ("ratelimit-policy", "\"hooks\";q=10;w=5".to_string()),
                ("ratelimit", "\"hooks\";r=0;t=2".to_string()),
            ]
        );
        assert_eq!(
            policy_only(mode, limits),
            [("ratelimit-policy", "\"hooks\";q=10;w=5".to_string())]
        );
        assert_eq!(node(mode, limits, &[], &[], 0), policy_only(mode, limits));
        assert!(fleet_denied(HeadersMode::None, limits, 5).is_empty());
    }

    #[test]
    fn a_fleet_admit_tells_the_standing_of_the_levels_the_store_reports() {
        let c = config("both");
        let (mode, limits) = (c.rate_limits.headers, &c.rate_limits.default);
        let charges = [hooks_charge(&c)];
        // The store's bucket holds 3.5 units after the charge: 6 whole units
        // remain of 10, and it drains at 2/s in 1.75 s, so 2 s.
        let h = fleet_admitted(mode, limits, &charges, &[3 * MICRO + MICRO / 2], 42);
        assert_eq!(
            h,
            [
                ("ratelimit-policy", "\"hooks\";q=10;w=5".to_string()),
                ("ratelimit", "\"hooks\";r=6;t=2".to_string()),
                ("x-ratelimit-limit", "10".to_string()),
                ("x-ratelimit-remaining", "6".to_string()),
                ("x-ratelimit-reset", "2".to_string()),
            ]
        );
        // No level per charge (a store that reports none): the policy alone.
        assert_eq!(
            fleet_admitted(mode, limits, &charges, &[], 42),
            policy_only(mode, limits)
        );
    }
}
