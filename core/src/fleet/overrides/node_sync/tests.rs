use super::*;
use crate::fleet::overrides::node_list::lookup;
use crate::node::cas::{decode_u64, ensure_keys, MapStore};
use crate::node::edge_keys::FIXED;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const NOW: u64 = 1_796_000_000_000;

fn store() -> MapStore {
    let s = MapStore::new();
    ensure_keys(&s, FIXED.map(String::from));
    s
}

fn one(tenant: &str, burst: u64, version: u64) -> Override {
    Override {
        tenant: tenant.into(),
        rate: Some(1),
        burst: Some(burst),
        bytes_rate: None,
        bytes_burst: None,
        shadow: None,
        expires_at_ms: None,
        version,
    }
}

fn page(version: u64, more: bool, overrides: Vec<Override>, deleted: &[&str]) -> OverridePage {
    OverridePage {
        epoch: "e1".into(),
        version,
        gap: false,
        more,
        total: overrides.len() as u64,
        overrides,
        deleted: deleted.iter().map(|t| t.to_string()).collect(),
    }
}

fn configured(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|t| t.to_string()).collect()
}

/// One poll: the query the node asks, the store's answer to it, applied.
fn poll(s: &MapStore, answer: impl FnOnce(&ListQuery) -> OverridePage) -> Applied {
    let c = configured(&["acme"]);
    let q = next_query(s, &c);
    let p = answer(&q);
    apply_page(s, &q, p, &c, NOW)
}

fn burst(s: &MapStore, tenant: &str) -> Option<u64> {
    lookup(s, tenant, NOW).and_then(|o| o.burst)
}

#[test]
fn the_whole_list_at_start_then_only_the_changes() {
    let s = store();
    let applied = poll(&s, |q| {
        assert_eq!((q.since, q.epoch.as_deref()), (0, None));
        page(
            3,
            false,
            vec![one("acme", 5, 1), one("beta", 6, 2)],
            &["old"],
        )
    });
    assert!(applied.changed);
    assert_eq!(applied.listed, Some((2, 0)));
    assert_eq!((burst(&s, "acme"), burst(&s, "beta")), (Some(5), Some(6)));
    // A change and a deletion since version 3.
    poll(&s, |q| {
        assert_eq!((q.since, q.epoch.as_deref()), (3, Some("e1")));
        page(5, false, vec![one("acme", 9, 4)], &["beta"])
    });
    assert_eq!((burst(&s, "acme"), burst(&s, "beta")), (Some(9), None));
    // Nothing changed: the list stays, freshly stamped.
    let quiet = poll(&s, |q| {
        assert_eq!(q.since, 5);
        page(5, false, vec![], &[])
    });
    assert!(!quiet.changed);
    assert_eq!(burst(&s, "acme"), Some(9));
}

#[test]
fn a_whole_listing_is_applied_only_with_its_last_page() {
    let s = store();
    poll(&s, |_| {
        page(2, false, vec![one("acme", 5, 1), one("stale", 5, 2)], &[])
    });
    // A gap: the old list stays applied while the whole is read again.
    let gap = poll(&s, |_| OverridePage {
        gap: true,
        ..page(40, false, vec![], &[])
    });
    assert!(gap.gap);
    let (lease, _) = s.get(LIST_LEASE_KEY);
    assert_eq!(decode_u64(&lease), NOW, "the listing starts at once");
    let first = poll(&s, |q| {
        assert_eq!((q.since, q.epoch.as_deref()), (0, None));
        page(30, true, vec![one("acme", 7, 30)], &[])
    });
    assert_eq!(first.listed, None, "not applied yet");
    assert_eq!(burst(&s, "stale"), Some(5));
    assert_eq!(burst(&s, "acme"), Some(5));
    poll(&s, |q| {
        assert_eq!((q.since, q.epoch.as_deref()), (30, Some("e1")));
        page(41, false, vec![one("beta", 3, 41)], &[])
    });
    assert_eq!(
        (burst(&s, "acme"), burst(&s, "beta"), burst(&s, "stale")),
        (Some(7), Some(3), None),
        "the listing replaced the list whole"
    );
}

#[test]
fn another_epoch_or_a_page_already_taken_is_not_applied() {
    let s = store();
    poll(&s, |_| page(2, false, vec![one("acme", 5, 1)], &[]));
    let moved = poll(&s, |_| OverridePage {
        epoch: "e2".into(),
        ..page(9, false, vec![one("acme", 1, 9)], &[])
    });
    assert!(moved.gap, "a Redis that is not the one the node knew");
    assert_eq!(burst(&s, "acme"), Some(5));
    let c = configured(&["acme"]);
    let asked = ListQuery {
        since: 2,
        epoch: Some("e1".into()),
        limit: PAGE_MAX,
    };
    let late = apply_page(
        &s,
        &asked,
        page(3, false, vec![one("acme", 1, 3)], &[]),
        &c,
        NOW,
    );
    assert!(late.stale);
    assert_eq!(burst(&s, "acme"), Some(5));
}

#[test]
fn crowding_overrides_named_to_sort_first_do_not_push_a_configured_tenant_off() {
    let s = store();
    let mut crowd: Vec<Override> = (0..MAX_OVERRIDES + 500)
        .map(|i| one(&format!("aaa{i:05}"), 1, 100 + i as u64))
        .collect();
    crowd.push(one("acme", 5, 1));
    crowd.push(one("zz-old", 5, 2));
    let applied = poll(&s, |_| page(9_000, false, crowd, &[]));
    assert_eq!(burst(&s, "acme"), Some(5), "configured: kept first");
    assert_eq!(burst(&s, "zz-old"), None, "the oldest change left out");
    assert_eq!(burst(&s, "aaa00000"), None);
    assert_eq!(burst(&s, "aaa01499"), Some(1), "the newest kept");
    assert_eq!(applied.cut.len(), 502);
    assert_eq!(applied.cut[0], "aaa00500");
    assert_eq!(applied.cut.last().map(String::as_str), Some("zz-old"));
    assert_eq!(applied.listed, Some((MAX_OVERRIDES, 502)));
    assert_eq!(
        describe_cut(&applied.cut),
        "aaa00500, aaa00499, aaa00498, aaa00497, aaa00496, aaa00495, aaa00494, \
         aaa00493, aaa00492, aaa00491 and 492 more"
    );
    // A newer change pushes out the oldest kept, and is counted.
    let pushed = poll(&s, |_| page(9_001, false, vec![one("new", 2, 9_001)], &[]));
    assert_eq!(pushed.cut, ["aaa00501"]);
    assert_eq!(burst(&s, "new"), Some(2));
}

#[test]
fn select_drops_the_expired_without_counting_them() {
    let expired = Override {
        expires_at_ms: Some(NOW),
        ..one("gone", 1, 9)
    };
    let (kept, cut) = select(
        vec![expired, one("b", 1, 1), one("a", 1, 1), one("c", 1, 2)],
        &configured(&[]),
        NOW,
        2,
    );
    let names: Vec<&str> = kept.iter().map(|o| o.tenant.as_str()).collect();
    assert_eq!(names, ["a", "c"], "newest first, then by name; kept sorted");
    assert_eq!(cut, ["b"]);
    assert_eq!(describe_cut(&cut), "b");
}

#[test]
fn a_configuration_that_names_other_tenants_lists_the_whole_again() {
    let s = store();
    poll(&s, |_| page(2, false, vec![one("acme", 5, 1)], &[]));
    let q = next_query(&s, &configured(&["acme", "beta"]));
    assert_eq!((q.since, q.epoch), (0, None));
}

#[test]
fn configured_tenants_are_the_sources_and_the_limits_tenants() {
    let config = Config::parse(
        br#"{"sources":{"gh":{"tenant":"acme"},"st":{"tenant":"gamma"}},
            "rate_limits":{"default":{"rate":1,"burst":1},"tenants":{"beta":{"rate":2,"burst":2}}}}"#,
    )
    .unwrap();
    assert_eq!(
        configured_tenants(&config),
        configured(&["acme", "beta", "gamma"])
    );
}

#[test]
fn a_store_from_before_the_change_log_is_read_whole_every_poll() {
    let s = store();
    let old = |overrides: Vec<Override>| OverridePage {
        epoch: String::new(),
        version: 0,
        ..page(0, false, overrides, &[])
    };
    poll(&s, |_| old(vec![one("acme", 5, 1), one("beta", 6, 1)]));
    assert_eq!(burst(&s, "beta"), Some(6));
    poll(&s, |q| {
        assert_eq!(q.since, 0);
        old(vec![one("acme", 5, 1)])
    });
    assert_eq!(
        (burst(&s, "acme"), burst(&s, "beta")),
        (Some(5), None),
        "a tenant gone from the whole list is gone"
    );
}
