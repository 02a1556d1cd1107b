use super::*;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn config() -> Config {
    Config::parse(
        br#"{"sources": {"gh": {"tenant": "acme", "dedupe": "github"}, "shared": {}},
             "rate_limits": {"default": {"rate": 1, "burst": 1}}}"#,
    )
    .unwrap()
}

fn ok(config: &Config, path: &str) -> (String, String) {
    let r = route(config, path).unwrap();
    (r.tenant, r.source_id)
}

fn pair(tenant: &str, source: &str) -> (String, String) {
    (tenant.to_string(), source.to_string())
}

#[test]
fn one_segment_takes_the_tenant_from_the_source() {
    let c = config();
    assert_eq!(ok(&c, "/webhooks/gh"), pair("acme", "gh"));
    assert_eq!(route(&c, "/webhooks/gh").unwrap().source, &c.sources["gh"]);
}

#[test]
fn two_segments_name_the_tenant_of_an_open_source() {
    let c = config();
    assert_eq!(ok(&c, "/webhooks/globex/shared"), pair("globex", "shared"));
    assert_eq!(ok(&c, "/webhooks/acme/gh"), pair("acme", "gh"));
}

#[test]
fn query_string_and_one_trailing_slash_are_ignored() {
    let c = config();
    assert_eq!(ok(&c, "/webhooks/gh?x=1/2"), pair("acme", "gh"));
    assert_eq!(ok(&c, "/webhooks/acme/gh/"), pair("acme", "gh"));
    assert_eq!(ok(&c, "/webhooks/gh#frag"), pair("acme", "gh"));
}

#[test]
fn other_paths_are_not_webhook_paths() {
    let c = config();
    for path in [
        "/",
        "",
        "/webhooks",
        "/webhooks/",
        "/webhooks//gh",
        "/webhooks/a/b/gh",
        "/hooks/gh",
        "webhooks/gh",
    ] {
        assert_eq!(route(&c, path), Err(RouteError::NotWebhookPath), "{path:?}");
    }
}

#[test]
fn unknown_source_is_named() {
    let c = config();
    assert_eq!(
        route(&c, "/webhooks/acme/gitlab"),
        Err(RouteError::UnknownSource("gitlab".into()))
    );
    assert_eq!(
        route(&c, "/webhooks/GH").unwrap_err().to_string(),
        "unknown source \"GH\""
    );
}

#[test]
fn tenant_segment_must_be_a_valid_name() {
    let c = config();
    assert_eq!(
        route(&c, "/webhooks/a.b/shared"),
        Err(RouteError::InvalidTenant("a.b".into()))
    );
    assert_eq!(
        route(&c, "/webhooks/%41/shared"),
        Err(RouteError::InvalidTenant("%41".into()))
    );
}

#[test]
fn a_source_with_a_tenant_refuses_any_other() {
    let c = config();
    let e = route(&c, "/webhooks/globex/gh").unwrap_err();
    assert_eq!(
        e.to_string(),
        "source \"gh\" belongs to tenant \"acme\", not \"globex\""
    );
}

#[test]
fn one_segment_needs_a_source_that_names_its_tenant() {
    let c = config();
    let e = route(&c, "/webhooks/shared").unwrap_err();
    assert_eq!(
        e,
        RouteError::TenantMismatch {
            source_id: "shared".into(),
            source_tenant: None,
            path_tenant: None
        }
    );
    assert_eq!(
        e.to_string(),
        "source \"shared\" names no tenant: use /webhooks/{tenant}/shared"
    );
}

#[test]
fn long_segments_are_clipped_in_errors() {
    let c = config();
    let long = "é".repeat(100);
    let Err(RouteError::UnknownSource(shown)) = route(&c, &format!("/webhooks/{long}")) else {
        panic!("expected an unknown source")
    };
    assert!(shown.len() <= MAX_ID_LEN && long.starts_with(&shown));
    assert_eq!(clip("abc"), "abc");
}

#[test]
fn not_webhook_path_says_what_is_expected() {
    assert_eq!(
        RouteError::NotWebhookPath.to_string(),
        "not a webhook path: expected /webhooks/{tenant}/{source} or /webhooks/{source}"
    );
    assert!(RouteError::InvalidTenant("x y".into())
        .to_string()
        .starts_with("invalid tenant \"x y\""));
}
