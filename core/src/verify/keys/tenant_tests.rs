//! Secrets per path tenant: each tenant's deliveries are checked against
//! its own keys, and one secret under two tenants' names is refused.

use super::*;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

const PER_TENANT: &str = r#"{"sources": {
    "gh": {"verify": {"scheme": "github", "secret_env": {"acme": "GH_ACME", "victim": ["GH_VICTIM", "GH_VICTIM_OLD"]}}}},
    "rate_limits": {"default": {"rate": 1, "burst": 1}}}"#;

fn signed(secret: &[u8]) -> RequestHeaders {
    let sig = verify::body_mac::sign(secret, "sha256=", verify::Encoding::Hex, b"{}");
    RequestHeaders::from_pairs(vec![("x-hub-signature-256".into(), sig.into_bytes())])
}

#[test]
fn a_path_tenant_is_checked_against_its_own_secrets_and_no_others() {
    let config = Config::parse(PER_TENANT.as_bytes()).unwrap();
    let keys = Keys::resolve(
        &config,
        env(&[
            ("GH_ACME", "a"),
            ("GH_VICTIM", "v"),
            ("GH_VICTIM_OLD", "v0"),
        ]),
    )
    .unwrap();
    let check = |tenant, secret: &[u8]| keys.check("gh", tenant, &signed(secret), Some(b"{}"), 0);
    assert_eq!(check("acme", b"a"), Ok(()));
    assert_eq!(check("victim", b"v"), Ok(()));
    assert_eq!(check("victim", b"v0"), Ok(()));
    assert_eq!(
        check("victim", b"a"),
        Err(Refusal::BadSignature),
        "acme's signature"
    );
    assert_eq!(check("acme", b"v"), Err(Refusal::BadSignature));
    assert_eq!(
        check("globex", b"a"),
        Err(Refusal::BadSignature),
        "no secret: refused"
    );
}

#[test]
fn one_secret_under_two_tenants_names_is_refused_unless_shared() {
    let config = Config::parse(PER_TENANT.as_bytes()).unwrap();
    let same = env(&[("GH_ACME", "s"), ("GH_VICTIM", "x"), ("GH_VICTIM_OLD", "s")]);
    let e = Keys::resolve(&config, same).err().unwrap();
    assert_eq!(
        e,
        "sources.gh.verify.secret_env.victim: environment variable GH_VICTIM_OLD holds the same secret as GH_ACME of tenant \"acme\": each path tenant needs its own secret"
    );
    let shared = PER_TENANT.replace(
        r#""secret_env""#,
        r#""shared_across_tenants": true, "secret_env""#,
    );
    let config = Config::parse(shared.as_bytes()).unwrap();
    let same = env(&[("GH_ACME", "s"), ("GH_VICTIM", "x"), ("GH_VICTIM_OLD", "s")]);
    assert!(Keys::resolve(&config, same).is_ok());
}
