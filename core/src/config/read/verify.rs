//! `sources.<id>.verify`: which scheme signs the source's deliveries and
//! which VM environment variables hold its secrets.
//!
//! ```json
//! {"scheme": "github", "secret_env": ["ANKUSA_GH_SECRET", "ANKUSA_GH_SECRET_OLD"]}
//! {"scheme": "stripe", "secret_env": "ANKUSA_STRIPE_SECRET", "tolerance_s": 300}
//! {"scheme": "hmac_sha256", "secret_env": ["S"], "header": "x-signature", "prefix": "sha256=", "encoding": "hex"}
//! {"scheme": "github", "secret_env": {"acme": "GH_ACME", "globex": ["GH_GLOBEX", "GH_GLOBEX_OLD"]},
//!  "replay_guard": {"window_ms": 86400000}}
//! ```
//!
//! Only names are configured, never values: the filter reads the values from
//! its VM environment at `on_configure`, so they never show in `config_dump`.
//!
//! A source whose tenant comes from the path signs each tenant's deliveries
//! with that tenant's secret: `secret_env` is then a map of tenant to
//! variables, and one list for all of them is refused unless
//! `shared_across_tenants` says the tenants really share it (otherwise a
//! delivery signed for one tenant would be admitted as another's).

use super::{show, ConfigError, Obj};
use crate::config::is_valid_id;
use crate::hook::event_key::DedupeRule;
use crate::limit::limits;
use crate::verify::rule::{
    is_env_name, Encoding, Scheme, Secrets, VerifyRule, DEFAULT_REPLAY_WINDOW_MS,
    DEFAULT_TOLERANCE_S, GENERIC, MAX_SECRETS, PRESETS,
};
use serde_json::Value;
use std::collections::BTreeMap;

pub(super) const VERIFY: &[&str] = &[
    "scheme",
    "secret_env",
    "tolerance_s",
    "header",
    "prefix",
    "encoding",
    "shared_across_tenants",
    "replay_guard",
];
const REPLAY_GUARD: &[&str] = &["window_ms"];

/// Keys only the generic rule takes.
const GENERIC_ONLY: [&str; 3] = ["header", "prefix", "encoding"];

fn schemes() -> String {
    format!("{}, {GENERIC}", PRESETS.join(", "))
}

/// `tenant`: the tenant the source names (None: the path names it).
pub(super) fn rule(obj: &Obj, tenant: Option<&str>) -> Result<VerifyRule, ConfigError> {
    let Some(name) = obj.string("scheme")? else {
        return Err(ConfigError::new(
            obj.path("scheme"),
            format!("is required: one of {}", schemes()),
        ));
    };
    let timestamped = Scheme::has_timestamp(name);
    let tolerance_s = obj.u64("tolerance_s")?;
    if let Some(t) = tolerance_s {
        if !timestamped {
            return Err(ConfigError::new(
                obj.path("tolerance_s"),
                format!(
                    "{name} signs no timestamp; only stripe, standard_webhooks and svix take one"
                ),
            ));
        }
        if t == 0 {
            return Err(ConfigError::new(
                obj.path("tolerance_s"),
                "must be at least 1, got 0",
            ));
        }
    }
    let scheme = if name == GENERIC {
        generic(obj)?
    } else {
        if let Some(key) = GENERIC_ONLY.iter().find(|k| obj.get(k).is_some()) {
            return Err(ConfigError::new(
                obj.path(key),
                format!("only for scheme {GENERIC:?}; the {name} preset fixes it"),
            ));
        }
        Scheme::preset(name, tolerance_s.unwrap_or(DEFAULT_TOLERANCE_S)).ok_or_else(|| {
            ConfigError::new(
                obj.path("scheme"),
                format!("unknown scheme {name:?}; expected one of {}", schemes()),
            )
        })?
    };
    let replay_window_ms = replay_guard(obj, name, &scheme)?;
    Ok(VerifyRule {
        name: name.to_string(),
        scheme,
        secret_env: secrets(obj, tenant)?,
        shared_across_tenants: obj.get("shared_across_tenants") == Some(&Value::Bool(true)),
        replay_window_ms,
    })
}

fn generic(obj: &Obj) -> Result<Scheme, ConfigError> {
    let Some(header) = obj.string("header")? else {
        return Err(ConfigError::new(
            obj.path("header"),
            format!("is required for scheme {GENERIC:?}: the header holding the signature"),
        ));
    };
    let header = match DedupeRule::header(header) {
        Ok(DedupeRule::Header(lower)) => lower,
        Ok(_) => {
            return Err(ConfigError::new(
                obj.path("header"),
                format!("{header:?} is not an HTTP header name"),
            ))
        }
        Err(problem) => return Err(ConfigError::new(obj.path("header"), problem)),
    };
    let encoding = match obj.string("encoding")? {
        None | Some("hex") => Encoding::Hex,
        Some("base64") => Encoding::Base64,
        Some(other) => {
            return Err(ConfigError::new(
                obj.path("encoding"),
                format!("unknown encoding {other:?}; expected \"hex\" or \"base64\""),
            ))
        }
    };
    Ok(Scheme::BodyMac {
        header,
        prefix: obj.string("prefix")?.unwrap_or_default().to_string(),
        encoding,
    })
}

/// `replay_guard`: `{"window_ms": N}` (24 h when omitted), only for a
/// scheme that signs the body alone.
fn replay_guard(obj: &Obj, name: &str, scheme: &Scheme) -> Result<Option<u64>, ConfigError> {
    let Some(guard) = obj.object("replay_guard", REPLAY_GUARD)? else {
        return Ok(None);
    };
    if !scheme.signs_body_only() {
        return Err(ConfigError::new(
            obj.path("replay_guard"),
            format!(
                "{name} signs the delivery's id and time, so a replay is refused already; \
                 the guard is for github, shopify and {GENERIC}"
            ),
        ));
    }
    let window = guard.u64("window_ms")?.unwrap_or(DEFAULT_REPLAY_WINDOW_MS);
    limits::TTL_MS
        .check(window)
        .map_err(|message| ConfigError::new(guard.path("window_ms"), message))?;
    Ok(Some(window))
}

/// `secret_env` and `shared_across_tenants`: one list for a source with a
/// tenant (or tenants that share it, said explicitly), a map per path tenant.
fn secrets(obj: &Obj, tenant: Option<&str>) -> Result<Secrets, ConfigError> {
    let shared = match obj.get("shared_across_tenants") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(obj.wrong_type("shared_across_tenants", "true or false", other)),
    };
    let field = obj.path("secret_env");
    if let (Some(own), true) = (tenant, shared) {
        return Err(ConfigError::new(
            obj.path("shared_across_tenants"),
            format!("the source has one tenant ({own:?}): there is nothing to share"),
        ));
    }
    let Some(Value::Object(map)) = obj.get("secret_env") else {
        if tenant.is_none() && !shared {
            // Read the names first, so a malformed one is named as such.
            names(&field, obj.get("secret_env"))?;
            return Err(ConfigError::new(
                field,
                "the source takes its tenant from the path, so one secret would admit a \
                 delivery signed for any tenant as another's: give each tenant its own \
                 ({\"<tenant>\": \"<VARIABLE>\", …}), or set \"shared_across_tenants\": true \
                 if they really share it",
            ));
        }
        return names(&field, obj.get("secret_env")).map(Secrets::Shared);
    };
    if let Some(own) = tenant {
        return Err(ConfigError::new(
            field,
            format!(
                "the source has one tenant ({own:?}): give its variables as a name or a list, \
                 a map of tenants is for a source whose tenant comes from the path"
            ),
        ));
    }
    if map.is_empty() {
        return Err(ConfigError::new(field, "must name at least one tenant"));
    }
    let mut per_tenant = BTreeMap::new();
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in map {
        if !is_valid_id(name) {
            return Err(ConfigError::new(
                field,
                format!(
                    "{name:?} is not a valid tenant name: 1 to {} characters of [A-Za-z0-9_-]",
                    crate::config::MAX_ID_LEN
                ),
            ));
        }
        let tenant_field = format!("{field}.{name}");
        let list = names(&tenant_field, Some(value))?;
        for var in &list {
            if let (Some(other), false) = (owner.get(var), shared) {
                return Err(ConfigError::new(
                    tenant_field,
                    format!(
                        "{var:?} is {other:?}'s too: each path tenant needs its own secret \
                         (or set \"shared_across_tenants\": true)"
                    ),
                ));
            }
        }
        for var in &list {
            owner.entry(var.clone()).or_insert_with(|| name.clone());
        }
        per_tenant.insert(name.clone(), list);
    }
    Ok(Secrets::PerTenant(per_tenant))
}

/// One name or a list of 1 to [`MAX_SECRETS`] distinct names, at `field`.
fn names(field: &str, value: Option<&Value>) -> Result<Vec<String>, ConfigError> {
    let field = field.to_string();
    let names: Vec<&Value> = match value {
        None => {
            return Err(ConfigError::new(
                field,
                "is required: the environment variables holding the signing secrets",
            ))
        }
        Some(one @ Value::String(_)) => vec![one],
        Some(Value::Array(list)) => list.iter().collect(),
        Some(other) => {
            return Err(ConfigError::new(
                field,
                format!(
                    "expected a variable name or a list of them, got {}",
                    show(other)
                ),
            ))
        }
    };
    if names.is_empty() || names.len() > MAX_SECRETS {
        return Err(ConfigError::new(
            field,
            format!(
                "must name 1 to {MAX_SECRETS} variables, got {}",
                names.len()
            ),
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for value in names {
        let Some(name) = value.as_str().filter(|n| is_env_name(n)) else {
            return Err(ConfigError::new(
                field,
                format!(
                    "{} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                    show(value)
                ),
            ));
        };
        if out.iter().any(|n| n == name) {
            return Err(ConfigError::new(field, format!("{name:?} is named twice")));
        }
        out.push(name.to_string());
    }
    Ok(out)
}
