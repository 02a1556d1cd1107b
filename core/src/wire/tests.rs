use super::*;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

#[test]
fn a_hit_reply_is_a_hit_answer_plus_the_override_in_force() {
    let plain = HitReply {
        edges: None,
        wire: None,
        unknown_fields: 0,
        answer: HitAnswer::RateLimited { retry_after_ms: 5 },
        in_force: None,
        levels: vec![],
    };
    let text = serde_json::to_string(&plain).unwrap();
    assert_eq!(text, r#"{"result":"rate_limited","retry_after_ms":5}"#);
    let o = Override {
        tenant: "acme".into(),
        rate: Some(1),
        burst: Some(2),
        bytes_rate: None,
        bytes_burst: None,
        shadow: None,
        expires_at_ms: None,
        version: 7,
    };
    let with = HitReply {
        edges: None,
        wire: None,
        unknown_fields: 0,
        answer: HitAnswer::Ok,
        in_force: Some(o),
        levels: vec![2_000_000],
    };
    let text = serde_json::to_string(&with).unwrap();
    assert_eq!(
        text,
        r#"{"result":"ok","override":{"tenant":"acme","rate":1,"burst":2,"version":7},"levels":[2000000]}"#
    );
    // Readers of the bare answer still read it; the reply reads back whole.
    assert_eq!(
        serde_json::from_str::<HitAnswer>(&text).unwrap(),
        HitAnswer::Ok
    );
    assert_eq!(serde_json::from_str::<HitReply>(&text).unwrap(), with);
}

fn claim() -> Claim {
    Claim {
        tenant: "acme".into(),
        source_id: "gh".into(),
        key: "delivery-1".into(),
        hook_id: "0190a5b2-7c1d-7aaa-8bbb-0123456789ab".into(),
        node: "edge-1".into(),
        ttl_ms: 259_200_000,
        pending_ttl_ms: 30_000,
    }
}

/// A hit with these charges and claim, and nothing else.
fn request(charges: Vec<Charge>, claim: Option<Claim>) -> HitRequest {
    HitRequest {
        node: None,
        traceparent: None,
        charges,
        claim,
        replay: None,
    }
}

fn charge(kind: ChargeKind) -> Charge {
    Charge {
        kind,
        tenant: "acme".into(),
        units: 1,
        rate: 500,
        burst: 100,
    }
}

#[test]
fn hit_request_round_trips_in_the_documented_shape() {
    let req = request(vec![charge(ChargeKind::Hooks)], Some(claim()));
    let json = serde_json::to_value(&req).unwrap();
    assert_eq!(json["charges"][0]["kind"], "hooks");
    assert_eq!(json["claim"]["source_id"], "gh");
    assert_eq!(serde_json::from_value::<HitRequest>(json).unwrap(), req);
}

#[test]
fn answers_are_tagged_by_result() {
    let cases = [
        (HitAnswer::Ok, r#"{"result":"ok"}"#),
        (
            HitAnswer::Duplicate {
                hook_id: "h1".into(),
            },
            r#"{"result":"duplicate","hook_id":"h1"}"#,
        ),
        (
            HitAnswer::Pending { retry_after_ms: 7 },
            r#"{"result":"pending","retry_after_ms":7}"#,
        ),
        (
            HitAnswer::RateLimited { retry_after_ms: 9 },
            r#"{"result":"rate_limited","retry_after_ms":9}"#,
        ),
    ];
    for (answer, text) in cases {
        assert_eq!(serde_json::to_string(&answer).unwrap(), text);
        assert_eq!(serde_json::from_str::<HitAnswer>(text).unwrap(), answer);
    }
}

#[test]
fn settle_ops_are_tagged_by_op() {
    let text = serde_json::to_string(&SettleRequest {
        ops: vec![
            SettleOp::Promote {
                claim: claim(),
                hook_id: "h2".into(),
                receipt: None,
            },
            SettleOp::Release { claim: claim() },
        ],
    })
    .unwrap();
    assert!(text.contains(r#""op":"promote""#) && text.contains(r#""op":"release""#));
    assert!(!text.contains("receipt"), "absent, not null: {text}");
}

#[test]
fn a_promote_reads_and_writes_its_receipt_and_a_release_carries_none() {
    let promote = SettleOp::Promote {
        claim: claim(),
        hook_id: "h2".into(),
        receipt: Some("ab12".into()),
    };
    let text = serde_json::to_string(&promote).unwrap();
    assert!(text.contains(r#""receipt":"ab12""#), "{text}");
    // Read through SettleOpRead, field by field, as the store reads it.
    let mut unknown = Vec::new();
    let read: SettleOp = tolerant::from_str(&text, |f| unknown.push(f)).unwrap();
    assert_eq!((read, unknown), (promote, Vec::<String>::new()));
    // Without one it is a promote as v0.1.0 sent it.
    let bare = text.replace(r#","receipt":"ab12""#, "");
    assert!(matches!(
        serde_json::from_str::<SettleOp>(&bare).unwrap(),
        SettleOp::Promote { receipt: None, .. }
    ));
    let release = serde_json::to_value(SettleOp::Release { claim: claim() }).unwrap();
    let mut with_receipt = release.clone();
    with_receipt["receipt"] = "ab12".into();
    let e = serde_json::from_value::<SettleOp>(with_receipt).unwrap_err();
    assert!(
        e.to_string().contains("a release carries no `receipt`"),
        "{e}"
    );
}

#[test]
fn a_receipt_is_checked_naming_its_op_and_value() {
    let with = |receipt: &str| SettleRequest {
        ops: vec![
            SettleOp::Release { claim: claim() },
            SettleOp::Promote {
                claim: claim(),
                hook_id: "h2".into(),
                receipt: Some(receipt.into()),
            },
        ],
    };
    assert_eq!(with(&"0f".repeat(32)).validate(), Ok(()));
    for bad in ["", "ABCD", "abc", "zz", &"ab".repeat(65)] {
        let e = with(bad).validate().unwrap_err();
        assert_eq!(e.field, "ops[1].receipt", "{bad:?}");
        assert!(e.problem.contains("lower-case hex"), "{e}");
    }
    let e = with("not-a-receipt-at-all").validate().unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"ops[1].receipt: "not-a-receipt-at"… is not 2 to 128 lower-case hex digits"#
    );
}

fn charge_error(edit: impl FnOnce(&mut Charge)) -> String {
    let mut c = charge(ChargeKind::Bytes);
    edit(&mut c);
    request(vec![c], None).validate().unwrap_err().to_string()
}

fn claim_error(edit: impl FnOnce(&mut Claim)) -> String {
    let mut c = claim();
    edit(&mut c);
    request(vec![], Some(c)).validate().unwrap_err().to_string()
}

#[test]
fn every_charge_bound_is_the_core_limit_naming_the_field() {
    assert_eq!(
        charge_error(|c| c.units = 101),
        "charges[0].units: must be between 1 and 100, got 101"
    );
    assert_eq!(
        charge_error(|c| c.units = 0),
        "charges[0].units: must be between 1 and 100, got 0"
    );
    assert_eq!(
        charge_error(|c| c.rate = 1_000_000_001),
        "charges[0].rate: must be between 1 and 1000000000, got 1000000001"
    );
    assert_eq!(
        charge_error(|c| c.rate = 0),
        "charges[0].rate: must be between 1 and 1000000000, got 0"
    );
    assert_eq!(
        charge_error(|c| c.burst = (1 << 32) + 1),
        "charges[0].burst: must be between 1 and 4294967296, got 4294967297"
    );
    let mut top = charge(ChargeKind::Bytes);
    (top.rate, top.burst, top.units) = (1_000_000_000, 1 << 32, 1 << 32);
    assert_eq!(request(vec![top], None).validate(), Ok(()));
}

#[test]
fn every_claim_ttl_bound_is_the_core_limit_naming_the_field() {
    assert_eq!(
        claim_error(|c| c.ttl_ms = (1 << 53) - 1),
        "claim.ttl_ms: must be between 1 and 2592000000, got 9007199254740991"
    );
    assert_eq!(
        claim_error(|c| c.ttl_ms = 0),
        "claim.ttl_ms: must be between 1 and 2592000000, got 0"
    );
    assert_eq!(
        claim_error(|c| c.pending_ttl_ms = 86_400_001),
        "claim.pending_ttl_ms: must be between 1 and 86400000, got 86400001"
    );
}

#[test]
fn empty_names_are_refused() {
    let mut cl = claim();
    cl.key.clear();
    let err = request(vec![], Some(cl)).validate().unwrap_err();
    assert_eq!(err.to_string(), "claim.key: must be 1 to 200 bytes, got 0");
    let mut cl = claim();
    cl.tenant.clear();
    let err = request(vec![], Some(cl)).validate().unwrap_err();
    assert_eq!(err.field, "claim.tenant");
}

#[test]
fn tenants_and_sources_follow_the_configs_name_rule() {
    // A dot is no part of a name an edge routes (`limits::is_valid_id`);
    // a node name may hold one (Envoy node ids do).
    let mut c = charge(ChargeKind::Hooks);
    c.tenant = "a.b".into();
    let err = c.validate("charges[0]").unwrap_err();
    assert_eq!(err.field, "charges[0].tenant");
    assert!(err.problem.contains("[A-Za-z0-9_-]"), "{}", err.problem);
    let mut cl = claim();
    cl.source_id = "..".into();
    assert_eq!(cl.validate("claim").unwrap_err().field, "claim.source_id");
    let mut cl = claim();
    cl.node = "edge-1.example".into();
    assert_eq!(cl.validate("claim"), Ok(()));
    let reset = ResetRequest {
        tenant: "a.b".into(),
    };
    assert_eq!(reset.validate().unwrap_err().field, "tenant");
}

#[test]
fn one_hit_is_one_tenant() {
    let mut other = charge(ChargeKind::Bytes);
    other.tenant = "globex".into();
    let req = request(vec![charge(ChargeKind::Hooks), other], None);
    assert_eq!(req.validate().unwrap_err().field, "charges[1].tenant");
    let req = request(
        vec![charge(ChargeKind::Hooks), charge(ChargeKind::Hooks)],
        None,
    );
    assert_eq!(req.validate().unwrap_err().field, "charges[1].kind");
}

#[test]
fn empty_hit_is_refused_and_an_unknown_field_is_skipped() {
    let req = request(vec![], None);
    assert_eq!(req.validate().unwrap_err().field, "charges");
    // Wire 2: a newer edge's field is read past, not refused (wire::version).
    let read = serde_json::from_str::<HitRequest>(r#"{"charges":[],"claim":null,"x":1}"#);
    assert_eq!(read.unwrap(), request(vec![], None));
}

#[test]
fn settle_validates_every_op() {
    let mut bad = claim();
    bad.node = "edge 1".into();
    let req = SettleRequest {
        ops: vec![
            SettleOp::Release { claim: claim() },
            SettleOp::Release { claim: bad },
        ],
    };
    assert_eq!(req.validate().unwrap_err().field, "ops[1].claim.node");
}

#[test]
fn charge_kinds_keep_their_names() {
    // The names are in every bucket's Redis key (`ankusa:{t}:rl:<kind>`):
    // another spelling would orphan every tenant's buckets on upgrade.
    assert_eq!(ChargeKind::Hooks.as_str(), "hooks");
    assert_eq!(ChargeKind::Bytes.as_str(), "bytes");
    let twice = request(
        vec![charge(ChargeKind::Bytes), charge(ChargeKind::Bytes)],
        None,
    );
    let e = twice.validate().unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"charges[1].kind: "bytes" is charged twice"#
    );
}

#[test]
fn a_hit_carries_its_own_traceparent_and_a_bad_one_is_refused_naming_it() {
    let traced = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let mut req = HitRequest {
        node: None,
        traceparent: Some(traced.into()),
        charges: vec![charge(ChargeKind::Hooks)],
        claim: None,
        replay: None,
    };
    assert_eq!(req.validate(), Ok(()));
    let json = serde_json::to_value(&req).unwrap();
    assert_eq!(json["traceparent"], traced);
    req.traceparent = Some("00-not-a-trace".into());
    let err = req.validate().unwrap_err();
    assert_eq!(err.field, "traceparent");
    assert!(err.problem.contains("\"00-not-a-trace\""), "{err}");
    req.traceparent = None;
    let json = serde_json::to_string(&req).unwrap();
    assert!(!json.contains("traceparent"), "absent, not null: {json}");
}

#[test]
fn a_claims_key_and_hook_id_are_bounded_at_their_limits() {
    let with = |key: String, hook_id: String| Claim {
        key,
        hook_id,
        ..claim()
    };
    assert_eq!(
        with("k".repeat(MAX_KEY_LEN), claim().hook_id).validate("claim"),
        Ok(())
    );
    let long_key = with("k".repeat(MAX_KEY_LEN + 1), claim().hook_id);
    assert_eq!(long_key.validate("claim").unwrap_err().field, "claim.key");
    assert_eq!(
        with("k".into(), "h".repeat(MAX_HOOK_ID_LEN)).validate("claim"),
        Ok(())
    );
    for bad in [
        "h".repeat(MAX_HOOK_ID_LEN + 1),
        String::new(),
        "a b".into(),
        "x/y".into(),
    ] {
        let e = with("k".into(), bad.clone()).validate("claim").unwrap_err();
        assert_eq!(e.field, "claim.hook_id", "{bad:?}");
    }
    assert_eq!(with("k".into(), "Az09_-".into()).validate("claim"), Ok(()));
}

#[test]
fn a_settle_batch_holds_up_to_its_bound_and_no_more() {
    let op = SettleOp::Release { claim: claim() };
    let at_bound = SettleRequest {
        ops: vec![op.clone(); MAX_SETTLE_OPS],
    };
    assert_eq!(at_bound.validate(), Ok(()));
    let over = SettleRequest {
        ops: vec![op; MAX_SETTLE_OPS + 1],
    };
    assert_eq!(over.validate().unwrap_err().field, "ops");
}
