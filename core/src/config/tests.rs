use super::*;
use crate::limit::limits::MAX_SETTLE_OPS;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const MINIMAL: &str = r#"{"sources": {"gh": {"tenant": "acme", "dedupe": "github"}},
                          "rate_limits": {"default": {"rate": 50, "burst": 100}}}"#;

fn minimal() -> Config {
    Config::parse(MINIMAL.as_bytes()).unwrap()
}

fn err(config: &Config) -> String {
    config.validate().unwrap_err().to_string()
}

#[test]
fn missing_optionals_take_their_defaults() {
    let c = minimal();
    assert_eq!(c.node, None);
    assert_eq!(c.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
    assert_eq!(c.rate_limits.scope, Scope::Node);
    assert_eq!(c.dedupe.scope, Scope::Node);
    assert_eq!(c.fleet, FleetConfig::default());
    assert_eq!(c.sources["gh"].ttl_ms, DEFAULT_TTL_MS);
    assert!(!c.uses_store());
}

#[test]
fn display_is_field_then_message() {
    assert_eq!(
        ConfigError::new("fleet.timeout_ms", "must be ...").to_string(),
        "fleet.timeout_ms: must be ..."
    );
}

#[test]
fn for_tenant_falls_back_to_the_default() {
    let mut c = minimal();
    let acme = Limits {
        hooks: Quota {
            rate: 500,
            burst: 1000,
        },
        bytes: None,
    };
    c.rate_limits.tenants.insert("acme".into(), acme);
    assert_eq!(c.rate_limits.for_tenant("acme"), &acme);
    assert_eq!(c.rate_limits.for_tenant("globex"), &c.rate_limits.default);
}

#[test]
fn scope_spelling_matches_the_json() {
    assert_eq!(
        (Scope::Node.as_str(), Scope::Fleet.as_str()),
        ("node", "fleet")
    );
}

#[test]
fn breaker_policy_refuses_rates_outside_zero_to_one() {
    assert_eq!(BreakerPolicy::default().validate(), Ok(()));
    for bad in [0.0, -0.1, 1.01, f64::NAN] {
        let p = BreakerPolicy {
            failure_rate: bad,
            ..BreakerPolicy::default()
        };
        assert_eq!(
            p.validate().unwrap_err().field,
            "fleet.breaker_failure_rate",
            "{bad}"
        );
    }
    let p = BreakerPolicy {
        failure_rate: 1.0,
        ..BreakerPolicy::default()
    };
    assert_eq!(p.validate(), Ok(()));
}

#[test]
fn breaker_policy_needs_positive_counts_and_durations() {
    let base = BreakerPolicy::default();
    let cases = [
        (
            BreakerPolicy {
                min_calls: 0,
                ..base
            },
            "fleet.breaker_min_calls: must be at least 1, got 0",
        ),
        (
            BreakerPolicy {
                window_ms: 0,
                ..base
            },
            "fleet.breaker_window_ms: must be between 1 and 86400000, got 0",
        ),
        (
            BreakerPolicy { open_ms: 0, ..base },
            "fleet.breaker_open_ms: must be between 1 and 86400000, got 0",
        ),
    ];
    for (policy, message) in cases {
        assert_eq!(policy.validate().unwrap_err().to_string(), message);
    }
}

#[test]
fn fleet_ranges_are_checked() {
    let ok = FleetConfig::default();
    assert_eq!(ok.validate(), Ok(()));
    let mut f = ok.clone();
    f.timeout_ms = MAX_TIMEOUT_MS + 1;
    assert_eq!(
        f.validate().unwrap_err().to_string(),
        "fleet.timeout_ms: must be between 1 and 10000, got 10001"
    );
    let mut f = ok.clone();
    f.settle_batch_max = MAX_SETTLE_OPS;
    assert_eq!(f.validate(), Ok(()));
    f.settle_batch_max = MAX_SETTLE_OPS + 1;
    assert_eq!(f.validate().unwrap_err().field, "fleet.settle_batch_max");
    let mut f = ok;
    f.settle_queue_max = 0;
    assert_eq!(
        f.validate().unwrap_err().to_string(),
        "fleet.settle_queue_max: must be at least 1, got 0"
    );
}

#[test]
fn ids_are_path_segments() {
    assert!(is_valid_id("acme_Corp-2"));
    assert!(is_valid_id(&"a".repeat(MAX_ID_LEN)));
    for bad in [
        "",
        "a.b",
        "..",
        "a/b",
        "ac me",
        "é",
        &"a".repeat(MAX_ID_LEN + 1),
    ] {
        assert!(!is_valid_id(bad), "{bad:?}");
    }
}

#[test]
fn a_fleet_scope_needs_a_cluster_but_a_node_scope_does_not() {
    let mut c = minimal();
    c.fleet.cluster.clear();
    assert_eq!(c.validate(), Ok(()));
    c.dedupe.scope = Scope::Fleet;
    assert_eq!(
        err(&c),
        "fleet.cluster: must not be empty when dedupe.scope is \"fleet\""
    );
    c.rate_limits.scope = Scope::Fleet;
    assert_eq!(
        err(&c),
        "fleet.cluster: must not be empty when rate_limits.scope is \"fleet\""
    );
}

#[test]
fn validate_names_the_tenant_and_the_value() {
    let mut c = minimal();
    let zero_burst = Limits {
        hooks: Quota { rate: 5, burst: 0 },
        bytes: None,
    };
    c.rate_limits.tenants.insert("acme".into(), zero_burst);
    assert_eq!(
        err(&c),
        "rate_limits.tenants.acme.burst: must be between 1 and 4294967296, got 0"
    );
    let mut c = minimal();
    c.rate_limits.default.bytes = Some(Quota { rate: 0, burst: 10 });
    assert_eq!(
        err(&c),
        "rate_limits.default.bytes_rate: must be between 1 and 1000000000, got 0"
    );
}

#[test]
fn validate_checks_sources_and_node() {
    let mut c = minimal();
    c.node = Some("edge 1".into());
    assert_eq!(
        err(&c),
        "node: \"edge 1\" is not 1 to 64 characters of [A-Za-z0-9_.-]"
    );
    c.node = Some("edge-1.eu".into());
    assert_eq!(c.validate(), Ok(()));
    c.sources.get_mut("gh").unwrap().ttl_ms = 0;
    assert_eq!(
        err(&c),
        "sources.gh.ttl_ms: must be between 1 and 2592000000, got 0"
    );
    c.sources.clear();
    assert_eq!(err(&c), "sources: must name at least one source");
}

fn parse_err(json: &str) -> String {
    Config::parse(json.as_bytes()).unwrap_err().to_string()
}

#[test]
fn only_an_edge_with_a_store_polls_the_override_list() {
    let node = r#"{"sources": {"gh": {}}, "rate_limits": {"default": {"rate": 1, "burst": 1}}}"#;
    assert!(!Config::parse(node.as_bytes()).unwrap().polls_overrides());
    let with_fleet = r#"{"sources": {"gh": {}}, "rate_limits": {"default": {"rate": 1, "burst": 1}},
                         "fleet": {"timeout_ms": 100}}"#;
    assert!(Config::parse(with_fleet.as_bytes())
        .unwrap()
        .polls_overrides());
    let mut c = minimal();
    c.rate_limits.scope = Scope::Fleet;
    assert!(
        c.polls_overrides(),
        "a fleet scope has a store, section or not"
    );
}

#[test]
fn a_fleet_scope_uses_the_store() {
    let mut c = minimal();
    c.rate_limits.scope = Scope::Fleet;
    assert!(c.uses_store());
    c.rate_limits.scope = Scope::Node;
    c.dedupe.scope = Scope::Fleet;
    assert!(c.uses_store());
}

// The fixtures in tests/fixtures/config pin every message natively; these
// few run in wasm too, where the filter parses its config.
#[test]
fn parse_refusals_name_the_path_and_value() {
    assert_eq!(
        parse_err("not json"),
        "config: not valid JSON: expected ident at line 1 column 2"
    );
    assert_eq!(parse_err("5"), "config: expected a JSON object, got 5");
    assert_eq!(
        parse_err("{}"),
        "sources: is required: name at least one source"
    );
    let unknown = r#"{"sources": {"gh": {}}, "rate_limits": {"defualt": {}}}"#;
    assert_eq!(
        parse_err(unknown),
        "rate_limits.defualt: unknown field; expected one of scope, default, tenants, headers"
    );
    let scope = r#"{"sources": {"gh": {}}, "rate_limits": {"scope": "Fleet", "default": {"rate": 1, "burst": 1}}}"#;
    assert_eq!(
        parse_err(scope),
        "rate_limits.scope: unknown scope \"Fleet\"; expected \"node\" or \"fleet\""
    );
    let zero = r#"{"sources": {"gh": {}}, "rate_limits": {"default": {"rate": 1, "burst": 0}}}"#;
    assert_eq!(
        parse_err(zero),
        "rate_limits.default.burst: must be between 1 and 4294967296, got 0"
    );
}

#[test]
fn parse_reads_scopes_and_rules() {
    let json = r#"{"sources": {"s": {"dedupe": {"json": "data.id"}}},
                   "rate_limits": {"scope": "fleet", "default": {"rate": 1, "burst": 1}},
                   "dedupe": {"scope": "node"}}"#;
    let c = Config::parse(json.as_bytes()).unwrap();
    assert_eq!(
        (c.rate_limits.scope, c.dedupe.scope),
        (Scope::Fleet, Scope::Node)
    );
    assert_eq!(c.sources["s"].dedupe, DedupeRule::json_path("data.id").ok());
    assert_eq!(c.sources["s"].tenant, None);
}
