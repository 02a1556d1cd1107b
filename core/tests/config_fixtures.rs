//! One fixture per way a plugin config can be refused, each with the exact
//! message the operator sees, plus the good configs that must load.
//! Every file in `fixtures/config/` must be listed here, so none goes unchecked.
#![cfg(not(target_arch = "wasm32"))]

use ankusa_core::config::{Config, Scope};
use ankusa_core::hook::event_key::DedupeRule;
use ankusa_core::limit::gcra::Quota;
use ankusa_core::verify::rule::Secrets;
use std::collections::BTreeSet;
use std::path::PathBuf;

const PRESETS_HINT: &str =
    "expected one of github, standard_webhooks, svix, shopify, stripe, or {\"header\": NAME} or {\"json\": PATH}";

/// (fixture file stem, exact `ConfigError` Display).
const REFUSED: &[(&str, &str)] = &[
    // Shape: unknown keys, missing sections, wrong JSON types.
    ("misspelled_key", "rate_limits.defualt: unknown field; expected one of scope, default, tenants, headers"),
    (
        "unknown_top_level_key",
        "routing: unknown field; expected one of node, sources, rate_limits, dedupe, fleet, max_body_bytes",
    ),
    ("unknown_source_key", "sources.gh.tenat: unknown field; expected one of tenant, dedupe, ttl_ms, verify"),
    (
        "unknown_fleet_key",
        "fleet.breaker_failure_ratio: unknown field; expected one of cluster, authority, timeout_ms, \
         pending_ttl_ms, breaker_failure_rate, breaker_min_calls, breaker_window_ms, breaker_open_ms, \
         settle_interval_ms, settle_queue_max, settle_batch_max, settle_retries, nodes, degraded_share, connection, store",
    ),
    ("unknown_dedupe_rule_key", "sources.gh.dedupe.jsonpath: unknown field; expected one of header, json"),
    ("missing_sources", "sources: is required: name at least one source"),
    ("no_sources", "sources: must name at least one source"),
    ("source_not_an_object", "sources.gh: expected an object, got \"github\""),
    (
        "missing_rate_limits",
        "rate_limits: is required: give at least {\"default\": {\"rate\": N, \"burst\": N}}",
    ),
    ("missing_default_limits", "rate_limits.default: is required: {\"rate\": N, \"burst\": N}"),
    ("empty_default_limits", "rate_limits.default.rate: is required, with burst"),
    ("wrong_type", "rate_limits.default.rate: expected a whole number, got \"50\""),
    ("negative_rate", "rate_limits.default.rate: expected a whole number, got -1"),
    ("fractional_timeout", "fleet.timeout_ms: expected a whole number, got 2.5"),
    ("breaker_rate_not_a_number", "fleet.breaker_failure_rate: expected a number, got \"50%\""),
    ("section_wrong_type", "fleet: expected an object, got []"),
    ("tenant_wrong_type", "sources.gh.tenant: expected a string, got 5"),
    // Not JSON at all.
    ("not_json", "config: not valid JSON: expected value at line 1 column 1"),
    ("truncated_json", "config: not valid JSON: EOF while parsing an object at line 2 column 0"),
    ("empty", "config: not valid JSON: EOF while parsing a value at line 1 column 0"),
    ("not_an_object", "config: expected a JSON object, got [\"gh\"]"),
    // Shadow mode and rate-limit headers.
    (
        "shadow_wrong_type",
        "rate_limits.default.shadow: expected true, false or {\"rate_limit\": bool, \"dedupe\": bool}, got \"yes\"",
    ),
    (
        "shadow_unknown_key",
        "rate_limits.tenants.acme.shadow.rate_limits: unknown field; expected one of rate_limit, dedupe",
    ),
    ("shadow_part_wrong_type", "rate_limits.tenants.acme.shadow.dedupe: expected true or false, got 1"),
    (
        "unknown_headers",
        "rate_limits.headers: unknown headers \"x-legacy\"; expected \"ietf\", \"legacy\", \"both\" or \"none\"",
    ),
    ("headers_wrong_type", "rate_limits.headers: expected a string, got true"),
    // Rate limits.
    ("zero_rate", "rate_limits.default.rate: must be between 1 and 1000000000, got 0"),
    ("zero_burst_for_tenant", "rate_limits.tenants.acme.burst: must be between 1 and 4294967296, got 0"),
    ("zero_bytes_burst", "rate_limits.default.bytes_burst: must be between 1 and 4294967296, got 0"),
    // The upper bounds, the same the store checks on the wire (core/src/limit/limits.rs).
    ("rate_too_large", "rate_limits.default.rate: must be between 1 and 1000000000, got 1000000001"),
    (
        "burst_too_large_for_tenant",
        "rate_limits.tenants.acme.burst: must be between 1 and 4294967296, got 4294967297",
    ),
    (
        "bytes_rate_too_large",
        "rate_limits.default.bytes_rate: must be between 1 and 1000000000, got 1000000001",
    ),
    (
        "bytes_burst_too_large",
        "rate_limits.default.bytes_burst: must be between 1 and 4294967296, got 9007199254740993",
    ),
    ("ttl_ms_too_large", "sources.gh.ttl_ms: must be between 1 and 2592000000, got 9007199254740991"),
    ("pending_ttl_ms_too_large", "fleet.pending_ttl_ms: must be between 1 and 86400000, got 86400001"),
    ("breaker_window_ms_too_large", "fleet.breaker_window_ms: must be between 1 and 86400000, got 86400001"),
    ("breaker_open_ms_too_large", "fleet.breaker_open_ms: must be between 1 and 86400000, got 86400001"),
    ("settle_interval_ms_too_large", "fleet.settle_interval_ms: must be between 1 and 60000, got 60001"),
    (
        "bytes_rate_without_burst",
        "rate_limits.default.bytes_burst: is missing but bytes_rate is set (1048576); give both or neither",
    ),
    (
        "bytes_burst_without_rate",
        "rate_limits.tenants.acme.bytes_rate: is missing but bytes_burst is set (4096); give both or neither",
    ),
    (
        "burst_without_rate",
        "rate_limits.default.rate: is missing but burst is set (100); give both or neither",
    ),
    ("unknown_scope", "rate_limits.scope: unknown scope \"global\"; expected \"node\" or \"fleet\""),
    ("unknown_dedupe_scope", "dedupe.scope: unknown scope \"cluster\"; expected \"node\" or \"fleet\""),
    (
        "bad_tenant_key",
        "rate_limits.tenants: \"acme.eu\" is not a valid tenant name: 1 to 64 characters of [A-Za-z0-9_-]",
    ),
    // Sources and their dedupe rules.
    ("bad_source_id", "sources: \"git hub\" is not a valid source id: 1 to 64 characters of [A-Za-z0-9_-]"),
    (
        "bad_source_tenant",
        "sources.gh.tenant: \"acme corp\" is not a valid tenant name: 1 to 64 characters of [A-Za-z0-9_-]",
    ),
    ("ttl_ms_zero", "sources.gh.ttl_ms: must be between 1 and 2592000000, got 0"),
    ("bad_node", "node: \"edge 1\" is not 1 to 64 characters of [A-Za-z0-9_.-]"),
    ("unknown_preset", "sources.gh.dedupe: unknown preset \"gitlab\"; PRESETS_HINT"),
    ("bad_dedupe_header", "sources.gh.dedupe.header: \"x event id\" is not an HTTP header name"),
    (
        "dedupe_header_in_edge_namespace",
        "sources.gh.dedupe.header: \"X-Ankusa-Event-Key\" is in the edge's own header namespace \
         (x-ankusa-*): the edge removes every such header a sender sets, so no rule can read it",
    ),
    (
        "bad_dedupe_json_path",
        "sources.gh.dedupe.json: \"data..id\" has an empty segment; write a dot path like \"data.object.id\"",
    ),
    (
        "dedupe_header_and_json",
        "sources.gh.dedupe: expected exactly one of {\"header\": NAME} or {\"json\": PATH}, \
         got {\"header\":\"x-id\",\"json\":\"id\"}",
    ),
    (
        "dedupe_wrong_type",
        "sources.gh.dedupe: expected a preset name, {\"header\": NAME} or {\"json\": PATH}, got 5",
    ),
    // Signature verification.
    ("verify_without_scheme", "sources.gh.verify.scheme: is required: one of github, stripe, shopify, standard_webhooks, svix, hmac_sha256"),
    ("verify_unknown_scheme", "sources.gh.verify.scheme: unknown scheme \"gitlab\"; expected one of github, stripe, shopify, standard_webhooks, svix, hmac_sha256"),
    (
        "verify_unknown_key",
        "sources.gh.verify.secrets: unknown field; expected one of scheme, secret_env, tolerance_s, header, prefix, \
         encoding, shared_across_tenants, replay_guard",
    ),
    ("verify_not_an_object", "sources.gh.verify: expected an object, got \"github\""),
    (
        "verify_without_secret_env",
        "sources.gh.verify.secret_env: is required: the environment variables holding the signing secrets",
    ),
    ("verify_no_secrets", "sources.gh.verify.secret_env: must name 1 to 8 variables, got 0"),
    ("verify_too_many_secrets", "sources.gh.verify.secret_env: must name 1 to 8 variables, got 9"),
    (
        "verify_bad_env_name",
        "sources.gh.verify.secret_env: \"GH-SECRET\" is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
    ),
    ("verify_env_name_twice", "sources.gh.verify.secret_env: \"ANKUSA_GH_SECRET\" is named twice"),
    (
        "verify_secret_env_wrong_type",
        "sources.gh.verify.secret_env: expected a variable name or a list of them, got 5",
    ),
    (
        "verify_tolerance_without_timestamp",
        "sources.gh.verify.tolerance_s: github signs no timestamp; only stripe, standard_webhooks and svix take one",
    ),
    ("verify_tolerance_zero", "sources.gh.verify.tolerance_s: must be at least 1, got 0"),
    (
        "verify_header_on_a_preset",
        "sources.gh.verify.header: only for scheme \"hmac_sha256\"; the shopify preset fixes it",
    ),
    (
        "verify_generic_without_header",
        "sources.gh.verify.header: is required for scheme \"hmac_sha256\": the header holding the signature",
    ),
    ("verify_generic_bad_header", "sources.gh.verify.header: \"x sig\" is not an HTTP header name"),
    (
        "verify_generic_header_in_edge_namespace",
        "sources.gh.verify.header: \"x-ankusa-signature\" is in the edge's own header namespace \
         (x-ankusa-*): the edge removes every such header a sender sets, so no rule can read it",
    ),
    (
        "verify_generic_bad_encoding",
        "sources.gh.verify.encoding: unknown encoding \"base32\"; expected \"hex\" or \"base64\"",
    ),
    // A secret per path tenant.
    (
        "verify_path_tenants_one_secret",
        "sources.gh.verify.secret_env: the source takes its tenant from the path, so one secret would admit a \
         delivery signed for any tenant as another's: give each tenant its own ({\"<tenant>\": \"<VARIABLE>\", …}), \
         or set \"shared_across_tenants\": true if they really share it",
    ),
    (
        "verify_tenant_map_on_one_tenant",
        "sources.gh.verify.secret_env: the source has one tenant (\"acme\"): give its variables as a name or a \
         list, a map of tenants is for a source whose tenant comes from the path",
    ),
    ("verify_tenant_map_empty", "sources.gh.verify.secret_env: must name at least one tenant"),
    (
        "verify_tenant_map_bad_tenant",
        "sources.gh.verify.secret_env: \"acme.eu\" is not a valid tenant name: 1 to 64 characters of [A-Za-z0-9_-]",
    ),
    (
        "verify_tenant_map_shared_variable",
        "sources.gh.verify.secret_env.victim: \"ANKUSA_GH_SECRET\" is \"acme\"'s too: each path tenant needs its \
         own secret (or set \"shared_across_tenants\": true)",
    ),
    (
        "verify_tenant_map_entry_wrong_type",
        "sources.gh.verify.secret_env.acme: expected a variable name or a list of them, got 5",
    ),
    ("verify_shared_wrong_type", "sources.gh.verify.shared_across_tenants: expected true or false, got \"yes\""),
    (
        "verify_shared_on_one_tenant",
        "sources.gh.verify.shared_across_tenants: the source has one tenant (\"acme\"): there is nothing to share",
    ),
    // The replay guard.
    ("verify_replay_guard_wrong_type", "sources.gh.verify.replay_guard: expected an object, got true"),
    (
        "verify_replay_guard_unknown_key",
        "sources.gh.verify.replay_guard.window: unknown field; expected one of window_ms",
    ),
    (
        "verify_replay_window_zero",
        "sources.gh.verify.replay_guard.window_ms: must be between 1 and 2592000000, got 0",
    ),
    (
        "verify_replay_window_too_large",
        "sources.gh.verify.replay_guard.window_ms: must be between 1 and 2592000000, got 2592000001",
    ),
    (
        "verify_replay_guard_signed_id",
        "sources.stripe.verify.replay_guard: stripe signs the delivery's id and time, so a replay is refused \
         already; the guard is for github, shopify and hmac_sha256",
    ),
    (
        "verify_replay_guard_node_dedupe",
        "sources.gh.verify.replay_guard: needs \"dedupe\": {\"scope\": \"fleet\"}: the guard is a claim every \
         edge shares",
    ),
    // Fleet.
    ("nodes_zero", "fleet.nodes: must be between 1 and 1000, got 0"),
    ("nodes_too_large", "fleet.nodes: must be between 1 and 1000, got 1001"),
    ("nodes_fractional", "fleet.nodes: expected a whole number, got 2.5"),
    ("degraded_share_zero", "fleet.degraded_share: must be a number from 0.001 to 1, got 0"),
    ("degraded_share_above_one", "fleet.degraded_share: must be a number from 0.001 to 1, got 1.5"),
    ("degraded_share_too_small", "fleet.degraded_share: must be a number from 0.001 to 1, got 0.0001"),
    ("degraded_share_wrong_type", "fleet.degraded_share: expected a number, got \"half\""),
    ("timeout_ms_zero", "fleet.timeout_ms: must be between 1 and 10000, got 0"),
    ("timeout_ms_too_large", "fleet.timeout_ms: must be between 1 and 10000, got 10001"),
    ("pending_ttl_ms_zero", "fleet.pending_ttl_ms: must be between 1 and 86400000, got 0"),
    ("breaker_rate_above_one", "fleet.breaker_failure_rate: must be greater than 0 and at most 1, got 1.5"),
    ("breaker_rate_zero", "fleet.breaker_failure_rate: must be greater than 0 and at most 1, got 0"),
    ("breaker_min_calls_zero", "fleet.breaker_min_calls: must be at least 1, got 0"),
    ("breaker_window_ms_zero", "fleet.breaker_window_ms: must be between 1 and 86400000, got 0"),
    ("breaker_open_ms_zero", "fleet.breaker_open_ms: must be between 1 and 86400000, got 0"),
    ("settle_interval_ms_zero", "fleet.settle_interval_ms: must be between 1 and 60000, got 0"),
    ("settle_queue_max_zero", "fleet.settle_queue_max: must be at least 1, got 0"),
    ("settle_batch_max_zero", "fleet.settle_batch_max: must be between 1 and 10000, got 0"),
    ("settle_batch_max_over_wire_limit", "fleet.settle_batch_max: must be between 1 and 10000, got 10001"),
    ("settle_retries_too_large", "fleet.settle_retries: must be at most 4294967295, got 4294967296"),
    (
        "fleet_scope_without_cluster",
        "fleet.cluster: must not be empty when rate_limits.scope is \"fleet\"",
    ),
    (
        "fleet_dedupe_without_authority",
        "fleet.authority: must not be empty when dedupe.scope is \"fleet\"",
    ),
    ("max_body_bytes_zero", "max_body_bytes: must be at least 1, got 0"),
    (
        "fleet_connection_unknown",
        "fleet.connection: must be \"callout\" or \"direct\", got \"socket\"",
    ),
    (
        "fleet_store_malformed",
        "fleet.store: \"ankusa-store\" is not \"host:port\": no port",
    ),
    (
        "fleet_direct_without_store",
        "fleet.store: is missing: fleet.connection \"direct\" needs the store's \"host:port\"",
    ),
    (
        "fleet_store_without_direct",
        "fleet.store: \"ankusa-store:8081\" is only used when fleet.connection is \"direct\" \
         (it is \"callout\": calls go through fleet.cluster)",
    ),
];

/// Fixtures that must load; their contents are checked in the tests below.
const GOOD: &[&str] = &[
    "good_design_example",
    "good_minimal",
    "good_every_key",
    "good_verify",
    "good_verify_tenants",
    "good_operating",
];

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config")
}

fn load(stem: &str) -> Result<Config, String> {
    let path = dir().join(format!("{stem}.json"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Config::parse(&bytes).map_err(|e| e.to_string())
}

#[test]
fn every_refused_fixture_gives_its_exact_message() {
    let mut wrong = Vec::new();
    for (stem, expected) in REFUSED {
        let expected = expected.replace("PRESETS_HINT", PRESETS_HINT);
        match load(stem) {
            Ok(_) => wrong.push(format!("{stem}: loaded, expected {expected:?}")),
            Err(got) if got != expected => wrong.push(format!(
                "{stem}:\n  got      {got:?}\n  expected {expected:?}"
            )),
            Err(_) => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} fixtures wrong:\n{}",
        wrong.len(),
        REFUSED.len(),
        wrong.join("\n")
    );
}

#[test]
fn every_fixture_file_is_listed_once() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    let listed: Vec<&str> = REFUSED
        .iter()
        .map(|(stem, _)| *stem)
        .chain(GOOD.iter().copied())
        .collect();
    let unique: BTreeSet<String> = listed.iter().map(|s| s.to_string()).collect();
    assert_eq!(unique.len(), listed.len(), "a fixture is listed twice");
    assert_eq!(on_disk, unique, "fixtures on disk and in the tables differ");
}

#[test]
fn the_design_example_loads_as_written() {
    let c = load("good_design_example").unwrap();
    assert_eq!(c.node.as_deref(), Some("edge-1"));
    assert_eq!(c.rate_limits.scope, Scope::Fleet);
    assert_eq!(c.dedupe.scope, Scope::Fleet);
    assert!(c.uses_store());
    let default = c.rate_limits.default;
    assert_eq!(
        default.hooks,
        Quota {
            rate: 50,
            burst: 100
        }
    );
    assert_eq!(
        default.bytes,
        Some(Quota {
            rate: 1_048_576,
            burst: 4_194_304
        })
    );
    // acme names only its hook pair; its bytes pair comes from the default.
    let acme = c.rate_limits.for_tenant("acme");
    assert_eq!(
        acme.hooks,
        Quota {
            rate: 500,
            burst: 1000
        }
    );
    assert_eq!(acme.bytes, default.bytes);
    assert_eq!(c.sources["gh"].tenant.as_deref(), Some("acme"));
    assert_eq!(c.sources["gh"].dedupe, DedupeRule::preset("github"));
    assert_eq!(c.sources["stripe"].dedupe, DedupeRule::preset("stripe"));
    assert_eq!(c.sources["stripe"].ttl_ms, 259_200_000);
    let f = &c.fleet;
    assert_eq!(
        (f.cluster.as_str(), f.authority.as_str()),
        ("ankusa_store", "ankusa-store")
    );
    assert_eq!((f.timeout_ms, f.pending_ttl_ms), (25, 30_000));
    assert_eq!((f.breaker.failure_rate, f.breaker.min_calls), (0.5, 20));
    assert_eq!((f.breaker.window_ms, f.breaker.open_ms), (10_000, 5_000));
    assert_eq!((f.settle_interval_ms, f.settle_queue_max), (5, 50_000));
    assert_eq!((f.settle_batch_max, f.settle_retries), (500, 3));
    assert_eq!(c.max_body_bytes, 1_048_576);
}

#[test]
fn the_minimal_config_is_node_local_with_defaults() {
    let c = load("good_minimal").unwrap();
    assert_eq!(c.node, None);
    assert!(!c.uses_store());
    assert_eq!(c.rate_limits.default.bytes, None);
    assert!(c.rate_limits.tenants.is_empty());
    assert_eq!(c.sources["gh"].ttl_ms, 259_200_000);
}

#[test]
fn every_key_is_read() {
    let c = load("good_every_key").unwrap();
    assert_eq!(c.dedupe.scope, Scope::Node);
    assert_eq!(c.max_body_bytes, 65_536);
    assert_eq!(c.fleet.authority, "store.internal");
    assert_eq!(
        (c.fleet.settle_batch_max, c.fleet.settle_retries),
        (10_000, 0)
    );
    assert_eq!((c.fleet.nodes, c.fleet.degraded_share), (3, Some(0.25)));
    let rule = |id: &str| c.sources[id].dedupe.clone();
    assert_eq!(rule("shared"), DedupeRule::preset("standard_webhooks"));
    assert_eq!(rule("shop"), DedupeRule::preset("shopify"));
    assert_eq!(rule("svix"), DedupeRule::preset("svix"));
    assert_eq!(
        rule("custom"),
        Some(DedupeRule::Header("x-event-id".into()))
    );
    assert_eq!(rule("nested"), DedupeRule::json_path("data.object.id").ok());
    assert_eq!(rule("nokey"), None);
    assert_eq!(c.sources["shared"].tenant, None);
    assert_eq!(c.sources["shared"].ttl_ms, 86_400_000);
    // globex names only its bytes pair; its hook pair comes from the default.
    let globex = c.rate_limits.for_tenant("globex");
    assert_eq!(globex.hooks, c.rate_limits.default.hooks);
    assert_eq!(
        globex.bytes,
        Some(Quota {
            rate: 2048,
            burst: 65_536
        })
    );
}

#[test]
fn path_tenants_load_with_their_own_secrets_or_a_shared_one_said_so() {
    let c = load("good_verify_tenants").unwrap();
    let rule = |id: &str| c.sources[id].verify.clone().unwrap();
    let gh = rule("gh");
    let per_tenant = |pairs: &[(&str, &[&str])]| {
        Secrets::PerTenant(
            pairs
                .iter()
                .map(|(t, names)| (t.to_string(), names.iter().map(|n| n.to_string()).collect()))
                .collect(),
        )
    };
    assert_eq!(
        gh.secret_env,
        per_tenant(&[
            ("acme", &["ANKUSA_GH_ACME"]),
            ("globex", &["ANKUSA_GH_GLOBEX", "ANKUSA_GH_GLOBEX_OLD"])
        ])
    );
    assert!(!gh.shared_across_tenants);
    assert_eq!(gh.replay_window_ms, Some(86_400_000), "24 h unless set");
    let shop = rule("shop");
    assert!(shop.shared_across_tenants);
    assert_eq!(shop.replay_window_ms, Some(3_600_000));
    let custom = rule("custom");
    assert_eq!(
        (custom.secret_env, custom.shared_across_tenants),
        (Secrets::Shared(vec!["ANKUSA_CUSTOM_SECRET".into()]), true)
    );
    assert!(!rule("stripe").shared_across_tenants);
}

#[test]
fn every_verify_scheme_loads_with_its_secret_names() {
    use ankusa_core::verify::{Encoding, Family, Scheme};
    let c = load("good_verify").unwrap();
    let rule = |id: &str| c.sources[id].verify.clone().unwrap();
    let gh = rule("gh");
    assert_eq!(
        gh.secret_env,
        Secrets::Shared(vec![
            "ANKUSA_GH_SECRET".into(),
            "ANKUSA_GH_SECRET_OLD".into()
        ])
    );
    assert_eq!(gh.replay_window_ms, None);
    assert_eq!(
        gh.scheme,
        Scheme::BodyMac {
            header: "x-hub-signature-256".into(),
            prefix: "sha256=".into(),
            encoding: Encoding::Hex
        }
    );
    let stripe = rule("stripe");
    assert_eq!(
        stripe.secret_env,
        Secrets::Shared(vec!["ANKUSA_STRIPE_SECRET".into()])
    );
    assert_eq!(stripe.scheme, Scheme::Stripe { tolerance_s: 600 });
    assert_eq!(
        rule("sw").scheme,
        Scheme::StandardWebhooks {
            family: Family::StandardWebhooks,
            tolerance_s: 300
        }
    );
    assert_eq!(
        rule("svix").scheme,
        Scheme::StandardWebhooks {
            family: Family::Svix,
            tolerance_s: 60
        }
    );
    assert_eq!(
        rule("shop").scheme,
        Scheme::BodyMac {
            header: "x-shopify-hmac-sha256".into(),
            prefix: String::new(),
            encoding: Encoding::Base64
        }
    );
    assert_eq!(
        rule("custom").scheme,
        Scheme::BodyMac {
            header: "x-signature".into(),
            prefix: "hmac=".into(),
            encoding: Encoding::Base64
        }
    );
    assert_eq!(c.sources["open"].verify, None);
}

#[test]
fn shadow_and_headers_are_read_per_tenant_with_the_default_behind() {
    use ankusa_core::hook::shadow::Shadow;
    use ankusa_core::limit::ratelimit_headers::HeadersMode;
    let c = load("good_operating").unwrap();
    let r = &c.rate_limits;
    assert_eq!(r.headers, HeadersMode::Both);
    assert_eq!(r.default_shadow, Shadow::from_bool(true));
    assert_eq!(
        r.shadow_for("acme"),
        Shadow {
            rate_limit: false,
            dedupe: true
        }
    );
    // A tenant without `shadow` has the default's; `false` turns it off.
    assert_eq!(r.shadow_for("globex"), Shadow::from_bool(true));
    assert_eq!(r.shadow_for("initech"), Shadow::default());
    assert_eq!(r.shadow_for("unlisted"), Shadow::from_bool(true));
    assert_eq!(r.for_tenant("acme").hooks, Quota { rate: 5, burst: 10 });
    // Unset: ietf headers, no shadow.
    let m = load("good_minimal").unwrap();
    assert_eq!(m.rate_limits.headers, HeadersMode::Ietf);
    assert!(m.rate_limits.shadow_for("acme").is_off());
}
