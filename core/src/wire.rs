//! The JSON spoken between the filter and the store service.
//!
//! `POST /v1/hit` carries a [`HitRequest`] and answers a [`HitAnswer`];
//! `POST /v1/settle` carries a [`SettleRequest`] and answers a [`SettleAnswer`];
//! `POST /v1/reset` carries a [`ResetRequest`]. Any refusal is an [`ErrorBody`].
//! Both sides use these types, so the two can't drift apart; the store checks
//! every request with `validate` before it touches Redis.

use crate::hook::shadow::Shadow;
use serde::{Deserialize, Serialize};

pub mod batch;
mod check;
pub mod paths;
mod read;
pub mod receipt;
pub mod tolerant;
pub mod version;

pub use check::WireError;
pub use paths::*;

/// The source id of every body claim of the replay guard (see
/// `verify::replay`): its `.` is one no configured source id may hold, so no
/// event key of any source can name a body claim.
pub const BODY_CLAIM_SOURCE: &str = "replay.body";

/// Request header carrying the caller's remaining budget in whole ms.
pub const BUDGET_HEADER: &str = "x-ankusa-budget-ms";

/// The wire's length and count bounds, from [`crate::limit::limits`].
pub use crate::limit::limits::{
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
pub struct Charge {
    pub kind: ChargeKind,
    pub tenant: String,
    /// Units this hook spends: 1 hook, or the body's bytes; 1..=`burst`.
    pub units: u64,
    /// The quota's units per second ([`crate::limit::limits::RATE`]).
    pub rate: u64,
    /// The quota's units at once ([`crate::limit::limits::BURST`]).
    pub burst: u64,
}

/// A provider event key to claim for one hook.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
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

/// A hook's hit. Like every message between edge and store, a reader skips
/// (and counts) a field it doesn't know: see [`version`].
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
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
    /// The sender's W3C trace context ([`crate::hook::trace_context`]): the store
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
#[serde(try_from = "read::AnswerRead")]
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
    /// [`crate::fleet::edges`]); absent from a store that doesn't count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edges: Option<u64>,
    /// The store's wire version ([`version::WIRE_VERSION`]); absent from a
    /// store of v0.1.0 (wire 1). In a batch it is the batch's, not each hit's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<u32>,
    /// Fields of this answer the edge skipped as unknown (a newer store's):
    /// counted, never sent.
    #[serde(skip)]
    pub unknown_fields: u32,
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
#[serde(tag = "op", rename_all = "snake_case", try_from = "read::SettleOpRead")]
pub enum SettleOp {
    /// The hook is durable: commit the key under `hook_id` for `claim.ttl_ms`.
    Promote {
        claim: Claim,
        hook_id: String,
        /// The upstream's proof that it stored hook `hook_id` of
        /// `claim.tenant` ([`receipt`]), which a store holding a receipt key
        /// asks before it commits. A field of wire 2: sent only to a store
        /// that speaks it, or not heard yet ([`SettleOp::for_store`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        receipt: Option<String>,
    },
    /// Nothing was stored: delete the key if `claim.hook_id` still holds it.
    Release { claim: Claim },
}

impl SettleOp {
    pub fn claim(&self) -> &Claim {
        match self {
            SettleOp::Promote { claim, .. } | SettleOp::Release { claim } => claim,
        }
    }

    /// This operation as a store of wire `store` may be sent it: a promote's
    /// receipt goes only to a store that speaks wire [`receipt::SINCE`] or
    /// was not heard yet ([`version::StoreWire::sends`]; a v0.1.0 store
    /// refuses the field, and with it the whole batch). The operation itself
    /// is always sent.
    pub fn for_store(&self, store: version::StoreWire) -> SettleOp {
        match self {
            SettleOp::Promote {
                claim,
                hook_id,
                receipt: Some(_),
            } if !store.sends(receipt::SINCE) => SettleOp::Promote {
                claim: claim.clone(),
                hook_id: hook_id.clone(),
                receipt: None,
            },
            op => op.clone(),
        }
    }
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct SettleRequest {
    pub ops: Vec<SettleOp>,
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct SettleAnswer {
    /// Operations applied to Redis: all of them on success, but a promote
    /// the store's receipt check left out (its batch still answered 200).
    pub applied: usize,
    /// The store's wire version; absent from a v0.1.0 store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<u32>,
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

#[cfg(test)]
mod tests;
