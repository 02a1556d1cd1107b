//! Every request's check: the store runs `validate` on each before it touches
//! Redis, and every refusal names the field and the value.

use super::*;
use crate::limit::limits::{self, Bound};
use std::fmt;

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
            if crate::hook::trace_context::parse(t).as_deref() != Some(t.as_str()) {
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
            if let SettleOp::Promote {
                hook_id, receipt, ..
            } = op
            {
                check_hook_id(&format!("ops[{i}].hook_id"), hook_id)?;
                if let Some(r) = receipt.as_deref().filter(|r| !receipt::is_well_formed(r)) {
                    let shown = r.get(..16).map_or(format!("{r:?}"), |r| format!("{r:?}…"));
                    return Err(invalid(
                        format!("ops[{i}].receipt"),
                        format!(
                            "{shown} is not 2 to {} lower-case hex digits",
                            receipt::MAX_LEN
                        ),
                    ));
                }
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
