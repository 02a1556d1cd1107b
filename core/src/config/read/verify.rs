//! `sources.<id>.verify`: which scheme signs the source's deliveries and
//! which VM environment variables hold its secrets.
//!
//! ```json
//! {"scheme": "github", "secret_env": ["ANKUSA_GH_SECRET", "ANKUSA_GH_SECRET_OLD"]}
//! {"scheme": "stripe", "secret_env": "ANKUSA_STRIPE_SECRET", "tolerance_s": 300}
//! {"scheme": "hmac_sha256", "secret_env": ["S"], "header": "x-signature", "prefix": "sha256=", "encoding": "hex"}
//! ```
//!
//! Only names are configured, never values: the filter reads the values from
//! its VM environment at `on_configure`, so they never show in `config_dump`.

use super::{show, ConfigError, Obj};
use crate::event_key::DedupeRule;
use crate::verify::rule::{
    is_env_name, Encoding, Scheme, VerifyRule, DEFAULT_TOLERANCE_S, GENERIC, MAX_SECRETS, PRESETS,
};
use serde_json::Value;

pub(super) const VERIFY: &[&str] = &[
    "scheme",
    "secret_env",
    "tolerance_s",
    "header",
    "prefix",
    "encoding",
];

/// Keys only the generic rule takes.
const GENERIC_ONLY: [&str; 3] = ["header", "prefix", "encoding"];

fn schemes() -> String {
    format!("{}, {GENERIC}", PRESETS.join(", "))
}

pub(super) fn rule(obj: &Obj) -> Result<VerifyRule, ConfigError> {
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
    Ok(VerifyRule {
        name: name.to_string(),
        scheme,
        secret_env: secret_env(obj)?,
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
        Ok(_) | Err(_) => {
            return Err(ConfigError::new(
                obj.path("header"),
                format!("{header:?} is not an HTTP header name"),
            ))
        }
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

/// One name or a list of 1 to [`MAX_SECRETS`] distinct names.
fn secret_env(obj: &Obj) -> Result<Vec<String>, ConfigError> {
    let field = obj.path("secret_env");
    let names: Vec<&Value> = match obj.get("secret_env") {
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
