//! The request rules a hook meets before any charge: webhooks are POSTed,
//! a body is never larger than `max_body_bytes`, and the body is buffered
//! whenever admission needs to read it or to bound it.

use crate::config::{Config, Source};
use crate::hook::outcome::Outcome;
use crate::hook::reply::LocalReply;

/// A refusal: how it is counted and what the sender gets.
pub type Refusal = (Outcome, LocalReply);

/// What the headers allow, for a hook routed to `source` of `tenant`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers {
    /// Admission must wait for the whole body.
    pub needs_body: bool,
}

/// Checks the method and a declared `content-length`, and says whether the
/// body is needed: when its length is undeclared (chunked: buffered so the
/// limit holds before anything goes upstream), when the source verifies
/// signatures, when its dedupe key is in the body, or when the tenant has a
/// bytes quota.
pub fn check_headers(
    config: &Config,
    tenant: &str,
    source: &Source,
    verifies: bool,
    method: &str,
    content_length: Option<&str>,
) -> Result<Headers, Refusal> {
    if method != "POST" {
        return Err((Outcome::BadMethod, LocalReply::bad_method(method)));
    }
    let limit = config.max_body_bytes;
    let declared = content_length.and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(len) = declared.filter(|len| *len > limit) {
        return Err((Outcome::TooLarge, LocalReply::too_large(len, limit)));
    }
    let needs_body = declared.is_none()
        || verifies
        || source.dedupe.as_ref().is_some_and(|r| r.needs_body())
        || config.rate_limits.for_tenant(tenant).bytes.is_some();
    Ok(Headers { needs_body })
}

/// The body as buffered so far (`size` bytes) against `max_body_bytes`:
/// past it there is no waiting for the end.
pub fn check_body_size(config: &Config, size: u64) -> Result<(), Refusal> {
    let limit = config.max_body_bytes;
    if size > limit {
        return Err((Outcome::TooLarge, LocalReply::too_large(size, limit)));
    }
    Ok(())
}

/// The body bytes the tenant's bytes quota charges (0 without one).
pub fn charged_body_len(config: &Config, tenant: &str, body: Option<&[u8]>) -> u64 {
    if config.rate_limits.for_tenant(tenant).bytes.is_some() {
        body.map_or(0, |b| b.len() as u64)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn config(extra_limits: &str) -> Config {
        let json = format!(
            r#"{{"max_body_bytes":100,
                "sources":{{"gh":{{"tenant":"acme","dedupe":"github"}},
                            "stripe":{{"tenant":"acme","dedupe":"stripe"}}}},
                "rate_limits":{{"default":{{"rate":1,"burst":1{extra_limits}}}}}}}"#
        );
        Config::parse(json.as_bytes()).unwrap()
    }

    fn check(
        config: &Config,
        source: &str,
        verifies: bool,
        method: &str,
        len: Option<&str>,
    ) -> Result<Headers, Refusal> {
        let source = &config.sources[source];
        check_headers(config, "acme", source, verifies, method, len)
    }

    #[test]
    fn only_posts_are_webhooks() {
        let c = config("");
        let (outcome, reply) = check(&c, "gh", false, "GET", Some("0")).unwrap_err();
        assert_eq!(outcome, Outcome::BadMethod);
        assert_eq!(reply.status, 405);
        assert!(reply.body.contains("GET is not accepted"), "{}", reply.body);
    }

    #[test]
    fn a_declared_length_over_the_limit_is_refused_before_the_body() {
        let c = config("");
        let (outcome, reply) = check(&c, "gh", false, "POST", Some(" 101 ")).unwrap_err();
        assert_eq!(outcome, Outcome::TooLarge);
        assert_eq!(reply.status, 413);
        assert!(
            reply.body.contains("101 bytes is over the limit of 100"),
            "{}",
            reply.body
        );
        assert!(check(&c, "gh", false, "POST", Some("100")).is_ok());
    }

    #[test]
    fn the_body_is_needed_only_when_admission_reads_or_bounds_it() {
        let c = config("");
        let needs =
            |source, verifies, len| check(&c, source, verifies, "POST", len).unwrap().needs_body;
        assert!(
            !needs("gh", false, Some("10")),
            "header key, declared length"
        );
        assert!(
            needs("gh", false, None),
            "chunked: bounded before it goes upstream"
        );
        assert!(needs("gh", true, Some("10")), "a signature covers the body");
        assert!(needs("stripe", false, Some("10")), "the key is in the JSON");
        let bytes = config(r#","bytes_rate":10,"bytes_burst":100"#);
        let source = &bytes.sources["gh"];
        assert!(
            check_headers(&bytes, "acme", source, false, "POST", Some("10"))
                .unwrap()
                .needs_body,
            "bytes quota"
        );
    }

    #[test]
    fn a_body_over_the_limit_is_refused_and_only_a_bytes_quota_charges_it() {
        let c = config("");
        assert!(check_body_size(&c, 100).is_ok());
        assert_eq!(check_body_size(&c, 101).unwrap_err().1.status, 413);
        assert_eq!(charged_body_len(&c, "acme", Some(b"abc")), 0);
        let bytes = config(r#","bytes_rate":10,"bytes_burst":100"#);
        assert_eq!(charged_body_len(&bytes, "acme", Some(b"abc")), 3);
        assert_eq!(charged_body_len(&bytes, "acme", None), 0);
    }
}
