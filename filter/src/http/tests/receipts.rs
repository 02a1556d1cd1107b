//! The upstream's receipt through the host glue: read from its response
//! headers, taken out of them before the sender sees them, queued in the
//! promote, and sent on only to a store that speaks wire 2.

use super::*;

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
