//! The ranges and rules [`Config::validate`] checks after reading; every
//! refusal names the field path and the value.

use super::{Config, ConfigError, Limits, Scope, MAX_ID_LEN};
use crate::limit::limits::{self, is_valid_id, is_valid_name, Bound};

impl Config {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(node) = &self.node {
            if !is_valid_name(node) {
                return Err(ConfigError::new(
                    "node",
                    format!(
                        "{node:?} is not 1 to {} characters of [A-Za-z0-9_.-]",
                        limits::MAX_NAME_LEN
                    ),
                ));
            }
        }
        if self.sources.is_empty() {
            return Err(ConfigError::new("sources", "must name at least one source"));
        }
        for (id, source) in &self.sources {
            check_id("sources", id, "source id")?;
            if let Some(tenant) = &source.tenant {
                check_id(&format!("sources.{id}.tenant"), tenant, "tenant name")?;
            }
            bound(
                &format!("sources.{id}.ttl_ms"),
                limits::TTL_MS,
                source.ttl_ms,
            )?;
            let guarded = source.verify.as_ref().and_then(|v| v.replay_window_ms);
            if guarded.is_some() && self.dedupe.scope != Scope::Fleet {
                return Err(ConfigError::new(
                    format!("sources.{id}.verify.replay_guard"),
                    "needs \"dedupe\": {\"scope\": \"fleet\"}: the guard is a claim every edge shares",
                ));
            }
        }
        check_limits("rate_limits.default", &self.rate_limits.default)?;
        for (tenant, limits) in &self.rate_limits.tenants {
            check_id("rate_limits.tenants", tenant, "tenant name")?;
            check_limits(&format!("rate_limits.tenants.{tenant}"), limits)?;
        }
        self.fleet.validate()?;
        if self.uses_store() {
            let which = if self.rate_limits.scope == Scope::Fleet {
                "rate_limits.scope"
            } else {
                "dedupe.scope"
            };
            for (field, value) in [
                ("fleet.cluster", &self.fleet.cluster),
                ("fleet.authority", &self.fleet.authority),
            ] {
                if value.is_empty() {
                    return Err(ConfigError::new(
                        field,
                        format!("must not be empty when {which} is \"fleet\""),
                    ));
                }
            }
        }
        at_least("max_body_bytes", self.max_body_bytes, 1)
    }
}

pub(super) fn check_id(field: &str, name: &str, what: &str) -> Result<(), ConfigError> {
    if is_valid_id(name) {
        return Ok(());
    }
    Err(ConfigError::new(
        field,
        format!("{name:?} is not a valid {what}: 1 to {MAX_ID_LEN} characters of [A-Za-z0-9_-]"),
    ))
}

fn check_limits(field: &str, l: &Limits) -> Result<(), ConfigError> {
    bound(&format!("{field}.rate"), limits::RATE, l.hooks.rate)?;
    bound(&format!("{field}.burst"), limits::BURST, l.hooks.burst)?;
    if let Some(bytes) = l.bytes {
        bound(&format!("{field}.bytes_rate"), limits::RATE, bytes.rate)?;
        bound(&format!("{field}.bytes_burst"), limits::BURST, bytes.burst)?;
    }
    Ok(())
}

/// One of the core's [`limits`], naming the field.
pub(super) fn bound(field: &str, bound: Bound, value: u64) -> Result<(), ConfigError> {
    bound
        .check(value)
        .map_err(|message| ConfigError::new(field, message))
}

pub(super) fn at_least(field: &str, value: u64, min: u64) -> Result<(), ConfigError> {
    if value < min {
        return Err(ConfigError::new(
            field,
            format!("must be at least {min}, got {value}"),
        ));
    }
    Ok(())
}

pub(super) fn between(field: &str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if !(min..=max).contains(&value) {
        return Err(ConfigError::new(
            field,
            format!("must be between {min} and {max}, got {value}"),
        ));
    }
    Ok(())
}
