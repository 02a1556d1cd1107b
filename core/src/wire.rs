//! The JSON spoken between the filter and the store service.
//!
//! `POST /v1/hit` carries a [`HitRequest`] and answers a [`HitAnswer`];
//! `POST /v1/settle` carries a [`SettleRequest`] and answers a [`SettleAnswer`];
//! `POST /v1/reset` carries a [`ResetRequest`]. Any refusal is an [`ErrorBody`].
//! Both sides use these types, so the two can't drift apart; the store checks
//! every request with `validate` before it touches Redis.

use crate::limits::{self, Bound};
use crate::shadow::Shadow;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Request header carrying the caller's remaining budget in whole ms.
pub const BUDGET_HEADER: &str = "x-ankusa-budget-ms";

/// The wire's length and count bounds, from [`crate::limits`].
pub use crate::limits::{
    is_valid_name, MAX_HOOK_ID_LEN, MAX_KEY_LEN, MAX_NAME_LEN, MAX_SETTLE_OPS,
};

/// Which bucket of a tenant a charge draws on.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[serde(rename_all = "snake_case")]
pub enum ChargeKind {
    /// One per hook.
    Hooks,
    /// One per body byte.
    Bytes,
}

impl ChargeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChargeKind::Hooks => "hooks",
            ChargeKind::Bytes => "bytes",
        }
    }
}

/// One GCRA bucket to charge: `units` against the quota the user wrote.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
#[serde(deny_unknown_fields)]
pub struct Charge {
    pub kind: ChargeKind,
    pub tenant: String,
    /// Units this hook spends: 1 hook, or the body's bytes; 1..=`burst`.
    pub units: u64,
    /// The quota's units per second ([`limits::RATE`]).
    pub rate: u64,
    /// The quota's units at once ([`limits::BURST`]).
    pub burst: u64,
}

/// A provider event key to claim for one hook.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub tenant: String,
    pub source_id: String,
    pub key: String,
    pub hook_id: String,
    pub node: String,
    /// How long the key stays committed once the hook is durable (ms).
    pub ttl_ms: u64,
    /// How long the key may stay pending before it expires on its own (ms).
    pub pending_ttl_ms: u64,
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
#[serde(deny_unknown_fields)]
pub struct HitRequest {
    pub charges: Vec<Charge>,
    pub claim: Option<Claim>,
    /// The replay guard's claim on the signed body (see
    /// [`crate::verify::replay`]), checked and written with `claim` in the
    /// same script; absent without a guard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Claim>,
    /// The calling edge's name (the configuration's `node`): the store counts
    /// the edges it heard from lately and answers with that count (`edges`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The sender's W3C trace context ([`crate::trace_context`]): the store
    /// records its span for this hit under it. Each hit carries its own, so
    /// hooks batched into one call keep their own traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

/// An override as stored and as carried in hit answers and listings.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct Override {
    pub tenant: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_rate: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_burst: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<Shadow>,
    /// Unix ms after which the override is no longer in force; None: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// Unix ms at which the store accepted it: changes with every PUT, so an
    /// edge compares versions rather than contents.
    pub version: u64,
}

/// The store's answer to a hit.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum HitAnswer {
    /// Every charge was taken; the claim, if any, is now this hook's (pending).
    Ok,
    /// The key is committed under `hook_id`: the hook is already stored.
    Duplicate { hook_id: String },
    /// Another hook holds the key and is not durable yet.
    Pending { retry_after_ms: u64 },
    /// A charge was denied; nothing was written.
    RateLimited { retry_after_ms: u64 },
}

/// The store's answer to a hit as sent: the [`HitAnswer`] fields, plus the
/// tenant's fleet override when one is in force (`"override"`, absent
/// otherwise). A reader of a bare [`HitAnswer`] ignores the extra field, so
/// every earlier answer shape stays valid.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct HitReply {
    #[serde(flatten)]
    pub answer: HitAnswer,
    #[serde(default, rename = "override", skip_serializing_if = "Option::is_none")]
    pub in_force: Option<Override>,
    /// On an admit: each charged bucket's level after the charge (millionths
    /// of a unit, at the store's clock), in charge order; what the edge's
    /// RateLimit headers tell the sender.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<u64>,
    /// The edges the store heard from in the last few seconds (see
    /// [`crate::edges`]); absent from a store that doesn't count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum SettleOp {
    /// The hook is durable: commit the key under `hook_id` for `claim.ttl_ms`.
    Promote { claim: Claim, hook_id: String },
    /// Nothing was stored: delete the key if `claim.hook_id` still holds it.
    Release { claim: Claim },
}

impl SettleOp {
    pub fn claim(&self) -> &Claim {
        match self {
            SettleOp::Promote { claim, .. } | SettleOp::Release { claim } => claim,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
#[serde(deny_unknown_fields)]
pub struct SettleRequest {
    pub ops: Vec<SettleOp>,
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct SettleAnswer {
    /// Operations applied to Redis (all of them, on success).
    pub applied: usize,
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    pub tenant: String,
}

/// Every non-2xx answer of the store: a stable `error` code and a sentence.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct ErrorBody {
    pub error: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// A request that parsed but makes no sense; names the field and the value.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WireError {
    pub field: String,
    pub problem: String,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for WireError {}

fn invalid(field: impl Into<String>, problem: impl Into<String>) -> WireError {
    WireError {
        field: field.into(),
        problem: problem.into(),
    }
}

fn check_name(field: &str, value: &str) -> Result<(), WireError> {
    if is_valid_name(value) {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("{value:?} is not 1 to {MAX_NAME_LEN} characters of [A-Za-z0-9_.-]"),
        ))
    }
}

/// A tenant or source id: the config's rule ([`limits::is_valid_id`]), so
/// the store never holds a tenant no edge can route.
fn check_id(field: &str, value: &str) -> Result<(), WireError> {
    if limits::is_valid_id(value) {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("{value:?} is not 1 to {MAX_NAME_LEN} {}", limits::ID_CHARS),
        ))
    }
}

fn check_bound(field: &str, bound: Bound, value: u64) -> Result<(), WireError> {
    bound
        .check(value)
        .map_err(|problem| invalid(field, problem))
}

impl Charge {
    pub fn validate(&self, field: &str) -> Result<(), WireError> {
        check_id(&format!("{field}.tenant"), &self.tenant)?;
        check_bound(&format!("{field}.rate"), limits::RATE, self.rate)?;
        check_bound(&format!("{field}.burst"), limits::BURST, self.burst)?;
        check_bound(
            &format!("{field}.units"),
            Bound {
                min: 1,
                max: self.burst,
            },
            self.units,
        )
    }
}

/// The source id of every body claim of the replay guard (see
/// `verify::replay`): its `.` is one no configured source id may hold, so no
/// event key of any source can name a body claim.
pub const BODY_CLAIM_SOURCE: &str = "replay.body";

impl Claim {
    /// Whether this is a body claim (the replay guard's), not an event key's.
    pub fn is_body_claim(&self) -> bool {
        self.source_id == BODY_CLAIM_SOURCE
    }

    pub fn validate(&self, field: &str) -> Result<(), WireError> {
        check_id(&format!("{field}.tenant"), &self.tenant)?;
        // A configured source's id, or the body claims' own namespace, whose
        // `.` no source id may hold (see [`BODY_CLAIM_SOURCE`]).
        if !self.is_body_claim() {
            check_id(&format!("{field}.source_id"), &self.source_id)?;
        }
        check_name(&format!("{field}.node"), &self.node)?;
        if self.key.is_empty() || self.key.len() > MAX_KEY_LEN {
            return Err(invalid(
                format!("{field}.key"),
                format!("must be 1 to {MAX_KEY_LEN} bytes, got {}", self.key.len()),
            ));
        }
        check_hook_id(&format!("{field}.hook_id"), &self.hook_id)?;
        check_bound(&format!("{field}.ttl_ms"), limits::TTL_MS, self.ttl_ms)?;
        check_bound(
            &format!("{field}.pending_ttl_ms"),
            limits::PENDING_TTL_MS,
            self.pending_ttl_ms,
        )?;
        Ok(())
    }
}

fn check_hook_id(field: &str, id: &str) -> Result<(), WireError> {
    if id.is_empty()
        || id.len() > MAX_HOOK_ID_LEN
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(invalid(
            field,
            format!("{id:?} is not 1 to {MAX_HOOK_ID_LEN} characters of [A-Za-z0-9_-]"),
        ));
    }
    Ok(())
}

impl HitRequest {
    /// Every charge and the claim must name one tenant: its keys share one
    /// hash tag, so one script touches one Redis Cluster slot.
    pub fn validate(&self) -> Result<(), WireError> {
        if self.charges.is_empty() && self.claim.is_none() && self.replay.is_none() {
            return Err(invalid(
                "charges",
                "is empty and there is no claim: nothing to do",
            ));
        }
        if self.charges.len() > 2 {
            return Err(invalid(
                "charges",
                format!(
                    "has {} entries; at most 2 (hooks and bytes)",
                    self.charges.len()
                ),
            ));
        }
        for (i, charge) in self.charges.iter().enumerate() {
            charge.validate(&format!("charges[{i}]"))?;
        }
        if let Some(claim) = &self.claim {
            claim.validate("claim")?;
        }
        if let Some(node) = &self.node {
            check_name("node", node)?;
        }
        if let Some(t) = &self.traceparent {
            if crate::trace_context::parse(t).as_deref() != Some(t.as_str()) {
                let shown = t.get(..64).map_or(format!("{t:?}"), |t| format!("{t:?}…"));
                return Err(invalid(
                    "traceparent",
                    format!("{shown} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)"),
                ));
            }
        }
        let tenant = self.tenant().unwrap_or_default();
        if let Some(replay) = &self.replay {
            replay.validate("replay")?;
            if !replay.is_body_claim() {
                return Err(invalid(
                    "replay.source_id",
                    format!(
                        "{:?} is not {:?}: a replay claim is a body claim",
                        replay.source_id, BODY_CLAIM_SOURCE
                    ),
                ));
            }
            if replay.tenant != tenant {
                return Err(invalid(
                    "replay.tenant",
                    format!(
                        "{:?} differs from {tenant:?}: one hit is one tenant",
                        replay.tenant
                    ),
                ));
            }
        }
        for (i, charge) in self.charges.iter().enumerate() {
            if charge.tenant != tenant {
                return Err(invalid(
                    format!("charges[{i}].tenant"),
                    format!(
                        "{:?} differs from {tenant:?}: one hit is one tenant",
                        charge.tenant
                    ),
                ));
            }
        }
        if let [a, b] = self.charges.as_slice() {
            if a.kind == b.kind {
                return Err(invalid(
                    "charges[1].kind",
                    format!("{:?} is charged twice", a.kind.as_str()),
                ));
            }
        }
        Ok(())
    }

    /// The one tenant this hit is about.
    pub fn tenant(&self) -> Option<&str> {
        self.claim
            .as_ref()
            .or(self.replay.as_ref())
            .map(|c| c.tenant.as_str())
            .or_else(|| self.charges.first().map(|c| c.tenant.as_str()))
    }
}

impl SettleRequest {
    pub fn validate(&self) -> Result<(), WireError> {
        if self.ops.len() > MAX_SETTLE_OPS {
            return Err(invalid(
                "ops",
                format!("has {} entries; at most {MAX_SETTLE_OPS}", self.ops.len()),
            ));
        }
        for (i, op) in self.ops.iter().enumerate() {
            op.claim().validate(&format!("ops[{i}].claim"))?;
            if let SettleOp::Promote { hook_id, .. } = op {
                check_hook_id(&format!("ops[{i}].hook_id"), hook_id)?;
            }
        }
        Ok(())
    }
}

impl ResetRequest {
    pub fn validate(&self) -> Result<(), WireError> {
        check_id("tenant", &self.tenant)
    }
}

#[cfg(test)]
mod tests;
