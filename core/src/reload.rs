//! A reload that changes a tenant's limits.
//!
//! Every root context of the filter runs `on_configure` on a reload; the first to see new
//! limits (by compare-and-swap on the last configuration's limits) resets the
//! changed tenants' node buckets.
//!
//! The store's fleet buckets are not reset: an edge token may not reset
//! (`/v1/reset` is an operator's), and nothing needs it. A fleet bucket holds
//! a level in units, and every hit carries the quota it is charged against,
//! so a new limit holds from the next hit: a raised burst has its room at
//! once, a lowered one finds a fuller bucket full and drains it at the new rate.

use crate::cas::CasStore;
use crate::config::{Config, Limits};
use crate::edge_keys::{BUCKET_PREFIX, BUCKET_SLOTS, LIMITS_KEY};
use crate::node_buckets::NodeBuckets;
use std::collections::BTreeMap;

/// A tenant's limits in a form two configurations compare by.
fn fingerprint(limits: &Limits) -> String {
    let bytes = limits
        .bytes
        .map_or(String::from("-"), |b| format!("{}/{}", b.rate, b.burst));
    format!("{}/{};{bytes}", limits.hooks.rate, limits.hooks.burst)
}

/// Every configured tenant's limits, plus the default under "*".
pub fn limits_map(config: &Config) -> BTreeMap<String, String> {
    let mut map: BTreeMap<String, String> = config
        .rate_limits
        .tenants
        .iter()
        .map(|(t, l)| (t.clone(), fingerprint(l)))
        .collect();
    map.insert("*".to_string(), fingerprint(&config.rate_limits.default));
    map
}

/// Tenants whose effective limit differs between two limit maps. A change to
/// the default ("*") concerns tenants nobody configured; their buckets
/// converge within one burst period, so it resets nothing.
pub fn changed_tenants(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> Vec<String> {
    let effective =
        |map: &BTreeMap<String, String>, t: &str| map.get(t).or_else(|| map.get("*")).cloned();
    let mut tenants: Vec<String> = old
        .keys()
        .chain(new.keys())
        .filter(|t| t.as_str() != "*")
        .filter(|t| effective(old, t) != effective(new, t))
        .cloned()
        .collect();
    tenants.sort();
    tenants.dedup();
    tenants
}

/// On a reload, the first root context to see new limits resets the changed
/// tenants' node buckets; the tenants it reset.
pub fn note_limit_changes<S: CasStore>(store: &S, config: &Config) -> Vec<String> {
    let new = limits_map(config);
    let Ok(new_bytes) = serde_json::to_vec(&new) else {
        return Vec::new();
    };
    let (old_bytes, version) = store.get(LIMITS_KEY);
    if old_bytes == new_bytes || !store.compare_and_set(LIMITS_KEY, &new_bytes, version) {
        return Vec::new();
    }
    let Ok(old) = serde_json::from_slice::<BTreeMap<String, String>>(&old_bytes) else {
        return Vec::new(); // first configuration on this node: nothing to reset
    };
    let tenants = changed_tenants(&old, &new);
    let buckets = NodeBuckets::new(store, BUCKET_PREFIX, BUCKET_SLOTS);
    for t in &tenants {
        buckets.reset(t);
    }
    tenants
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cas::{ensure_keys, MapStore};
    use crate::node_buckets::NodeVerdict;
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
        let charge = crate::gcra::Quota { rate: 1, burst: 1 }
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
}
