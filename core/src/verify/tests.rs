//! Each scheme against the vectors its provider publishes (GitHub, Standard
//! Webhooks) or, where none is published (Stripe, Shopify), against vectors
//! computed independently with Python's `hmac` and `hashlib`:
//!
//! ```text
//! hmac.new(b"whsec_test_secret", b'1700000000.{"id":"evt_1"}', sha256).hexdigest()
//! base64.b64encode(hmac.new(b"shpss_secret", b'{"id":1}', sha256).digest())
//! ```

use super::*;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn check(
    scheme: &Scheme,
    secrets: &[&str],
    headers: &[(&str, &str)],
    body: &[u8],
    now_s: u64,
) -> Result<(), Refusal> {
    let keys: Vec<Vec<u8>> = secrets.iter().map(|s| scheme.key(s).unwrap()).collect();
    let lookup = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.to_string())
    };
    verify(scheme, &keys, lookup, body, now_s)
}

fn preset(name: &str) -> Scheme {
    Scheme::preset(name, DEFAULT_TOLERANCE_S).unwrap()
}

const GH_SECRET: &str = "It's a Secret to Everybody";
const GH_SIG: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

#[test]
fn github_published_vector() {
    let gh = preset("github");
    let ok = check(
        &gh,
        &[GH_SECRET],
        &[("X-Hub-Signature-256", GH_SIG)],
        b"Hello, World!",
        0,
    );
    assert_eq!(ok, Ok(()));
    let bad = Err(Refusal::BadSignature);
    assert_eq!(
        check(
            &gh,
            &["other"],
            &[("x-hub-signature-256", GH_SIG)],
            b"Hello, World!",
            0
        ),
        bad
    );
    assert_eq!(
        check(
            &gh,
            &[GH_SECRET],
            &[("x-hub-signature-256", GH_SIG)],
            b"Hello, World?",
            0
        ),
        bad
    );
    assert_eq!(check(&gh, &[GH_SECRET], &[], b"Hello, World!", 0), bad);
    // The MAC without its prefix, or under the old SHA-1 header, is not a signature.
    let bare = &GH_SIG["sha256=".len()..];
    assert_eq!(
        check(
            &gh,
            &[GH_SECRET],
            &[("x-hub-signature-256", bare)],
            b"Hello, World!",
            0
        ),
        bad
    );
    assert_eq!(
        check(
            &gh,
            &[GH_SECRET],
            &[("x-hub-signature", GH_SIG)],
            b"Hello, World!",
            0
        ),
        bad
    );
}

#[test]
fn any_configured_secret_may_sign() {
    let gh = preset("github");
    let headers = [("x-hub-signature-256", GH_SIG)];
    assert_eq!(
        check(&gh, &["new", GH_SECRET], &headers, b"Hello, World!", 0),
        Ok(())
    );
    assert_eq!(
        check(&gh, &[GH_SECRET, "new"], &headers, b"Hello, World!", 0),
        Ok(())
    );
    assert_eq!(
        check(&gh, &["new"], &headers, b"Hello, World!", 0),
        Err(Refusal::BadSignature)
    );
}

#[test]
fn shopify_base64_of_the_body() {
    let shopify = preset("shopify");
    let sig = "xocA3LkeJ/RvNrkxep1EUtFHuj7rIoIqZYaLU26LyPQ=";
    let h = [("x-shopify-hmac-sha256", sig)];
    assert_eq!(
        check(&shopify, &["shpss_secret"], &h, br#"{"id":1}"#, 0),
        Ok(())
    );
    assert_eq!(
        check(&shopify, &["shpss_other"], &h, br#"{"id":1}"#, 0),
        Err(Refusal::BadSignature)
    );
    assert_eq!(
        body_mac::sign(b"shpss_secret", "", Encoding::Base64, br#"{"id":1}"#),
        sig
    );
}

const STRIPE_SECRET: &str = "whsec_test_secret";
const STRIPE_BODY: &[u8] = br#"{"id":"evt_1"}"#;
const STRIPE_V1: &str = "248a374f50f943a28b0f6ab50faf9a7e7e29b710fa26df9fb1618b9bf8ea9c9a";

#[test]
fn stripe_signs_timestamp_dot_body() {
    let stripe = preset("stripe");
    let value = format!("t=1700000000,v1={STRIPE_V1}");
    assert_eq!(
        stripe::sign(STRIPE_SECRET.as_bytes(), 1_700_000_000, STRIPE_BODY),
        value
    );
    let h = [("Stripe-Signature", value.as_str())];
    assert_eq!(
        check(&stripe, &[STRIPE_SECRET], &h, STRIPE_BODY, 1_700_000_100),
        Ok(())
    );
    assert_eq!(
        check(&stripe, &["whsec_other"], &h, STRIPE_BODY, 1_700_000_100),
        Err(Refusal::BadSignature)
    );
    // 300 s is the edge of the default tolerance; one more is stale.
    assert_eq!(
        check(&stripe, &[STRIPE_SECRET], &h, STRIPE_BODY, 1_700_000_300),
        Ok(())
    );
    assert_eq!(
        check(&stripe, &[STRIPE_SECRET], &h, STRIPE_BODY, 1_700_000_301),
        Err(Refusal::StaleTimestamp)
    );
    // The timestamp is signed: moving it breaks the signature, it doesn't make it fresh.
    let moved = format!("t=1700000301,v1={STRIPE_V1}");
    assert_eq!(
        check(
            &stripe,
            &[STRIPE_SECRET],
            &[("stripe-signature", &moved)],
            STRIPE_BODY,
            1_700_000_301
        ),
        Err(Refusal::BadSignature)
    );
}

#[test]
fn stripe_reads_every_v1_and_ignores_v0() {
    let stripe = preset("stripe");
    let other = "0".repeat(64);
    let value = format!("t=1700000000,v0={STRIPE_V1},v1={other},v1={STRIPE_V1}");
    let h = [("stripe-signature", value.as_str())];
    assert_eq!(
        check(&stripe, &[STRIPE_SECRET], &h, STRIPE_BODY, 1_700_000_000),
        Ok(())
    );
    let only_v0 = format!("t=1700000000,v0={STRIPE_V1}");
    let bad = Err(Refusal::BadSignature);
    assert_eq!(
        check(
            &stripe,
            &[STRIPE_SECRET],
            &[("stripe-signature", &only_v0)],
            STRIPE_BODY,
            1_700_000_000
        ),
        bad
    );
    for broken in [
        format!("v1={STRIPE_V1}"),
        format!("t=abc,v1={STRIPE_V1}"),
        String::new(),
    ] {
        assert_eq!(
            check(
                &stripe,
                &[STRIPE_SECRET],
                &[("stripe-signature", &broken)],
                STRIPE_BODY,
                1_700_000_000
            ),
            bad,
            "{broken}"
        );
    }
}

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SW_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const SW_TS: &str = "1614265330";
const SW_BODY: &[u8] = br#"{"test": 2432232314}"#;
const SW_SIG: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

#[test]
fn standard_webhooks_published_vector() {
    let sw = preset("standard_webhooks");
    let h = [
        ("webhook-id", SW_ID),
        ("webhook-timestamp", SW_TS),
        ("webhook-signature", SW_SIG),
    ];
    assert_eq!(check(&sw, &[SW_SECRET], &h, SW_BODY, 1_614_265_330), Ok(()));
    let key = sw.key(SW_SECRET).unwrap();
    assert_eq!(standard::sign(&key, SW_ID, 1_614_265_330, SW_BODY), SW_SIG);
    assert_eq!(
        check(&sw, &[SW_SECRET], &h, SW_BODY, 1_614_265_330 + 301),
        Err(Refusal::StaleTimestamp)
    );
    assert_eq!(
        check(
            &sw,
            &["whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"],
            &h,
            SW_BODY,
            1_614_265_330
        ),
        Err(Refusal::BadSignature)
    );
    // Svix's names are not Standard Webhooks' names.
    let svix_names = [
        ("svix-id", SW_ID),
        ("svix-timestamp", SW_TS),
        ("svix-signature", SW_SIG),
    ];
    assert_eq!(
        check(&sw, &[SW_SECRET], &svix_names, SW_BODY, 1_614_265_330),
        Err(Refusal::BadSignature)
    );
    assert_eq!(
        check(
            &preset("svix"),
            &[SW_SECRET],
            &svix_names,
            SW_BODY,
            1_614_265_330
        ),
        Ok(())
    );
}

#[test]
fn standard_webhooks_reads_several_signatures_and_needs_all_three_headers() {
    let sw = preset("standard_webhooks");
    let several = format!("v1a,abc v1,AAAA {SW_SIG}");
    let h = [
        ("webhook-id", SW_ID),
        ("webhook-timestamp", SW_TS),
        ("webhook-signature", several.as_str()),
    ];
    assert_eq!(check(&sw, &[SW_SECRET], &h, SW_BODY, 1_614_265_330), Ok(()));
    for missing in 0..3 {
        let mut h = vec![
            ("webhook-id", SW_ID),
            ("webhook-timestamp", SW_TS),
            ("webhook-signature", SW_SIG),
        ];
        h.remove(missing);
        assert_eq!(
            check(&sw, &[SW_SECRET], &h, SW_BODY, 1_614_265_330),
            Err(Refusal::BadSignature),
            "without header {missing}"
        );
    }
}

/// An empty HMAC key would let anyone sign: `whsec_` with nothing after it
/// is refused, not read as the empty key.
#[test]
fn whsec_with_an_empty_key_is_refused() {
    for name in ["standard_webhooks", "svix"] {
        let scheme = preset(name);
        assert!(scheme.key("whsec_").is_err(), "{name}");
        assert!(scheme.key("whsec_AAAA").is_ok(), "{name}");
    }
}

/// A repeated `t=` is read once, the first: the signature binds that one.
#[test]
fn stripe_reads_the_first_timestamp_of_a_repeated_t() {
    let stripe = preset("stripe");
    let first = format!("t=1700000000,t=1700000999,v1={STRIPE_V1}");
    let last = format!("t=1700000999,t=1700000000,v1={STRIPE_V1}");
    for (value, want) in [(first, Ok(())), (last, Err(Refusal::BadSignature))] {
        assert_eq!(
            check(
                &stripe,
                &[STRIPE_SECRET],
                &[("stripe-signature", &value)],
                STRIPE_BODY,
                1_700_000_000
            ),
            want,
            "{value}"
        );
    }
}

/// At most eight `v1` entries are read from one header: each costs an HMAC
/// per configured secret inside Envoy. A valid ninth entry is never reached.
#[test]
fn stripe_reads_at_most_eight_v1_entries() {
    let stripe = preset("stripe");
    let other = "0".repeat(64);
    let header = |before: usize| {
        let mut value = String::from("t=1700000000");
        for _ in 0..before {
            value.push_str(&format!(",v1={other}"));
        }
        value.push_str(&format!(",v1={STRIPE_V1}"));
        value
    };
    let eighth = header(7);
    let ninth = header(8);
    assert_eq!(
        check(
            &stripe,
            &[STRIPE_SECRET],
            &[("stripe-signature", &eighth)],
            STRIPE_BODY,
            1_700_000_000
        ),
        Ok(())
    );
    assert_eq!(
        check(
            &stripe,
            &[STRIPE_SECRET],
            &[("stripe-signature", &ninth)],
            STRIPE_BODY,
            1_700_000_000
        ),
        Err(Refusal::BadSignature)
    );
}

#[test]
fn whsec_keys_must_be_base64_and_the_error_hides_the_value() {
    let sw = preset("standard_webhooks");
    let e = sw.key("whsec_not base64!").unwrap_err();
    assert!(!e.contains("not base64!"), "{e}");
    assert!(sw.key("").is_err());
    // Stripe's whsec_ secret keys the HMAC as written.
    assert_eq!(preset("stripe").key("whsec_x").unwrap(), b"whsec_x");
}

#[test]
fn a_whsec_secret_without_its_padding_signs_as_the_padded_one() {
    // 32 bytes: base64 ends in one `=`, which the providers' libraries let a
    // secret leave out.
    let padded = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let unpadded = padded.trim_end_matches('=');
    assert_ne!(padded, unpadded);
    for name in ["standard_webhooks", "svix"] {
        let scheme = preset(name);
        let key = scheme.key(unpadded).unwrap();
        assert_eq!(key, (0u8..32).collect::<Vec<u8>>(), "{name}");
        assert_eq!(scheme.key(padded).unwrap(), key, "{name}");
        let prefix = if name == "svix" { "svix" } else { "webhook" };
        let [id, ts, signature] =
            ["id", "timestamp", "signature"].map(|part| format!("{prefix}-{part}"));
        let sig = standard::sign(&key, SW_ID, 1_614_265_330, SW_BODY);
        let h = [
            (id.as_str(), SW_ID),
            (ts.as_str(), SW_TS),
            (signature.as_str(), sig.as_str()),
        ];
        for secret in [padded, unpadded] {
            assert_eq!(
                check(&scheme, &[secret], &h, SW_BODY, 1_614_265_330),
                Ok(()),
                "{name} with {secret}"
            );
        }
    }
    // Padding that doesn't belong is still refused.
    assert!(preset("standard_webhooks")
        .key("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8==")
        .is_err());
}

#[test]
fn a_generic_rule_reads_its_header_prefix_and_encoding() {
    let rule = Scheme::BodyMac {
        header: "x-signature".into(),
        prefix: "hmac=".into(),
        encoding: Encoding::Base64,
    };
    let value = body_mac::sign(b"k", "hmac=", Encoding::Base64, b"body");
    assert_eq!(
        check(&rule, &["k"], &[("x-signature", &value)], b"body", 0),
        Ok(())
    );
    let bare = value.trim_start_matches("hmac=");
    assert_eq!(
        check(&rule, &["k"], &[("x-signature", bare)], b"body", 0),
        Err(Refusal::BadSignature)
    );
}

#[test]
fn refusals_spell_the_401_error() {
    assert_eq!(Refusal::BadSignature.as_str(), "bad_signature");
    assert_eq!(Refusal::StaleTimestamp.as_str(), "stale_timestamp");
}
