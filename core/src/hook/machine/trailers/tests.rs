//! Trailers as the body's end: the request stays paused until the hook is
//! decided, and is decided on the trailers exactly as on a last body chunk.

use super::super::world::World;
use super::super::*;
use crate::verify::{body_mac, Encoding};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const NOW: u64 = 1_700_000_000_000_000;
const BODY: &[u8] = br#"{"id":"evt_1"}"#;

/// Source `gh` verifies GitHub signatures with secret `S`; `stripe` takes
/// its key from the JSON body; `plain` is neither. Bodies up to 64 bytes.
fn config(scope: &str) -> String {
    format!(
        r#"{{"max_body_bytes":64,
            "sources":{{"gh":{{"tenant":"acme","dedupe":"github",
                               "verify":{{"scheme":"github","secret_env":"S"}}}},
                        "stripe":{{"tenant":"acme","dedupe":{{"json":"id"}}}},
                        "plain":{{"tenant":"acme","dedupe":"github"}}}},
            "rate_limits":{{"scope":"{scope}","default":{{"rate":10,"burst":10}}}},
            "dedupe":{{"scope":"{scope}"}}}}"#
    )
}

fn world(scope: &str) -> World {
    World::new(&config(scope), &[("S", "secret")])
}

/// Request headers for `source`, the body to follow (`end_of_stream` false).
fn start(w: &World, hook: &mut Hook, source: &str, extra: &[(&str, &str)]) -> Step {
    let path = format!("/webhooks/{source}");
    let mut pairs: Vec<(String, Vec<u8>)> = vec![
        (":path".into(), path.into_bytes()),
        (":method".into(), b"POST".to_vec()),
        ("x-github-delivery".into(), b"d-1".to_vec()),
    ];
    pairs.extend(
        extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())),
    );
    let headers = crate::hook::headers::RequestHeaders::from_pairs(pairs);
    hook.on_headers(&w.env(), headers, false, || NOW, |_| [1; 10])
}

fn replies(step: &Step) -> Vec<u32> {
    step.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Reply(r) => Some(r.status),
            _ => None,
        })
        .collect()
}

fn counted(step: &Step) -> Vec<Outcome> {
    step.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Metric(Metric::Admission(o)) => Some(*o),
            _ => None,
        })
        .collect()
}

fn calls(step: &Step) -> Vec<crate::wire::HitRequest> {
    step.hit
        .iter()
        .filter_map(|hit| serde_json::from_slice(&hit.body).ok())
        .collect()
}

fn signed() -> String {
    body_mac::sign(b"secret", "sha256=", Encoding::Hex, BODY)
}

/// The body's last chunk without `end_of_stream`, then the trailers.
fn body_then_trailers(w: &World, hook: &mut Hook, body: &[u8]) -> Step {
    let step = hook.on_body(&w.env(), body.len() as u64, false, Vec::new, || NOW);
    assert_eq!(
        (step.flow, replies(&step), counted(&step)),
        (Flow::Pause, vec![], vec![]),
        "nothing is decided before the body's end"
    );
    let body = body.to_vec();
    hook.on_trailers(&w.env(), move || body, || NOW)
}

#[test]
fn a_forgery_followed_by_trailers_is_refused_on_them() {
    let w = world("node");
    let mut hook = Hook::new();
    start(&w, &mut hook, "gh", &[("x-hub-signature-256", "sha256=00")]);
    let step = body_then_trailers(&w, &mut hook, BODY);
    assert_eq!(
        (step.flow, replies(&step), counted(&step)),
        (Flow::Pause, vec![401], vec![Outcome::Unverified])
    );
}

#[test]
fn a_signed_body_followed_by_trailers_is_checked_against_the_whole_body() {
    let w = world("node");
    let mut hook = Hook::new();
    let signature = signed();
    start(&w, &mut hook, "gh", &[("x-hub-signature-256", &signature)]);
    let step = body_then_trailers(&w, &mut hook, BODY);
    assert_eq!(
        (step.flow, replies(&step), counted(&step)),
        (Flow::Continue, vec![], vec![Outcome::Admitted])
    );
    assert!(step
        .effects
        .contains(&Effect::Header(EVENT_KEY, Some("d-1".into()))));
}

#[test]
fn a_key_in_the_body_is_claimed_when_the_trailers_end_it() {
    let w = world("fleet");
    let mut hook = Hook::new();
    start(&w, &mut hook, "stripe", &[]);
    let step = body_then_trailers(&w, &mut hook, BODY);
    assert_eq!(step.flow, Flow::Pause, "waiting for the store");
    let claim = calls(&step).pop().and_then(|hit| hit.claim).map(|c| c.key);
    assert_eq!(claim.as_deref(), Some("evt_1"));
    let ok = br#"{"result":"ok"}"#;
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(ok), NOW);
    assert_eq!(step.flow, Flow::Continue);
}

#[test]
fn a_refusal_held_for_the_upload_is_sent_on_the_trailers() {
    // A declared length: decided on the headers, with the body to follow.
    let w = world("fleet");
    let mut hook = Hook::new();
    let step = start(&w, &mut hook, "plain", &[("content-length", "14")]);
    assert_eq!(calls(&step).len(), 1);
    let limited = br#"{"result":"rate_limited","retry_after_ms":10}"#;
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(limited), NOW);
    assert_eq!((step.flow, replies(&step)), (Flow::Pause, vec![]));
    let step = body_then_trailers(&w, &mut hook, BODY);
    assert_eq!((step.flow, replies(&step)), (Flow::Pause, vec![429]));
}

#[test]
fn trailers_during_the_store_call_keep_the_request_paused() {
    let w = world("fleet");
    let mut hook = Hook::new();
    start(&w, &mut hook, "plain", &[("content-length", "14")]);
    let step = body_then_trailers(&w, &mut hook, BODY);
    assert_eq!((step.flow, step.effects), (Flow::Pause, vec![]));
    let duplicate = br#"{"result":"duplicate","hook_id":"h-0"}"#;
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(duplicate), NOW);
    assert_eq!(
        (step.flow, replies(&step), counted(&step)),
        (Flow::Pause, vec![201], vec![Outcome::Duplicate])
    );
}

#[test]
fn trailers_after_a_hook_was_let_through_go_on() {
    let w = world("node");
    let mut hook = Hook::new();
    let step = start(&w, &mut hook, "plain", &[("content-length", "14")]);
    assert_eq!(step.flow, Flow::Continue, "decided on the headers");
    let step = hook.on_body(&w.env(), 14, false, Vec::new, || NOW);
    assert_eq!(step.flow, Flow::Continue);
    let step = hook.on_trailers(&w.env(), Vec::new, || NOW);
    assert_eq!((step.flow, step.effects), (Flow::Continue, vec![]));
}

#[test]
fn too_large_is_refused_on_the_trailers_declared_or_counted() {
    let w = world("node");
    let mut hook = Hook::new();
    let step = start(&w, &mut hook, "plain", &[("content-length", "65")]);
    assert_eq!((step.flow, replies(&step)), (Flow::Pause, vec![]));
    let step = body_then_trailers(&w, &mut hook, &[b'x'; 65][..]);
    assert_eq!((step.flow, replies(&step)), (Flow::Pause, vec![413]));
    // Counted: a body the host had buffered past the limit by the trailers.
    let mut hook = Hook::new();
    start(&w, &mut hook, "stripe", &[]);
    let step = hook.on_trailers(&w.env(), || vec![b'x'; 65], || NOW);
    assert_eq!(
        (step.flow, replies(&step), counted(&step)),
        (Flow::Pause, vec![413], vec![Outcome::TooLarge])
    );
}

#[test]
fn trailers_with_no_body_at_all_decide_on_an_empty_body() {
    let w = world("node");
    let mut hook = Hook::new();
    let empty = body_mac::sign(b"secret", "sha256=", Encoding::Hex, b"");
    start(&w, &mut hook, "gh", &[("x-hub-signature-256", &empty)]);
    let step = hook.on_trailers(&w.env(), Vec::new, || NOW);
    assert_eq!(
        (step.flow, counted(&step)),
        (Flow::Continue, vec![Outcome::Admitted])
    );
    // Not a webhook: the 404 held for the upload goes out on the trailers.
    let mut hook = Hook::new();
    start(&w, &mut hook, "nope", &[]);
    let step = hook.on_trailers(&w.env(), Vec::new, || NOW);
    assert_eq!((step.flow, replies(&step)), (Flow::Pause, vec![404]));
}
