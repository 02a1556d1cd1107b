//! A secret per path tenant, and the replay guard's body claim through a
//! hook's life: sent beside the event key's claim, and settled, released or
//! dropped exactly where that claim is.

use super::world::World;
use super::*;
use crate::verify::{body_mac, replay, Encoding};
use crate::wire::SettleOp;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const NOW: u64 = 1_700_000_000_000_000;
const BODY: &[u8] = br#"{"zen":"Keep it logically awesome."}"#;
const ENV: [(&str, &str); 2] = [("GH_ACME", "acme-secret"), ("GH_VICTIM", "victim-secret")];

/// Path-tenant source `gh` with a secret per tenant and a replay guard,
/// fleet dedupe and a `rate_scope` rate limit of burst 1.
fn config(rate_scope: &str) -> String {
    format!(
        r#"{{"sources":{{"gh":{{"dedupe":"github",
              "verify":{{"scheme":"github","secret_env":{{"acme":"GH_ACME","victim":"GH_VICTIM"}},
                         "replay_guard":{{"window_ms":3600000}}}}}}}},
            "rate_limits":{{"scope":"{rate_scope}","default":{{"rate":1,"burst":1}}}},
            "dedupe":{{"scope":"fleet"}}}}"#
    )
}

/// A delivery to `/webhooks/{tenant}/gh` signed with `secret`, body in:
/// the hook and the step its body ended with.
fn deliver(w: &World, tenant: &str, secret: &str, delivery: &str) -> (Hook, Step) {
    let path = format!("/webhooks/{tenant}/gh");
    let length = BODY.len().to_string();
    let signature = body_mac::sign(secret.as_bytes(), "sha256=", Encoding::Hex, BODY);
    let pairs = [
        (":path", path.as_str()),
        (":method", "POST"),
        ("content-length", length.as_str()),
        ("x-github-delivery", delivery),
        ("x-hub-signature-256", signature.as_str()),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
    .collect();
    let mut hook = Hook::new();
    let step = hook.on_headers(
        &w.env(),
        RequestHeaders::from_pairs(pairs),
        false,
        || NOW,
        |_| [1; 10],
    );
    assert_eq!(step.flow, Flow::Pause, "the body is needed");
    let step = hook.on_body(&w.env(), BODY.len() as u64, true, || BODY.to_vec(), || NOW);
    (hook, step)
}

fn replies(step: &Step) -> Vec<(u32, String)> {
    step.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Reply(r) => Some((r.status, r.body.clone())),
            _ => None,
        })
        .collect()
}

fn hit(step: &Step) -> crate::wire::HitRequest {
    match &step.hit {
        Some(hit) => serde_json::from_slice(&hit.body).unwrap(),
        None => panic!("no store call: {:?}", step.effects),
    }
}

/// The settles of `step` as (promote?, claim source id).
fn settles(step: &Step) -> Vec<(bool, String)> {
    step.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Settle(q) => Some((
                matches!(q.op, SettleOp::Promote { .. }),
                q.op.claim().source_id.clone(),
            )),
            _ => None,
        })
        .collect()
}

fn both(promote: bool) -> Vec<(bool, String)> {
    vec![
        (promote, "gh".to_string()),
        (promote, replay::CLAIM_SOURCE.to_string()),
    ]
}

const OK: &[u8] = br#"{"result":"ok"}"#;

#[test]
fn a_path_tenant_is_checked_against_its_own_secret_only() {
    let w = World::new(&config("fleet"), &ENV);
    let (_, step) = deliver(&w, "victim", "acme-secret", "d-1");
    assert_eq!(
        replies(&step),
        [(401, r#"{"error":"bad_signature"}"#.into())]
    );
    let (_, step) = deliver(&w, "globex", "acme-secret", "d-1");
    assert_eq!(
        replies(&step).len(),
        1,
        "a tenant with no secret is refused"
    );
    assert_eq!(replies(&step)[0].0, 401);
    let (_, step) = deliver(&w, "acme", "acme-secret", "d-1");
    assert_eq!(hit(&step).claim.map(|c| c.tenant).as_deref(), Some("acme"));
    let (_, step) = deliver(&w, "victim", "victim-secret", "d-1");
    assert_eq!(
        hit(&step).claim.map(|c| c.tenant).as_deref(),
        Some("victim")
    );
}

#[test]
fn the_body_claim_rides_the_hit_and_is_promoted_with_the_event_key() {
    let w = World::new(&config("fleet"), &ENV);
    let (mut hook, step) = deliver(&w, "acme", "acme-secret", "d-1");
    let request = hit(&step);
    assert_eq!(request.validate(), Ok(()));
    let body_claim = request.replay.expect("a body claim");
    assert_eq!(
        (
            body_claim.source_id.as_str(),
            body_claim.key.as_str(),
            body_claim.ttl_ms
        ),
        (
            replay::CLAIM_SOURCE,
            replay::body_key("gh", BODY).as_str(),
            3_600_000
        )
    );
    let claim = request.claim.expect("the event key's claim");
    assert_eq!(
        (&body_claim.tenant, &body_claim.hook_id),
        (&claim.tenant, &claim.hook_id)
    );
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(OK), NOW);
    assert_eq!(step.flow, Flow::Continue);
    assert!(hook.holds_claim());
    let step = hook.on_upstream_headers(Some("201"), Some("older-copy"), Some("c0ffee"));
    assert_eq!(settles(&step), both(true));
    for e in &step.effects {
        if let Effect::Settle(q) = e {
            let SettleOp::Promote {
                hook_id, receipt, ..
            } = &q.op
            else {
                panic!("{q:?}")
            };
            assert_eq!(hook_id, "older-copy", "under the upstream's id, both");
            // One receipt names the hook, so it proves both of its claims.
            assert_eq!(receipt.as_deref(), Some("c0ffee"), "with its receipt, both");
        }
    }
    assert!(settles(&hook.on_stream_end()).is_empty(), "settled once");
}

#[test]
fn a_replay_is_answered_as_the_first_hooks_duplicate_and_holds_nothing() {
    let w = World::new(&config("fleet"), &ENV);
    let (mut hook, _) = deliver(&w, "acme", "acme-secret", "d-2");
    let answer = br#"{"result":"duplicate","hook_id":"first-hook"}"#;
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(answer), NOW);
    assert_eq!(replies(&step)[0].0, 201);
    assert!(replies(&step)[0].1.contains(r#""id":"first-hook""#));
    assert!(!hook.holds_claim());
    assert!(settles(&hook.on_stream_end()).is_empty());
    let (mut hook, _) = deliver(&w, "acme", "acme-secret", "d-3");
    let answer = br#"{"result":"pending","retry_after_ms":900}"#;
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(answer), NOW);
    assert_eq!(replies(&step)[0].0, 409);
    assert!(!hook.holds_claim());
}

#[test]
fn the_body_claim_is_released_wherever_the_event_claim_is() {
    let w = World::new(&config("fleet"), &ENV);
    // The upstream refused it.
    let (mut hook, _) = deliver(&w, "acme", "acme-secret", "d-1");
    hook.on_store_answer(&w.env(), Some("200"), Some(OK), NOW);
    assert_eq!(
        settles(&hook.on_upstream_headers(Some("500"), None, None)),
        both(false)
    );
    // The sender went away while the call was in flight.
    let (mut hook, _) = deliver(&w, "victim", "victim-secret", "d-1");
    assert_eq!(settles(&hook.on_stream_end()), both(false));
    // A call that was sent and failed: both may be written, both are held.
    let w = World::new(&config("fleet"), &ENV);
    let (mut hook, _) = deliver(&w, "acme", "acme-secret", "d-1");
    hook.on_store_answer(&w.env(), Some("504"), None, NOW);
    assert!(hook.holds_claim());
    assert_eq!(
        settles(&hook.on_upstream_headers(Some("202"), None, None)),
        both(true)
    );
    // A call that never left holds neither.
    let (mut hook, _) = deliver(&w, "victim", "victim-secret", "d-1");
    hook.on_dispatch_failed(&w.env(), NOW);
    assert!(!hook.holds_claim());
    // A node refusal after the store's ok releases both.
    let w = World::new(&config("node"), &ENV);
    let mut released = Vec::new();
    for delivery in ["d-1", "d-2"] {
        let (mut hook, _) = deliver(&w, "acme", "acme-secret", delivery);
        let step = hook.on_store_answer(&w.env(), Some("200"), Some(OK), NOW);
        released.extend(settles(&step));
    }
    assert_eq!(released, both(false));
}
