use super::*;
use crate::hook::reply::*;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn config(rate_scope: &str, dedupe_scope: &str, bytes: bool) -> Config {
    let bytes = if bytes {
        r#","bytes_rate":1000,"bytes_burst":100"#
    } else {
        ""
    };
    let json = format!(
        r#"{{"node":"edge-1",
            "sources":{{"gh":{{"tenant":"acme","dedupe":"github"}},"stripe":{{"dedupe":{{"json":"id"}},"ttl_ms":5000}}}},
            "rate_limits":{{"scope":"{rate_scope}","default":{{"rate":10,"burst":20{bytes}}}}},
            "dedupe":{{"scope":"{dedupe_scope}"}}}}"#
    );
    Config::parse(json.as_bytes()).unwrap()
}

fn hook(key: Option<&str>, body_len: u64) -> HookFacts {
    HookFacts {
        tenant: "acme".into(),
        source_id: "stripe".into(),
        hook_id: "0190a5b2-7c1d-7aaa-8bbb-0123456789ab".into(),
        event_key: key.map(str::to_string),
        body_len,
        replay_key: None,
        traceparent: None,
    }
}

#[test]
fn node_scopes_never_call_the_store() {
    let p = plan(
        &config("node", "node", false),
        "edge-1",
        &hook(Some("evt"), 0),
    )
    .unwrap();
    assert_eq!(p.fleet, None);
    assert_eq!(p.charges.len(), 1);
    assert_eq!(p.charges[0].kind, ChargeKind::Hooks);
}

#[test]
fn fleet_scopes_send_charges_and_claim_in_one_request() {
    let p = plan(
        &config("fleet", "fleet", true),
        "edge-1",
        &hook(Some("evt"), 10),
    )
    .unwrap();
    let req = p.fleet.unwrap();
    assert_eq!(req.charges.len(), 2, "hooks and bytes");
    let claim = req.claim.unwrap();
    assert_eq!(
        (claim.key.as_str(), claim.node.as_str(), claim.ttl_ms),
        ("evt", "edge-1", 5000)
    );
    assert_eq!(claim.pending_ttl_ms, 30_000);
    assert!(p.node_after_ok.is_empty());
    assert!(req.charges.iter().all(|c| c.validate("c").is_ok()));
}

#[test]
fn fleet_dedupe_with_node_rate_claims_alone_and_charges_the_node_after_ok() {
    let p = plan(
        &config("node", "fleet", false),
        "edge-1",
        &hook(Some("evt"), 0),
    )
    .unwrap();
    let req = p.fleet.unwrap();
    assert!(
        req.charges.is_empty(),
        "a duplicate must spend no node charge"
    );
    assert!(req.claim.is_some());
    assert_eq!(p.node_after_ok, p.charges);
}

#[test]
fn fleet_dedupe_without_a_key_and_node_rate_needs_no_call() {
    let p = plan(&config("node", "fleet", false), "edge-1", &hook(None, 0)).unwrap();
    assert_eq!(p.fleet, None);
}

#[test]
fn fleet_rate_with_node_dedupe_sends_no_claim() {
    let p = plan(
        &config("fleet", "node", false),
        "edge-1",
        &hook(Some("evt"), 0),
    )
    .unwrap();
    let req = p.fleet.unwrap();
    assert_eq!(req.claim, None);
    assert_eq!(req.charges.len(), 1);
}

#[test]
fn body_over_the_bytes_burst_is_too_large() {
    let err = plan(&config("node", "node", true), "edge-1", &hook(None, 101)).unwrap_err();
    assert_eq!(
        err,
        TooLarge {
            size: 101,
            limit: 100
        }
    );
}

#[test]
fn every_failure_shape_is_a_failure() {
    assert_eq!(parse_answer(None, None), Err(CallFailure::NoStatus));
    assert_eq!(
        parse_answer(Some("503"), Some(b"{}")),
        Err(CallFailure::Status("503".into()))
    );
    assert_eq!(
        parse_answer(Some("504"), None),
        Err(CallFailure::Status("504".into()))
    );
    assert_eq!(
        parse_answer(Some("200"), Some(b"garbage")),
        Err(CallFailure::Unparsable)
    );
    assert_eq!(
        parse_answer(Some("200"), None),
        Err(CallFailure::Unparsable)
    );
    assert_eq!(
        parse_answer(Some("200"), Some(br#"{"result":"ok"}"#)),
        Ok(HitAnswer::Ok)
    );
}

#[test]
fn retry_after_is_whole_seconds_at_least_one() {
    assert_eq!(retry_after_secs(0), 1);
    assert_eq!(retry_after_secs(1), 1);
    assert_eq!(retry_after_secs(1_000), 1);
    assert_eq!(retry_after_secs(1_001), 2);
}

#[test]
fn replies_have_the_documented_bodies() {
    let dup = LocalReply::duplicate("h1");
    assert_eq!(dup.status, 201);
    let body: serde_json::Value = serde_json::from_str(&dup.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"status":"accepted","id":"h1","duplicate":true})
    );
    let pending = LocalReply::pending(1_500);
    assert_eq!((pending.status, pending.retry_after), (409, Some(2)));
    assert_eq!(pending.body, r#"{"error":"dedupe_pending"}"#);
    let limited = LocalReply::rate_limited(10);
    assert_eq!((limited.status, limited.retry_after), (429, Some(1)));
    assert_eq!(limited.body, r#"{"error":"rate_limited"}"#);
}

#[test]
fn the_upstreams_older_id_wins_when_it_reports_one() {
    assert_eq!(committed_id("ours", Some("older")), "older");
    assert_eq!(committed_id("ours", None), "ours");
    assert_eq!(committed_id("ours", Some("")), "ours");
    assert_eq!(committed_id("ours", Some("bad id")), "ours");
    assert_eq!(committed_id("ours", Some(&"x".repeat(65))), "ours");
}

#[test]
fn a_sent_call_that_failed_keeps_its_claim_to_settle() {
    let p = plan(
        &config("fleet", "fleet", false),
        "edge-1",
        &hook(Some("evt"), 0),
    )
    .unwrap();
    let sent = p.fleet.as_ref().and_then(|r| r.claim.clone());
    assert!(sent.is_some());
    for failure in [
        CallFailure::NoStatus,
        CallFailure::Status("504".into()),
        CallFailure::Status("503".into()),
        CallFailure::Unparsable,
    ] {
        assert_eq!(claim_after_failure(&p, &failure), sent, "{failure}");
    }
}

#[test]
fn a_call_never_sent_or_without_a_claim_holds_none() {
    let with_claim = plan(
        &config("fleet", "fleet", false),
        "edge-1",
        &hook(Some("evt"), 0),
    )
    .unwrap();
    assert_eq!(
        claim_after_failure(&with_claim, &CallFailure::Dispatch),
        None
    );
    assert_eq!(
        claim_after_failure(&with_claim, &CallFailure::Unreached),
        None
    );
    let no_key = plan(&config("fleet", "fleet", false), "edge-1", &hook(None, 0)).unwrap();
    assert!(no_key.fleet.is_some(), "the charges still go to the store");
    assert_eq!(claim_after_failure(&no_key, &CallFailure::NoStatus), None);
    let node_dedupe = plan(
        &config("fleet", "node", false),
        "edge-1",
        &hook(Some("evt"), 0),
    )
    .unwrap();
    assert_eq!(
        claim_after_failure(&node_dedupe, &CallFailure::NoStatus),
        None
    );
}

#[test]
fn envoys_connect_failures_are_unreached_and_a_reset_after_sending_is_not() {
    let answer = |body: &str| parse_answer(Some("503"), Some(body.as_bytes()));
    let prefix = "upstream connect error or disconnect/reset before headers. reset reason: ";
    for reason in [
        "remote connection failure",
        "local connection failure",
        "connection failure",
        "connection timeout",
        "overflow",
    ] {
        assert_eq!(
            answer(&format!("{prefix}{reason}")),
            Err(CallFailure::Unreached),
            "{reason}"
        );
    }
    assert_eq!(answer("no healthy upstream"), Err(CallFailure::Unreached));
    for sent in [
        format!("{prefix}connection termination"),
        format!("{prefix}remote reset"),
        r#"{"error":"redis_unavailable"}"#.to_string(),
    ] {
        assert_eq!(
            answer(&sent),
            Err(CallFailure::Status("503".into())),
            "{sent}"
        );
    }
    assert_eq!(
        parse_answer(Some("504"), Some(b"upstream request timeout")),
        Err(CallFailure::Status("504".into()))
    );
    assert_eq!(
        parse_answer(Some("503"), None),
        Err(CallFailure::Status("503".into()))
    );
}
