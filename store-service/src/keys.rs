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
/// [`ankusa_core::fleet::overrides::Override`]), expiring with it (PXAT). Same hash
/// tag as the buckets, so the hit script reads it in the same slot.
pub fn override_of(tenant: &str) -> String {
    format!("ankusa:{{{tenant}}}:override")
}

/// The override change log that `GET /v1/overrides` reads, all under one
/// hash tag (one Cluster slot, one script): `meta` (hash: `epoch`,
/// `version`, `floor`), `data` (hash: tenant → override JSON), `log` (sorted
/// set: tenant by the version of its last change), `gone` (sorted set: the
/// deleted tenants still in `log`, by version), `exp` (sorted set: tenant by
/// expiry, unix ms). The tag holds a `:`, which no tenant name does.
pub const OVERRIDE_LOG: [&str; 5] = [
    "ankusa:{overrides:log}:meta",
    "ankusa:{overrides:log}:data",
    "ankusa:{overrides:log}:log",
    "ankusa:{overrides:log}:gone",
    "ankusa:{overrides:log}:exp",
];

/// `ankusa:overrides`: the index of tenants with an override that stores
/// before the change log kept; read once at start to carry them over.
pub const OLD_OVERRIDE_INDEX: &str = "ankusa:overrides";

/// `ankusa:{edges}:live`: the fleet's live edges, a sorted set of node
/// names scored by when each was last heard (unix ms on Redis's clock).
pub const LIVE_EDGES: &str = "ankusa:{edges}:live";

/// `ankusa:{edges}:names:<nodes>`: the live names of the edge tokens whose
/// scope is `nodes` (a name or pattern, `*` for unscoped tokens), scored as
/// [`LIVE_EDGES`]; a name enters [`LIVE_EDGES`] only through one of these,
/// within its token's allowance. The same hash tag, so one script (one
/// Cluster slot) checks both.
pub fn live_names(nodes: &str) -> String {
    format!("ankusa:{{edges}}:names:{nodes}")
}
