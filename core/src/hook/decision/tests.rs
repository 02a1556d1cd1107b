use super::*;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn admitted() -> Decision {
    Decision {
        outcome: Some(Outcome::Admitted),
        shadow: false,
        tenant: Some("acme".into()),
        source: Some("gh".into()),
        event_key: Some("72d3162e-cc78-11e3-81ab-4c9367dc0958".into()),
        hook_id: Some("0190f1a2-0000-7000-8000-00000000000a".into()),
        scopes: (Scope::Fleet, Scope::Fleet),
        decided: Decided::Store,
        store_us: Some(812),
    }
}

#[test]
fn every_field_is_printed_in_order() {
    assert_eq!(
        admitted().render(),
        "outcome=admitted shadow=false tenant=acme source=gh \
         key=72d3162e-cc78-11e3-81ab-4c9367dc0958 hook=0190f1a2-0000-7000-8000-00000000000a \
         rate_scope=fleet dedupe_scope=fleet decided=store store_us=812"
    );
}

#[test]
fn what_is_not_known_is_a_dash() {
    let not_found = Decision {
        outcome: Some(Outcome::NotFound),
        ..Decision::default()
    };
    assert_eq!(
        not_found.render(),
        "outcome=not_found shadow=false tenant=- source=- key=- hook=- \
         rate_scope=node dedupe_scope=node decided=node store_us=-"
    );
}

#[test]
fn a_senders_key_cannot_break_the_line_or_forge_a_field() {
    let mut d = admitted();
    d.event_key = Some("a b\"c\\d\ne=f\u{7f}é".into());
    let line = d.render();
    assert!(
        line.contains(r#" key="a b\"c\\d\x0ae=f\x7f\xc3\xa9" hook="#),
        "{line}"
    );
    assert!(!line.contains('\n') && line.is_ascii(), "{line}");
    // A real key that reads as "unknown" or as nothing is quoted.
    for (key, shown) in [("-", r#"key="-""#), ("", r#"key="""#)] {
        d.event_key = Some(key.into());
        assert!(d.render().contains(shown), "{key:?}: {}", d.render());
    }
}

#[test]
fn a_shadowed_refusal_and_a_fallback_say_so() {
    let d = Decision {
        outcome: Some(Outcome::RateLimited),
        shadow: true,
        decided: Decided::Fallback,
        store_us: Some(25_000),
        ..admitted()
    };
    let line = d.render();
    assert!(
        line.starts_with("outcome=rate_limited shadow=true "),
        "{line}"
    );
    assert!(line.ends_with(" decided=fallback store_us=25000"), "{line}");
}
