//! Shadow mode through Envoy: a tenant in shadow has every refusal computed
//! and counted (`ankusa_admissions_total{outcome,shadow="true"}`) and its hooks
//! forwarded; turning shadow off is a config reload that enforces again.
//! Dedupe stays enforced unless the tenant's shadow names it.

use ankusa_testkit::envoy::{Edge, EdgeSpec, Reload};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use serde_json::{json, Value};

/// `acme` at 1/s with a burst of `BURST`, shadowed as written.
const BURST: u64 = 2;
const SENT: u64 = 8;

fn with_shadow(mut config: Value, shadow: Option<Value>) -> Value {
    if let Some(shadow) = shadow {
        config["rate_limits"]["tenants"]["acme"]["shadow"] = shadow;
    }
    config
}

/// The counter of `ankusa_admissions_total` whose labels hold both `outcome` and `shadow="true"`.
fn shadowed(edge: &Edge, outcome: &str) -> f64 {
    let text = edge.scraped();
    text.lines()
        .filter(|l| l.starts_with("ankusa_admissions_total{"))
        .filter(|l| l.contains(&format!("outcome=\"{outcome}\"")) && l.contains("shadow=\"true\""))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

#[test]
fn a_shadowed_node_limit_forwards_and_counts_until_a_reload_turns_it_off() {
    let intake = Intake::start();
    let config = node_config(BURST);
    let spec = EdgeSpec::new(
        "edge-shadow",
        intake.port,
        free_port(),
        with_shadow(config.clone(), Some(json!(true))),
    );
    let mut edge = Edge::start_lds(spec);

    for i in 0..SENT {
        let r = deliver(&edge, "/webhooks/gh", &format!("s-{i}-{}", free_port()));
        assert_eq!(r.status, 201, "{}\n{}", r.text(), edge.log_tail());
    }
    assert_eq!(intake.hooks().len() as u64, SENT, "every hook forwarded");
    let admitted = edge.stat(r#"ankusa_admissions_total{outcome="admitted"}"#);
    let shadowed_429 = shadowed(&edge, "rate_limited");
    // Each hook is counted once: admitted within the limit, shadowed past it.
    assert_eq!(admitted + shadowed_429, SENT as f64);
    // The burst plus at most a few refilled at 1/s while sending.
    assert!(
        shadowed_429 >= (SENT - BURST - 3) as f64 && admitted >= BURST as f64,
        "admitted {admitted}, shadowed {shadowed_429}"
    );
    assert_eq!(
        edge.stat(r#"ankusa_admissions_total{outcome="rate_limited"}"#),
        0.0,
        "nothing refused"
    );

    // Shadow off: the same limit is enforced.
    assert_eq!(edge.reload(with_shadow(config, None)), Reload::Accepted);
    let mut statuses = Vec::new();
    for i in 0..BURST + 4 {
        let r = deliver(&edge, "/webhooks/gh", &format!("e-{i}-{}", free_port()));
        statuses.push(r.status);
    }
    assert!(statuses.contains(&429), "enforced again: {statuses:?}");
    assert!(edge.stat(r#"ankusa_admissions_total{outcome="rate_limited"}"#) >= 1.0);
}

#[test]
fn fleet_dedupe_stays_enforced_under_shadow_true_and_is_forwarded_when_shadowed() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let config = |shadow: Value| {
        let mut c = fleet_config(100, 200);
        c["rate_limits"]["tenants"]["acme"]["shadow"] = shadow;
        c
    };
    let enforced = edge("edge-dd", intake.port, store.port, config(json!(true)));
    let key = format!("dup-{}", free_port());
    let first = deliver(&enforced, "/webhooks/gh", &key);
    assert_eq!(first.status, 201, "{}", enforced.log_tail());
    let again = deliver(&enforced, "/webhooks/gh", &key);
    assert!(
        again.status == 201 || again.status == 409,
        "{} {}",
        again.status,
        again.text()
    );
    assert!(
        again.header("x-envoy-upstream-service-time").is_none(),
        "answered by the edge, not forwarded"
    );
    assert_eq!(
        enforced.stat(r#"ankusa_admissions_total{outcome="duplicate"}"#)
            + enforced.stat(r#"ankusa_admissions_total{outcome="pending"}"#),
        1.0
    );
    drop(enforced);

    let shadowing = edge(
        "edge-ds",
        intake.port,
        store.port,
        config(json!({"dedupe": true})),
    );
    let again = deliver(&shadowing, "/webhooks/gh", &key);
    assert_eq!(again.status, 201, "{}", shadowing.log_tail());
    // The upstream's own index answers it (the intake stores a key once).
    assert!(
        again.header("x-envoy-upstream-service-time").is_some(),
        "a shadowed duplicate is forwarded"
    );
    assert_eq!(intake.hooks().len(), 1);
    let counted = shadowed(&shadowing, "duplicate") + shadowed(&shadowing, "pending");
    assert_eq!(counted, 1.0);
    assert_eq!(
        shadowing.stat(r#"ankusa_admissions_total{outcome="admitted"}"#)
            + shadowing.stat(r#"ankusa_admissions_total{outcome="duplicate"}"#),
        0.0,
        "counted once, as shadowed"
    );
}
