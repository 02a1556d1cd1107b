//! A reload of the plugin configuration in a running Envoy (file-based LDS):
//! a changed tenant limit resets that tenant's node buckets at once (its
//! fleet buckets hold the new limit from the next hit, with no store reset:
//! that is an operator's call); unchanged tenants keep theirs; a bad
//! configuration is refused and the old one keeps serving.

use ankusa_testkit::envoy::{Edge, EdgeSpec, Reload};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use serde_json::{json, Value};
use std::time::Instant;

/// Beta's burst: what a (wrong) reset of its bucket would hand out again;
/// far more than it refills in the seconds a reload takes.
const BETA_BURST: u64 = 40;

/// Node scopes; `acme` (source "gh") with `acme_burst` hooks at 1/s, `beta`
/// (path /webhooks/beta/any) with `BETA_BURST` at 1/s.
fn node_limits(acme_burst: u64) -> Value {
    json!({
        "sources": {
            "gh": {"tenant": "acme", "dedupe": "github"},
            "any": {"dedupe": "github"}
        },
        "rate_limits": {
            "default": {"rate": 1000, "burst": 1000},
            "tenants": {
                "acme": {"rate": 1, "burst": acme_burst},
                "beta": {"rate": 1, "burst": BETA_BURST}
            }
        }
    })
}

/// Acme's burst after the reload: what a reset hands out at once, far more
/// than its old bucket refills (1/s) in the seconds a reload takes.
const NEW_BURST: u64 = 30;

/// Sends distinct hooks to `path` until one is refused 429 (at most `max`);
/// how many were admitted first. Any other answer fails the test.
fn admitted_until_429(edge: &Edge, path: &str, tag: &str, max: u64) -> u64 {
    for i in 0..max {
        let r = deliver(edge, path, &format!("{tag}-{i}-{}", free_port()));
        match r.status {
            201 => {}
            429 => return i,
            s => panic!("{path}: {s} {}\n{}", r.text(), edge.log_tail()),
        }
    }
    panic!(
        "{path}: {max} hooks admitted and no 429\n{}",
        edge.log_tail()
    );
}

#[test]
fn a_node_reload_resets_only_the_changed_tenant_and_a_bad_one_is_refused() {
    let intake = Intake::start();
    let spec = EdgeSpec::new("edge-reload", intake.port, free_port(), node_limits(5));
    let mut edge = Edge::start_lds(spec);

    let acme = admitted_until_429(&edge, "/webhooks/gh", "a0", 10);
    assert!((5..=6).contains(&acme), "acme's burst of 5 admitted {acme}");
    let beta = admitted_until_429(&edge, "/webhooks/beta/any", "b0", BETA_BURST + 5);
    assert!(beta >= BETA_BURST, "beta's burst admitted {beta}");

    let reloaded_at = Instant::now();
    assert_eq!(edge.reload(node_limits(NEW_BURST)), Reload::Accepted);
    assert!(
        edge.log().contains(r#"limits changed for ["acme"]"#),
        "the reset is logged:\n{}",
        edge.log_tail()
    );
    // Left alone, acme's bucket would hold a token a second since it ran dry;
    // reset, it holds the whole new burst.
    let acme = admitted_until_429(&edge, "/webhooks/gh", "a1", NEW_BURST + 10);
    assert!(
        acme >= NEW_BURST,
        "after the reload acme admitted {acme}, not its new burst of {NEW_BURST}"
    );
    let refilled = reloaded_at.elapsed().as_secs() + 2;
    let beta = admitted_until_429(&edge, "/webhooks/beta/any", "b1", BETA_BURST + 5);
    assert!(
        beta <= refilled && beta < BETA_BURST,
        "beta's unchanged limit was reset: {beta} admitted ({refilled} s of refill)"
    );

    // A bad configuration (with a changed acme limit too) is refused whole.
    let mut bad = node_limits(1_000);
    bad["rate_limits"]["tenants"]["beta"]["rate"] = json!(0);
    assert_eq!(edge.reload(bad), Reload::Rejected);
    let log = edge.log();
    let refusal = log
        .lines()
        .find(|l| l.contains("ankusa: configuration refused"))
        .unwrap_or_else(|| panic!("no refusal logged:\n{}", edge.log_tail()));
    assert!(
        refusal.contains("rate_limits.tenants.beta.rate:"),
        "the refusal names the field: {refusal}"
    );
    assert_eq!(
        log.matches("limits changed for").count(),
        1,
        "the refused config reset nothing"
    );
    let r = deliver(&edge, "/webhooks/gh", "after-bad");
    assert_eq!(
        r.status,
        429,
        "acme is still on the old limit: {}",
        r.text()
    );
    let admitted = intake
        .hooks()
        .iter()
        .filter(|h| h["tenant"] == "acme")
        .count() as u64;
    assert!(
        admitted >= 5 + NEW_BURST,
        "intake holds {admitted} acme hooks"
    );
}

#[test]
fn a_fleet_reload_holds_the_new_limit_from_the_next_hit_without_a_store_reset() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let spec = EdgeSpec::new(
        "edge-reload-fleet",
        intake.port,
        store.port,
        fleet_config(5, 5),
    );
    let mut edge = Edge::start_lds(spec);

    let acme = admitted_until_429(&edge, "/webhooks/gh", "f0", 10);
    assert!(
        (5..=6).contains(&acme),
        "acme's fleet burst admitted {acme}"
    );
    let reloaded_at = Instant::now();
    assert_eq!(edge.reload(fleet_config(NEW_BURST, 5)), Reload::Accepted);
    // The store's bucket keeps acme's level (about 5 hooks, draining 1/s);
    // the raised burst holds from the next hit: the rest of it passes now.
    let acme = admitted_until_429(&edge, "/webhooks/gh", "f1", NEW_BURST + 10);
    let refilled = reloaded_at.elapsed().as_secs() + 1;
    assert!(
        acme + 6 >= NEW_BURST && acme <= NEW_BURST - 5 + refilled,
        "after the reload acme admitted {acme} of a new burst of {NEW_BURST} \
         ({refilled} s of refill)"
    );
    // The edge asked the store for nothing an edge token may not do.
    for (name, label) in [
        ("ankusa_store_requests_total", r#"endpoint="reset""#),
        ("ankusa_store_forbidden_total", r#"endpoint="#),
    ] {
        assert_eq!(
            metric_sum(&store.url_of("/metrics"), name, label),
            0.0,
            "{name}{{{label}}}:\n{}",
            edge.log_tail()
        );
    }
}
