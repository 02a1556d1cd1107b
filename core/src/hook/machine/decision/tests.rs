//! The decision each hook publishes for the access log, and the trace
//! context it carries to the store.

use super::super::world::World;
use super::super::*;
use crate::config::Scope;
use crate::hook::decision::Decided;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const NOW: u64 = 1_700_000_000_000_000;
const DELIVERY: &str = "decision-delivery-1";
const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn config(scope: &str) -> String {
    format!(
        r#"{{"sources":{{"gh":{{"tenant":"acme","dedupe":"github"}},"any":{{"dedupe":"github"}},
                       "signed":{{"tenant":"acme","verify":{{"scheme":"github","secret_env":"S"}}}}}},
            "rate_limits":{{"scope":"{scope}","default":{{"rate":1,"burst":1}},
                            "tenants":{{"quiet":{{"rate":1,"burst":1,"shadow":true}}}}}},
            "dedupe":{{"scope":"{scope}"}}}}"#
    )
}

fn world(scope: &str) -> World {
    World::new(&config(scope), &[("S", "secret")])
}

fn start(w: &World, hook: &mut Hook, extra: &[(&str, &str)]) -> Step {
    let mut pairs: Vec<(String, Vec<u8>)> = vec![
        (":path".into(), b"/webhooks/gh".to_vec()),
        (":method".into(), b"POST".to_vec()),
        ("x-github-delivery".into(), DELIVERY.as_bytes().to_vec()),
    ];
    for (k, v) in extra {
        pairs.retain(|(name, _)| name != k);
        pairs.push((k.to_string(), v.as_bytes().to_vec()));
    }
    let headers = RequestHeaders::from_pairs(pairs);
    hook.on_headers(&w.env(), headers, true, || NOW, |_| [7; 10])
}

/// Every decision a step published.
fn decisions(step: &Step) -> Vec<&Decision> {
    step.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Decision(d) => Some(d),
            _ => None,
        })
        .collect()
}

fn one(step: &Step) -> &Decision {
    match decisions(step)[..] {
        [d] => d,
        ref other => panic!("not one decision: {other:?}"),
    }
}

fn sent(step: &Step) -> crate::wire::HitRequest {
    match &step.hit {
        Some(hit) => serde_json::from_slice(&hit.body).unwrap(),
        None => panic!("no store call: {:?}", step.effects),
    }
}

#[test]
fn an_admitted_hook_says_the_store_decided_and_how_long_it_waited() {
    let w = world("fleet");
    let mut hook = Hook::new();
    let step = start(&w, &mut hook, &[("traceparent", TRACE)]);
    assert!(decisions(&step).is_empty(), "not decided before the answer");
    assert_eq!(sent(&step).traceparent.as_deref(), Some(TRACE));
    let ok = Some(&br#"{"result":"ok"}"#[..]);
    let step = hook.on_store_answer(&w.env(), Some("200"), ok, NOW + 812);
    let d = one(&step);
    assert_eq!(d.outcome, Some(Outcome::Admitted));
    assert_eq!((d.decided, d.store_us), (Decided::Store, Some(812)));
    assert_eq!(d.scopes, (Scope::Fleet, Scope::Fleet));
    assert_eq!(
        (
            d.tenant.as_deref(),
            d.source.as_deref(),
            d.event_key.as_deref()
        ),
        (Some("acme"), Some("gh"), Some(DELIVERY))
    );
    let hook_id = d.hook_id.clone().unwrap();
    assert!(step
        .effects
        .contains(&Effect::Header(HOOK_ID, Some(hook_id))));
    // Published once: the upstream's answer and the stream's end add none.
    assert!(decisions(&hook.on_upstream_headers(Some("201"), None, None)).is_empty());
    assert!(decisions(&hook.on_stream_end()).is_empty());
}

#[test]
fn a_traceparent_that_is_not_one_is_not_carried() {
    let w = world("fleet");
    let mut hook = Hook::new();
    let step = start(&w, &mut hook, &[("traceparent", "00-nope")]);
    assert_eq!(sent(&step).traceparent, None);
    let step = start(&w, &mut Hook::new(), &[]);
    assert_eq!(sent(&step).traceparent, None);
}

#[test]
fn a_hook_answered_without_the_store_says_fallback() {
    let w = world("fleet");
    let mut hook = Hook::new();
    start(&w, &mut hook, &[]);
    let step = hook.on_store_answer(&w.env(), Some("503"), None, NOW + 5_000);
    let d = one(&step);
    assert_eq!(d.outcome, Some(Outcome::Admitted));
    assert_eq!((d.decided, d.store_us), (Decided::Fallback, Some(5_000)));
    // The node bucket (burst 1) is spent: a refused dispatch answers 429, on its own.
    let mut next = Hook::new();
    start(&w, &mut next, &[]);
    let d = one(&next.on_dispatch_failed(&w.env(), NOW)).clone();
    assert_eq!(d.outcome, Some(Outcome::RateLimited));
    assert_eq!((d.decided, d.store_us), (Decided::Fallback, Some(0)));
}

#[test]
fn refusals_the_store_answered_say_so() {
    let w = world("fleet");
    for (answer, outcome) in [
        (
            &br#"{"result":"duplicate","hook_id":"h1"}"#[..],
            Outcome::Duplicate,
        ),
        (
            br#"{"result":"pending","retry_after_ms":5}"#,
            Outcome::Pending,
        ),
        (
            br#"{"result":"rate_limited","retry_after_ms":5}"#,
            Outcome::RateLimited,
        ),
    ] {
        let mut hook = Hook::new();
        start(&w, &mut hook, &[]);
        let step = hook.on_store_answer(&w.env(), Some("200"), Some(answer), NOW + 3);
        let d = one(&step);
        assert_eq!((d.outcome, d.decided), (Some(outcome), Decided::Store));
        assert_eq!(d.event_key.as_deref(), Some(DELIVERY));
    }
}

#[test]
fn a_node_scope_hook_and_early_refusals_say_node_with_no_store_wait() {
    let w = world("node");
    let mut hook = Hook::new();
    let d = one(&start(&w, &mut hook, &[])).clone();
    assert_eq!(
        (d.outcome, d.decided),
        (Some(Outcome::Admitted), Decided::Node)
    );
    assert_eq!((d.store_us, d.scopes), (None, (Scope::Node, Scope::Node)));

    let forged = [
        (":path", "/webhooks/signed"),
        ("x-hub-signature-256", "sha256=00"),
    ];
    let d = one(&start(&w, &mut Hook::new(), &forged)).clone();
    assert_eq!(d.outcome, Some(Outcome::Unverified));
    assert_eq!(d.source.as_deref(), Some("signed"));

    let d = one(&start(&w, &mut Hook::new(), &[(":method", "GET")])).clone();
    assert_eq!(d.outcome, Some(Outcome::BadMethod));
    assert_eq!(
        (
            d.tenant.as_deref(),
            d.source.as_deref(),
            d.hook_id.as_deref()
        ),
        (Some("acme"), Some("gh"), None),
        "the route is known, no hook was made"
    );

    let d = one(&start(&w, &mut Hook::new(), &[(":path", "/elsewhere")])).clone();
    assert_eq!(d.outcome, Some(Outcome::NotFound));
    assert_eq!((d.tenant, d.source), (None, None));
}

#[test]
fn a_refusal_shadow_mode_forwards_says_shadow() {
    let w = world("node");
    // Tenant `quiet` (burst 1, shadow mode) spends its burst, then is over it.
    let quiet = [(":path", "/webhooks/quiet/any")];
    let d = one(&start(&w, &mut Hook::new(), &quiet)).clone();
    assert_eq!((d.outcome, d.shadow), (Some(Outcome::Admitted), false));
    let again = [quiet[0], ("x-github-delivery", "another")];
    let d = one(&start(&w, &mut Hook::new(), &again)).clone();
    assert_eq!((d.outcome, d.shadow), (Some(Outcome::RateLimited), true));
    assert_eq!(
        (d.tenant.as_deref(), d.source.as_deref()),
        (Some("quiet"), Some("any"))
    );
}
