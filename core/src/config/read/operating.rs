//! `shadow` (in `rate_limits.default` and `rate_limits.tenants.<t>`) and
//! `rate_limits.headers`: how a tenant's limits are operated.

use super::{show, ConfigError, Obj};
use crate::hook::shadow::Shadow;
use crate::limit::ratelimit_headers::HeadersMode;
use serde_json::Value;

const SHADOW_PARTS: &[&str] = &["rate_limit", "dedupe"];

/// `shadow`: `true`/`false` (rate limits only) or `{"rate_limit", "dedupe"}`.
pub(super) fn shadow(obj: &Obj) -> Result<Option<Shadow>, ConfigError> {
    let Some(value) = obj.get("shadow") else {
        return Ok(None);
    };
    match value {
        Value::Bool(on) => Ok(Some(Shadow::from_bool(*on))),
        Value::Object(_) => {
            let parts = Obj::of(obj.path("shadow"), value, SHADOW_PARTS)?;
            let flag = |key: &str| match parts.get(key) {
                None => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(other) => Err(parts.wrong_type(key, "true or false", other)),
            };
            Ok(Some(Shadow {
                rate_limit: flag("rate_limit")?,
                dedupe: flag("dedupe")?,
            }))
        }
        other => Err(ConfigError::new(
            obj.path("shadow"),
            format!(
                "expected true, false or {{\"rate_limit\": bool, \"dedupe\": bool}}, got {}",
                show(other)
            ),
        )),
    }
}

/// `rate_limits.headers`: `"ietf"` (default), `"legacy"`, `"both"` or `"none"`.
pub(super) fn headers(obj: &Obj) -> Result<HeadersMode, ConfigError> {
    match obj.string("headers")? {
        None => Ok(HeadersMode::default()),
        Some(text) => HeadersMode::parse(text).ok_or_else(|| {
            ConfigError::new(
                obj.path("headers"),
                format!(
                    "unknown headers {text:?}; expected \"ietf\", \"legacy\", \"both\" or \"none\""
                ),
            )
        }),
    }
}
