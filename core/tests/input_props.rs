//! Properties of the code that reads untrusted request input: event keys,
//! webhook paths and hook ids. A panic here would kill an Envoy worker's VM,
//! and an event key that differs between nodes would defeat fleet dedupe.
#![cfg(not(target_arch = "wasm32"))]

use ankusa_core::config::Config;
use ankusa_core::hook::event_key::{normalize_key, DedupeRule, HASHED_PREFIX};
use ankusa_core::hook::hook_id::{hook_id, unix_ms_of};
use ankusa_core::hook::route::route;
use ankusa_core::wire::MAX_KEY_LEN;
use proptest::prelude::*;

/// A key the wire (`Claim::validate`), Redis and an upstream header all carry
/// unchanged: 1 to 200 printable ASCII bytes, no edge space.
fn assert_claimable(key: &str) {
    assert!(
        !key.is_empty() && key.len() <= MAX_KEY_LEN,
        "{} bytes",
        key.len()
    );
    assert!(key.bytes().all(|b| (0x20..=0x7e).contains(&b)), "{key:?}");
    assert_eq!(key.trim_matches(' '), key);
}

/// What `normalize_key` keeps as is.
fn travels(raw: &[u8]) -> bool {
    !raw.is_empty()
        && raw.len() <= MAX_KEY_LEN
        && raw.iter().all(|b| (0x20..=0x7e).contains(b))
        && raw[0] != b' '
        && raw[raw.len() - 1] != b' '
}

fn json_rules() -> impl Strategy<Value = DedupeRule> {
    prop_oneof![
        Just(DedupeRule::preset("stripe").unwrap()),
        "(id|a|b|0|[a-z0-9]{1,3})(\\.(id|a|b|0|[a-z0-9]{1,3})){0,3}"
            .prop_map(|p| DedupeRule::json_path(&p).unwrap()),
    ]
}

/// A JSON leaf of any type an id field might hold.
fn leaf() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{json, Value};
    prop_oneof![
        any::<String>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
        Just(json!([])),
    ]
}

/// Random bytes, or JSON bodies with ids where the rules look, sometimes cut short.
fn bodies() -> impl Strategy<Value = Vec<u8>> {
    let json = (leaf(), leaf(), any::<prop::sample::Index>(), any::<bool>()).prop_map(
        |(id, nested, cut, whole)| {
            let body = serde_json::json!({"id": id, "a": {"b": nested}, "0": [id, nested]});
            let mut bytes = serde_json::to_vec(&body).unwrap();
            if !whole {
                bytes.truncate(cut.index(bytes.len() + 1));
            }
            bytes
        },
    );
    prop_oneof![prop::collection::vec(any::<u8>(), 0..512), json]
}

proptest! {
    #[test]
    fn any_body_gives_a_claimable_key_or_none(rule in json_rules(), body in bodies()) {
        if let Some(key) = rule.extract(|_| None::<&[u8]>, Some(&body)) {
            assert_claimable(&key);
        }
    }

    #[test]
    fn any_header_value_gives_a_claimable_key_or_none(value in any::<String>()) {
        let rule = DedupeRule::preset("github").unwrap();
        let key = rule.extract(|name| (name == "x-github-delivery").then(|| value.clone()), None);
        prop_assert_eq!(key.is_none(), value.as_bytes().trim_ascii().is_empty());
        if let Some(key) = key {
            assert_claimable(&key);
        }
    }

    #[test]
    fn normalizing_is_stable_and_only_hashes_what_cannot_travel(raw in any::<String>()) {
        let key = normalize_key(&raw);
        prop_assert_eq!(&key, &normalize_key(&raw));
        match key {
            None => prop_assert!(raw.is_empty()),
            Some(key) => {
                assert_claimable(&key);
                if travels(raw.as_bytes()) {
                    prop_assert_eq!(key, raw);
                } else {
                    prop_assert!(key.starts_with(HASHED_PREFIX));
                    prop_assert_eq!(key.len(), HASHED_PREFIX.len() + 64);
                }
            }
        }
    }

    #[test]
    fn any_header_bytes_give_a_claimable_key_or_none(value in prop::collection::vec(any::<u8>(), 0..300)) {
        let rule = DedupeRule::preset("github").unwrap();
        let key = rule.extract(|name| (name == "x-github-delivery").then_some(&value[..]), None);
        let trimmed = value.trim_ascii();
        prop_assert_eq!(key.is_none(), trimmed.is_empty());
        if let Some(key) = key {
            assert_claimable(&key);
            if travels(trimmed) {
                prop_assert_eq!(key.as_bytes(), trimmed);
            } else {
                prop_assert_eq!(Some(key), normalize_key(trimmed));
            }
        }
    }

    #[test]
    fn long_keys_hash_apart(a in ".{201,300}", b in ".{201,300}") {
        prop_assume!(a != b);
        prop_assert_ne!(normalize_key(&a), normalize_key(&b));
    }

    #[test]
    fn a_json_string_id_is_read_back_exactly(id in any::<String>()) {
        let body = serde_json::to_vec(&serde_json::json!({"id": id, "other": [1, 2]})).unwrap();
        let rule = DedupeRule::preset("stripe").unwrap();
        prop_assert_eq!(rule.extract(|_| None::<&[u8]>, Some(&body)), normalize_key(&id));
    }

    #[test]
    fn any_path_routes_or_is_refused_without_panicking(path in any::<String>()) {
        let config = Config::parse(
            br#"{"sources": {"gh": {"tenant": "acme"}, "open": {}},
                 "rate_limits": {"default": {"rate": 1, "burst": 1}}}"#,
        )
        .unwrap();
        if let Ok(r) = route(&config, &path) {
            prop_assert!(path.starts_with("/webhooks/"));
            prop_assert!(config.sources.contains_key(&r.source_id));
            prop_assert!(ankusa_core::config::is_valid_id(&r.tenant));
        }
    }

    #[test]
    fn hook_ids_carry_their_time(ms in 0u64..(1 << 48), random in any::<[u8; 10]>()) {
        let id = hook_id(ms, random);
        prop_assert_eq!(id.len(), 36);
        prop_assert_eq!(unix_ms_of(&id), Some(ms));
        prop_assert_eq!(unix_ms_of(&id.to_ascii_uppercase()), Some(ms));
    }

    #[test]
    fn hook_ids_sort_by_time(a in 0u64..(1 << 48), b in 0u64..(1 << 48), ra in any::<[u8; 10]>(), rb in any::<[u8; 10]>()) {
        prop_assume!(a < b);
        prop_assert!(hook_id(a, ra) < hook_id(b, rb));
    }

    #[test]
    fn unix_ms_of_never_panics(text in any::<String>()) {
        let _ = unix_ms_of(&text);
    }
}
