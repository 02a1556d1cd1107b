use super::*;

const HEX: &[u8] = b"0123456789abcdef";
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn no_headers(_: &str) -> Option<String> {
    None
}

fn headers<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn presets_name_their_provider_header_or_json_id() {
    let h = |s: &str| Some(DedupeRule::Header(s.into()));
    assert_eq!(DedupeRule::preset("github"), h("x-github-delivery"));
    assert_eq!(DedupeRule::preset("standard_webhooks"), h("webhook-id"));
    assert_eq!(DedupeRule::preset("svix"), h("svix-id"));
    assert_eq!(DedupeRule::preset("shopify"), h("x-shopify-webhook-id"));
    assert_eq!(
        DedupeRule::preset("stripe"),
        Some(DedupeRule::JsonPath(vec!["id".into()]))
    );
    assert_eq!(DedupeRule::preset("GitHub"), None);
    assert!(PRESETS.iter().all(|p| DedupeRule::preset(p).is_some()));
}

#[test]
fn header_rule_is_lowercased_and_refuses_non_token_names() {
    assert_eq!(
        DedupeRule::header("X-Foo-Id"),
        Ok(DedupeRule::Header("x-foo-id".into()))
    );
    assert_eq!(
        DedupeRule::header(""),
        Err("\"\" is not an HTTP header name".into())
    );
    assert_eq!(
        DedupeRule::header("x foo"),
        Err("\"x foo\" is not an HTTP header name".into())
    );
    assert!(DedupeRule::header("x-foo:").is_err());
}

#[test]
fn json_path_splits_on_dots_and_refuses_empty_segments() {
    assert_eq!(
        DedupeRule::json_path("data.object.id"),
        Ok(DedupeRule::JsonPath(vec![
            "data".into(),
            "object".into(),
            "id".into()
        ]))
    );
    for bad in ["", ".id", "id.", "data..id"] {
        assert!(
            DedupeRule::json_path(bad)
                .unwrap_err()
                .contains("empty segment"),
            "{bad:?}"
        );
    }
}

#[test]
fn only_json_rules_need_the_body() {
    assert!(DedupeRule::preset("stripe").unwrap().needs_body());
    assert!(!DedupeRule::preset("github").unwrap().needs_body());
}

#[test]
fn header_rule_reads_the_trimmed_header_and_ignores_the_body() {
    let rule = DedupeRule::preset("github").unwrap();
    let found = rule.extract(
        headers(&[("x-github-delivery", " 72d3162e ")]),
        Some(b"{\"id\":1}"),
    );
    assert_eq!(found.as_deref(), Some("72d3162e"));
    assert_eq!(rule.extract(no_headers, None), None);
    assert_eq!(
        rule.extract(headers(&[("x-github-delivery", "  ")]), None),
        None
    );
}

#[test]
fn json_rule_follows_objects_and_array_indices() {
    let rule = DedupeRule::json_path("data.items.1.id").unwrap();
    let body = br#"{"data":{"items":[{"id":"a"},{"id":"b"}]}}"#;
    assert_eq!(rule.extract(no_headers, Some(body)).as_deref(), Some("b"));
    let rule = DedupeRule::json_path("data.items.x").unwrap();
    assert_eq!(rule.extract(no_headers, Some(body)), None);
}

#[test]
fn json_value_must_be_a_non_empty_string_or_an_integer() {
    let rule = DedupeRule::preset("stripe").unwrap();
    let key = |body: &str| rule.extract(no_headers, Some(body.as_bytes()));
    assert_eq!(key(r#"{"id":"evt_1"}"#).as_deref(), Some("evt_1"));
    assert_eq!(key(r#"{"id":42}"#).as_deref(), Some("42"));
    assert_eq!(key(r#"{"id":-7}"#).as_deref(), Some("-7"));
    for none in [
        r#"{"id":""}"#,
        r#"{"id":1.5}"#,
        r#"{"id":null}"#,
        r#"{"id":{}}"#,
        r#"{"id":true}"#,
    ] {
        assert_eq!(key(none), None, "{none}");
    }
    assert_eq!(key(r#"{"other":"x"}"#), None);
    assert_eq!(key(r#"["id"]"#), None);
}

#[test]
fn missing_or_non_json_body_has_no_key() {
    let rule = DedupeRule::preset("stripe").unwrap();
    assert_eq!(rule.extract(no_headers, None), None);
    assert_eq!(rule.extract(no_headers, Some(b"id=evt_1")), None);
    assert_eq!(rule.extract(no_headers, Some(&[0xff, 0xfe, b'{'])), None);
    assert_eq!(rule.extract(no_headers, Some(b"")), None);
}

#[test]
fn a_key_of_exactly_200_bytes_is_kept_and_201_is_hashed() {
    let kept = "k".repeat(MAX_KEY_LEN);
    assert_eq!(normalize_key(&kept), Some(kept.clone()));
    let long = "k".repeat(MAX_KEY_LEN + 1);
    let hashed = normalize_key(&long).unwrap();
    assert!(hashed.starts_with(HASHED_PREFIX));
    assert_eq!(hashed.len(), HASHED_PREFIX.len() + 64);
    assert!(hashed[HASHED_PREFIX.len()..]
        .bytes()
        .all(|b| HEX.contains(&b)));
}

#[test]
fn hashing_is_sha256_of_the_utf8_bytes() {
    // sha256("a" × 201), computed independently with `printf 'a%.0s' {1..201} | sha256sum`.
    let hashed = normalize_key("a".repeat(201)).unwrap();
    assert_eq!(
        hashed,
        "sha256:a92efd82109373e58f9a2056dee01e807e216ce6075f7051207c0a9f7d666e50"
    );
}

#[test]
fn control_characters_are_hashed_so_the_key_fits_a_header() {
    let hashed = normalize_key("evt\r\nx-injected: 1").unwrap();
    assert!(hashed.starts_with(HASHED_PREFIX));
    assert_eq!(normalize_key("evt\r\nx-injected: 1"), Some(hashed));
    assert_eq!(normalize_key(""), None);
}

#[test]
fn printable_ascii_is_kept_and_everything_else_is_hashed() {
    assert_eq!(normalize_key("evt 1~!").as_deref(), Some("evt 1~!"));
    for hashed in [
        &b"\xc3\xa9v\xc3\xa8nement"[..], // "évènement": UTF-8, not ASCII
        b"\xff\xfe-1",                   // not UTF-8
        b"evt\x7f",                      // DEL
        b"evt\t1",                       // a control byte inside
        b" evt",                         // an edge space a header would drop
        b"evt ",
    ] {
        let key = normalize_key(hashed).unwrap();
        assert!(key.starts_with(HASHED_PREFIX), "{hashed:?} -> {key}");
        assert_eq!(key.len(), HASHED_PREFIX.len() + 64);
    }
}

#[test]
fn bytes_that_are_not_utf8_hash_to_sha256_of_the_bytes() {
    // `printf '\xff\xfe\x41' | sha256sum`
    assert_eq!(
        normalize_key([0xff, 0xfe, 0x41]).as_deref(),
        Some("sha256:e338b52c1bba42031362180fb1465d6e8b382881cb2f2601e30e971f21e4901c")
    );
}

#[test]
fn a_header_that_is_not_utf8_gives_one_key_for_the_same_bytes() {
    let rule = DedupeRule::preset("github").unwrap();
    let value: &[u8] = b" \xffdelivery\x80 ";
    let header = |name: &str| (name == "x-github-delivery").then_some(value);
    let key = rule.extract(header, None).unwrap();
    assert_eq!(Some(key.clone()), normalize_key(&value[1..value.len() - 1]));
    assert_eq!(rule.extract(header, None), Some(key.clone()), "stable");
    let other: &[u8] = b"\xffdelivery\x81";
    let other = rule.extract(|_: &str| Some(other), None).unwrap();
    assert_ne!(key, other);
}

#[test]
fn a_json_id_hashes_by_its_utf8_bytes_like_the_same_header() {
    let rule = DedupeRule::preset("stripe").unwrap();
    let body = r#"{"id":"\u00e9vt\u0000"}"#.as_bytes();
    let from_json = rule.extract(no_headers, Some(body));
    assert_eq!(from_json, normalize_key("évt\0"));
    let github = DedupeRule::preset("github").unwrap();
    let from_header = github.extract(|_: &str| Some("évt\0"), None);
    assert_eq!(from_json, from_header);
    // A lone surrogate is not valid JSON text: no key, no panic.
    assert_eq!(rule.extract(no_headers, Some(br#"{"id":"\ud800"}"#)), None);
}
