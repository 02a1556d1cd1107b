use super::*;
use serde_json::json;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn read(value: Value) -> Result<Config, String> {
    config(value.to_string().as_bytes()).map_err(|e| e.to_string())
}

fn with(patch: impl FnOnce(&mut Value)) -> Result<Config, String> {
    let mut value = json!({"sources": {"gh": {"tenant": "acme"}},
                           "rate_limits": {"default": {"rate": 50, "burst": 100}}});
    patch(&mut value);
    read(value)
}

#[test]
fn tenant_entries_inherit_the_pairs_they_omit() {
    let c = with(|v| {
        v["rate_limits"]["default"]["bytes_rate"] = json!(1024);
        v["rate_limits"]["default"]["bytes_burst"] = json!(4096);
        v["rate_limits"]["tenants"] = json!({"acme": {"rate": 500, "burst": 1000}, "globex": {}});
    })
    .unwrap();
    let acme = c.rate_limits.for_tenant("acme");
    assert_eq!(
        acme.hooks,
        Quota {
            rate: 500,
            burst: 1000
        }
    );
    assert_eq!(
        acme.bytes,
        Some(Quota {
            rate: 1024,
            burst: 4096
        })
    );
    assert_eq!(c.rate_limits.for_tenant("globex"), &c.rate_limits.default);
}

#[test]
fn null_counts_as_absent() {
    let c = with(|v| v["node"] = Value::Null).unwrap();
    assert_eq!(c.node, None);
}

#[test]
fn a_dedupe_object_needs_exactly_one_of_header_or_json() {
    let e = with(|v| v["sources"]["gh"]["dedupe"] = json!({})).unwrap_err();
    assert_eq!(
        e,
        "sources.gh.dedupe: expected exactly one of {\"header\": NAME} or {\"json\": PATH}, got {}"
    );
    let e =
        with(|v| v["sources"]["gh"]["dedupe"] = json!({"header": "a", "json": "b"})).unwrap_err();
    assert!(
        e.starts_with("sources.gh.dedupe: expected exactly one of"),
        "{e}"
    );
    let c = with(|v| v["sources"]["gh"]["dedupe"] = json!({"header": "X-Request-Id"})).unwrap();
    assert_eq!(
        c.sources["gh"].dedupe,
        Some(DedupeRule::Header("x-request-id".into()))
    );
}

#[test]
fn numbers_must_be_whole_and_fit() {
    let e = with(|v| v["fleet"] = json!({"timeout_ms": 2.5})).unwrap_err();
    assert_eq!(e, "fleet.timeout_ms: expected a whole number, got 2.5");
    let e = with(|v| v["fleet"] = json!({"settle_retries": 4_294_967_296u64})).unwrap_err();
    assert_eq!(
        e,
        "fleet.settle_retries: must be at most 4294967295, got 4294967296"
    );
    let e = with(|v| v["fleet"] = json!({"breaker_failure_rate": "half"})).unwrap_err();
    assert_eq!(
        e,
        "fleet.breaker_failure_rate: expected a number, got \"half\""
    );
}

#[test]
fn a_bad_tenant_key_is_refused_before_its_contents() {
    let e = with(|v| v["rate_limits"]["tenants"] = json!({"a.b": {"rate": "x"}})).unwrap_err();
    assert_eq!(
        e,
        "rate_limits.tenants: \"a.b\" is not a valid tenant name: 1 to 64 characters of [A-Za-z0-9_-]"
    );
}

#[test]
fn show_cuts_long_values_on_a_char_boundary() {
    assert_eq!(show(&json!(5)), "5");
    let shown = show(&json!("é".repeat(100)));
    assert!(
        shown.ends_with('…') && shown.len() <= MAX_SHOWN + '…'.len_utf8(),
        "{shown}"
    );
}

#[test]
fn paths_join_with_dots_from_the_root() {
    let root = json!({"a": {}});
    let top = Obj::of(String::new(), &root, &["a"]).unwrap();
    assert_eq!(top.path("a"), "a");
    assert_eq!(top.object("a", &[]).unwrap().unwrap().path("b"), "a.b");
}
