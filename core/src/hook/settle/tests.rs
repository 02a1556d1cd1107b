use super::*;
use crate::node::cas::{ensure_keys, MapStore};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn store() -> MapStore {
    let s = MapStore::new();
    ensure_keys(&s, [DEPTH_KEY.to_string(), LEASE_KEY.to_string()]);
    s
}

fn release(n: u32) -> Queued {
    let claim = Claim {
        tenant: "acme".into(),
        source_id: "gh".into(),
        key: format!("k{n}"),
        hook_id: "0190a5b2-7c1d-7aaa-8bbb-0123456789ab".into(),
        node: "edge-1".into(),
        ttl_ms: 1,
        pending_ttl_ms: 1,
    };
    Queued {
        retries: n,
        op: SettleOp::Release { claim },
    }
}

#[test]
fn the_queue_bound_is_node_wide_and_places_come_back() {
    let s = store();
    assert_eq!(reserve(&s, 2), Some(1));
    assert_eq!(reserve(&s, 2), Some(2));
    assert_eq!(reserve(&s, 2), None);
    assert_eq!(release_places(&s, 5), 0, "never below zero");
    assert_eq!(reserve(&s, 2), Some(1));
}

#[test]
fn one_lease_per_interval_node_wide() {
    let s = store();
    assert!(take_lease(&s, 1_000, 50));
    assert!(
        !take_lease(&s, 1_010, 50),
        "a second worker in the same interval waits"
    );
    assert!(take_lease(&s, 1_050, 50));
}

#[test]
fn a_backward_clock_step_does_not_stop_the_drain() {
    let s = store();
    assert!(take_lease(&s, 3_600_000, 50));
    // A worker a little behind still waits for the interval.
    assert!(!take_lease(&s, 3_599_990, 50));
    // The clock steps back an hour: the lease is stale and taken.
    assert!(take_lease(&s, 10, 50));
    assert!(!take_lease(&s, 20, 50));
    assert!(take_lease(&s, 60, 50));
}

#[test]
fn failed_batches_are_retried_a_bounded_number_of_times() {
    let (again, dropped) = after_failure(vec![release(0), release(2), release(3)], 3);
    assert_eq!(dropped, 1);
    assert_eq!(again.iter().map(|q| q.retries).collect::<Vec<_>>(), [1, 3]);
}

#[test]
fn a_batch_is_one_settle_request() {
    let body = request_body(&[release(0), release(1)], StoreWire::default());
    let req: SettleRequest = serde_json::from_slice(&body).unwrap();
    assert_eq!(req.ops.len(), 2);
    assert_eq!(req.ops[1].claim().key, "k1", "in queue order");
    assert!(req.validate().is_ok(), "{:?}", req.validate());
}

#[test]
fn a_batch_leaves_only_when_queued_idle_closed_and_leased() {
    let s = store();
    ensure_keys(&s, [BREAKER_KEY.to_string()]);
    let policy = BreakerPolicy::default();
    let due = |in_flight, now_us| {
        let depth = read_u64(&s, DEPTH_KEY).0;
        drain_due(&s, in_flight, depth, policy, || now_us, 50)
    };
    assert!(!due(false, 1_000_000), "nothing queued");
    reserve(&s, 10);
    assert!(
        !due(true, 1_000_000),
        "a batch of this worker's is in flight"
    );
    assert!(due(false, 1_000_000));
    assert!(!due(false, 1_010_000), "the lease is another's for 50 ms");
    assert!(due(false, 1_050_000));
    let breaker = Breaker::new(&s, BREAKER_KEY, policy);
    let now = crate::fleet::breaker::fail_until_open(&breaker, 2_000_000);
    assert!(!due(false, now + 100_000), "held while the breaker is open");
}

#[test]
fn ticks_are_short_whatever_the_interval() {
    assert_eq!(tick_ms(0), 1);
    assert_eq!(tick_ms(20), 20);
    assert_eq!(tick_ms(1_000), MAX_TICK_MS);
}

#[test]
fn only_a_2xx_settles_or_promotes() {
    assert!(answered_ok(Some("200")) && answered_ok(Some("204")));
    assert!(!answered_ok(Some("500")) && !answered_ok(Some("404")) && !answered_ok(None));
    let claim = release(0).op.claim().clone();
    let answered = |status, hook_id| UpstreamAnswer {
        status: Some(status),
        hook_id,
        receipt: None,
    };
    assert!(
        matches!(settle_op(claim.clone(), answered("201", None)), SettleOp::Promote { hook_id, .. } if hook_id == claim.hook_id)
    );
    assert!(
        matches!(settle_op(claim.clone(), answered("201", Some("bad id!"))), SettleOp::Promote { hook_id, .. } if hook_id == claim.hook_id)
    );
    assert!(
        matches!(settle_op(claim.clone(), answered("201", Some("up_1"))), SettleOp::Promote { hook_id, .. } if hook_id == "up_1")
    );
    assert!(matches!(
        settle_op(claim, answered("409", Some("up_1"))),
        SettleOp::Release { .. }
    ));
}

#[test]
fn a_promote_carries_the_upstreams_receipt_and_only_a_well_formed_one() {
    let claim = release(0).op.claim().clone();
    let upstream = |status, receipt| UpstreamAnswer {
        status: Some(status),
        hook_id: None,
        receipt,
    };
    let op = settle_op(claim.clone(), upstream("201", Some(" ab12 ")));
    assert!(
        matches!(&op, SettleOp::Promote { receipt: Some(r), .. } if r == "ab12"),
        "{op:?}"
    );
    let op = settle_op(claim.clone(), upstream("201", Some("not a receipt")));
    assert!(
        matches!(&op, SettleOp::Promote { receipt: None, .. }),
        "{op:?}"
    );
    let op = settle_op(claim.clone(), upstream("201", None));
    assert!(
        matches!(&op, SettleOp::Promote { receipt: None, .. }),
        "{op:?}"
    );
    // A release needs no proof, whatever came with the answer.
    let op = settle_op(claim, upstream("503", Some("ab12")));
    assert!(matches!(op, SettleOp::Release { .. }), "{op:?}");
}

#[test]
fn a_batch_carries_receipts_only_to_a_store_of_wire_2() {
    let claim = release(0).op.claim().clone();
    let promote = Queued {
        retries: 0,
        op: SettleOp::Promote {
            hook_id: claim.hook_id.clone(),
            claim,
            receipt: Some("ab12".into()),
        },
    };
    let batch = [promote.clone(), release(1)];
    let body = |wire: StoreWire| -> serde_json::Value {
        serde_json::from_slice(&request_body(&batch, wire)).unwrap()
    };
    let mut v2 = StoreWire::default();
    v2.heard(Some(2));
    assert_eq!(body(v2)["ops"][0]["receipt"], "ab12");
    // A store not heard yet gets it: a late claim of a hook whose call
    // failed needs it to commit.
    assert_eq!(body(StoreWire::default())["ops"][0]["receipt"], "ab12");
    // A store that named no version (v0.1.0's) refuses any field it doesn't
    // know, and with it the whole batch: the promote goes, its receipt not.
    let mut wire1 = StoreWire::default();
    wire1.heard(None);
    let sent = body(wire1);
    assert_eq!(sent["ops"][0]["op"], "promote");
    assert_eq!(
        sent["ops"][0]["hook_id"],
        promote.op.claim().hook_id.as_str()
    );
    assert!(sent["ops"][0].get("receipt").is_none(), "{sent}");
    assert_eq!(sent["ops"].as_array().unwrap().len(), 2);
    // The queued operation keeps it, for a later batch to a store that speaks it.
    assert!(matches!(
        &batch[0].op,
        SettleOp::Promote {
            receipt: Some(_),
            ..
        }
    ));
}

#[test]
fn only_a_400_to_a_call_that_carried_a_receipt_says_the_store_is_older() {
    let claim = release(0).op.claim().clone();
    let promote = Queued {
        retries: 0,
        op: SettleOp::Promote {
            hook_id: claim.hook_id.clone(),
            claim,
            receipt: Some("ab12".into()),
        },
    };
    let unknown = StoreWire::default();
    let proven = [promote, release(1)];
    assert!(refused_receipts(Some("400"), &proven, unknown));
    // Another failure, or a call that carried none, says nothing of its version.
    assert!(!refused_receipts(Some("503"), &proven, unknown));
    assert!(!refused_receipts(None, &proven, unknown));
    assert!(!refused_receipts(Some("400"), &[release(1)], unknown));
    let mut wire1 = StoreWire::default();
    wire1.heard(None);
    assert!(
        !refused_receipts(Some("400"), &proven, wire1),
        "sent without the receipt"
    );
}
