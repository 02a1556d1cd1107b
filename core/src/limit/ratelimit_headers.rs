//! Rate-limit answer headers from the GCRA state, so the numbers are exact.
//!
//! IETF form (draft-ietf-httpapi-ratelimit-headers): one policy per quota,
//! named `"hooks"` (and `"bytes"`, with `qu="content-bytes"`):
//!
//! - `RateLimit-Policy: "hooks";q=<burst>;w=<ceil(burst / rate)>`: the
//!   quota is the burst the user wrote; the window is how long an empty
//!   GCRA bucket takes to refill from nothing to the whole burst (a bucket
//!   is never reset at once, it drains at `rate`).
//! - `RateLimit: "hooks";r=<remaining>;t=<reset>`: `remaining` is the
//!   number of whole units the bucket admits now (`floor((capacity − level)
//!   / 10⁶)` after draining to now, so a hook is admitted iff `r ≥ 1`);
//!   `reset` is the seconds until the bucket is full again (level 0),
//!   rounded up.
//!
//! Legacy form: `X-RateLimit-Limit` (burst), `X-RateLimit-Remaining`,
//! `X-RateLimit-Reset` (seconds, as `t`). `Retry-After` on a 429 is unchanged
//! (from the denial's wait).
//!
//! Which set an edge sends is `rate_limits.headers` ([`HeadersMode`]).

use crate::limit::gcra::{Bucket, Quota, MICRO};

/// `rate_limits.headers`: which headers a rate-limited source's answers carry.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum HeadersMode {
    /// `RateLimit-Policy` and `RateLimit` (the default).
    #[default]
    Ietf,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset`.
    Legacy,
    /// Both sets.
    Both,
    /// Neither (`Retry-After` on a 429 still goes out).
    None,
}

impl HeadersMode {
    /// The JSON spelling: `"ietf"`, `"legacy"`, `"both"`, `"none"`.
    pub fn parse(text: &str) -> Option<HeadersMode> {
        match text {
            "ietf" => Some(HeadersMode::Ietf),
            "legacy" => Some(HeadersMode::Legacy),
            "both" => Some(HeadersMode::Both),
            "none" => Some(HeadersMode::None),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HeadersMode::Ietf => "ietf",
            HeadersMode::Legacy => "legacy",
            HeadersMode::Both => "both",
            HeadersMode::None => "none",
        }
    }

    pub fn ietf(self) -> bool {
        matches!(self, HeadersMode::Ietf | HeadersMode::Both)
    }

    pub fn legacy(self) -> bool {
        matches!(self, HeadersMode::Legacy | HeadersMode::Both)
    }
}

/// Which quota a policy describes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Policy {
    Hooks,
    Bytes,
}

impl Policy {
    fn item(self) -> &'static str {
        match self {
            Policy::Hooks => "\"hooks\"",
            Policy::Bytes => "\"bytes\"",
        }
    }
}

/// A bucket's standing at one instant.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Standing {
    /// Whole units admitted now.
    pub remaining: u64,
    /// Seconds until the bucket is full again (rounded up).
    pub reset_s: u64,
}

/// The bucket's level drained to `now_us`, as [`crate::limit::gcra::check`] sees
/// it: a level over the capacity counts as full, a stamp leading `now` by at
/// most [`crate::limit::gcra::MAX_LEAD_US`] has not drained yet, a stamp further ahead is stale.
pub fn level_at(bucket: Option<Bucket>, now_us: u64, quota: Quota) -> u64 {
    let rate = quota.rate.max(1);
    let b = bucket.unwrap_or_default();
    let level = b.level.min(quota.burst.saturating_mul(MICRO));
    let lead = b.stamp_us.saturating_sub(now_us);
    if lead > 0 {
        // Kept (no drain yet), or stale (more than MAX_LEAD_US ahead:
        // restarts at now): either way the level is as written.
        return level;
    }
    let elapsed = now_us - b.stamp_us;
    if elapsed >= level.div_ceil(rate) {
        0
    } else {
        level - elapsed * rate
    }
}

/// The standing of `bucket` (None: never charged) of `quota` at `now_us`;
/// called with the bucket a charge just wrote, it is the standing after that
/// charge.
pub fn standing(quota: Quota, bucket: Option<Bucket>, now_us: u64) -> Standing {
    let cap = quota.burst.saturating_mul(MICRO);
    let level = level_at(bucket, now_us, quota);
    Standing {
        remaining: (cap - level) / MICRO,
        reset_s: level.div_ceil(quota.rate.max(1)).div_ceil(MICRO),
    }
}

/// The standing on a denial known only by its wait (a fleet 429): nothing
/// remains, and the earliest the quota has room again is the wait.
pub fn denied(retry_after_ms: u64) -> Standing {
    Standing {
        remaining: 0,
        reset_s: crate::limit::gcra::wait_secs(retry_after_ms),
    }
}

/// The policy window: seconds for an empty bucket to refill the whole
/// burst at `rate`, rounded up, at least 1.
pub fn window_s(quota: Quota) -> u64 {
    quota.burst.div_ceil(quota.rate.max(1)).max(1)
}

/// What a policy item says: the quota `q` and the window `w` (seconds).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Terms {
    pub quota: u64,
    pub window_s: u64,
}

impl From<Quota> for Terms {
    fn from(quota: Quota) -> Terms {
        Terms {
            quota: quota.burst,
            window_s: window_s(quota),
        }
    }
}

/// One `RateLimit-Policy` list member: `"hooks";q=100;w=2`, and for bytes
/// `"bytes";q=1048576;qu="content-bytes";w=1`.
pub fn policy_item(policy: Policy, quota: Quota) -> String {
    let mut out = String::with_capacity(48);
    push_policy(&mut out, policy, quota);
    out
}

/// One `RateLimit` list member: `"hooks";r=37;t=1`.
pub fn ratelimit_item(policy: Policy, s: Standing) -> String {
    let mut out = String::with_capacity(48);
    push_ratelimit(&mut out, policy, s);
    out
}

// Headers are written on every forwarded hook, so they are built by
// appending digits: `format!` costs several times as much inside a wasm VM.

fn push_policy(out: &mut String, policy: Policy, quota: impl Into<Terms>) {
    let terms = quota.into();
    out.push_str(policy.item());
    out.push_str(";q=");
    push_u64(out, terms.quota);
    if policy == Policy::Bytes {
        out.push_str(";qu=\"content-bytes\"");
    }
    out.push_str(";w=");
    push_u64(out, terms.window_s);
}

fn push_ratelimit(out: &mut String, policy: Policy, s: Standing) {
    out.push_str(policy.item());
    out.push_str(";r=");
    push_u64(out, s.remaining);
    out.push_str(";t=");
    push_u64(out, s.reset_s);
}

/// Appends `n` in decimal (no `format!`: every hook writes some).
pub fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        // A remainder below 10 fits a digit.
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
}

fn decimal(n: u64) -> String {
    let mut out = String::with_capacity(20);
    push_u64(&mut out, n);
    out
}

/// The headers for `mode` (names lower case, as proxy-wasm sets them) from
/// each limited quota's standing: the hooks quota first, then bytes if it is
/// limited. The legacy triple describes the hooks quota.
pub fn headers<Q: Into<Terms> + Copy>(
    mode: HeadersMode,
    hooks: (Q, Standing),
    bytes: Option<(Q, Standing)>,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::with_capacity(5);
    if mode.ietf() {
        let mut policy = String::with_capacity(96);
        let mut state = String::with_capacity(64);
        push_policy(&mut policy, Policy::Hooks, hooks.0);
        push_ratelimit(&mut state, Policy::Hooks, hooks.1);
        if let Some((q, s)) = bytes {
            policy.push_str(", ");
            push_policy(&mut policy, Policy::Bytes, q);
            state.push_str(", ");
            push_ratelimit(&mut state, Policy::Bytes, s);
        }
        out.push(("ratelimit-policy", policy));
        out.push(("ratelimit", state));
    }
    if mode.legacy() {
        out.push(("x-ratelimit-limit", decimal(hooks.0.into().quota)));
        out.push(("x-ratelimit-remaining", decimal(hooks.1.remaining)));
        out.push(("x-ratelimit-reset", decimal(hooks.1.reset_s)));
    }
    out
}

#[cfg(test)]
mod tests;
