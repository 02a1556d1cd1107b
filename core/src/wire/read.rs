//! The shapes the wire's messages are read through: plain structs, every
//! field named, so a reader sees each field it skips and counts it
//! ([`super::tolerant`]). Serde's tagged and untagged enums (`"op"`,
//! `"result"`, a batch's reply-or-refusal) buffer a message before reading
//! it, and a field they skip there is skipped unseen; each enum is read
//! through one of these instead (`#[serde(try_from = ...)]`), and written
//! as before.

use super::batch::HitResult;
use super::{Claim, ErrorBody, HitAnswer, HitReply, Override, SettleOp};
use serde::Deserialize;

/// A settle operation as read: `{"op": "promote"|"release", "claim": …,
/// "hook_id": …, "receipt": …}` (a promote's receipt is optional).
#[derive(Deserialize)]
pub struct SettleOpRead {
    op: String,
    /// Optional here so that an unknown `op` is named before a missing claim.
    #[serde(default)]
    claim: Option<Claim>,
    #[serde(default)]
    hook_id: Option<String>,
    #[serde(default)]
    receipt: Option<String>,
}

impl TryFrom<SettleOpRead> for SettleOp {
    type Error = String;

    fn try_from(read: SettleOpRead) -> Result<SettleOp, String> {
        let claim = || read.claim.clone().ok_or("missing field `claim`");
        match (read.op.as_str(), read.hook_id.clone()) {
            ("promote", Some(hook_id)) => Ok(SettleOp::Promote {
                claim: claim()?,
                hook_id,
                receipt: read.receipt.clone(),
            }),
            ("promote", None) => Err("a promote needs its `hook_id`".into()),
            ("release", None) if read.receipt.is_some() => {
                Err("a release carries no `receipt`".into())
            }
            ("release", None) => Ok(SettleOp::Release { claim: claim()? }),
            ("release", Some(_)) => Err("a release carries no `hook_id`".into()),
            (other, _) => Err(format!(
                "unknown `op` {:?}; expected promote or release",
                other.chars().take(32).collect::<String>()
            )),
        }
    }
}

/// A hit's answer as read: the `result` and each variant's field, beside
/// the reply's own fields.
#[derive(Deserialize)]
pub struct HitReplyRead {
    result: String,
    #[serde(default)]
    hook_id: Option<String>,
    #[serde(default)]
    retry_after_ms: Option<u64>,
    #[serde(default, rename = "override")]
    in_force: Option<Override>,
    #[serde(default)]
    levels: Vec<u64>,
    #[serde(default)]
    edges: Option<u64>,
    #[serde(default)]
    wire: Option<u32>,
}

impl TryFrom<HitReplyRead> for HitReply {
    type Error = String;

    fn try_from(read: HitReplyRead) -> Result<HitReply, String> {
        let retry = || {
            read.retry_after_ms
                .ok_or_else(|| format!("a `{}` answer needs `retry_after_ms`", read.result))
        };
        let answer = match read.result.as_str() {
            "ok" => HitAnswer::Ok,
            "duplicate" => HitAnswer::Duplicate {
                hook_id: read
                    .hook_id
                    .clone()
                    .ok_or("a `duplicate` answer needs `hook_id`")?,
            },
            "pending" => HitAnswer::Pending {
                retry_after_ms: retry()?,
            },
            "rate_limited" => HitAnswer::RateLimited {
                retry_after_ms: retry()?,
            },
            other => {
                return Err(format!(
                    "unknown `result` {:?}",
                    other.chars().take(32).collect::<String>()
                ))
            }
        };
        Ok(HitReply {
            answer,
            in_force: read.in_force,
            levels: read.levels,
            edges: read.edges,
            wire: read.wire,
            unknown_fields: 0,
        })
    }
}

/// One result of a batch as read: a reply (it has `result`) or a refusal
/// (it has `error`).
#[derive(Deserialize)]
pub struct HitResultRead {
    #[serde(default)]
    result: Option<String>,
    #[serde(default)]
    hook_id: Option<String>,
    #[serde(default)]
    retry_after_ms: Option<u64>,
    #[serde(default, rename = "override")]
    in_force: Option<Override>,
    #[serde(default)]
    levels: Vec<u64>,
    #[serde(default)]
    edges: Option<u64>,
    #[serde(default)]
    wire: Option<u32>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    message: String,
}

impl TryFrom<HitResultRead> for HitResult {
    type Error = String;

    fn try_from(read: HitResultRead) -> Result<HitResult, String> {
        match (read.result, read.error) {
            (Some(result), None) => HitReply::try_from(HitReplyRead {
                result,
                hook_id: read.hook_id,
                retry_after_ms: read.retry_after_ms,
                in_force: read.in_force,
                levels: read.levels,
                edges: read.edges,
                wire: read.wire,
            })
            .map(HitResult::Reply),
            (None, Some(error)) => Ok(HitResult::Refused(ErrorBody {
                error,
                message: read.message,
            })),
            _ => Err("a batch result has either `result` or `error`".into()),
        }
    }
}
