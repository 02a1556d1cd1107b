use super::*;
use crate::config::BreakerPolicy;
use crate::node::cas::{ensure_keys, MapStore};
use crate::node::edge_keys::FIXED;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const NOW: u64 = 1_796_000_000_000;

fn store() -> MapStore {
    let s = MapStore::new();
    ensure_keys(&s, FIXED.map(String::from));
    s
}

fn ok(body: &str) -> Result<OverridePage, ListError> {
    parse_page(Some("200"), body.len(), || Some(body.as_bytes().to_vec()))
}

fn one(tenant: &str, rate: u64, burst: u64, expires_at_ms: Option<u64>) -> Override {
    Override {
        tenant: tenant.into(),
        rate: Some(rate),
        burst: Some(burst),
        bytes_rate: None,
        bytes_burst: None,
        shadow: None,
        expires_at_ms,
        version: NOW,
    }
}

fn polled(list: Vec<Override>) -> Polled {
    Polled {
        overrides: list,
        cut: 0,
    }
}

#[test]
fn a_page_is_read_and_checked() {
    let p = ok(r#"{"epoch":"e1","version":7,"more":true,"total":3,
                   "overrides":[{"tenant":"zed","shadow":true,"version":2},
                                {"tenant":"acme","rate":5,"burst":10,"expires_at_ms":9,"version":1}],
                   "deleted":["gone"]}"#)
    .unwrap();
    assert_eq!(
        (p.epoch.as_str(), p.version, p.more, p.gap, p.total),
        ("e1", 7, true, false, 3)
    );
    assert_eq!(p.overrides[1], one("acme", 5, 10, Some(9)).with_version(1));
    assert_eq!(p.overrides[0].tenant, "zed");
    assert_eq!(p.deleted, ["gone"]);
    let gap = ok(r#"{"epoch":"e1","version":9,"gap":true,"overrides":[]}"#).unwrap();
    assert!(gap.gap && gap.overrides.is_empty());
}

trait WithVersion {
    fn with_version(self, v: u64) -> Self;
}

impl WithVersion for Override {
    fn with_version(mut self, v: u64) -> Self {
        self.version = v;
        self
    }
}

#[test]
fn a_failed_or_bad_answer_is_refused_with_a_clear_error() {
    let never =
        || -> Option<Vec<u8>> { panic!("an answer refused by its status or size is not read") };
    assert_eq!(parse_page(None, 0, never), Err(ListError::NoStatus));
    let e = parse_page(Some("401"), 10, never).unwrap_err();
    assert_eq!(e.to_string(), "the store answered 401 to the override list");
    assert_eq!(
        parse_page(Some("503"), 10, never),
        Err(ListError::Status("503".into()))
    );
    let e = parse_page(Some("200"), MAX_LIST_BYTES + 1, never).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "the override list is {} bytes, over the limit of {MAX_LIST_BYTES}",
            MAX_LIST_BYTES + 1
        )
    );
    assert!(matches!(
        ok("this is not json"),
        Err(ListError::Unparsable(_))
    ));
    assert!(matches!(
        ok(r#"{"list":[]}"#),
        Err(ListError::Unparsable(_))
    ));
    assert_eq!(
        parse_page(Some("200"), 0, || None).map(|_| ()),
        Err(ListError::Unparsable(
            "EOF while parsing a value at line 1 column 0".into()
        ))
    );
    let e = ok(
        r#"{"epoch":"e","version":1,"overrides":[{"tenant":"acme","shadow":true,"version":1},
                                 {"tenant":"beta","rate":0,"burst":10,"version":1}]}"#,
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "overrides[1].rate: must be between 1 and 1000000000, got 0"
    );
    let e =
        ok(r#"{"epoch":"e","version":1,"overrides":[{"tenant":"a b","version":1}]}"#).unwrap_err();
    assert_eq!(
        e.to_string(),
        "overrides[0].tenant: \"a b\" is not 1 to 64 characters of [A-Za-z0-9_.-]"
    );
    let e =
        ok(r#"{"epoch":"e","version":1,"overrides":[{"tenant":"a","bytes_rate":5,"version":1}]}"#)
            .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("overrides[0].bytes_burst: is missing"),
        "{e}"
    );
}

#[test]
fn a_deleted_entry_that_is_no_tenant_name_refuses_the_page() {
    let e = ok(r#"{"epoch":"e","version":1,"overrides":[],"deleted":["ok","a b"]}"#).unwrap_err();
    assert_eq!(
        e.to_string(),
        "deleted[1]: \"a b\" is not 1 to 64 characters of [A-Za-z0-9_.-]"
    );
}

#[test]
fn one_poll_per_interval_node_wide_and_none_while_one_is_in_flight() {
    let s = store();
    let due = |in_flight, now_ms| poll_due(&s, in_flight, BreakerPolicy::default(), now_ms);
    assert!(due(false, NOW));
    assert!(
        !due(false, NOW + 10),
        "another worker waits for the interval"
    );
    assert!(
        !due(true, NOW + POLL_INTERVAL_MS),
        "this worker's poll is in flight"
    );
    assert!(due(false, NOW + POLL_INTERVAL_MS));
    // The clock steps back an hour: the lease is stale, polls go on.
    assert!(due(false, NOW - 3_600_000));
}

#[test]
fn no_poll_while_the_breaker_is_open() {
    use crate::fleet::breaker::Breaker;
    use crate::node::edge_keys::BREAKER_KEY;
    let s = store();
    let policy = BreakerPolicy::default();
    let breaker = Breaker::new(&s, BREAKER_KEY, policy);
    let now_us = crate::fleet::breaker::fail_until_open(&breaker, NOW * 1_000);
    assert!(!poll_due(&s, false, policy, now_us / 1_000));
    let after_us = now_us + policy.open_ms * 1_000;
    assert!(
        !poll_due(&s, false, policy, after_us / 1_000),
        "open until a hit probes"
    );
    let permit = breaker.admit_call(after_us);
    breaker.record(after_us, permit, true);
    assert!(
        poll_due(&s, false, policy, after_us / 1_000),
        "the probe closed it: the poll goes"
    );
}

#[test]
fn a_list_is_fresh_for_the_staleness_bound_only() {
    assert!(!is_fresh(0, NOW), "never fetched");
    assert!(is_fresh(NOW, NOW));
    assert!(is_fresh(NOW, NOW + STALE_AFTER_MS - 1));
    assert!(!is_fresh(NOW, NOW + STALE_AFTER_MS));
    assert!(
        is_fresh(NOW + 5, NOW),
        "another worker's clock a moment ahead"
    );
    assert!(
        !is_fresh(NOW + 3_600_000, NOW),
        "stamped by a clock that stepped back"
    );
}

#[test]
fn the_override_in_force_is_found_until_it_expires_or_the_list_goes_stale() {
    let s = store();
    assert_eq!(lookup(&s, "acme", NOW), None, "nothing polled yet");
    let list = vec![
        one("acme", 1, 5, Some(NOW + 2_000)),
        one("beta", 2, 6, None),
    ];
    assert!(store_list(&s, &polled(list.clone()), NOW));
    assert_eq!(lookup(&s, "acme", NOW + 1_999), Some(list[0].clone()));
    assert_eq!(lookup(&s, "acme", NOW + 2_000), None, "expired");
    assert_eq!(lookup(&s, "gamma", NOW), None, "no override for it");
    assert_eq!(
        lookup(&s, "beta", NOW + STALE_AFTER_MS - 1),
        Some(list[1].clone())
    );
    assert_eq!(lookup(&s, "beta", NOW + STALE_AFTER_MS), None, "stale");
    // The same list polled again refreshes the stamp alone.
    assert!(!store_list(&s, &polled(list.clone()), NOW + 5_000));
    assert_eq!(
        lookup(&s, "beta", NOW + STALE_AFTER_MS),
        Some(list[1].clone())
    );
    // Deleted on the store: an empty list applies the configuration.
    assert!(store_list(&s, &polled(vec![]), NOW + 6_000));
    assert_eq!(lookup(&s, "beta", NOW + 6_000), None);
}

#[test]
fn requota_replaces_each_charge_with_the_effective_quota() {
    use crate::config::Limits;
    use crate::limit::gcra::Quota;
    use crate::wire::ChargeKind;
    let hooks = Quota {
        rate: 100,
        burst: 200,
    }
    .charge(ChargeKind::Hooks, "acme", 1)
    .unwrap()
    .unwrap();
    let bytes = Quota {
        rate: 1000,
        burst: 5000,
    }
    .charge(ChargeKind::Bytes, "acme", 300)
    .unwrap()
    .unwrap();
    let lowered = Limits {
        hooks: Quota { rate: 1, burst: 2 },
        bytes: Some(Quota {
            rate: 10,
            burst: 400,
        }),
    };
    let out = crate::fleet::overrides::requota(&[hooks.clone(), bytes.clone()], &lowered);
    assert_eq!((out[0].rate, out[0].burst, out[0].units), (1, 2, 1));
    assert_eq!((out[1].rate, out[1].burst, out[1].units), (10, 400, 300));
    let no_bytes = Limits {
        bytes: None,
        ..lowered
    };
    assert_eq!(
        crate::fleet::overrides::requota(&[hooks, bytes], &no_bytes).len(),
        1
    );
}

#[test]
fn a_changed_list_is_read_again_whatever_this_worker_parsed_before() {
    let s = store();
    store_list(&s, &polled(vec![one("acme", 1, 5, None)]), NOW);
    assert_eq!(lookup(&s, "acme", NOW).and_then(|o| o.burst), Some(5));
    store_list(&s, &polled(vec![one("acme", 1, 7, None)]), NOW + 1_000);
    assert_eq!(
        lookup(&s, "acme", NOW + 1_000).and_then(|o| o.burst),
        Some(7)
    );
    // Another node's store with the first list: same bytes, same answer.
    let other = store();
    store_list(&other, &polled(vec![one("acme", 1, 5, None)]), NOW);
    assert_eq!(lookup(&other, "acme", NOW).and_then(|o| o.burst), Some(5));
}
