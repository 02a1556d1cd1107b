//! Which tenant and source a request path is for.
//!
//! `/webhooks/{tenant}/{source}` names both; `/webhooks/{source}` is for
//! providers that can't put a tenant in the URL, so the source's config must
//! name it. A source that names a tenant accepts only that tenant, so one
//! tenant can't spend another's quota or claim its event keys through it.
//! Anything else is not ours: the filter answers 404.

use crate::config::{is_valid_id, Config, Source, MAX_ID_LEN};
use std::fmt;

const PREFIX: &str = "/webhooks/";

/// A request path resolved against the configuration.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Route<'c> {
    pub tenant: String,
    pub source_id: String,
    pub source: &'c Source,
}

/// Why a path is not a configured webhook endpoint. Values taken from the
/// path are cut to [`MAX_ID_LEN`] bytes, so a long path can't flood a reply or log.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RouteError {
    /// Not `/webhooks/{source}` or `/webhooks/{tenant}/{source}`.
    NotWebhookPath,
    /// No source has this id.
    UnknownSource(String),
    /// The tenant segment is not 1 to 64 characters of `[A-Za-z0-9_-]`.
    InvalidTenant(String),
    /// The path's tenant is not one the source accepts.
    TenantMismatch {
        source_id: String,
        /// The tenant the source's config names (None: it names none).
        source_tenant: Option<String>,
        /// The tenant in the path (None: the one-segment form).
        path_tenant: Option<String>,
    },
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteError::NotWebhookPath => {
                write!(f, "not a webhook path: expected /webhooks/{{tenant}}/{{source}} or /webhooks/{{source}}")
            }
            RouteError::UnknownSource(id) => write!(f, "unknown source {id:?}"),
            RouteError::InvalidTenant(t) => {
                write!(
                    f,
                    "invalid tenant {t:?}: expected 1 to {MAX_ID_LEN} characters of [A-Za-z0-9_-]"
                )
            }
            RouteError::TenantMismatch {
                source_id,
                source_tenant,
                path_tenant,
            } => match (source_tenant, path_tenant) {
                (Some(own), Some(asked)) => {
                    write!(
                        f,
                        "source {source_id:?} belongs to tenant {own:?}, not {asked:?}"
                    )
                }
                _ => write!(
                    f,
                    "source {source_id:?} names no tenant: use /webhooks/{{tenant}}/{source_id}"
                ),
            },
        }
    }
}

impl std::error::Error for RouteError {}

/// Resolves `path` (an HTTP `:path`; the query string is ignored). One
/// trailing slash is tolerated; empty segments are not.
pub fn route<'c>(config: &'c Config, path: &str) -> Result<Route<'c>, RouteError> {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let rest = path
        .strip_prefix(PREFIX)
        .ok_or(RouteError::NotWebhookPath)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (path_tenant, source_id) = match rest.split_once('/') {
        None => (None, rest),
        Some((tenant, source_id)) => (Some(tenant), source_id),
    };
    if path_tenant.is_some_and(str::is_empty) || source_id.is_empty() || source_id.contains('/') {
        return Err(RouteError::NotWebhookPath);
    }
    let source = config
        .sources
        .get(source_id)
        .ok_or_else(|| RouteError::UnknownSource(clip(source_id)))?;
    if let Some(tenant) = path_tenant {
        if !is_valid_id(tenant) {
            return Err(RouteError::InvalidTenant(clip(tenant)));
        }
    }
    let tenant = match (&source.tenant, path_tenant) {
        (Some(own), None) => own.clone(),
        (None, Some(asked)) => asked.to_string(),
        (Some(own), Some(asked)) if own == asked => own.clone(),
        (own, asked) => {
            return Err(RouteError::TenantMismatch {
                source_id: source_id.to_string(),
                source_tenant: own.clone(),
                path_tenant: asked.map(str::to_string),
            })
        }
    };
    Ok(Route {
        tenant,
        source_id: source_id.to_string(),
        source,
    })
}

/// At most [`MAX_ID_LEN`] bytes of `s`, cut on a char boundary.
fn clip(s: &str) -> String {
    let mut end = s.len().min(MAX_ID_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

#[cfg(test)]
mod tests {
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
}
