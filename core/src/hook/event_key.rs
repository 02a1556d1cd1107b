//! The provider's event id: the key a hook is deduplicated on.
//!
//! Each source names a rule: a header (GitHub's `x-github-delivery`, Standard
//! Webhooks' `webhook-id`, ...) or a dot path into the JSON body (Stripe's
//! `id`). No key means nothing is claimed and only the quota applies, so every
//! odd input — missing header, empty value, non-JSON body, a float or an
//! object where the id should be — is `None`, never an error or a panic.
//!
//! A header value is read as bytes: HTTP allows obs-text, and a provider whose
//! ids aren't UTF-8 must still be deduplicated. Whatever can't travel as is
//! in a header and a Redis key becomes `sha256:<hex>` of its bytes (see
//! [`normalize_key`]), the same on every node.

use crate::hook::headers::OWN_PREFIX;
use crate::limit::limits::MAX_KEY_LEN;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Where a source's event id is found.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum DedupeRule {
    /// A request header; the name is stored lowercased (Envoy's header map is).
    Header(String),
    /// Object keys (or array indices) from the body's root, e.g. `["data", "object", "id"]`.
    JsonPath(Vec<String>),
}

/// The preset names a source's `dedupe` may use, in the order messages list them.
pub const PRESETS: [&str; 5] = ["github", "standard_webhooks", "svix", "shopify", "stripe"];

/// Prefix of a key that was replaced by its SHA-256 (see [`normalize_key`]).
pub const HASHED_PREFIX: &str = "sha256:";

impl DedupeRule {
    /// The rule a provider preset stands for; `None` for an unknown name.
    pub fn preset(name: &str) -> Option<DedupeRule> {
        let header = |h: &str| Some(DedupeRule::Header(h.to_string()));
        match name {
            "github" => header("x-github-delivery"),
            "standard_webhooks" => header("webhook-id"),
            "svix" => header("svix-id"),
            "shopify" => header("x-shopify-webhook-id"),
            "stripe" => Some(DedupeRule::JsonPath(vec!["id".to_string()])),
            _ => None,
        }
    }

    /// A header rule; the error says why `name` is not a header name.
    pub fn header(name: &str) -> Result<DedupeRule, String> {
        let is_token_char = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if name.is_empty() || !name.bytes().all(is_token_char) {
            return Err(format!("{name:?} is not an HTTP header name"));
        }
        let lower = name.to_ascii_lowercase();
        if lower.starts_with(OWN_PREFIX) {
            return Err(format!(
                "{name:?} is in the edge's own header namespace ({OWN_PREFIX}*): \
                 the edge removes every such header a sender sets, so no rule can read it"
            ));
        }
        Ok(DedupeRule::Header(lower))
    }

    /// A JSON dot-path rule (`"data.object.id"`); the error says why it is refused.
    pub fn json_path(path: &str) -> Result<DedupeRule, String> {
        let segments: Vec<String> = path.split('.').map(str::to_string).collect();
        if segments.iter().any(String::is_empty) {
            return Err(format!(
                "{path:?} has an empty segment; write a dot path like \"data.object.id\""
            ));
        }
        Ok(DedupeRule::JsonPath(segments))
    }

    /// The filter must buffer the body before it can extract the key.
    pub fn needs_body(&self) -> bool {
        matches!(self, DedupeRule::JsonPath(_))
    }

    /// The event key of one request, ready to claim (see [`normalize_key`]).
    /// `header` looks a lowercased header name up and answers its value's
    /// bytes (UTF-8 or not); `body` is `None` until read.
    pub fn extract<V: AsRef<[u8]>>(
        &self,
        header: impl Fn(&str) -> Option<V>,
        body: Option<&[u8]>,
    ) -> Option<String> {
        match self {
            // Surrounding whitespace (SP, HTAB) is not part of an HTTP field value.
            DedupeRule::Header(name) => normalize_key(header(name)?.as_ref().trim_ascii()),
            DedupeRule::JsonPath(path) => {
                let root: Value = serde_json::from_slice(body?).ok()?;
                let mut value = &root;
                for segment in path {
                    value = match value {
                        Value::Object(map) => map.get(segment)?,
                        Value::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
                        _ => return None,
                    };
                }
                match value {
                    Value::String(s) => normalize_key(s),
                    Value::Number(n) if n.is_i64() || n.is_u64() => normalize_key(n.to_string()),
                    _ => None,
                }
            }
        }
    }
}

/// Turns a raw id (header bytes, or a JSON id's UTF-8) into a key the wire,
/// Redis and the `x-ankusa-event-key` header all carry unchanged. Empty is no
/// key. An id of 1 to [`MAX_KEY_LEN`] printable ASCII bytes (0x20–0x7e) that
/// neither starts nor ends with a space is the key itself. Anything else —
/// longer, a control byte, a byte over 0x7e (non-ASCII UTF-8, or not UTF-8 at
/// all), an edge space a header would lose — becomes `sha256:<64 lowercase
/// hex>` of its bytes: the same id always maps to the same key, on every node.
pub fn normalize_key(raw: impl AsRef<[u8]>) -> Option<String> {
    let raw = raw.as_ref();
    if raw.is_empty() {
        return None;
    }
    if let Some(key) = as_is(raw) {
        return Some(key.to_string());
    }
    let mut key = String::with_capacity(HASHED_PREFIX.len() + 64);
    key.push_str(HASHED_PREFIX);
    key.push_str(&hex::encode(Sha256::digest(raw)));
    Some(key)
}

/// `raw` as text when it may be the key unchanged (see [`normalize_key`]).
fn as_is(raw: &[u8]) -> Option<&str> {
    let printable = |b: &u8| (0x20..=0x7e).contains(b);
    let fits = raw.len() <= MAX_KEY_LEN
        && raw.iter().all(printable)
        && raw.first() != Some(&b' ')
        && raw.last() != Some(&b' ');
    // Printable ASCII is UTF-8, so this never fails when `fits`.
    fits.then(|| std::str::from_utf8(raw).ok()).flatten()
}

#[cfg(test)]
mod tests;
