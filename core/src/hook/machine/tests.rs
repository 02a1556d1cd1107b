//! Hook lives through the state machine alone, over an in-memory store.

use super::world::World;
use super::*;
use crate::wire::SettleOp;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const NOW: u64 = 1_700_000_000_000_000;
const DELIVERY: &str = "72d3162e-cc78-11e3-81ab-4c9367dc0958";

impl World {
    fn headers(&self, hook: &mut Hook, pairs: &[(&str, &str)], end: bool) -> Step {
        let pairs = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect();
        hook.on_headers(
            &self.env(),
            RequestHeaders::from_pairs(pairs),
            end,
            || NOW,
            |_| [1; 10],
        )
    }
}

fn fleet(rate_scope: &str) -> String {
    format!(
        r#"{{"sources":{{"gh":{{"tenant":"acme","dedupe":"github"}}}},
            "rate_limits":{{"scope":"{rate_scope}","default":{{"rate":1,"burst":1}}}},
            "dedupe":{{"scope":"fleet"}}}}"#
    )
}

const POST: [(&str, &str); 4] = [
    (":path", "/webhooks/gh"),
    (":method", "POST"),
    ("content-length", "2"),
    ("x-github-delivery", DELIVERY),
];

fn replies(step: &Step) -> Vec<u32> {
    step.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Reply(r) => Some(r.status),
            _ => None,
        })
        .collect()
}

fn settles(step: &Step) -> Vec<&SettleOp> {
    step.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Settle(q) => Some(&q.op),
            _ => None,
        })
        .collect()
}

#[test]
fn a_fleet_hook_calls_the_store_then_forwards_and_promotes_on_a_2xx() {
    let w = World::new(&fleet("fleet"), &[]);
    let mut hook = Hook::new();
    let step = w.headers(&mut hook, &POST, true);
    assert_eq!(step.flow, Flow::Pause);
    let Some(HitCall { body, timeout_ms }) = &step.hit else {
        panic!("no hit call: {:?}", step.effects)
    };
    assert_eq!(*timeout_ms, w.worker.config.fleet.timeout_ms);
    let request: crate::wire::HitRequest = serde_json::from_slice(body).unwrap();
    assert_eq!(request.claim.map(|c| c.key).as_deref(), Some(DELIVERY));
    let step = hook.on_store_answer(
        &w.env(),
        Some("200"),
        Some(br#"{"result":"ok"}"#),
        NOW + 2_000,
    );
    assert_eq!(step.flow, Flow::Continue);
    assert!(step.effects.contains(&Effect::Metric(Metric::CallMs(2))));
    assert!(step
        .effects
        .contains(&Effect::Header(EVENT_KEY, Some(DELIVERY.into()))));
    assert!(hook.holds_claim());
    let step = hook.on_upstream_headers(Some("201"), None, None);
    assert!(matches!(settles(&step)[..], [SettleOp::Promote { .. }]));
    assert!(settles(&hook.on_stream_end()).is_empty(), "settled once");
}

#[test]
fn a_refused_dispatch_falls_back_to_the_node_with_no_claim() {
    let w = World::new(&fleet("fleet"), &[]);
    let mut hook = Hook::new();
    w.headers(&mut hook, &POST, true);
    let step = hook.on_dispatch_failed(&w.env(), NOW);
    assert_eq!(step.flow, Flow::Continue);
    assert!(step.effects.contains(&Effect::Metric(Metric::Fallback)));
    assert!(!hook.holds_claim());
    // The node bucket (burst 1) was charged: the next hook is refused.
    let mut next = Hook::new();
    w.headers(&mut next, &POST, true);
    let step = next.on_dispatch_failed(&w.env(), NOW);
    assert_eq!(replies(&step), [429]);
}

#[test]
fn a_node_refusal_after_a_fleet_ok_releases_the_claim() {
    let w = World::new(&fleet("node"), &[]);
    let mut statuses = Vec::new();
    let mut released = 0;
    for _ in 0..2 {
        let mut hook = Hook::new();
        w.headers(&mut hook, &POST, true);
        let step = hook.on_store_answer(&w.env(), Some("200"), Some(br#"{"result":"ok"}"#), NOW);
        statuses.push(replies(&step));
        released += settles(&step)
            .iter()
            .filter(|op| matches!(op, SettleOp::Release { .. }))
            .count();
    }
    assert_eq!(statuses, [vec![], vec![429]]);
    assert_eq!(released, 1);
}

#[test]
fn a_refusal_before_the_body_ends_waits_for_it() {
    let w = World::new(&fleet("fleet"), &[]);
    let mut hook = Hook::new();
    w.headers(&mut hook, &POST, false);
    let answer = br#"{"result":"rate_limited","retry_after_ms":10}"#;
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(answer), NOW);
    assert!(replies(&step).is_empty());
    let step = hook.on_body(&w.env(), 1, false, Vec::new, || NOW);
    assert!(replies(&step).is_empty());
    let step = hook.on_body(&w.env(), 2, true, Vec::new, || NOW);
    assert_eq!((step.flow, replies(&step)), (Flow::Pause, vec![429]));
}

#[test]
fn a_forgery_is_refused_before_any_charge() {
    let config = r#"{"sources":{"gh":{"tenant":"acme","verify":{"scheme":"github","secret_env":"S"}}},
        "rate_limits":{"default":{"rate":1,"burst":1}}}"#;
    let w = World::new(config, &[("S", "secret")]);
    let before = w.store.clone();
    let mut hook = Hook::new();
    let step = w.headers(&mut hook, &POST, false);
    assert_eq!(step.flow, Flow::Pause, "the body is needed");
    let step = hook.on_body(&w.env(), 2, true, || b"{}".to_vec(), || NOW);
    assert_eq!(replies(&step), [401]);
    assert!(w.store == before, "nothing charged");
}

#[test]
fn our_headers_are_stripped_from_the_senders_request() {
    let w = World::new(&fleet("fleet"), &[]);
    let mut hook = Hook::new();
    let mut pairs = POST.to_vec();
    pairs.push(("x-ankusa-event-key", "mine"));
    let step = w.headers(&mut hook, &pairs, true);
    assert_eq!(step.effects[0], Effect::RemoveHeader(EVENT_KEY.into()));
}

/// Only the four headers the filter sets were stripped: a sender's
/// `x-ankusa-budget-ms` or `x-ankusa-foo` reached the upstream.
#[test]
fn every_header_under_our_prefix_is_stripped_not_only_the_four_we_set() {
    let w = World::new(&fleet("fleet"), &[]);
    let mut hook = Hook::new();
    let mut pairs = POST.to_vec();
    pairs.extend([
        ("x-ankusa-budget-ms", "7"),
        ("x-ankusa-foo", "bar"),
        ("X-Ankusa-Tenant", "victim"),
        ("x-ankusa-foo", "again"),
    ]);
    let step = w.headers(&mut hook, &pairs, true);
    let removed: Vec<_> = step
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::RemoveHeader(name) => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        removed,
        ["x-ankusa-budget-ms", "x-ankusa-foo", "X-Ankusa-Tenant"]
    );
}

/// A CONNECT was decided (404: it names no webhook path) and its answer held
/// for the end of a stream that, being a tunnel, never ends: the sender
/// waited until it gave up.
#[test]
fn a_connect_is_answered_at_once() {
    let w = World::new(&fleet("fleet"), &[]);
    for pairs in [
        vec![(":method", "CONNECT"), (":authority", "example.com:443")],
        vec![(":method", "CONNECT"), (":path", "/webhooks/gh")],
    ] {
        let mut hook = Hook::new();
        let step = w.headers(&mut hook, &pairs, false);
        assert_eq!(step.flow, Flow::Pause);
        assert_eq!(replies(&step).len(), 1, "{pairs:?}: {step:?}");
    }
    // Any other refused method still waits for its upload to end first.
    let mut hook = Hook::new();
    let pairs = [(":method", "PUT"), (":path", "/webhooks/gh")];
    let step = w.headers(&mut hook, &pairs, false);
    assert!(replies(&step).is_empty(), "{step:?}");
    let step = hook.on_body(&w.env(), 0, true, Vec::new, || NOW);
    assert_eq!(replies(&step), [405]);
}

/// `fleet(..)` with the default tenant's `shadow` set to `shadow`.
fn shadowed(rate_scope: &str, shadow: &str) -> String {
    fleet(rate_scope).replace(
        r#""burst":1}"#,
        &format!(r#""burst":1,"shadow":{shadow}}}"#),
    )
}

fn counted(step: &Step) -> Vec<Metric> {
    step.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Metric(m @ (Metric::Admission(_) | Metric::Shadowed(_))) => Some(*m),
            _ => None,
        })
        .collect()
}

#[test]
fn shadow_forwards_a_node_rate_limit_and_counts_it_shadowed() {
    let w = World::new(&shadowed("node", "true"), &[]);
    let mut steps = Vec::new();
    for _ in 0..2 {
        let mut hook = Hook::new();
        w.headers(&mut hook, &POST, true);
        let step = hook.on_store_answer(&w.env(), Some("200"), Some(br#"{"result":"ok"}"#), NOW);
        assert!(hook.holds_claim(), "the claim is the hook's own");
        steps.push(step);
    }
    assert_eq!(steps[1].flow, Flow::Continue);
    assert!(replies(&steps[1]).is_empty());
    assert!(
        settles(&steps[1]).is_empty(),
        "the claim is kept, not released"
    );
    assert_eq!(counted(&steps[0]), [Metric::Admission(Outcome::Admitted)]);
    assert_eq!(counted(&steps[1]), [Metric::Shadowed(Outcome::RateLimited)]);
}

#[test]
fn shadow_forwards_a_fleet_rate_limit_without_a_claim() {
    let w = World::new(&shadowed("fleet", "true"), &[]);
    let mut hook = Hook::new();
    w.headers(&mut hook, &POST, true);
    let answer = br#"{"result":"rate_limited","retry_after_ms":10}"#;
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(answer), NOW);
    assert_eq!((step.flow, replies(&step)), (Flow::Continue, vec![]));
    assert_eq!(counted(&step), [Metric::Shadowed(Outcome::RateLimited)]);
    assert!(step
        .effects
        .contains(&Effect::Header(EVENT_KEY, Some(DELIVERY.into()))));
    assert!(!hook.holds_claim(), "the store wrote no claim for a denial");
}

#[test]
fn shadow_true_keeps_dedupe_enforced() {
    let w = World::new(&shadowed("fleet", "true"), &[]);
    let mut hook = Hook::new();
    w.headers(&mut hook, &POST, true);
    let answer = br#"{"result":"duplicate","hook_id":"h1"}"#;
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(answer), NOW);
    assert_eq!(replies(&step), [201]);
    assert_eq!(counted(&step), [Metric::Admission(Outcome::Duplicate)]);
}

#[test]
fn a_shadowed_duplicate_is_forwarded_and_never_settled_as_ours() {
    let w = World::new(&shadowed("fleet", r#"{"dedupe":true}"#), &[]);
    for answer in [
        &br#"{"result":"duplicate","hook_id":"h1"}"#[..],
        br#"{"result":"pending","retry_after_ms":5}"#,
    ] {
        let mut hook = Hook::new();
        w.headers(&mut hook, &POST, true);
        let step = hook.on_store_answer(&w.env(), Some("200"), Some(answer), NOW);
        assert_eq!((step.flow, replies(&step)), (Flow::Continue, vec![]));
        assert!(matches!(counted(&step)[..], [Metric::Shadowed(_)]));
        assert!(!hook.holds_claim());
        assert!(settles(&hook.on_upstream_headers(Some("201"), None, None)).is_empty());
    }
    // Rate limits stay enforced under a dedupe-only shadow.
    let mut hook = Hook::new();
    w.headers(&mut hook, &POST, true);
    let answer = br#"{"result":"rate_limited","retry_after_ms":10}"#;
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(answer), NOW);
    assert_eq!(replies(&step), [429]);
}

fn response_headers(step: &Step) -> Vec<(&'static str, String)> {
    step.effects
        .iter()
        .filter_map(|e| match e {
            Effect::ResponseHeader(k, v) => Some((*k, v.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn node_answers_carry_the_standing_of_the_bucket_they_charged() {
    let config = r#"{"sources":{"gh":{"tenant":"acme"}},
        "rate_limits":{"headers":"both","default":{"rate":1,"burst":2}}}"#;
    let w = World::new(config, &[]);
    let mut first = Hook::new();
    w.headers(&mut first, &POST, true);
    assert!(first.reads_upstream());
    let step = first.on_upstream_headers(Some("201"), None, None);
    let h = response_headers(&step);
    assert!(
        h.contains(&("ratelimit-policy", "\"hooks\";q=2;w=2".into())),
        "{h:?}"
    );
    assert!(
        h.contains(&("ratelimit", "\"hooks\";r=1;t=1".into())),
        "{h:?}"
    );
    assert!(h.contains(&("x-ratelimit-remaining", "1".into())), "{h:?}");
    let mut second = Hook::new();
    w.headers(&mut second, &POST, true);
    let h = response_headers(&second.on_upstream_headers(Some("201"), None, None));
    assert!(
        h.contains(&("ratelimit", "\"hooks\";r=0;t=2".into())),
        "{h:?}"
    );
    let mut third = Hook::new();
    let step = w.headers(&mut third, &POST, true);
    let Some(Effect::Reply(reply)) = step.effects.iter().find(|e| matches!(e, Effect::Reply(_)))
    else {
        panic!("{:?}", step.effects)
    };
    assert_eq!((reply.status, reply.retry_after), (429, Some(1)));
    assert!(reply
        .headers
        .contains(&("ratelimit", "\"hooks\";r=0;t=2".into())));
}

#[test]
fn the_override_a_fleet_answer_carries_sets_that_hooks_shadow_and_policy() {
    let w = World::new(&fleet("fleet"), &[]);
    let expires = NOW / 1_000 + 60_000;
    let answer = format!(
        r#"{{"result":"rate_limited","retry_after_ms":1000,
            "override":{{"tenant":"acme","rate":1,"burst":5,"shadow":true,
                         "expires_at_ms":{expires},"version":3}}}}"#
    );
    let mut hook = Hook::new();
    w.headers(&mut hook, &POST, true);
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(answer.as_bytes()), NOW);
    assert_eq!((step.flow, replies(&step)), (Flow::Continue, vec![]));
    assert_eq!(counted(&step), [Metric::Shadowed(Outcome::RateLimited)]);
    let h = response_headers(&hook.on_upstream_headers(Some("201"), None, None));
    assert!(
        h.contains(&("ratelimit-policy", "\"hooks\";q=5;w=5".into())),
        "{h:?}"
    );
    assert!(
        h.contains(&("ratelimit", "\"hooks\";r=0;t=1".into())),
        "{h:?}"
    );

    // Expired: the configuration's (burst 1, no shadow) again.
    let expired = answer.replace(&expires.to_string(), &(NOW / 1_000 - 1).to_string());
    let mut hook = Hook::new();
    w.headers(&mut hook, &POST, true);
    let step = hook.on_store_answer(&w.env(), Some("200"), Some(expired.as_bytes()), NOW);
    assert_eq!(replies(&step), [429]);
}

#[test]
fn a_sender_gone_while_the_store_call_is_in_flight_releases_the_claim_once() {
    let w = World::new(&fleet("fleet"), &[]);
    let mut hook = Hook::new();
    w.headers(&mut hook, &POST, true);
    assert!(hook.calling());
    let step = hook.on_stream_end();
    let released = settles(&step);
    assert!(
        matches!(&released[..], [SettleOp::Release { claim }] if claim.key == DELIVERY),
        "{released:?}"
    );
    assert!(!hook.calling());
    // The late answer finds no call: nothing more is settled.
    let late = hook.on_store_answer(&w.env(), Some("200"), Some(br#"{"result":"ok"}"#), NOW);
    assert!(settles(&late).is_empty());
    assert!(settles(&hook.on_stream_end()).is_empty());
}
