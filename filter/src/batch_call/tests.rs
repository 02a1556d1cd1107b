//! A worker's batched hits through the mock host: hooks that arrive while a
//! call is in flight park, the root is woken and sends them as one call,
//! and each hook gets its own share of the answer in its own context.

use super::*;
use crate::http::HookContext;
use crate::mock::MockHost;
use ankusa_core::hook::machine::Metric;
use ankusa_core::hook::outcome::Outcome;
use ankusa_core::hook::settle::Queued;
use ankusa_core::shell::batch;
use ankusa_core::wire::{Claim, SettleOp, HITS_PATH, HIT_PATH};
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::Action;

const FLEET: &str = r#"{"node":"edge-1",
    "fleet":{"breaker_min_calls":1},
    "sources":{"gh":{"tenant":"acme","dedupe":"github"}},
    "rate_limits":{"scope":"fleet","default":{"rate":10,"burst":20}},
    "dedupe":{"scope":"fleet"}}"#;

const WAKE: u32 = 9;
const OK: &str = r#"{"result":"ok"}"#;

type TestHook = HookContext<Rc<MockHost>>;

/// A worker with batching on (its wake queue registered).
fn worker() -> Rc<MockHost> {
    worker_with(FLEET)
}

fn worker_with(config: &str) -> Rc<MockHost> {
    let host = MockHost::new(config, &[]);
    batch::init(Some(WAKE));
    host
}

/// HookContext `id` sends its headers (delivery `delivery`, a body to follow).
fn arrive(host: &Rc<MockHost>, id: u32, delivery: &str) -> (TestHook, Action) {
    host.request(
        &[
            (":path", "/webhooks/gh"),
            (":method", "POST"),
            ("content-length", "2"),
            ("x-github-delivery", delivery),
        ],
        b"{}",
    );
    let mut hook = HookContext::new(Some(Rc::clone(host))).in_context(id);
    let action = hook.on_http_request_headers(5, false);
    (hook, action)
}

/// The release of an earlier hook's claim, held by the worker.
fn old_release() -> Queued {
    Queued {
        retries: 0,
        op: SettleOp::Release {
            claim: Claim {
                tenant: "acme".into(),
                source_id: "gh".into(),
                key: "old".into(),
                hook_id: "h-old".into(),
                node: "edge-1".into(),
                ttl_ms: 60_000,
                pending_ttl_ms: 5_000,
            },
        },
    }
}

/// The root reads its wake queue.
fn root_woken(host: &Rc<MockHost>) {
    assert!(batch::woken(WAKE));
    on_wake(host);
}

#[test]
fn hooks_arriving_during_a_call_ride_the_next_one_and_each_gets_its_own_answer() {
    let host = worker();
    let (mut first, action) = arrive(&host, 1, "d-1");
    assert!(matches!(action, Action::Pause));
    assert_eq!(
        host.calls.borrow().len(),
        1,
        "the first hook calls alone, at once"
    );
    assert_eq!(host.calls.borrow()[0].path, HIT_PATH);

    let (mut second, action) = arrive(&host, 2, "d-2");
    assert!(matches!(action, Action::Pause));
    let (mut third, _) = arrive(&host, 3, "d-3");
    assert_eq!(
        host.calls.borrow().len(),
        1,
        "hooks behind a call in flight wait"
    );
    assert!(
        host.wakes.borrow().is_empty(),
        "the call in flight's answer sends them"
    );

    // The first call is answered: the first hook goes on, the root is woken.
    host.answer(Some("200"), OK);
    first.on_http_call_response(1, 0, OK.len(), 0);
    assert_eq!(host.resumed.get(), 1);
    assert_eq!(*host.wakes.borrow(), [WAKE]);

    root_woken(&host);
    let calls = host.calls.borrow().clone();
    assert_eq!(calls.len(), 2, "the two waiting hooks leave as one call");
    assert_eq!(calls[1].path, HITS_PATH);
    let hits = calls[1].body["hits"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let keys: Vec<_> = hits.iter().map(|h| h["claim"]["key"].clone()).collect();
    assert_eq!(keys, ["d-2", "d-3"], "in arrival order");

    let answer = r#"{"results":[{"result":"ok"},{"result":"duplicate","hook_id":"h-0"}]}"#;
    host.answer(Some("200"), answer);
    assert!(on_call_answer(&host, 2, answer.len()));
    assert_eq!(
        *host.entered.borrow(),
        [2, 3],
        "each answered in its own context"
    );
    assert_eq!(host.resumed.get(), 2, "the second goes on");
    assert_eq!(
        host.admissions(),
        [Outcome::Admitted, Outcome::Admitted, Outcome::Duplicate]
    );
    let replies = host.replies.borrow().clone();
    assert_eq!(replies.len(), 0, "the duplicate waits for its body");
    assert!(matches!(third.on_http_request_body(2, true), Action::Pause));
    assert_eq!(host.replies.borrow().len(), 1);
    assert!(host.replies.borrow()[0].body.contains("h-0"));

    // The second takes its machine back and settles its own claim.
    assert!(matches!(
        second.on_http_request_body(2, true),
        Action::Continue
    ));
    host.respond(&[(":status", "200")]);
    second.on_http_response_headers(1, false);
    second.on_log();
    let settles = host.settles.borrow();
    assert_eq!(settles.len(), 1);
    assert!(matches!(&settles[0].op, SettleOp::Promote { claim, .. } if claim.key == "d-2"));
}

#[test]
fn a_batch_the_host_refuses_answers_every_waiting_hook_from_the_node_once_counted() {
    let host = worker_with(&FLEET.replace(
        r#""breaker_min_calls":1"#,
        r#""breaker_min_calls":3,"breaker_failure_rate":0.5"#,
    ));
    let (mut first, _) = arrive(&host, 1, "d-1");
    let (_second, _) = arrive(&host, 2, "d-2");
    let (_third, _) = arrive(&host, 3, "d-3");
    host.answer(Some("200"), OK);
    first.on_http_call_response(1, 0, OK.len(), 0);
    host.refuse_dispatch.set(true);
    root_woken(&host);
    assert_eq!(host.calls.borrow().len(), 2, "the batch was tried");
    assert_eq!(
        host.resumed.get(),
        3,
        "both waiting hooks answered node-local and forwarded"
    );
    let fallbacks = host
        .metrics
        .borrow()
        .iter()
        .filter(|m| **m == Metric::Fallback)
        .count();
    assert_eq!(fallbacks, 2);
    // The breaker counts calls: the refused batch is one failure, not two
    // (counted twice, 2 failures in 3 calls would open it).
    let breaker = ankusa_core::fleet::breaker::Breaker::new(
        &host.store,
        ankusa_core::node::edge_keys::BREAKER_KEY,
        host.worker.config.fleet.breaker,
    );
    assert_eq!(
        breaker.state(host.now_us.get()),
        ankusa_core::fleet::breaker::BreakerState::Closed
    );
}

#[test]
fn a_hook_gone_while_its_batch_is_in_flight_is_not_answered_and_releases_its_claim() {
    let host = worker();
    let (mut first, _) = arrive(&host, 1, "d-1");
    let (mut second, _) = arrive(&host, 2, "d-2");
    host.answer(Some("200"), OK);
    first.on_http_call_response(1, 0, OK.len(), 0);
    root_woken(&host);
    assert_eq!(host.calls.borrow().len(), 2);
    // The sender goes away while the batch is in flight.
    second.on_log();
    assert!(
        matches!(&host.settles.borrow()[..], [Queued { op: SettleOp::Release { claim }, .. }] if claim.key == "d-2"),
        "{:?}",
        host.settles.borrow()
    );
    host.answer(Some("200"), OK);
    assert!(on_call_answer(&host, 2, OK.len()));
    assert!(host.entered.borrow().is_empty(), "nobody to answer");
    assert_eq!(host.resumed.get(), 1);
}

#[test]
fn held_settles_ride_on_a_batch_and_are_reported_back() {
    let host = worker();
    let op = old_release();
    let (mut first, _) = arrive(&host, 1, "d-1");
    // Held once the first hook's own call has left: the batch carries it.
    host.worker.held.borrow_mut().hold(op.clone(), 0, 100);
    let _second = arrive(&host, 2, "d-2");
    let _third = arrive(&host, 3, "d-3");
    host.answer(Some("200"), OK);
    first.on_http_call_response(1, 0, OK.len(), 0);
    root_woken(&host);
    let batch = host.calls.borrow()[1].body.clone();
    assert_eq!(batch["settle"].as_array().map(Vec::len), Some(1), "{batch}");
    let answer = r#"{"results":[{"result":"ok"},{"result":"ok"}],"settled":1}"#;
    host.answer(Some("200"), answer);
    on_call_answer(&host, 2, answer.len());
    assert_eq!(*host.rode.borrow(), [(vec![op], true)]);
}

/// A held promote of an earlier hook, with the upstream's receipt.
fn old_promote() -> Queued {
    let SettleOp::Release { claim } = old_release().op else {
        unreachable!("old_release is a release")
    };
    Queued {
        retries: 0,
        op: SettleOp::Promote {
            hook_id: claim.hook_id.clone(),
            claim,
            receipt: Some("ab12".into()),
        },
    }
}

/// The promote a batched call carries once the worker's first call was
/// answered `first_answer` (batching state is the test thread's own).
fn batched_promote(first_answer: &str) -> serde_json::Value {
    let host = worker();
    let (mut first, _) = arrive(&host, 1, "d-1");
    host.worker.held.borrow_mut().hold(old_promote(), 0, 100);
    let _second = arrive(&host, 2, "d-2");
    let _third = arrive(&host, 3, "d-3");
    host.answer(Some("200"), first_answer);
    first.on_http_call_response(1, 0, first_answer.len(), 0);
    root_woken(&host);
    let batch = host.calls.borrow()[1].body.clone();
    assert_eq!(batch["settle"][0]["op"], "promote", "{batch}");
    batch["settle"][0].clone()
}

#[test]
fn a_batch_carries_a_promotes_receipt_to_a_store_that_said_wire_2() {
    let sent = batched_promote(r#"{"result":"ok","wire":2}"#);
    assert_eq!(sent["receipt"], "ab12", "{sent}");
}

#[test]
fn a_batch_to_a_store_of_wire_1_carries_the_promote_without_its_receipt() {
    let sent = batched_promote(OK);
    assert!(sent.get("receipt").is_none(), "{sent}");
}

#[test]
fn a_single_waiting_hook_without_settles_leaves_on_the_single_path() {
    let host = worker();
    let (mut first, _) = arrive(&host, 1, "d-1");
    let _second = arrive(&host, 2, "d-2");
    host.answer(Some("200"), OK);
    first.on_http_call_response(1, 0, OK.len(), 0);
    root_woken(&host);
    let call = host.calls.borrow()[1].clone();
    assert_eq!(call.path, HIT_PATH);
    assert!(call.body.get("settle").is_none());
}

#[test]
fn a_single_waiting_hook_carries_held_settles_as_a_batch_of_one() {
    let host = worker();
    let (mut first, _) = arrive(&host, 1, "d-1");
    let (mut second, _) = arrive(&host, 2, "d-2");
    let op = old_release();
    host.worker.held.borrow_mut().hold(op.clone(), 0, 100);
    host.answer(Some("200"), OK);
    first.on_http_call_response(1, 0, OK.len(), 0);
    root_woken(&host);
    let call = host.calls.borrow()[1].clone();
    assert_eq!(call.path, HITS_PATH);
    assert_eq!(
        call.body["hits"].as_array().map(Vec::len),
        Some(1),
        "{call:?}"
    );
    assert_eq!(
        call.body["settle"].as_array().map(Vec::len),
        Some(1),
        "{call:?}"
    );
    assert!(host.worker.held.borrow().is_empty());
    let answer = r#"{"results":[{"result":"ok"}],"settled":1}"#;
    host.answer(Some("200"), answer);
    assert!(on_call_answer(&host, 2, answer.len()));
    assert_eq!(*host.rode.borrow(), [(vec![op], true)]);
    second.on_http_request_body(2, true);
    assert_eq!(host.admissions(), [Outcome::Admitted, Outcome::Admitted]);
}

/// A worker holding one settle operation of an earlier hook, and a hook
/// arriving alone (no call in flight): its own call carries the operation.
fn lone_hook_with_a_held_settle() -> (Rc<MockHost>, TestHook, Queued) {
    let host = worker();
    let op = old_release();
    host.worker.held.borrow_mut().hold(op.clone(), 0, 100);
    let (hook, action) = arrive(&host, 1, "d-1");
    assert_eq!(action, Action::Pause);
    let call = host.calls.borrow()[0].clone();
    assert_eq!(
        call.path, HITS_PATH,
        "a lone hit with settles goes as a batch of one"
    );
    assert_eq!(call.body["hits"][0]["claim"]["key"], "d-1", "{call:?}");
    let sent: Vec<SettleOp> = serde_json::from_value(call.body["settle"].clone()).unwrap();
    assert_eq!(sent, vec![op.op.clone()]);
    assert!(host.worker.held.borrow().is_empty(), "taken by the call");
    (host, hook, op)
}

#[test]
fn a_lone_hit_carries_the_workers_held_settles_and_reads_its_answer_as_a_batch() {
    let (host, mut hook, op) = lone_hook_with_a_held_settle();
    let answer = r#"{"results":[{"result":"ok"}],"settled":1}"#;
    host.answer(Some("200"), answer);
    hook.on_http_call_response(1, 0, answer.len(), 0);
    hook.on_http_request_body(2, true);
    assert_eq!(host.admissions(), [Outcome::Admitted]);
    assert_eq!(host.resumed.get(), 1);
    assert_eq!(*host.rode.borrow(), [(vec![op], true)]);
}

#[test]
fn a_lone_hit_that_fails_or_is_left_gives_its_riding_settles_back() {
    // The call fails: the hook falls back, the settles are not applied.
    let (host, mut hook, op) = lone_hook_with_a_held_settle();
    host.answer(
        Some("503"),
        r#"{"error":"redis_unavailable","message":"down"}"#,
    );
    hook.on_http_call_response(1, 0, 40, 0);
    hook.on_http_request_body(2, true);
    assert!(host.metrics.borrow().contains(&Metric::Fallback));
    assert_eq!(*host.rode.borrow(), [(vec![op], false)]);

    // The sender leaves while the call is in flight: its answer will never come.
    let (host, mut hook, op) = lone_hook_with_a_held_settle();
    hook.on_log();
    assert_eq!(*host.rode.borrow(), [(vec![op], false)]);

    // The host refuses the dispatch.
    let host = worker();
    let op = old_release();
    host.worker.held.borrow_mut().hold(op.clone(), 0, 100);
    host.refuse_dispatch.set(true);
    let _refused = arrive(&host, 1, "d-1");
    assert_eq!(*host.rode.borrow(), [(vec![op], false)]);
}

/// The metrics of the wire's compatibility rule the worker reported.
fn wire_metrics(host: &Rc<MockHost>) -> Vec<Metric> {
    host.metrics
        .borrow()
        .iter()
        .filter(|m| matches!(m, Metric::StoreWire(_) | Metric::WireUnknown(_)))
        .cloned()
        .collect()
}

/// A newer store's answers, alone and batched, carry fields this edge
/// doesn't know: every hook is decided as without them, the fields are
/// counted, and the store's wire version is reported once per change.
#[test]
fn a_newer_stores_fields_are_counted_and_its_version_followed() {
    let host = worker();
    let (mut first, _) = arrive(&host, 1, "d-1");
    let (_second, _) = arrive(&host, 2, "d-2");
    let (_third, _) = arrive(&host, 3, "d-3");
    let alone = r#"{"result":"ok","wire":3,"quota":{"left":4}}"#;
    host.answer(Some("200"), alone);
    first.on_http_call_response(1, 0, alone.len(), 0);
    assert_eq!(
        wire_metrics(&host),
        [Metric::StoreWire(3), Metric::WireUnknown(1)]
    );
    root_woken(&host);
    let batch = r#"{"results":[{"result":"ok","hint":1},{"result":"duplicate","hook_id":"h-0","why":"x"}],"wire":3,"batch":7}"#;
    host.answer(Some("200"), batch);
    assert!(on_call_answer(&host, 2, batch.len()));
    assert_eq!(
        host.admissions(),
        [Outcome::Admitted, Outcome::Admitted, Outcome::Duplicate],
        "decided as without the fields"
    );
    assert_eq!(
        wire_metrics(&host),
        [
            Metric::StoreWire(3),
            Metric::WireUnknown(1),
            Metric::WireUnknown(3)
        ],
        "the batch's three unknown fields counted once; its version unchanged"
    );
}

/// A store that names no version (v0.1.0's) is reported as wire 1.
#[test]
fn a_store_naming_no_version_is_reported_as_wire_1() {
    let host = worker();
    let (mut first, _) = arrive(&host, 1, "d-1");
    host.answer(Some("200"), OK);
    first.on_http_call_response(1, 0, OK.len(), 0);
    assert_eq!(wire_metrics(&host), [Metric::StoreWire(1)]);
}
