//! Which hooks share a call, when it leaves, and each hook's share of the answer.

use super::*;
use crate::hook::plan::{parse_reply, CallFailure};
use crate::wire::{Claim, HitAnswer, SettleOp};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const MS: u64 = 1_000;

/// A store that named wire 2.
fn wire2() -> StoreWire {
    let mut wire = StoreWire::default();
    wire.heard(Some(2));
    wire
}

fn hook(id: u32, arrived_us: u64) -> Waiting {
    Waiting {
        id,
        body: format!(r#"{{"charges":[],"claim":null,"n":{id}}}"#).into_bytes(),
        arrived_us,
        budget_ms: 20,
    }
}

#[test]
fn a_lone_hook_is_sent_at_once_and_alone() {
    let mut b = Batcher::new();
    assert_eq!(b.submit(hook(1, 0)), Submitted::SendNow);
    assert_eq!(b.in_flight(), 1);
    assert_eq!(b.waiting(), 0);
    // Its answer leaves nothing waiting: nothing to flush.
    assert!(!b.done(MS));
    assert_eq!(b.submit(hook(2, 5 * MS)), Submitted::SendNow);
}

#[test]
fn hooks_arriving_during_a_call_share_the_next_one_in_order() {
    let mut b = Batcher::new();
    assert_eq!(b.submit(hook(1, 0)), Submitted::SendNow);
    for (id, at) in [(2, MS), (3, 2 * MS), (4, 3 * MS)] {
        assert_eq!(b.submit(hook(id, at)), Submitted::Queued);
    }
    assert!(b.done(4 * MS), "hooks wait: flush");
    let flush = b.flush(4 * MS);
    assert!(flush.expired.is_empty());
    let call = flush.call.expect("a call");
    assert_eq!(call.members, vec![2, 3, 4]);
    assert_eq!(call.path, "/v1/hits");
    let body: serde_json::Value = serde_json::from_slice(&call.body).unwrap();
    let ns: Vec<u64> = body["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["n"].as_u64().unwrap())
        .collect();
    assert_eq!(ns, vec![2, 3, 4]);
    // The earliest budget bounds the call: hook 2 arrived at 1 ms, 20 ms budget.
    assert_eq!(call.timeout_ms, 17);
    assert_eq!(b.in_flight(), 1);
    assert_eq!(b.waiting(), 0);
}

#[test]
fn one_waiting_hook_leaves_on_the_single_path() {
    let mut b = Batcher::new();
    b.submit(hook(1, 0));
    b.submit(hook(2, MS));
    b.done(2 * MS);
    let call = b.flush(2 * MS).call.expect("a call");
    assert_eq!((call.members, call.path), (vec![2], "/v1/hit"));
    assert_eq!(call.body, hook(2, MS).body);
}

#[test]
fn a_hook_with_under_half_its_budget_left_is_answered_from_the_node() {
    let mut b = Batcher::new();
    b.submit(hook(1, 0));
    b.submit(hook(2, 0));
    b.submit(hook(3, 9 * MS));
    b.done(12 * MS);
    // At 12 ms hook 2 has 8 of 20 ms left, hook 3 has 17.
    let flush = b.flush(12 * MS);
    assert_eq!(flush.expired, vec![2]);
    let call = flush.call.expect("a call");
    assert_eq!((call.members, call.timeout_ms), (vec![3], 17));
    // Nothing worth sending: no call, nothing in flight.
    let mut b = Batcher::new();
    b.submit(hook(1, 0));
    b.submit(hook(2, 0));
    b.done(25 * MS);
    let flush = b.flush(25 * MS);
    assert_eq!((flush.expired, flush.call), (vec![2], None));
    assert_eq!(b.in_flight(), 0);
}

#[test]
fn a_full_queue_flushes_at_once_and_a_batch_is_bounded() {
    let mut b = Batcher::new();
    b.submit(hook(0, 0));
    for id in 1..MAX_BATCH as u32 {
        assert_eq!(b.submit(hook(id, 0)), Submitted::Queued);
    }
    assert_eq!(b.submit(hook(MAX_BATCH as u32, 0)), Submitted::QueuedFlush);
    b.submit(hook(999, 0));
    let call = b.flush(MS).call.expect("a call");
    assert_eq!(call.members.len(), MAX_BATCH);
    assert_eq!(b.waiting(), 1);
    assert_eq!(b.in_flight(), 2);
}

#[test]
fn a_hook_that_went_away_is_not_sent() {
    let mut b = Batcher::new();
    b.submit(hook(1, 0));
    b.submit(hook(2, 0));
    b.submit(hook(3, 0));
    assert!(b.forget(2));
    assert!(!b.forget(2));
    b.done(MS);
    assert_eq!(b.flush(MS).call.expect("a call").members, vec![3]);
}

#[test]
fn each_hook_gets_its_own_result() {
    let body = br#"{"results":[{"result":"ok"},
        {"result":"duplicate","hook_id":"h0"},
        {"error":"bad_request","message":"hits[2].claim.key: bad"},
        {"error":"redis_unavailable","message":"retry later"}]}"#;
    let (shares, settled) = split(HITS_PATH, 4, Some("200"), Some(body));
    assert_eq!(settled, None);
    let read = |i: usize| shares[i].clone();
    assert_eq!(read(0).unwrap().answer, HitAnswer::Ok);
    assert_eq!(
        read(1).unwrap().answer,
        HitAnswer::Duplicate {
            hook_id: "h0".into()
        }
    );
    assert_eq!(read(2).unwrap_err(), CallFailure::Status("400".into()));
    assert_eq!(read(3).unwrap_err(), CallFailure::Status("503".into()));
}

/// A claim the settle operations of these tests settle.
fn claim() -> Claim {
    Claim {
        tenant: "acme".into(),
        source_id: "gh".into(),
        key: "k".into(),
        hook_id: "h".into(),
        node: "edge-1".into(),
        ttl_ms: 1000,
        pending_ttl_ms: 100,
    }
}

#[test]
fn settles_ride_on_a_batch_and_their_count_comes_back() {
    let claim = claim();
    let ops = vec![
        Queued {
            retries: 0,
            op: SettleOp::Release {
                claim: claim.clone(),
            },
        },
        Queued {
            retries: 1,
            op: SettleOp::Promote {
                claim,
                hook_id: "h".into(),
                receipt: Some("ab12".into()),
            },
        },
    ];
    let hit = br#"{"charges":[],"claim":null}"#;
    let body = hits_body([&hit[..], &hit[..]].into_iter());
    let (path, riding) = with_settle(HITS_PATH, body.clone(), &ops, wire2());
    assert_eq!(path, HITS_PATH);
    let request: crate::wire::batch::HitsRequest = serde_json::from_slice(&riding).unwrap();
    assert_eq!(request.hits.len(), 2);
    let sent: Vec<SettleOp> = ops.iter().map(|q| q.op.clone()).collect();
    assert_eq!(request.settle, sent);
    assert_eq!(
        with_settle(HITS_PATH, body.clone(), &[], wire2()),
        (HITS_PATH, body.clone())
    );
    // A store of wire 1 gets the same operations without the receipt.
    let wire1 = || {
        let mut wire = StoreWire::default();
        wire.heard(None);
        wire
    };
    let (_, riding) = with_settle(HITS_PATH, body, &ops, wire1());
    let request: crate::wire::batch::HitsRequest = serde_json::from_slice(&riding).unwrap();
    assert!(
        matches!(&request.settle[1], SettleOp::Promote { receipt: None, hook_id, .. } if hook_id == "h"),
        "{:?}",
        request.settle
    );
    assert!(!String::from_utf8_lossy(&riding).contains("receipt"));
    let answer = br#"{"results":[{"result":"ok"},{"result":"ok"}],"settled":2}"#;
    assert_eq!(split(HITS_PATH, 2, Some("200"), Some(answer)).1, Some(2));
    let answer = br#"{"results":[{"result":"ok"},{"result":"ok"}]}"#;
    assert_eq!(split(HITS_PATH, 2, Some("200"), Some(answer)).1, None);
    assert_eq!(split(HITS_PATH, 2, Some("503"), Some(b"{}")).1, None);
}

#[test]
fn a_failed_call_is_every_hooks_failure() {
    for (status, body) in [
        (None, None),
        (Some("503"), Some(&b"no healthy upstream"[..])),
        (Some("504"), Some(&b"upstream request timeout"[..])),
    ] {
        let (shares, _) = split(HITS_PATH, 3, status, body);
        assert_eq!(shares.len(), 3);
        let alone = parse_reply(status, body).unwrap_err();
        assert!(shares.iter().all(|s| s.as_ref().err() == Some(&alone)));
    }
    // A 200 that isn't one result per hook is unparsable for each.
    for body in [&br#"{"results":[{"result":"ok"}]}"#[..], b"garbage"] {
        let (shares, _) = split(HITS_PATH, 2, Some("200"), Some(body));
        assert_eq!(shares, vec![Err(CallFailure::Unparsable); 2]);
    }
    // One hook: its answer is its own, untouched.
    let (shares, _) = split(HIT_PATH, 1, Some("200"), Some(br#"{"result":"ok"}"#));
    assert_eq!(shares[0].as_ref().map(|r| &r.answer), Ok(&HitAnswer::Ok));
}

#[test]
fn the_latency_of_answered_calls_is_kept() {
    let mut b = Batcher::new();
    assert_eq!(b.latency_us(), None);
    b.submit(hook(1, 0));
    b.done(8 * MS);
    assert_eq!(b.latency_us(), Some(8 * MS));
    b.submit(hook(2, 10 * MS));
    b.done(14 * MS);
    // Faster: a moving average, three parts the old, one part the new.
    assert_eq!(b.latency_us(), Some(7 * MS));
    b.submit(hook(3, 20 * MS));
    b.done(36 * MS);
    // Slower: taken at once.
    assert_eq!(b.latency_us(), Some(16 * MS));
}

#[test]
fn a_hook_that_cannot_afford_to_wait_for_a_slow_call_is_sent_at_once() {
    // Calls take 16 ms; budgets are 20 ms.
    let mut b = Batcher::new();
    b.submit(hook(1, 0));
    b.done(16 * MS);
    assert_eq!(b.submit(hook(2, 20 * MS)), Submitted::SendNow);
    // Waiting for hook 2's call (back at 36 ms) and then its own call would
    // take hook 3 past its budget: it gets a call of its own, beside it.
    assert_eq!(b.submit(hook(3, 21 * MS)), Submitted::SendNow);
    assert_eq!(b.in_flight(), 2);
    assert_eq!(b.waiting(), 0);
    // A store that is fast again: hooks wait for the call in flight again.
    let mut b = Batcher::new();
    b.submit(hook(1, 0));
    b.done(MS);
    assert_eq!(b.submit(hook(2, 10 * MS)), Submitted::SendNow);
    assert_eq!(b.submit(hook(3, 10 * MS + 500)), Submitted::Queued);
}

mod breaker {
    //! The breaker counts calls: hooks that shared a call count once.
    use crate::fleet::breaker::{Breaker, BreakerState};
    use crate::hook::headers::RequestHeaders;
    use crate::hook::machine::world::World;
    use crate::hook::machine::Hook;
    use crate::node::edge_keys::BREAKER_KEY;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const NOW: u64 = 1_700_000_000_000_000;

    /// A fleet world whose breaker opens after two calls, half of them failed.
    fn world() -> World {
        World::new(
            r#"{"sources":{"gh":{"tenant":"acme","dedupe":"github"}},
                "rate_limits":{"scope":"fleet","default":{"rate":100,"burst":100}},
                "dedupe":{"scope":"fleet"},
                "fleet":{"breaker_min_calls":2,"breaker_failure_rate":0.5}}"#,
            &[],
        )
    }

    impl World {
        /// A hook whose store call is in flight.
        fn calling(&self, delivery: &str) -> Hook {
            let mut hook = Hook::new();
            let pairs = [
                (":path", "/webhooks/gh"),
                (":method", "POST"),
                ("x-github-delivery", delivery),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect();
            hook.on_headers(
                &self.env(),
                RequestHeaders::from_pairs(pairs),
                true,
                || NOW,
                |_| [1; 10],
            );
            assert!(hook.calling());
            hook
        }

        fn breaker(&self) -> BreakerState {
            Breaker::new(&self.store, BREAKER_KEY, self.worker.config.fleet.breaker)
                .state(NOW + 2_000)
        }
    }

    #[test]
    fn hooks_that_shared_a_failed_call_count_as_one_call() {
        let w = world();
        let mut hooks: Vec<Hook> = (0..3).map(|i| w.calling(&format!("d-{i}"))).collect();
        for (i, hook) in hooks.iter_mut().enumerate() {
            if i > 0 {
                hook.share_call();
            }
            hook.on_store_answer(&w.env(), Some("503"), Some(b"{}"), NOW + 1_000);
        }
        // One failed call of the two the breaker needs to judge: still closed.
        assert_eq!(w.breaker(), BreakerState::Closed);
        // A second call fails: two of two failed, it opens.
        let mut alone = w.calling("d-alone");
        alone.on_store_answer(&w.env(), Some("503"), Some(b"{}"), NOW + 1_000);
        assert_eq!(w.breaker(), BreakerState::Open);
    }

    #[test]
    fn a_shared_call_records_one_duration() {
        use crate::hook::machine::{Effect, Metric};
        let w = world();
        let mut durations = 0;
        for i in 0..3 {
            let mut hook = w.calling(&format!("m-{i}"));
            if i > 0 {
                hook.share_call();
            }
            let step = hook.on_store_answer(
                &w.env(),
                Some("200"),
                Some(br#"{"result":"ok"}"#),
                NOW + 3_000,
            );
            durations += step
                .effects
                .iter()
                .filter(|e| matches!(e, Effect::Metric(Metric::CallMs(3))))
                .count();
        }
        assert_eq!(durations, 1);
    }

    #[test]
    fn hooks_that_each_sent_a_call_each_count() {
        let w = world();
        for i in 0..2 {
            let mut hook = w.calling(&format!("e-{i}"));
            hook.on_store_answer(&w.env(), Some("503"), Some(b"{}"), NOW + 1_000);
        }
        assert_eq!(w.breaker(), BreakerState::Open);
    }
}

#[test]
fn the_root_is_woken_for_a_full_queue_or_when_no_call_would_send_the_waiting() {
    // A hook sent at once wakes nothing: it leaves from its own context.
    assert!(!Submitted::SendNow.wakes_root(0, false));
    // A full queue leaves now, whatever is in flight or queued.
    assert!(Submitted::QueuedFlush.wakes_root(1, false));
    assert!(Submitted::QueuedFlush.wakes_root(1, true));
    // A waiting hook with a call in flight leaves with that call's answer.
    assert!(!Submitted::Queued.wakes_root(1, false));
    // None in flight: only a wake sends it, unless one is queued already.
    assert!(Submitted::Queued.wakes_root(0, false));
    assert!(!Submitted::Queued.wakes_root(0, true));
}

#[test]
fn a_lone_hit_carrying_settles_goes_as_a_batch_of_one() {
    let ops = vec![Queued {
        retries: 0,
        op: SettleOp::Release { claim: claim() },
    }];
    let hit = br#"{"charges":[],"claim":null}"#.to_vec();
    assert_eq!(
        with_settle(HIT_PATH, hit.clone(), &[], wire2()),
        (HIT_PATH, hit.clone()),
        "nothing to carry: the lone hit as it was"
    );
    let (path, body) = with_settle(HIT_PATH, hit.clone(), &ops, wire2());
    assert_eq!(path, HITS_PATH);
    let request: crate::wire::batch::HitsRequest = serde_json::from_slice(&body).unwrap();
    assert_eq!(request.hits.len(), 1);
    assert_eq!(request.settle, vec![ops[0].op.clone()]);

    // Its answer is the batch's: the hook's result, and the settles applied.
    let answer = br#"{"results":[{"result":"duplicate","hook_id":"h0"}],"settled":1}"#;
    let (share, applied) = own_answer(1, Some("200"), Some(answer));
    assert_eq!(
        share.unwrap().answer,
        HitAnswer::Duplicate {
            hook_id: "h0".into()
        }
    );
    assert_eq!(applied, Some(true));
    let (share, applied) = own_answer(1, Some("200"), Some(br#"{"results":[{"result":"ok"}]}"#));
    assert_eq!(
        (share.unwrap().answer, applied),
        (HitAnswer::Ok, Some(false))
    );
    let (share, applied) = own_answer(1, Some("504"), Some(b"upstream request timeout"));
    assert_eq!(share.unwrap_err(), CallFailure::Status("504".into()));
    assert_eq!(applied, Some(false));
    // Nothing rode: the single hit's answer, read as before.
    let (share, applied) = own_answer(0, Some("200"), Some(br#"{"result":"ok"}"#));
    assert_eq!((share.unwrap().answer, applied), (HitAnswer::Ok, None));
}
