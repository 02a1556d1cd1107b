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
        trace: Some(TRACE.into()),
    }
}

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn every_field_is_printed_in_order() {
    assert_eq!(
        admitted().render(),
        "outcome=admitted shadow=false tenant=acme source=gh \
         key=72d3162e-cc78-11e3-81ab-4c9367dc0958 hook=0190f1a2-0000-7000-8000-00000000000a \
         rate_scope=fleet dedupe_scope=fleet decided=store store_us=812 \
         trace=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    );
    let names: Vec<_> = admitted()
        .render()
        .split(' ')
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string()))
        .collect();
    assert_eq!(names, FIELDS);
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
         rate_scope=node dedupe_scope=node decided=node store_us=- trace=-"
    );
}

#[test]
fn a_senders_key_cannot_break_the_line_or_forge_a_field() {
    let mut d = admitted();
    d.event_key = Some("a b\"c\\d\ne=f\u{7f}é".into());
    let line = d.render();
    assert!(
        line.contains(r#" key="a\x20b\"c\\d\x0ae=f\x7f\xc3\xa9" hook="#),
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
    assert!(
        line.ends_with(&format!(" decided=fallback store_us=25000 trace={TRACE}")),
        "{line}"
    );
}

/// A key with spaces was printed quoted but with its spaces as they were,
/// so a reader splitting the line on spaces (as docs/observing.md told one
/// to) read a `decided=` or `tenant=` the sender wrote.
#[test]
fn a_key_with_spaces_forges_no_field_however_the_line_is_split() {
    let mut d = admitted();
    d.event_key = Some(r#"x" decided=store tenant=victim outcome=admitted"#.into());
    let line = d.render();
    let words: Vec<&str> = line.split(' ').collect();
    assert_eq!(words.len(), FIELDS.len(), "{line}");
    for (word, name) in words.iter().zip(FIELDS) {
        assert!(word.starts_with(&format!("{name}=")), "{word} in {line}");
    }
    assert_eq!(
        words[4],
        r#"key="x\"\x20decided=store\x20tenant=victim\x20outcome=admitted""#
    );
}

#[test]
fn the_longest_decision_fits_its_bound() {
    let d = Decision {
        outcome: Some(Outcome::RateLimited),
        shadow: true,
        tenant: Some("t".repeat(64)),
        source: Some("s".repeat(64)),
        event_key: Some(" ".repeat(crate::limit::limits::MAX_KEY_LEN)),
        decided: Decided::Fallback,
        store_us: Some(u64::MAX),
        ..admitted()
    };
    let line = d.render();
    assert!(line.len() <= MAX_RENDERED, "{} bytes: {line}", line.len());
    assert!(
        line.len() > MAX_RENDERED - 200,
        "the bound is close: {}",
        line.len()
    );
}
