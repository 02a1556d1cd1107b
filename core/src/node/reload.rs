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

use crate::config::{Config, Limits};
use crate::node::cas::CasStore;
use crate::node::edge_keys::{BUCKET_PREFIX, BUCKET_SLOTS, LIMITS_KEY};
use crate::node::node_buckets::NodeBuckets;
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
mod tests;
