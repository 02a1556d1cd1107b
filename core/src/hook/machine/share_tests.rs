//! A fleet quota answered node-local spends this node's share of it: the
//! live edge count the store's answers carried, else `fleet.nodes`, unless
//! `fleet.degraded_share` pins it.

use super::world::World;
use super::*;
use crate::hook::headers::RequestHeaders;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const NOW: u64 = 1_700_000_000_000_000;

fn config(fleet: &str, limits: &str) -> String {
    format!(
        r#"{{"sources":{{"gh":{{"tenant":"acme","dedupe":"github"}}}},
            "rate_limits":{{"scope":"fleet","default":{{{limits}}}}},
            "dedupe":{{"scope":"fleet"}},
            "fleet":{{{fleet}}}}}"#
    )
}

/// One hook of `body` to delivery `n`; its store call fails at `now`.
fn failed_hook(w: &World, n: usize, body: &str, now: u64) -> Step {
    let mut hook = Hook::new();
    let delivery = format!("d-{n}");
    let len = body.len().to_string();
    let pairs = [
        (":path", "/webhooks/gh"),
        (":method", "POST"),
        ("content-length", len.as_str()),
        ("x-github-delivery", delivery.as_str()),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
    .collect();
    let step = hook.on_headers(
        &w.env(),
        RequestHeaders::from_pairs(pairs),
        body.is_empty(),
        || now,
        |_| [1; 10],
    );
    if !body.is_empty() {
        let bytes = body.as_bytes().to_vec();
        hook.on_body(&w.env(), bytes.len() as u64, true, || bytes, || now);
    } else {
        assert!(step.hit.is_some(), "no hit call: {:?}", step.effects);
    }
    hook.on_dispatch_failed(&w.env(), now)
}

/// The store answers one hook ok, reporting `edges` live edges.
fn answered(w: &World, edges: u64, now: u64) -> Step {
    let mut hook = Hook::new();
    let pairs = [(":path", "/webhooks/gh"), (":method", "POST")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
    hook.on_headers(
        &w.env(),
        RequestHeaders::from_pairs(pairs),
        true,
        || now,
        |_| [1; 10],
    );
    let body = format!(r#"{{"result":"ok","edges":{edges}}}"#);
    hook.on_store_answer(&w.env(), Some("200"), Some(body.as_bytes()), now)
}

fn statuses(step: &Step) -> Option<u32> {
    step.effects.iter().find_map(|e| match e {
        Effect::Reply(r) => Some(r.status),
        _ => None,
    })
}

/// Hooks admitted of `n` sent at once with the store down.
fn admitted_at_once(w: &World, n: usize, body: &str) -> usize {
    (0..n)
        .filter(|i| statuses(&failed_hook(w, *i, body, NOW)).is_none())
        .count()
}

#[test]
fn with_the_store_down_a_node_spends_its_share_of_the_live_edges() {
    let w = World::new(&config("", r#""rate":10,"burst":10"#), &[]);
    let step = answered(&w, 2, NOW - 1_000_000);
    assert!(step.effects.contains(&Effect::Metric(Metric::Edges {
        live: 2,
        share_ppm: 500_000
    })));
    // Half the burst, where the whole quota used to be this node's.
    assert_eq!(admitted_at_once(&w, 12, ""), 5);
    // And half the rate: one more after 200 ms, not after 100 ms.
    assert!(statuses(&failed_hook(&w, 20, "", NOW + 199_999)).is_some());
    assert!(statuses(&failed_hook(&w, 21, "", NOW + 200_000)).is_none());
}

#[test]
fn an_unchanged_count_is_neither_written_nor_reported_again() {
    let w = World::new(&config("", r#""rate":10,"burst":10"#), &[]);
    answered(&w, 3, NOW);
    let step = answered(&w, 3, NOW + 1);
    assert!(!step
        .effects
        .iter()
        .any(|e| matches!(e, Effect::Metric(Metric::Edges { .. }))));
    assert_eq!(crate::fleet::edges::heard(&w.store), 3);
}

#[test]
fn never_told_a_count_a_node_divides_by_its_configured_nodes() {
    let w = World::new(&config(r#""nodes":4"#, r#""rate":10,"burst":8"#), &[]);
    assert_eq!(admitted_at_once(&w, 10, ""), 2);
    let w = World::new(&config("", r#""rate":10,"burst":8"#), &[]);
    assert_eq!(admitted_at_once(&w, 10, ""), 8, "default: the whole quota");
}

#[test]
fn a_pinned_share_outranks_the_count() {
    let w = World::new(
        &config(r#""degraded_share":0.25"#, r#""rate":10,"burst":8"#),
        &[],
    );
    answered(&w, 2, NOW - 1_000_000);
    assert_eq!(admitted_at_once(&w, 10, ""), 2);
}

#[test]
fn a_share_below_one_hook_still_admits_one() {
    let w = World::new(&config(r#""nodes":4"#, r#""rate":1,"burst":2"#), &[]);
    assert_eq!(admitted_at_once(&w, 3, ""), 1);
    // The next waits four seconds: one hook of a quarter of 1/s.
    assert!(statuses(&failed_hook(&w, 9, "", NOW + 3_999_999)).is_some());
    assert!(statuses(&failed_hook(&w, 10, "", NOW + 4_000_000)).is_none());
}

#[test]
fn the_headers_and_retry_after_describe_the_share() {
    let w = World::new(&config(r#""nodes":2"#, r#""rate":10,"burst":10"#), &[]);
    for i in 0..5 {
        failed_hook(&w, i, "", NOW);
    }
    let step = failed_hook(&w, 5, "", NOW);
    let Some(Effect::Reply(reply)) = step.effects.iter().find(|e| matches!(e, Effect::Reply(_)))
    else {
        panic!("{:?}", step.effects)
    };
    assert_eq!(reply.status, 429);
    let header = |name: &str| {
        reply
            .headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    };
    // Half of burst 10 at half of 10/s: 5 hooks, refilled in 1 s; the next
    // one in 200 ms (so Retry-After 1 s).
    assert_eq!(
        header("ratelimit-policy").as_deref(),
        Some("\"hooks\";q=5;w=1")
    );
    assert_eq!(header("ratelimit").as_deref(), Some("\"hooks\";r=0;t=1"));
    assert_eq!(reply.retry_after, Some(1));
}

#[test]
fn bytes_quotas_follow_the_share() {
    let limits = r#""rate":1000,"burst":1000,"bytes_rate":10,"bytes_burst":100"#;
    let w = World::new(&config(r#""nodes":2"#, limits), &[]);
    // 50 bytes of the 100-byte burst are this node's: two bodies of 20, not five.
    assert_eq!(admitted_at_once(&w, 5, &"x".repeat(20)), 2);
}

#[test]
fn shadow_mode_forwards_what_the_share_refuses_and_counts_it() {
    let limits = r#""rate":10,"burst":2,"shadow":true"#;
    let w = World::new(&config(r#""nodes":2"#, limits), &[]);
    let steps: Vec<Step> = (0..2).map(|i| failed_hook(&w, i, "", NOW)).collect();
    assert!(steps[0]
        .effects
        .contains(&Effect::Metric(Metric::Admission(Outcome::Admitted))));
    assert!(steps[1]
        .effects
        .contains(&Effect::Metric(Metric::Shadowed(Outcome::RateLimited))));
    assert_eq!(steps[1].flow, Flow::Continue);
}

#[test]
fn a_node_scope_rate_is_this_nodes_own_whatever_the_count() {
    let json = r#"{"sources":{"gh":{"tenant":"acme","dedupe":"github"}},
        "rate_limits":{"scope":"node","default":{"rate":10,"burst":4}},
        "dedupe":{"scope":"fleet"},"fleet":{"nodes":4}}"#;
    let w = World::new(json, &[]);
    assert_eq!(admitted_at_once(&w, 6, ""), 4);
}
