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
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn a_hit_reply_is_a_hit_answer_plus_the_override_in_force() {
        let plain = HitReply {
            edges: None,
            answer: HitAnswer::RateLimited { retry_after_ms: 5 },
            in_force: None,
            levels: vec![],
        };
        let text = serde_json::to_string(&plain).unwrap();
        assert_eq!(text, r#"{"result":"rate_limited","retry_after_ms":5}"#);
        let o = Override {
            tenant: "acme".into(),
            rate: Some(1),
            burst: Some(2),
            bytes_rate: None,
            bytes_burst: None,
            shadow: None,
            expires_at_ms: None,
            version: 7,
        };
        let with = HitReply {
            edges: None,
            answer: HitAnswer::Ok,
            in_force: Some(o),
            levels: vec![2_000_000],
        };
        let text = serde_json::to_string(&with).unwrap();
        assert_eq!(
            text,
            r#"{"result":"ok","override":{"tenant":"acme","rate":1,"burst":2,"version":7},"levels":[2000000]}"#
        );
        // Readers of the bare answer still read it; the reply reads back whole.
        assert_eq!(
            serde_json::from_str::<HitAnswer>(&text).unwrap(),
            HitAnswer::Ok
        );
        assert_eq!(serde_json::from_str::<HitReply>(&text).unwrap(), with);
    }

    fn claim() -> Claim {
        Claim {
            tenant: "acme".into(),
            source_id: "gh".into(),
            key: "delivery-1".into(),
            hook_id: "0190a5b2-7c1d-7aaa-8bbb-0123456789ab".into(),
            node: "edge-1".into(),
            ttl_ms: 259_200_000,
            pending_ttl_ms: 30_000,
        }
    }

    fn charge(kind: ChargeKind) -> Charge {
        Charge {
            kind,
            tenant: "acme".into(),
            units: 1,
            rate: 500,
            burst: 100,
        }
    }

    #[test]
    fn hit_request_round_trips_in_the_documented_shape() {
        let req = HitRequest {
            node: None,
            charges: vec![charge(ChargeKind::Hooks)],
            claim: Some(claim()),
            replay: None,
        };
        let json = serde_json::to_value(&req).unwrap();
        assert_eq!(json["charges"][0]["kind"], "hooks");
        assert_eq!(json["claim"]["source_id"], "gh");
        assert_eq!(serde_json::from_value::<HitRequest>(json).unwrap(), req);
    }

    #[test]
    fn answers_are_tagged_by_result() {
        let cases = [
            (HitAnswer::Ok, r#"{"result":"ok"}"#),
            (
                HitAnswer::Duplicate {
                    hook_id: "h1".into(),
                },
                r#"{"result":"duplicate","hook_id":"h1"}"#,
            ),
            (
                HitAnswer::Pending { retry_after_ms: 7 },
                r#"{"result":"pending","retry_after_ms":7}"#,
            ),
            (
                HitAnswer::RateLimited { retry_after_ms: 9 },
                r#"{"result":"rate_limited","retry_after_ms":9}"#,
            ),
        ];
        for (answer, text) in cases {
            assert_eq!(serde_json::to_string(&answer).unwrap(), text);
            assert_eq!(serde_json::from_str::<HitAnswer>(text).unwrap(), answer);
        }
    }

    #[test]
    fn settle_ops_are_tagged_by_op() {
        let text = serde_json::to_string(&SettleRequest {
            ops: vec![
                SettleOp::Promote {
                    claim: claim(),
                    hook_id: "h2".into(),
                },
                SettleOp::Release { claim: claim() },
            ],
        })
        .unwrap();
        assert!(text.contains(r#""op":"promote""#) && text.contains(r#""op":"release""#));
    }

    fn charge_error(edit: impl FnOnce(&mut Charge)) -> String {
        let mut c = charge(ChargeKind::Bytes);
        edit(&mut c);
        HitRequest {
            node: None,
            charges: vec![c],
            claim: None,
            replay: None,
        }
        .validate()
        .unwrap_err()
        .to_string()
    }

    fn claim_error(edit: impl FnOnce(&mut Claim)) -> String {
        let mut c = claim();
        edit(&mut c);
        HitRequest {
            node: None,
            charges: vec![],
            claim: Some(c),
            replay: None,
        }
        .validate()
        .unwrap_err()
        .to_string()
    }

    #[test]
    fn every_charge_bound_is_the_core_limit_naming_the_field() {
        assert_eq!(
            charge_error(|c| c.units = 101),
            "charges[0].units: must be between 1 and 100, got 101"
        );
        assert_eq!(
            charge_error(|c| c.units = 0),
            "charges[0].units: must be between 1 and 100, got 0"
        );
        assert_eq!(
            charge_error(|c| c.rate = 1_000_000_001),
            "charges[0].rate: must be between 1 and 1000000000, got 1000000001"
        );
        assert_eq!(
            charge_error(|c| c.rate = 0),
            "charges[0].rate: must be between 1 and 1000000000, got 0"
        );
        assert_eq!(
            charge_error(|c| c.burst = (1 << 32) + 1),
            "charges[0].burst: must be between 1 and 4294967296, got 4294967297"
        );
        let mut top = charge(ChargeKind::Bytes);
        (top.rate, top.burst, top.units) = (1_000_000_000, 1 << 32, 1 << 32);
        assert_eq!(
            HitRequest {
                node: None,
                charges: vec![top],
                claim: None,
                replay: None,
            }
            .validate(),
            Ok(())
        );
    }

    #[test]
    fn every_claim_ttl_bound_is_the_core_limit_naming_the_field() {
        assert_eq!(
            claim_error(|c| c.ttl_ms = (1 << 53) - 1),
            "claim.ttl_ms: must be between 1 and 2592000000, got 9007199254740991"
        );
        assert_eq!(
            claim_error(|c| c.ttl_ms = 0),
            "claim.ttl_ms: must be between 1 and 2592000000, got 0"
        );
        assert_eq!(
            claim_error(|c| c.pending_ttl_ms = 86_400_001),
            "claim.pending_ttl_ms: must be between 1 and 86400000, got 86400001"
        );
    }

    #[test]
    fn empty_names_are_refused() {
        let mut cl = claim();
        cl.key.clear();
        let err = HitRequest {
            node: None,
            charges: vec![],
            claim: Some(cl),
            replay: None,
        }
        .validate()
        .unwrap_err();
        assert_eq!(err.to_string(), "claim.key: must be 1 to 200 bytes, got 0");
        let mut cl = claim();
        cl.tenant.clear();
        let err = HitRequest {
            node: None,
            charges: vec![],
            claim: Some(cl),
            replay: None,
        }
        .validate()
        .unwrap_err();
        assert_eq!(err.field, "claim.tenant");
    }

    #[test]
    fn tenants_and_sources_follow_the_configs_name_rule() {
        // A dot is no part of a name an edge routes (`limits::is_valid_id`);
        // a node name may hold one (Envoy node ids do).
        let mut c = charge(ChargeKind::Hooks);
        c.tenant = "a.b".into();
        let err = c.validate("charges[0]").unwrap_err();
        assert_eq!(err.field, "charges[0].tenant");
        assert!(err.problem.contains("[A-Za-z0-9_-]"), "{}", err.problem);
        let mut cl = claim();
        cl.source_id = "..".into();
        assert_eq!(cl.validate("claim").unwrap_err().field, "claim.source_id");
        let mut cl = claim();
        cl.node = "edge-1.example".into();
        assert_eq!(cl.validate("claim"), Ok(()));
        let reset = ResetRequest {
            tenant: "a.b".into(),
        };
        assert_eq!(reset.validate().unwrap_err().field, "tenant");
    }

    #[test]
    fn one_hit_is_one_tenant() {
        let mut other = charge(ChargeKind::Bytes);
        other.tenant = "globex".into();
        let req = HitRequest {
            node: None,
            charges: vec![charge(ChargeKind::Hooks), other],
            claim: None,
            replay: None,
        };
        assert_eq!(req.validate().unwrap_err().field, "charges[1].tenant");
        let req = HitRequest {
            node: None,
            charges: vec![charge(ChargeKind::Hooks), charge(ChargeKind::Hooks)],
            claim: None,
            replay: None,
        };
        assert_eq!(req.validate().unwrap_err().field, "charges[1].kind");
    }

    #[test]
    fn empty_hit_is_refused_and_unknown_fields_fail_to_parse() {
        let req = HitRequest {
            node: None,
            charges: vec![],
            claim: None,
            replay: None,
        };
        assert_eq!(req.validate().unwrap_err().field, "charges");
        assert!(
            serde_json::from_str::<HitRequest>(r#"{"charges":[],"claim":null,"x":1}"#).is_err()
        );
    }

    #[test]
    fn settle_validates_every_op() {
        let mut bad = claim();
        bad.node = "edge 1".into();
        let req = SettleRequest {
            ops: vec![
                SettleOp::Release { claim: claim() },
                SettleOp::Release { claim: bad },
            ],
        };
        assert_eq!(req.validate().unwrap_err().field, "ops[1].claim.node");
    }
}
