use super::*;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

#[test]
fn never_written_key_is_empty_at_version_zero() {
    assert_eq!(MapStore::new().get("k"), (vec![], 0));
}

#[test]
fn stale_version_is_refused_and_changes_nothing() {
    let store = MapStore::new();
    assert!(store.compare_and_set("k", b"a", 0));
    let (_, v1) = store.get("k");
    assert!(store.compare_and_set("k", b"b", v1));
    assert!(!store.compare_and_set("k", b"c", v1));
    let (value, v2) = store.get("k");
    assert_eq!(value, b"b");
    assert_ne!(v1, v2);
}

#[test]
fn version_zero_writes_without_a_check() {
    let store = MapStore::new();
    assert!(store.compare_and_set("k", b"a", 0));
    assert!(store.compare_and_set("k", b"b", 0));
    assert_eq!(store.get("k").0, b"b");
}

#[test]
fn ensure_keys_creates_missing_keys_and_keeps_written_ones() {
    let store = MapStore::new();
    assert!(store.compare_and_set("a", b"state", 0));
    ensure_keys(&store, ["a".to_string(), "b".to_string()]);
    assert_eq!(store.get("a").0, b"state");
    let (value, version) = store.get("b");
    assert!(value.is_empty());
    assert_ne!(version, 0, "a created key must carry a real version");
    assert_eq!(store.keys(), ["a", "b"]);
}

#[test]
fn clone_is_independent_and_equal() {
    let store = MapStore::new();
    store.compare_and_set("k", b"a", 0);
    let copy = store.clone();
    assert_eq!(copy, store);
    store.compare_and_set("k", b"b", 0);
    assert_ne!(copy, store);
    assert_eq!(copy.get("k").0, b"a");
}

#[test]
fn update_u64_counts_and_refuses_past_a_cap() {
    let store = MapStore::new();
    ensure_keys(&store, ["n".to_string()]);
    let inc_below_2 = |n: u64| (n < 2).then_some(n + 1);
    assert_eq!(update_u64(&store, "n", inc_below_2), Some(Ok(1)));
    assert_eq!(update_u64(&store, "n", inc_below_2), Some(Ok(2)));
    assert_eq!(update_u64(&store, "n", inc_below_2), Some(Err(2)));
    assert_eq!(read_u64(&store, "n").0, 2);
}

#[test]
fn short_values_decode_as_zero() {
    assert_eq!(decode_u64(&[]), 0);
    assert_eq!(decode_u64(&[1, 2]), 0);
    assert_eq!(decode_u64(&7u64.to_le_bytes()), 7);
}

/// Every compare-and-swap conflicts.
struct Conflicting(MapStore);

impl CasStore for Conflicting {
    fn get(&self, key: &str) -> (Vec<u8>, u32) {
        self.0.get(key)
    }
    fn compare_and_set(&self, _: &str, _: &[u8], _: u32) -> bool {
        false
    }
}

#[test]
fn update_gives_up_after_max_tries_conflicts() {
    let store = Conflicting(MapStore::new());
    let mut tries = 0;
    let answer = update(&store, "k", |_| {
        tries += 1;
        Cas::Write(b"x".to_vec(), ())
    });
    assert_eq!(answer, None);
    assert_eq!(tries, MAX_TRIES);
    assert_eq!(
        update(&store, "k", |_| Cas::Keep(7)),
        Some(7),
        "a keep needs no write"
    );
}

#[test]
fn update_bytes_replaces_or_leaves_alone() {
    let store = MapStore::new();
    ensure_keys(&store, ["b".to_string()]);
    assert!(update_bytes(&store, "b", |cur| Some([cur, b"x"].concat())));
    assert!(update_bytes(&store, "b", |cur| Some([cur, b"y"].concat())));
    assert!(!update_bytes(&store, "b", |_| None));
    assert_eq!(store.get("b").0, b"xy");
}
