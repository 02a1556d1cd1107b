//! The upstream's receipt through the host glue: read from its response
//! headers, taken out of them before the sender sees them, queued in the
//! promote, and sent on only to a store that speaks wire 2.

use super::*;
use ankusa_core::hook::settle::Queued;
use ankusa_core::wire::receipt;
use ankusa_core::wire::version::StoreWire;

const RECEIPT: &str = "39e292d3768189161203b8976590e7dbe34c66613080c8eed8064b7b911042e8";

/// A fleet hook the store answered `answer`, forwarded and answered 201
/// with a receipt by the upstream: its promote.
fn promoted(answer: &str) -> (Rc<MockHost>, Queued) {
    let (host, mut hook) = fleet_hook(Some("200"), answer);
    hook.on_http_request_body(2, true);
    host.respond(&[(":status", "201"), ("x-ankusa-receipt", RECEIPT)]);
    hook.on_http_response_headers(2, false);
    hook.on_log();
    assert_eq!(
        *host.response_removed.borrow(),
        ["x-ankusa-receipt"],
        "the sender never sees the receipt"
    );
    let settles = host.settles.borrow().clone();
    assert_eq!(settles.len(), 1, "settled once");
    (host, settles[0].clone())
}

#[test]
fn the_upstreams_receipt_reaches_the_queued_promote() {
    let (_, queued) = promoted(r#"{"result":"ok","wire":2}"#);
    assert!(
        matches!(&queued.op, SettleOp::Promote { receipt: Some(r), .. } if r == RECEIPT),
        "{queued:?}"
    );
}

#[test]
fn a_workers_next_call_carries_the_receipt_only_to_a_store_of_wire_2() {
    for (answer, carried) in [
        (r#"{"result":"ok","wire":2}"#, true),
        // A v0.1.0 store names no version: it would refuse the field, and
        // the whole call with it. The promote goes without it.
        (r#"{"result":"ok"}"#, false),
    ] {
        let (host, queued) = promoted(answer);
        // The runtime holds it for the worker's next call.
        host.worker.held.borrow_mut().hold(queued, 0, 100);
        post(&host, "{}");
        let mut next = HookContext::new(Some(host.clone()));
        next.on_http_request_headers(5, false);
        let call = host.calls.borrow().last().cloned().expect("the next call");
        assert_eq!(call.path, "/v1/hits", "a lone hit with a settle riding");
        let sent = &call.body["settle"][0];
        assert_eq!(sent["op"], "promote", "{}", call.body);
        assert_eq!(
            sent.get("receipt").and_then(|r| r.as_str()) == Some(RECEIPT),
            carried,
            "after {answer}: {}",
            call.body
        );
    }
}

#[test]
fn a_forwarded_hook_without_a_claim_has_the_receipt_removed_unread() {
    // No delivery id: the hook holds no claim, the upstream still answers
    // with a receipt.
    let (host, mut hook) = start(FLEET);
    host.request(
        &[
            (":path", "/webhooks/gh"),
            (":method", "POST"),
            ("content-length", "2"),
        ],
        b"{}",
    );
    hook.on_http_request_headers(5, false);
    store_answers(&mut hook, &host, Some("200"), r#"{"result":"ok","wire":2}"#);
    hook.on_http_request_body(2, true);
    host.respond(&[(":status", "201"), ("x-ankusa-receipt", RECEIPT)]);
    hook.on_http_response_headers(2, false);
    assert_eq!(*host.response_removed.borrow(), ["x-ankusa-receipt"]);
    hook.on_log();
    assert!(host.settles.borrow().is_empty(), "nothing to settle");
}

#[test]
fn a_store_refusing_a_receipt_is_taken_as_wire_1_and_the_settles_go_again_without() {
    let (_, queued) = promoted(r#"{"result":"ok","wire":2}"#);
    // A node that heard nothing yet: a late claim's promote needs its
    // receipt, so it goes out. (The breaker stays closed through the
    // refused call, so the next hook calls too.)
    let config = FLEET.replace(r#""breaker_min_calls":1"#, r#""breaker_min_calls":100"#);
    let (host, mut hook) = start(&config);
    host.worker.held.borrow_mut().hold(queued, 0, 100);
    post(&host, "{}");
    hook.on_http_request_headers(5, false);
    let call = host.calls.borrow().last().cloned().expect("a call");
    assert_eq!(call.body["settle"][0]["receipt"], RECEIPT, "{}", call.body);
    // A v0.1.0 store refuses the unknown field, and the whole call with it.
    store_answers(
        &mut hook,
        &host,
        Some("400"),
        r#"{"error":"bad_request","message":"unknown field `receipt`"}"#,
    );
    assert!(!StoreWire::of_node(&host.store).sends(receipt::SINCE));
    assert!(host.metrics.borrow().contains(&Metric::StoreWire(1)));
    let (given_back, applied) = host.rode.borrow()[0].clone();
    assert!(!applied, "given back to go again");
    // The runtime holds them again; the next call carries them bare.
    for item in given_back {
        host.worker.held.borrow_mut().hold(item, 0, 100);
    }
    post(&host, "{}");
    let mut next = HookContext::new(Some(host.clone()));
    next.on_http_request_headers(5, false);
    let call = host.calls.borrow().last().cloned().expect("the next call");
    assert_eq!(call.body["settle"][0]["op"], "promote", "{}", call.body);
    assert!(
        call.body["settle"][0].get("receipt").is_none(),
        "{}",
        call.body
    );
}
