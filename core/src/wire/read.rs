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

/// A hit's answer as read, alone or as one result of a batch: the
/// `result` and each variant's field beside the reply's own fields, or a
/// refusal's `error` and `message`.
#[derive(Deserialize)]
pub struct AnswerRead {
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

impl TryFrom<AnswerRead> for HitReply {
    type Error = String;

    fn try_from(read: AnswerRead) -> Result<HitReply, String> {
        let (Some(result), None) = (read.result.as_deref(), &read.error) else {
            return Err("a hit answer has a `result` and no `error`".into());
        };
        let retry = || {
            read.retry_after_ms
                .ok_or_else(|| format!("a `{result}` answer needs `retry_after_ms`"))
        };
        let answer = match result {
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

impl TryFrom<AnswerRead> for HitResult {
    type Error = String;

    fn try_from(read: AnswerRead) -> Result<HitResult, String> {
        match (&read.result, read.error.clone()) {
            (Some(_), None) => HitReply::try_from(read).map(HitResult::Reply),
            (None, Some(error)) => Ok(HitResult::Refused(ErrorBody {
                error,
                message: read.message,
            })),
            _ => Err("a batch result has either `result` or `error`".into()),
        }
    }
}
