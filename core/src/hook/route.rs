//! Which tenant and source a request path is for.
//!
//! `/webhooks/{tenant}/{source}` names both; `/webhooks/{source}` is for
//! providers that can't put a tenant in the URL, so the source's config must
//! name it. A source that names a tenant accepts only that tenant, so one
//! tenant can't spend another's quota or claim its event keys through it.
//! Anything else is not ours: the filter answers 404.

use crate::config::{is_valid_id, Config, Source, MAX_ID_LEN};

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
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum RouteError {
    /// Not `/webhooks/{source}` or `/webhooks/{tenant}/{source}`.
    #[error(
        "not a webhook path: expected /webhooks/{{tenant}}/{{source}} or /webhooks/{{source}}"
    )]
    NotWebhookPath,
    /// No source has this id.
    #[error("unknown source {0:?}")]
    UnknownSource(String),
    /// The tenant segment is not 1 to 64 characters of `[A-Za-z0-9_-]`.
    #[error("invalid tenant {0:?}: expected 1 to {MAX_ID_LEN} characters of [A-Za-z0-9_-]")]
    InvalidTenant(String),
    /// The path's tenant is not one the source accepts.
    #[error("{}", mismatch(source_id, source_tenant.as_deref(), path_tenant.as_deref()))]
    TenantMismatch {
        source_id: String,
        /// The tenant the source's config names (None: it names none).
        source_tenant: Option<String>,
        /// The tenant in the path (None: the one-segment form).
        path_tenant: Option<String>,
    },
}

fn mismatch(source_id: &str, source_tenant: Option<&str>, path_tenant: Option<&str>) -> String {
    match (source_tenant, path_tenant) {
        (Some(own), Some(asked)) => {
            format!("source {source_id:?} belongs to tenant {own:?}, not {asked:?}")
        }
        _ => format!("source {source_id:?} names no tenant: use /webhooks/{{tenant}}/{source_id}"),
    }
}

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
mod tests;
