//! Hostile input to every parser the edge or the store runs on what arrives
//! from outside: the plugin configuration, the store's request bodies, the
//! store's answers as the filter reads them, and provider signature headers.
//! Arbitrary bytes and mutated valid documents must give a value or a clear
//! error (a field and a message), never a panic. Bounded: 256 cases each.
#![cfg(not(target_arch = "wasm32"))]

use ankusa_core::config::Config;
use ankusa_core::verify::rule::PRESETS;
use ankusa_core::verify::{self, Scheme};
use ankusa_core::wire::{HitAnswer, HitRequest, ResetRequest, SettleRequest};
use proptest::prelude::*;
use serde_json::{json, Value};

fn valid_config() -> Value {
    json!({
        "sources": {
            "gh": {"tenant": "acme", "dedupe": "github",
                   "verify": {"scheme": "github", "secret_env": ["GH_SECRET"]}},
            "stripe": {"tenant": "acme", "dedupe": {"json": "id"}}
        },
        "rate_limits": {
            "scope": "fleet",
            "default": {"rate": 50, "burst": 100},
            "tenants": {"acme": {"rate": 500, "burst": 1000}}
        },
        "dedupe": {"scope": "fleet"},
        "fleet": {"cluster": "ankusa_store", "timeout_ms": 250, "pending_ttl_ms": 5000}
    })
}

fn valid_hit() -> Value {
    json!({
        "charges": [{"kind": "hooks", "tenant": "acme", "units": 1, "rate": 500, "burst": 1000}],
        "claim": {"tenant": "acme", "source_id": "gh", "key": "k-1", "hook_id": "0190a0b0c0d0e0f0a0b0c0d0e0f0a0b0",
                  "node": "edge-1", "ttl_ms": 86400000, "pending_ttl_ms": 30000}
    })
}

fn valid_settle() -> Value {
    let claim = valid_hit()["claim"].clone();
    json!({"ops": [{"op": "promote", "claim": claim.clone(), "hook_id": "h-1"}, {"op": "release", "claim": claim}]})
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        any::<String>().prop_map(Value::String),
        "[a-z_.]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every path to a value inside `doc` (object keys and array indexes).
fn paths(doc: &Value, here: Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(here.clone());
    match doc {
        Value::Object(m) => {
            for (k, v) in m {
                let mut p = here.clone();
                p.push(k.clone());
                paths(v, p, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                let mut p = here.clone();
                p.push(i.to_string());
                paths(v, p, out);
            }
        }
        _ => {}
    }
}

/// `doc` with the value at path number `pick` (of all its paths) replaced by `with`.
fn mutate(doc: &Value, pick: usize, with: Value) -> Value {
    let mut all = Vec::new();
    paths(doc, Vec::new(), &mut all);
    let path = &all[pick % all.len()];
    let mut out = doc.clone();
    let mut at = &mut out;
    for step in path {
        at = match at {
            Value::Object(m) => m.get_mut(step).expect("path from this document"),
            Value::Array(a) => &mut a[step.parse::<usize>().expect("index")],
            _ => unreachable!("paths only descend into containers"),
        };
    }
    *at = with;
    out
}

fn check_config(bytes: &[u8]) {
    if let Err(e) = Config::parse(bytes) {
        assert!(!e.field.is_empty(), "no field in {e:?}");
        assert!(!e.message.is_empty(), "no message in {e:?}");
    }
}

/// What the store does with a request body: parse, then validate; a refusal
/// names a field.
fn check_request<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    validate: impl Fn(&T) -> Result<(), ankusa_core::wire::WireError>,
) {
    if let Ok(request) = serde_json::from_slice::<T>(bytes) {
        if let Err(e) = validate(&request) {
            assert!(!e.field.is_empty() && !e.problem.is_empty(), "{e:?}");
        }
    }
}

fn check_all_requests(bytes: &[u8]) {
    check_request::<HitRequest>(bytes, HitRequest::validate);
    check_request::<SettleRequest>(bytes, SettleRequest::validate);
    check_request::<ResetRequest>(bytes, ResetRequest::validate);
}

fn check_signatures(headers: &[(String, String)], body: &[u8], now_s: u64) {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    for name in PRESETS {
        let scheme = Scheme::preset(name, 300).expect("preset");
        let key = scheme
            .key("whsec_YW5rdXNhIG1vY2sgcHJvdmlkZXIga2V5IDMyIGJ5dGU=")
            .expect("a whsec_ secret keys every scheme");
        // Random headers never carry a valid MAC of this key.
        assert!(verify::verify(&scheme, &[key], header, body, now_s).is_err());
    }
}

/// Header names the signature schemes read, with a few others.
fn header_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("x-hub-signature-256".to_string()),
        Just("x-shopify-hmac-sha256".to_string()),
        Just("stripe-signature".to_string()),
        Just("webhook-id".to_string()),
        Just("webhook-timestamp".to_string()),
        Just("webhook-signature".to_string()),
        Just("svix-id".to_string()),
        Just("svix-timestamp".to_string()),
        Just("svix-signature".to_string()),
        "[a-z-]{1,20}",
    ]
}

/// Signature-shaped header values: the schemes' own syntax with random parts.
fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "sha256=[0-9a-fA-F]{0,70}",
        "t=[0-9]{0,20},v1=[0-9a-f]{0,70}(,v0=[0-9a-z]{0,10})?",
        "(v1,[A-Za-z0-9+/=]{0,50} ?){0,10}",
        "[0-9]{0,25}",
        "[=,v1t ]{0,40}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_bytes_as_plugin_config_give_a_config_or_a_named_error(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check_config(&bytes);
    }

    #[test]
    fn a_valid_config_with_any_value_swapped_in_gives_a_config_or_a_named_error(pick in any::<usize>(), with in any_json()) {
        let doc = mutate(&valid_config(), pick, with);
        check_config(doc.to_string().as_bytes());
    }

    #[test]
    fn any_bytes_as_a_store_request_parse_or_are_refused(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check_all_requests(&bytes);
    }

    #[test]
    fn valid_store_requests_with_any_value_swapped_in_are_refused_by_field(pick in any::<usize>(), with in any_json()) {
        check_all_requests(mutate(&valid_hit(), pick, with.clone()).to_string().as_bytes());
        check_all_requests(mutate(&valid_settle(), pick, with).to_string().as_bytes());
    }

    #[test]
    fn any_store_answer_parses_or_is_refused(bytes in prop::collection::vec(any::<u8>(), 0..256), pick in any::<usize>(), with in any_json()) {
        let _ = serde_json::from_slice::<HitAnswer>(&bytes);
        let shapes = [
            json!({"result": "ok"}),
            json!({"result": "duplicate", "hook_id": "h"}),
            json!({"result": "pending", "retry_after_ms": 10}),
            json!({"result": "rate_limited", "retry_after_ms": 10}),
        ];
        let doc = mutate(&shapes[pick % 4], pick / 4, with);
        let _ = serde_json::from_slice::<HitAnswer>(doc.to_string().as_bytes());
    }

    #[test]
    fn any_signature_headers_are_refused_without_panicking(
        headers in prop::collection::vec((header_name(), header_value()), 0..6),
        body in prop::collection::vec(any::<u8>(), 0..128),
        now_s in any::<u64>(),
    ) {
        check_signatures(&headers, &body, now_s);
    }
}

#[test]
fn a_deeply_nested_config_is_refused_with_an_error() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    check_config(deep.as_bytes());
    let deep_obj = format!("{}1{}", "{\"a\":".repeat(50_000), "}".repeat(50_000));
    check_config(deep_obj.as_bytes());
    check_all_requests(deep.as_bytes());
}

#[test]
fn the_documents_mutated_above_are_valid_to_start_with() {
    Config::parse(valid_config().to_string().as_bytes()).expect("valid config");
    let hit: HitRequest = serde_json::from_value(valid_hit()).expect("hit parses");
    hit.validate().expect("hit is valid");
    let settle: SettleRequest = serde_json::from_value(valid_settle()).expect("settle parses");
    settle.validate().expect("settle is valid");
}
