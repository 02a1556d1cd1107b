//! Node-local charges under the node's polled override list.

use super::super::world::World;
use super::super::*;
use crate::fleet::overrides::node_list::{store_list, Polled, STALE_AFTER_MS};
use crate::hook::headers::RequestHeaders;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const NOW: u64 = 1_700_000_000_000_000;

/// A world with the rate limits on `rate_scope` and a store to fall back from.
fn world(rate_scope: &str) -> World {
    let config = format!(
        r#"{{"sources":{{"gh":{{"tenant":"acme"}}}},
            "rate_limits":{{"scope":"{rate_scope}","default":{{"rate":1,"burst":100}}}},
            "fleet":{{"timeout_ms":100}}}}"#
    );
    World::new(&config, &[])
}

impl World {
    /// The store's list, as a poll at `now_us` took it.
    fn polled(&self, json: &str, now_us: u64) {
        let overrides = serde_json::from_str(json).unwrap();
        store_list(&self.store, &Polled { overrides, cut: 0 }, now_us / 1_000);
    }

    /// One hook at `now`: its step (a store call is refused, so the node answers).
    fn hook(&self, now: u64) -> Step {
        let pairs = [
            (":path", "/webhooks/gh"),
            (":method", "POST"),
            ("content-length", "2"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
        .collect();
        let mut hook = Hook::new();
        let step = hook.on_headers(
            &self.env(),
            RequestHeaders::from_pairs(pairs),
            true,
            || now,
            |_| [1; 10],
        );
        if hook.calling() {
            return hook.on_dispatch_failed(&self.env(), now);
        }
        step
    }

    /// How many of `n` hooks at `now` were forwarded, and how many counted shadowed.
    fn admitted(&self, n: usize, now: u64) -> (usize, usize) {
        let steps: Vec<Step> = (0..n).map(|_| self.hook(now)).collect();
        let forwarded = steps.iter().filter(|s| s.flow == Flow::Continue).count();
        let shadowed = steps
            .iter()
            .filter(|s| {
                s.effects
                    .contains(&Effect::Metric(Metric::Shadowed(Outcome::RateLimited)))
            })
            .count();
        (forwarded, shadowed)
    }
}

const LOWERED: &str = r#"[{"tenant":"acme","rate":1,"burst":3,"version":1}]"#;

#[test]
fn a_node_tenant_is_held_to_the_polled_override() {
    let w = world("node");
    w.polled(LOWERED, NOW);
    assert_eq!(
        w.admitted(10, NOW),
        (3, 0),
        "burst 3, as the override writes"
    );
}

#[test]
fn without_an_override_the_configuration_holds() {
    let w = world("node");
    w.polled("[]", NOW);
    assert_eq!(w.admitted(10, NOW), (10, 0));
}

#[test]
fn a_stale_list_or_an_expired_override_gives_the_configuration_back() {
    let w = world("node");
    w.polled(LOWERED, NOW);
    let later = NOW + STALE_AFTER_MS * 1_000;
    assert_eq!(
        w.admitted(10, later),
        (10, 0),
        "the store was not reached for the bound"
    );
    let w = world("node");
    let expiring = format!(
        r#"[{{"tenant":"acme","rate":1,"burst":3,"expires_at_ms":{},"version":1}}]"#,
        NOW / 1_000 + 5
    );
    w.polled(&expiring, NOW);
    assert_eq!(w.admitted(10, NOW + 5_000), (10, 0), "expired");
}

#[test]
fn a_shadow_override_forwards_what_the_limit_refuses_and_counts_it() {
    let w = world("node");
    w.polled(
        r#"[{"tenant":"acme","rate":1,"burst":3,"shadow":true,"version":1}]"#,
        NOW,
    );
    assert_eq!(w.admitted(10, NOW), (10, 7));
}

#[test]
fn a_fleet_tenant_falling_back_applies_the_last_known_override() {
    let w = world("fleet");
    w.polled(LOWERED, NOW);
    assert_eq!(w.admitted(10, NOW), (3, 0));
}

#[test]
fn the_stores_answer_outranks_the_nodes_list() {
    // Fleet dedupe, node rate: the store answered with no override in force
    // (just deleted), so the node charges the configuration, not the list.
    let config = r#"{"sources":{"gh":{"tenant":"acme","dedupe":"github"}},
        "rate_limits":{"default":{"rate":1,"burst":100}},"dedupe":{"scope":"fleet"}}"#;
    let w = World::new(config, &[]);
    w.polled(LOWERED, NOW);
    let forwarded = (0..10)
        .filter(|i| {
            let delivery = format!("d-{i}");
            let pairs = [
                (":path", "/webhooks/gh"),
                (":method", "POST"),
                ("content-length", "2"),
                ("x-github-delivery", delivery.as_str()),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect();
            let mut hook = Hook::new();
            hook.on_headers(
                &w.env(),
                RequestHeaders::from_pairs(pairs),
                true,
                || NOW,
                |_| [1; 10],
            );
            let step =
                hook.on_store_answer(&w.env(), Some("200"), Some(br#"{"result":"ok"}"#), NOW);
            step.flow == Flow::Continue
        })
        .count();
    assert_eq!(forwarded, 10);
}

#[test]
fn a_body_over_an_overrides_bytes_burst_is_too_large_on_the_node() {
    let config = r#"{"sources":{"gh":{"tenant":"acme"}},
        "rate_limits":{"default":{"rate":1,"burst":100,"bytes_rate":1000,"bytes_burst":1000}},
        "fleet":{"timeout_ms":100}}"#;
    let w = World::new(config, &[]);
    w.polled(
        r#"[{"tenant":"acme","bytes_rate":1,"bytes_burst":4,"version":1}]"#,
        NOW,
    );
    let pairs = [
        (":path", "/webhooks/gh"),
        (":method", "POST"),
        ("content-length", "10"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
    .collect();
    let mut hook = Hook::new();
    let step = hook.on_headers(
        &w.env(),
        RequestHeaders::from_pairs(pairs),
        false,
        || NOW,
        |_| [1; 10],
    );
    assert_eq!(step.flow, Flow::Pause, "the body is awaited");
    let step = hook.on_body(&w.env(), 10, true, || b"0123456789".to_vec(), || NOW);
    let statuses: Vec<u32> = step
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::Reply(r) => Some(r.status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, [413], "{:?}", step.effects);
    assert!(step
        .effects
        .contains(&Effect::Metric(Metric::Admission(Outcome::TooLarge))));
}

#[test]
fn an_edge_without_a_store_reads_no_list() {
    let config = r#"{"sources":{"gh":{"tenant":"acme"}},
        "rate_limits":{"default":{"rate":1,"burst":100}}}"#;
    let w = World::new(config, &[]);
    w.polled(LOWERED, NOW);
    assert_eq!(
        w.admitted(10, NOW),
        (10, 0),
        "no fleet section: the configuration"
    );
}
