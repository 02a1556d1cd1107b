use super::*;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const NOW: u64 = 1_700_000_000_000;

fn request(json: &str) -> OverrideRequest {
    serde_json::from_str(json).unwrap()
}

fn config() -> Limits {
    Limits {
        hooks: Quota {
            rate: 100,
            burst: 200,
        },
        bytes: Some(Quota {
            rate: 1000,
            burst: 5000,
        }),
    }
}

#[test]
fn a_ttl_becomes_an_absolute_expiry_and_the_version_is_now() {
    let o = request(r#"{"rate": 5, "burst": 10, "ttl_ms": 60000}"#)
        .into_override("acme", NOW)
        .unwrap();
    assert_eq!(o.hooks(), Some(Quota { rate: 5, burst: 10 }));
    assert_eq!(o.bytes(), None);
    assert_eq!(o.expires_at_ms, Some(NOW + 60_000));
    assert_eq!(o.version, NOW);
}

#[test]
fn bad_input_names_the_field_and_the_value() {
    let err = |json: &str| {
        request(json)
            .into_override("acme", NOW)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(r#"{"rate": 0, "burst": 10}"#),
        "rate: must be between 1 and 1000000000, got 0"
    );
    assert_eq!(
        err(r#"{"rate": 1, "burst": 4294967297}"#),
        "burst: must be between 1 and 4294967296, got 4294967297"
    );
    assert_eq!(
        err(r#"{"bytes_rate": 10}"#),
        "bytes_burst: is missing: bytes_rate and bytes_burst are set together"
    );
    assert_eq!(
        err(r#"{"burst": 10}"#),
        "rate: is missing: rate and burst are set together"
    );
    assert!(err(r#"{"ttl_ms": 10}"#).starts_with("override: sets nothing"));
    assert_eq!(
        err(r#"{"shadow": true, "ttl_ms": 0}"#),
        "ttl_ms: must be between 1 and 2592000000, got 0"
    );
    assert_eq!(
        err(&format!(r#"{{"shadow": true, "expires_at_ms": {NOW}}}"#)),
        format!("expires_at_ms: {NOW} is not after now ({NOW})")
    );
    assert!(err(r#"{"shadow": true, "ttl_ms": 5, "expires_at_ms": 9}"#).starts_with("ttl_ms:"));
    let e = request(r#"{"shadow": true}"#)
        .into_override("no spaces", NOW)
        .unwrap_err();
    assert_eq!(e.field, "tenant");
    assert!(serde_json::from_str::<OverrideRequest>(r#"{"rates": 1}"#).is_err());
}

#[test]
fn an_override_in_force_replaces_what_it_names() {
    let o = request(r#"{"rate": 5, "burst": 10, "shadow": true, "ttl_ms": 1000}"#)
        .into_override("acme", NOW)
        .unwrap();
    let e = effective(&config(), Shadow::default(), Some(&o), NOW + 999);
    assert_eq!(e.limits.hooks, Quota { rate: 5, burst: 10 });
    assert_eq!(e.limits.bytes, config().bytes);
    assert!(e.shadow.rate_limit);
    assert_eq!(e.version, Some(NOW));
}

#[test]
fn an_expired_or_absent_override_falls_back_to_the_configuration() {
    let o = request(r#"{"rate": 5, "burst": 10, "ttl_ms": 1000}"#)
        .into_override("acme", NOW)
        .unwrap();
    let shadow = Shadow::from_bool(true);
    for e in [
        effective(&config(), shadow, Some(&o), NOW + 1000),
        effective(&config(), shadow, None, NOW),
    ] {
        assert_eq!(e.limits, config());
        assert_eq!(e.shadow, shadow);
        assert_eq!(e.version, None);
    }
}

#[test]
fn an_override_without_expiry_stays_in_force_and_round_trips() {
    let o = request(r#"{"bytes_rate": 7, "bytes_burst": 70, "shadow": {"dedupe": true}}"#)
        .into_override("acme", NOW)
        .unwrap();
    assert!(o.in_force(u64::MAX));
    let text = serde_json::to_string(&o).unwrap();
    assert!(!text.contains("expires_at_ms"), "{text}");
    assert_eq!(serde_json::from_str::<Override>(&text).unwrap(), o);
    let e = effective(&config(), Shadow::default(), Some(&o), NOW);
    assert_eq!(e.limits.hooks, config().hooks);
    assert_eq!(e.limits.bytes, Some(Quota { rate: 7, burst: 70 }));
    assert!(e.shadow.dedupe && !e.shadow.rate_limit);
}

#[test]
fn an_override_is_for_a_tenant_an_edge_can_route() {
    assert_eq!(check_tenant("acme_Corp-2"), Ok(()));
    for bad in ["", "a.b", "no*star", &"a".repeat(65)] {
        let e = check_tenant(bad).unwrap_err();
        assert_eq!(e.field, "tenant", "{bad:?}");
        assert!(
            e.to_string().ends_with("characters of [A-Za-z0-9_-]"),
            "{e}"
        );
    }
}
