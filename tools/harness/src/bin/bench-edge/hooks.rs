//! What every client of a variant sends: a GitHub webhook with a fresh
//! delivery id per hook, signed for the verifying variant.

use super::variants::{self, Variant, BODY, PATH, SIGNED_BODY};
use ankusa_testkit::envoy::Edge;
use ankusa_tools::load::LoadSpec;
use std::time::Duration;

/// What every client of `variant` sends to `edge` for `duration`.
pub fn load_spec(
    variant: &Variant,
    edge: &Edge,
    tag: &str,
    clients: usize,
    duration: Duration,
) -> LoadSpec {
    let mut headers = vec![
        ("content-type".to_string(), "application/json".to_string()),
        // A fresh delivery per hook: none is a duplicate, every one a claim.
        (
            "x-github-delivery".to_string(),
            format!("{tag}-{}-{{i}}", variant.key),
        ),
        ("x-intake-status".to_string(), "201".to_string()),
    ];
    let body = if variant.signed {
        headers.push(("x-hub-signature-256".to_string(), variants::signature()));
        SIGNED_BODY
    } else {
        BODY
    };
    LoadSpec {
        url: edge.url(PATH),
        method: "POST".to_string(),
        headers,
        body: body.to_string(),
        clients,
        duration,
        expect_body: None,
        timeout: Duration::from_secs(10),
        rate: None,
        max_requests: None,
    }
}
