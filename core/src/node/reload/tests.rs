use super::*;
use crate::node::cas::{ensure_keys, MapStore};
use crate::node::node_buckets::NodeVerdict;
use crate::wire::ChargeKind;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn a_changed_added_or_removed_tenant_limit_is_a_change() {
    let old = map(&[
        ("*", "50/100;-"),
        ("acme", "500/1000;-"),
        ("gone", "1/1;-"),
        ("same", "2/2;-"),
    ]);
    let new = map(&[
        ("*", "60/100;-"),
        ("acme", "400/1000;-"),
        ("same", "2/2;-"),
        ("new", "5/5;-"),
    ]);
    assert_eq!(changed_tenants(&old, &new), ["acme", "gone", "new"]);
}

#[test]
fn a_tenant_moved_to_the_default_it_already_had_is_no_change() {
    let old = map(&[("*", "50/100;-"), ("acme", "50/100;-")]);
    let new = map(&[("*", "50/100;-")]);
    assert!(changed_tenants(&old, &new).is_empty());
}

#[test]
fn fingerprints_include_the_bytes_quota() {
    let config = Config::parse(
        br#"{"sources":{"gh":{"dedupe":"github"}},
             "rate_limits":{"default":{"rate":1,"burst":2,"bytes_rate":3,"bytes_burst":4}}}"#,
    )
    .unwrap();
    assert_eq!(limits_map(&config)["*"], "1/2;3/4");
}

fn config(scope: &str, acme_burst: u64) -> Config {
    let json = format!(
        r#"{{"sources":{{"gh":{{"dedupe":"github"}}}},
            "rate_limits":{{"scope":"{scope}","default":{{"rate":1,"burst":1}},
                           "tenants":{{"acme":{{"rate":1,"burst":{acme_burst}}}}}}}}}"#
    );
    Config::parse(json.as_bytes()).unwrap()
}

fn store() -> MapStore {
    let store = MapStore::new();
    let buckets = NodeBuckets::new(&store, BUCKET_PREFIX, BUCKET_SLOTS);
    ensure_keys(&store, buckets.keys().chain([LIMITS_KEY.into()]));
    store
}

#[test]
fn a_reload_that_changes_a_limit_resets_that_tenants_node_bucket_once() {
    let store = store();
    assert!(
        note_limit_changes(&store, &config("node", 1)).is_empty(),
        "first load"
    );
    let buckets = NodeBuckets::new(&store, BUCKET_PREFIX, BUCKET_SLOTS);
    let charge = crate::limit::gcra::Quota { rate: 1, burst: 1 }
        .charge(ChargeKind::Hooks, "acme", 1)
        .unwrap()
        .unwrap();
    let charges = [charge];
    assert_eq!(
        buckets.charge("acme", 1_000_000, &charges),
        NodeVerdict::Admit
    );
    assert!(matches!(
        buckets.charge("acme", 1_000_000, &charges),
        NodeVerdict::RateLimited { .. }
    ));
    assert!(
        note_limit_changes(&store, &config("node", 1)).is_empty(),
        "same limits"
    );
    assert_eq!(note_limit_changes(&store, &config("node", 5)), ["acme"]);
    assert_eq!(
        buckets.charge("acme", 1_000_000, &charges),
        NodeVerdict::Admit,
        "reset"
    );
    assert!(
        note_limit_changes(&store, &config("node", 5)).is_empty(),
        "the other workers see no change"
    );
}
