//! Whole hook lives through the mock host: Envoy's callbacks in the order
//! Envoy makes them, the host calls checked.

use super::*;
use crate::metrics::{Kind, Outcome};
use crate::mock::MockHost;
use ankusa_core::hook::machine::Metric;
use ankusa_core::wire::SettleOp;
use std::rc::Rc;

const FLEET: &str = r#"{"node":"edge-1",
    "fleet":{"breaker_min_calls":1},
    "sources":{"gh":{"tenant":"acme","dedupe":"github"}},
    "rate_limits":{"scope":"fleet","default":{"rate":10,"burst":20}},
    "dedupe":{"scope":"fleet"}}"#;

const DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

fn post(host: &MockHost, body: &str) {
    let len = body.len().to_string();
    host.request(
        &[
            (":path", "/webhooks/gh"),
            (":method", "POST"),
            ("content-length", &len),
            ("x-github-delivery", DELIVERY),
            ("x-ankusa-tenant", "forged"),
        ],
        body.as_bytes(),
    );
}

/// A hook whose headers came with its body still to follow.
fn start(config: &str) -> (Rc<MockHost>, HookContext<Rc<MockHost>>) {
    let host = MockHost::new(config, &[]);
    let hook = HookContext::new(Some(host.clone()));
    (host, hook)
}

fn store_answers(
    hook: &mut HookContext<Rc<MockHost>>,
    host: &MockHost,
    status: Option<&str>,
    body: &str,
) {
    host.answer(status, body);
    hook.on_http_call_response(1, 0, body.len(), 0);
}

fn settled(host: &MockHost) -> Vec<&'static str> {
    host.settles
        .borrow()
        .iter()
        .map(|q| match q.op {
            SettleOp::Promote { .. } => "promote",
            SettleOp::Release { .. } => "release",
        })
        .collect()
}

fn set(host: &MockHost, name: &str) -> Option<Option<String>> {
    host.set_headers
        .borrow()
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

/// Headers (body to follow), the store's `status`/`answer`, then the body's end.
fn fleet_hook(status: Option<&str>, answer: &str) -> (Rc<MockHost>, HookContext<Rc<MockHost>>) {
    let (host, mut hook) = start(FLEET);
    post(&host, "{}");
    assert!(matches!(
        hook.on_http_request_headers(5, false),
        Action::Pause
    ));
    assert_eq!(host.calls.borrow().len(), 1, "one store call");
    store_answers(&mut hook, &host, status, answer);
    (host, hook)
}

#[test]
fn a_fleet_ok_then_an_upstream_2xx_promotes_the_claim_under_the_upstreams_id() {
    let (host, mut hook) = fleet_hook(Some("200"), r#"{"result":"ok"}"#);
    let call = host.calls.borrow()[0].clone();
    assert_eq!(call.path, "/v1/hit");
    assert_eq!(call.body["claim"]["key"], DELIVERY);
    assert_eq!(call.body["claim"]["node"], "edge-1");
    assert_eq!(call.body["charges"].as_array().map(Vec::len), Some(1));
    assert_eq!(host.resumed.get(), 1, "forwarded once the store said ok");
    assert_eq!(
        set(&host, "x-ankusa-tenant"),
        Some(Some("acme".into())),
        "ours, not the sender's"
    );
    assert_eq!(
        set(&host, "x-ankusa-event-key"),
        Some(Some(DELIVERY.into()))
    );
    assert_eq!(host.admissions(), [Outcome::Admitted]);
    assert!(matches!(
        hook.on_http_request_body(2, true),
        Action::Continue
    ));
    host.respond(&[(":status", "202"), ("x-ankusa-hook-id", "older_id-1")]);
    hook.on_http_response_headers(2, false);
    hook.on_log();
    let settles = host.settles.borrow();
    assert_eq!(settles.len(), 1, "settled once");
    match &settles[0].op {
        SettleOp::Promote { hook_id, claim, .. } => {
            assert_eq!(hook_id, "older_id-1");
            assert_eq!(claim.key, DELIVERY);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_upstream_500_releases_the_claim() {
    let (host, mut hook) = fleet_hook(Some("200"), r#"{"result":"ok"}"#);
    host.respond(&[(":status", "500")]);
    hook.on_http_response_headers(2, false);
    hook.on_log();
    assert_eq!(settled(&host), ["release"]);
}

#[test]
fn a_sender_gone_before_the_upstream_answered_releases_the_claim() {
    let (host, mut hook) = fleet_hook(Some("200"), r#"{"result":"ok"}"#);
    hook.on_log();
    assert_eq!(settled(&host), ["release"]);
}

#[test]
fn every_store_failure_answers_node_local_and_keeps_a_sent_claim() {
    let reached = [
        (Some("504"), "upstream request timeout"),
        (None, ""),
        (Some("200"), "not json"),
        (Some("503"), "upstream connect error or disconnect/reset before headers. reset reason: connection termination"),
    ];
    for (status, body) in reached {
        let (host, mut hook) = fleet_hook(status, body);
        assert_eq!(host.resumed.get(), 1, "{status:?}: forwarded from the node");
        let metrics = host.metrics.borrow().clone();
        assert!(metrics.contains(&Metric::Fallback), "{status:?}");
        assert!(metrics.contains(&Metric::Degraded(Kind::RateLimit, true)));
        assert!(metrics.contains(&Metric::Degraded(Kind::Dedupe, true)));
        host.respond(&[(":status", "200")]);
        hook.on_http_response_headers(2, false);
        assert_eq!(
            settled(&host),
            ["promote"],
            "{status:?}: the store may have written it"
        );
    }
    let unreached = [
        (Some("503"), "no healthy upstream"),
        (Some("503"), "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure"),
    ];
    for (status, body) in unreached {
        let (host, mut hook) = fleet_hook(status, body);
        assert_eq!(host.admissions(), [Outcome::Admitted]);
        host.respond(&[(":status", "200")]);
        hook.on_http_response_headers(2, false);
        hook.on_log();
        assert!(
            host.settles.borrow().is_empty(),
            "{body}: never left the edge"
        );
    }
}

#[test]
fn a_refused_dispatch_falls_back_at_once_with_nothing_to_settle() {
    let (host, mut hook) = start(FLEET);
    host.refuse_dispatch.set(true);
    post(&host, "{}");
    assert!(matches!(
        hook.on_http_request_headers(5, true),
        Action::Continue
    ));
    assert!(host.metrics.borrow().contains(&Metric::Fallback));
    assert!(host.logs.borrow().iter().any(|(_, l)| l
        == "ankusa: fleet limiter degraded, answering from this node alone: the store cluster took no call"));
    host.respond(&[(":status", "200")]);
    hook.on_http_response_headers(2, false);
    assert!(host.settles.borrow().is_empty());
}

#[test]
fn an_open_breaker_skips_the_store() {
    let (host, _hook) = fleet_hook(Some("504"), "");
    assert!(
        host.metrics.borrow().contains(&Metric::BreakerState(1)),
        "opened"
    );
    let mut second = HookContext::new(Some(host.clone()));
    post(&host, "{}");
    assert!(matches!(
        second.on_http_request_headers(5, true),
        Action::Continue
    ));
    assert_eq!(host.calls.borrow().len(), 1, "no second call while open");
    assert_eq!(host.admissions(), [Outcome::Admitted, Outcome::Admitted]);
    second.on_log();
    assert!(host.settles.borrow().is_empty(), "no call, no claim");
}

#[test]
fn a_duplicate_is_answered_201_with_the_original_id_once_the_body_is_in() {
    let (host, mut hook) = fleet_hook(Some("200"), r#"{"result":"duplicate","hook_id":"h-1"}"#);
    assert!(
        host.replies.borrow().is_empty(),
        "deferred until the upload ends"
    );
    assert!(matches!(hook.on_http_request_body(1, false), Action::Pause));
    assert!(host.replies.borrow().is_empty());
    assert!(matches!(hook.on_http_request_body(2, true), Action::Pause));
    let replies = host.replies.borrow();
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].status, 201);
    assert!(
        replies[0].body.contains(r#""id":"h-1""#),
        "{}",
        replies[0].body
    );
    assert_eq!(host.admissions(), [Outcome::Duplicate]);
    assert_eq!(host.resumed.get(), 0);
}

#[test]
fn a_pending_key_is_a_409_with_retry_after() {
    let (host, mut hook) = fleet_hook(Some("200"), r#"{"result":"pending","retry_after_ms":1500}"#);
    hook.on_http_request_body(2, true);
    let reply = host.replies.borrow()[0].clone();
    assert_eq!((reply.status, reply.retry_after), (409, Some(2)));
    assert_eq!(host.admissions(), [Outcome::Pending]);
}

#[test]
fn a_fleet_429_waits_for_the_end_of_the_body() {
    let (host, mut hook) = fleet_hook(
        Some("200"),
        r#"{"result":"rate_limited","retry_after_ms":10}"#,
    );
    assert!(host.replies.borrow().is_empty());
    hook.on_http_request_body(2, true);
    let reply = host.replies.borrow()[0].clone();
    assert_eq!((reply.status, reply.retry_after), (429, Some(1)));
    hook.on_log();
    assert!(host.settles.borrow().is_empty(), "refused: no claim held");
}

#[test]
fn a_node_429_after_a_fleet_ok_releases_the_claim() {
    let config = FLEET.replace(
        r#""rate_limits":{"scope":"fleet","default":{"rate":10,"burst":20}}"#,
        r#""rate_limits":{"scope":"node","default":{"rate":1,"burst":1}}"#,
    );
    let host = MockHost::new(&config, &[]);
    for expect in ["admitted", "refused"] {
        let mut hook = HookContext::new(Some(host.clone()));
        post(&host, "{}");
        hook.on_http_request_headers(5, true);
        store_answers(&mut hook, &host, Some("200"), r#"{"result":"ok"}"#);
        if expect == "refused" {
            assert_eq!(host.replies.borrow()[0].status, 429);
        }
    }
    assert_eq!(host.admissions(), [Outcome::Admitted, Outcome::RateLimited]);
    assert_eq!(settled(&host), ["release"], "the refused hook's claim");
}

#[test]
fn a_forged_signature_is_401_and_charges_nothing() {
    let config = r#"{"sources":{"gh":{"tenant":"acme","dedupe":"github",
        "verify":{"scheme":"github","secret_env":"GH_SECRET"}}},
        "rate_limits":{"scope":"fleet","default":{"rate":1,"burst":1}},
        "dedupe":{"scope":"fleet"}}"#;
    let host = MockHost::new(config, &[("GH_SECRET", "s3cret")]);
    let before = host.store.clone();
    let mut hook = HookContext::new(Some(host.clone()));
    post(&host, "{}");
    assert!(
        matches!(hook.on_http_request_headers(5, false), Action::Pause),
        "the body is needed"
    );
    assert!(matches!(hook.on_http_request_body(2, true), Action::Pause));
    assert_eq!(host.replies.borrow()[0].status, 401);
    assert_eq!(
        host.replies.borrow()[0].body,
        r#"{"error":"bad_signature"}"#
    );
    assert!(host.calls.borrow().is_empty(), "no store call");
    assert!(host.store == before, "no node bucket written");
    assert_eq!(host.admissions(), [Outcome::Unverified]);
}

#[test]
fn a_chunked_body_over_the_limit_is_413_without_waiting_for_its_end() {
    let config = FLEET.replace(
        r#""node":"edge-1","#,
        r#""node":"edge-1","max_body_bytes":4,"#,
    );
    let host = MockHost::new(&config, &[]);
    let mut hook = HookContext::new(Some(host.clone()));
    host.request(
        &[
            (":path", "/webhooks/gh"),
            (":method", "POST"),
            ("x-github-delivery", DELIVERY),
        ],
        b"0123456789",
    );
    assert!(matches!(
        hook.on_http_request_headers(5, false),
        Action::Pause
    ));
    assert!(matches!(hook.on_http_request_body(3, false), Action::Pause));
    assert!(host.replies.borrow().is_empty());
    hook.on_http_request_body(10, false);
    let reply = host.replies.borrow()[0].clone();
    assert_eq!(reply.status, 413);
    assert!(
        reply
            .body
            .contains("body of 10 bytes is over the limit of 4"),
        "{}",
        reply.body
    );
    assert!(host.calls.borrow().is_empty());
}

#[test]
fn a_get_is_405_and_an_unknown_source_404() {
    let (host, mut hook) = start(FLEET);
    host.request(&[(":path", "/webhooks/gh"), (":method", "GET")], b"");
    hook.on_http_request_headers(2, true);
    let (host2, mut hook2) = start(FLEET);
    host2.request(&[(":path", "/webhooks/nope"), (":method", "POST")], b"");
    hook2.on_http_request_headers(2, true);
    assert_eq!(host.replies.borrow()[0].status, 405);
    assert_eq!(host2.replies.borrow()[0].status, 404);
    assert_eq!(host.admissions(), [Outcome::BadMethod]);
    assert_eq!(host2.admissions(), [Outcome::NotFound]);
}

#[test]
fn an_unconfigured_filter_answers_503_and_forwards_nothing() {
    let mut hook: HookContext<Rc<MockHost>> = HookContext::new(None);
    assert!(matches!(
        hook.on_http_request_headers(2, false),
        Action::Pause
    ));
    assert!(matches!(hook.on_http_request_body(2, true), Action::Pause));
    let replies = crate::mock::UNCONFIGURED.with(|r| r.borrow().clone());
    assert_eq!(replies.len(), 1);
    assert_eq!((replies[0].status, replies[0].retry_after), (503, Some(1)));
}

#[test]
fn a_shadowed_duplicate_is_forwarded_counted_shadowed_and_settles_nothing() {
    let config = FLEET.replace(r#""burst":20}"#, r#""burst":20,"shadow":{"dedupe":true}}"#);
    let (host, mut hook) = start(&config);
    post(&host, "{}");
    hook.on_http_request_headers(5, false);
    store_answers(
        &mut hook,
        &host,
        Some("200"),
        r#"{"result":"duplicate","hook_id":"h-1"}"#,
    );
    assert_eq!(host.resumed.get(), 1, "forwarded anyway");
    assert!(host.replies.borrow().is_empty());
    assert!(host
        .metrics
        .borrow()
        .contains(&Metric::Shadowed(Outcome::Duplicate)));
    assert!(host.admissions().is_empty(), "counted once, as shadowed");
    assert!(matches!(
        hook.on_http_request_body(2, true),
        Action::Continue
    ));
    host.respond(&[(":status", "201"), ("x-ankusa-hook-id", "h-1")]);
    hook.on_http_response_headers(2, false);
    hook.on_log();
    assert!(
        settled(&host).is_empty(),
        "the original's claim is not ours"
    );
}

#[test]
fn a_fleet_admit_carries_the_policy_and_a_fleet_429_the_denial() {
    let (host, mut hook) = fleet_hook(Some("200"), r#"{"result":"ok"}"#);
    hook.on_http_request_body(2, true);
    host.respond(&[(":status", "201")]);
    hook.on_http_response_headers(2, false);
    assert_eq!(
        *host.response_set.borrow(),
        [(
            "ratelimit-policy".to_string(),
            "\"hooks\";q=20;w=2".to_string()
        )]
    );
    let (host, mut hook) = fleet_hook(
        Some("200"),
        r#"{"result":"rate_limited","retry_after_ms":1500}"#,
    );
    hook.on_http_request_body(2, true);
    let reply = host.replies.borrow()[0].clone();
    assert_eq!((reply.status, reply.retry_after), (429, Some(2)));
    assert_eq!(
        reply.headers,
        [
            ("ratelimit-policy", "\"hooks\";q=20;w=2".to_string()),
            ("ratelimit", "\"hooks\";r=0;t=2".to_string()),
        ]
    );
}

#[test]
fn a_forged_signature_followed_by_trailers_is_401_on_the_trailers() {
    let config = r#"{"sources":{"gh":{"tenant":"acme","dedupe":"github",
        "verify":{"scheme":"github","secret_env":"GH_SECRET"}}},
        "rate_limits":{"scope":"fleet","default":{"rate":1,"burst":1}},
        "dedupe":{"scope":"fleet"}}"#;
    let host = MockHost::new(config, &[("GH_SECRET", "s3cret")]);
    let mut hook = HookContext::new(Some(host.clone()));
    post(&host, "{}");
    assert!(matches!(
        hook.on_http_request_headers(5, false),
        Action::Pause
    ));
    // With trailers to come, the body's last chunk is not the stream's end.
    assert!(matches!(hook.on_http_request_body(2, false), Action::Pause));
    assert!(host.replies.borrow().is_empty());
    assert!(
        matches!(hook.on_http_request_trailers(1), Action::Pause),
        "a forgery never goes on"
    );
    assert_eq!(host.replies.borrow()[0].status, 401);
    assert!(host.calls.borrow().is_empty(), "no store call");
    assert_eq!(host.admissions(), [Outcome::Unverified]);
}

#[test]
fn trailers_while_the_store_call_is_in_flight_wait_for_its_answer() {
    let (host, mut hook) = start(FLEET);
    post(&host, "{}");
    assert!(matches!(
        hook.on_http_request_headers(5, false),
        Action::Pause
    ));
    assert_eq!(host.calls.borrow().len(), 1, "decided on the headers");
    assert!(matches!(hook.on_http_request_body(2, false), Action::Pause));
    assert!(matches!(hook.on_http_request_trailers(1), Action::Pause));
    store_answers(
        &mut hook,
        &host,
        Some("200"),
        r#"{"result":"duplicate","hook_id":"orig-1"}"#,
    );
    assert_eq!(host.replies.borrow()[0].status, 201);
    assert_eq!(host.resumed.get(), 0, "nothing went upstream");
    assert_eq!(host.admissions(), [Outcome::Duplicate]);
}

#[test]
fn a_key_in_a_body_ended_by_trailers_is_claimed_then_forwarded() {
    let config = FLEET.replace(r#""dedupe":"github""#, r#""dedupe":{"json":"id"}"#);
    let (host, mut hook) = start(&config);
    host.request(
        &[(":path", "/webhooks/gh"), (":method", "POST")],
        br#"{"id":"evt_9"}"#,
    );
    assert!(matches!(
        hook.on_http_request_headers(2, false),
        Action::Pause
    ));
    assert!(matches!(
        hook.on_http_request_body(14, false),
        Action::Pause
    ));
    assert!(host.calls.borrow().is_empty(), "the body isn't all in yet");
    assert!(matches!(hook.on_http_request_trailers(1), Action::Pause));
    assert_eq!(host.calls.borrow()[0].body["claim"]["key"], "evt_9");
    store_answers(&mut hook, &host, Some("200"), r#"{"result":"ok"}"#);
    assert_eq!(host.resumed.get(), 1, "forwarded once the store said ok");
    assert_eq!(host.admissions(), [Outcome::Admitted]);
}

#[test]
fn each_hook_publishes_its_decision_once_for_the_access_log() {
    let (host, mut hook) = fleet_hook(Some("200"), r#"{"result":"ok"}"#);
    hook.on_http_request_body(2, true);
    host.respond(&[(":status", "201")]);
    hook.on_http_response_headers(1, false);
    hook.on_log();
    let published = host.published.borrow().clone();
    let [line] = &published[..] else {
        panic!("not one decision: {published:?}")
    };
    assert!(
        line.starts_with("outcome=admitted shadow=false tenant=acme source=gh "),
        "{line}"
    );
    assert!(line.contains(&format!(" key={DELIVERY} ")), "{line}");
    assert!(line.contains(" decided=store store_us="), "{line}");

    let (host, _hook) = fleet_hook(Some("503"), "");
    let published = host.published.borrow().clone();
    assert!(
        matches!(&published[..], [l] if l.contains(" decided=fallback ")),
        "{published:?}"
    );
}

mod receipts;
