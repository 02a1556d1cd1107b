//! Redis key names. Every key of a tenant carries the hash tag `{tenant}`, so
//! one hit script touches one Cluster slot.

use ankusa_core::wire::{ChargeKind, Claim};

/// `ankusa:{tenant}:rl:hooks` / `ankusa:{tenant}:rl:bytes`: a GCRA bucket, "stamp_us:level".
pub fn bucket(tenant: &str, kind: ChargeKind) -> String {
    format!("ankusa:{{{tenant}}}:rl:{}", kind.as_str())
}

/// Every bucket of a tenant (what a reset forgets).
pub fn buckets(tenant: &str) -> [String; 2] {
    [
        bucket(tenant, ChargeKind::Hooks),
        bucket(tenant, ChargeKind::Bytes),
    ]
}

/// `ankusa:{tenant}:claim:<source>:<key>`: `p:<hook_id>:<node>` while
/// pending, `c:<hook_id>` once committed.
pub fn claim(claim: &Claim) -> String {
    format!(
        "ankusa:{{{}}}:claim:{}:{}",
        claim.tenant, claim.source_id, claim.key
    )
}

pub fn pending_value(claim: &Claim) -> String {
    format!("p:{}:{}", claim.hook_id, claim.node)
}

/// What a pending value held by `hook_id` starts with (hook ids hold no ':').
pub fn pending_prefix(hook_id: &str) -> String {
    format!("p:{hook_id}:")
}

pub fn committed_value(hook_id: &str) -> String {
    format!("c:{hook_id}")
}

/// `ankusa:{tenant}:override`: the tenant's fleet override (JSON of
/// [`ankusa_core::overrides::Override`]), expiring with it (PXAT). Same hash
/// tag as the buckets, so the hit script reads it in the same slot.
pub fn override_of(tenant: &str) -> String {
    format!("ankusa:{{{tenant}}}:override")
}

/// `ankusa:overrides`: sorted set of tenants with an override, scored by
/// expiry (unix ms; +inf: none), for `GET /v1/overrides`.
pub const OVERRIDE_INDEX: &str = "ankusa:overrides";
