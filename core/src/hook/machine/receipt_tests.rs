//! The upstream's receipt through a hook's life: it rides in the promote of
//! every claim the hook holds, never reaches the sender, and the store's wire
//! version each answer names becomes the node's.

use super::world::World;
use super::*;
use crate::wire::{receipt, SettleOp};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const NOW: u64 = 1_700_000_000_000_000;

fn config(scope: &str) -> String {
    format!(
        r#"{{"sources":{{"gh":{{"tenant":"acme","dedupe":"github"}}}},
            "rate_limits":{{"scope":"{scope}","default":{{"rate":100,"burst":100}}}},
            "dedupe":{{"scope":"{scope}"}}}}"#
    )
}

/// A delivery's headers, with its GitHub delivery id when `delivery`.
fn post(w: &World, hook: &mut Hook, delivery: Option<&str>) -> Step {
    let mut pairs = vec![
        (":path".to_string(), b"/webhooks/gh".to_vec()),
        (":method".to_string(), b"POST".to_vec()),
        ("content-length".to_string(), b"0".to_vec()),
    ];
    if let Some(d) = delivery {
        pairs.push(("x-github-delivery".to_string(), d.as_bytes().to_vec()));
    }
    hook.on_headers(
        &w.env(),
        RequestHeaders::from_pairs(pairs),
        true,
        || NOW,
        |_| [1; 10],
    )
}

fn removed(step: &Step) -> Vec<&'static str> {
    step.effects
        .iter()
        .filter_map(|e| match e {
            Effect::RemoveResponseHeader(name) => Some(*name),
            _ => None,
        })
        .collect()
}

#[test]
fn the_upstreams_receipt_rides_in_the_promote_and_never_reaches_the_sender() {
    let w = World::new(&config("fleet"), &[]);
    let mut hook = Hook::new();
    post(&w, &mut hook, Some("d-1"));
    let ok = br#"{"result":"ok","wire":2}"#;
    hook.on_store_answer(&w.env(), Some("200"), Some(ok), NOW);
    assert!(hook.holds_claim() && hook.reads_upstream());
    let step = hook.on_upstream_headers(Some("201"), None, Some("ab12"));
    assert_eq!(removed(&step), [receipt::HEADER]);
    let promoted: Vec<_> = step
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::Settle(q) => Some(&q.op),
            _ => None,
        })
        .collect();
    assert!(
        matches!(promoted[..], [SettleOp::Promote { receipt: Some(r), .. }] if r == "ab12"),
        "{promoted:?}"
    );
    // An answer that carried none has nothing to remove, and promotes bare.
    let mut hook = Hook::new();
    post(&w, &mut hook, Some("d-2"));
    hook.on_store_answer(&w.env(), Some("200"), Some(ok), NOW);
    let step = hook.on_upstream_headers(Some("201"), None, None);
    assert!(removed(&step).is_empty());
    assert!(step.effects.iter().any(|e| matches!(
        e,
        Effect::Settle(q) if matches!(q.op, SettleOp::Promote { receipt: None, .. })
    )));
}

#[test]
fn a_forwarded_hook_holding_no_claim_still_has_any_receipt_removed() {
    // No delivery id: nothing to claim, but the upstream may still send a
    // receipt for the hook, and a sender must not get it.
    let w = World::new(&config("fleet"), &[]);
    let mut hook = Hook::new();
    post(&w, &mut hook, None);
    hook.on_store_answer(&w.env(), Some("200"), Some(br#"{"result":"ok"}"#), NOW);
    assert!(!hook.holds_claim());
    assert!(hook.reads_upstream());
    let step = hook.on_upstream_headers(None, None, None);
    assert_eq!(removed(&step), [receipt::HEADER]);
    // A hook refused before it was forwarded has no upstream answer to clear.
    let mut refused = Hook::new();
    let step = refused.on_headers(
        &w.env(),
        RequestHeaders::from_pairs(vec![(":path".into(), b"/nope".to_vec())]),
        true,
        || NOW,
        |_| [1; 10],
    );
    assert_eq!(step.flow, Flow::Pause);
    assert!(!refused.reads_upstream());
}

#[test]
fn an_edge_with_no_store_spends_nothing_on_receipts() {
    // Without rate-limit headers to add, nothing else reads the response.
    let config =
        config("node").replace(r#""scope":"node","#, r#""scope":"node","headers":"none","#);
    let w = World::new(&config, &[]);
    let mut hook = Hook::new();
    let step = post(&w, &mut hook, Some("d-1"));
    assert_eq!(step.flow, Flow::Continue);
    assert!(
        !hook.reads_upstream(),
        "no host call on the upstream's answer"
    );
}

#[test]
fn the_wire_a_store_answer_names_becomes_the_nodes() {
    let w = World::new(&config("fleet"), &[]);
    let node = || crate::wire::version::StoreWire::of_node(&w.store);
    assert!(!node().speaks(receipt::SINCE), "nothing heard yet");
    let mut hook = Hook::new();
    post(&w, &mut hook, Some("d-1"));
    hook.on_store_answer(
        &w.env(),
        Some("200"),
        Some(br#"{"result":"ok","wire":2}"#),
        NOW,
    );
    assert!(node().speaks(receipt::SINCE));
    // The store is rolled back to v0.1.0 (its answers name no version).
    let mut hook = Hook::new();
    post(&w, &mut hook, Some("d-2"));
    hook.on_store_answer(&w.env(), Some("200"), Some(br#"{"result":"ok"}"#), NOW);
    assert!(!node().speaks(receipt::SINCE));
}
