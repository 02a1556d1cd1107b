//! The JSON of `POST /v1/hits`: several hooks' hits in one store call.
//!
//! A [`HitsRequest`] carries up to [`MAX_HITS_PER_CALL`] [`HitRequest`]s; the
//! store answers a [`HitsAnswer`] with one [`HitResult`] per hit, in order:
//! exactly what `/v1/hit` would have answered for it (a [`HitReply`]), or that
//! hit's own refusal (an [`ErrorBody`] whose message names `hits[i]` and the
//! field). One malformed hit never costs the others their answers.

use crate::wire::{ErrorBody, HitReply, HitRequest, SettleOp, SettleRequest, WireError};
use serde::{Deserialize, Serialize};

/// The store path of a batch of hits.
pub use crate::wire::HITS_PATH;

/// Most hits in one `/v1/hits` call; more is refused (400) as a whole.
pub const MAX_HITS_PER_CALL: usize = 256;

#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct HitsRequest {
    pub hits: Vec<HitRequest>,
    /// Settle operations riding on the call, applied in the same pipelines
    /// (up to `MAX_SETTLE_OPS`; see [`HitsAnswer::settled`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settle: Vec<SettleOp>,
}

/// One hit's answer within a batch.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
#[serde(untagged, try_from = "super::read::AnswerRead")]
pub enum HitResult {
    /// What `/v1/hit` would have answered (`{"result": ...}`).
    Reply(HitReply),
    /// This hit was refused or failed (`{"error": ..., "message": ...}`).
    Refused(ErrorBody),
}

#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug)]
pub struct HitsAnswer {
    pub results: Vec<HitResult>,
    /// The riding settle operations the store is done with (all of them, or
    /// absent when any failed: the caller queues them again; each is
    /// idempotent). A promote the store's receipt check left unapplied is
    /// done with: sending it again would change nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<usize>,
    /// The store's wire version; absent from a v0.1.0 store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire: Option<u32>,
}

/// The batch's own bounds: 1 to [`MAX_HITS_PER_CALL`] hits. Each hit is
/// checked on its own (see [`item_field`]).
pub fn check_count(count: usize) -> Result<(), WireError> {
    if count == 0 || count > MAX_HITS_PER_CALL {
        return Err(WireError {
            field: "hits".into(),
            problem: format!("has {count} entries; 1 to {MAX_HITS_PER_CALL}"),
        });
    }
    Ok(())
}

/// The riding settle operations, checked as a `/v1/settle` body would be;
/// a refusal names `settle[i]` and the field.
pub fn check_settle(ops: &[SettleOp]) -> Result<(), WireError> {
    let request = SettleRequest { ops: ops.to_vec() };
    request.validate().map_err(|e| WireError {
        field: e.field.replacen("ops", "settle", 1),
        problem: e.problem,
    })
}

/// A hit's refusal, its field named within the batch: `hits[2].claim.key: ...`.
pub fn item_field(index: usize, e: &WireError) -> WireError {
    WireError {
        field: format!("hits[{index}].{}", e.field),
        problem: e.problem.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::HitAnswer;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn results_read_back_as_replies_or_refusals_in_order() {
        let text = r#"{"results":[
            {"result":"ok"},
            {"error":"bad_request","message":"hits[1].claim.key: must be 1 to 512 bytes, got 0"},
            {"result":"duplicate","hook_id":"h1","override":{"tenant":"t","rate":1,"burst":2,"version":3}}
        ]}"#;
        let answer: HitsAnswer = serde_json::from_str(text).unwrap();
        assert_eq!(answer.results.len(), 3);
        assert!(matches!(&answer.results[0], HitResult::Reply(r) if r.answer == HitAnswer::Ok));
        assert!(
            matches!(&answer.results[1], HitResult::Refused(e) if e.error == "bad_request" && e.message.starts_with("hits[1].claim.key"))
        );
        assert!(matches!(&answer.results[2],
            HitResult::Reply(r) if r.answer == HitAnswer::Duplicate { hook_id: "h1".into() }
                && r.in_force.as_ref().map(|o| o.version) == Some(3)));
    }

    #[test]
    fn a_result_round_trips_as_the_single_hit_answer_would() {
        let reply = HitResult::Reply(HitReply {
            edges: None,
            wire: None,
            unknown_fields: 0,
            answer: HitAnswer::RateLimited { retry_after_ms: 7 },
            in_force: None,
            levels: vec![],
        });
        let text = serde_json::to_string(&reply).unwrap();
        assert_eq!(text, r#"{"result":"rate_limited","retry_after_ms":7}"#);
        let back: HitResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, reply);
    }

    #[test]
    fn riding_settles_are_checked_and_a_refusal_names_settle_i() {
        let claim = |key: &str| crate::wire::Claim {
            tenant: "acme".into(),
            source_id: "gh".into(),
            key: key.into(),
            hook_id: "0190a5b2-7c1d-7aaa-8bbb-0123456789ab".into(),
            node: "edge-1".into(),
            ttl_ms: 60_000,
            pending_ttl_ms: 5_000,
        };
        let good = SettleOp::Release {
            claim: claim("d-1"),
        };
        let bad = SettleOp::Release { claim: claim("") };
        assert_eq!(check_settle(std::slice::from_ref(&good)), Ok(()));
        let e = check_settle(&[good, bad]).unwrap_err();
        assert!(e.field.starts_with("settle[1]."), "{e}");
    }

    #[test]
    fn the_count_is_bounded_and_an_item_field_names_its_index() {
        assert!(check_count(1).is_ok());
        assert!(check_count(MAX_HITS_PER_CALL).is_ok());
        assert_eq!(check_count(0).unwrap_err().field, "hits");
        let e = check_count(MAX_HITS_PER_CALL + 1).unwrap_err();
        assert!(e.problem.contains("257"), "{e}");
        let inner = WireError {
            field: "charges[0].rate".into(),
            problem: "must be at least 1, got 0".into(),
        };
        assert_eq!(
            item_field(4, &inner).to_string(),
            "hits[4].charges[0].rate: must be at least 1, got 0"
        );
    }
}
