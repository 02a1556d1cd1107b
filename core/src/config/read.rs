//! JSON → [`Config`], one key at a time.
//!
//! Keys are read by hand from a `serde_json::Value` rather than through
//! `#[derive(Deserialize)]` because serde's errors don't say which key they
//! are about ("invalid type: string \"25\", expected u64"); here every error
//! carries the full dot path. Each object lists the keys it knows, and any
//! other key is refused, as `deny_unknown_fields` would. Ranges are left to
//! [`Config::validate`]; this only checks shapes and types.

use super::connection::StoreConnection;
use super::validate::check_id;
use super::{
    BreakerPolicy, Config, ConfigError, DedupeConfig, FleetConfig, Limits, RateLimits, Scope,
    Source, DEFAULT_MAX_BODY_BYTES, DEFAULT_TTL_MS,
};
use crate::hook::event_key::{DedupeRule, PRESETS};
use crate::limit::gcra::Quota;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

mod operating;
mod verify;

const TOP: &[&str] = &[
    "node",
    "sources",
    "rate_limits",
    "dedupe",
    "fleet",
    "max_body_bytes",
];
const SOURCE: &[&str] = &["tenant", "dedupe", "ttl_ms", "verify"];
const RATE_LIMITS: &[&str] = &["scope", "default", "tenants", "headers"];
const LIMITS: &[&str] = &["rate", "burst", "bytes_rate", "bytes_burst", "shadow"];
const DEDUPE: &[&str] = &["scope"];
const DEDUPE_RULE: &[&str] = &["header", "json"];
const FLEET: &[&str] = &[
    "cluster",
    "authority",
    "timeout_ms",
    "pending_ttl_ms",
    "breaker_failure_rate",
    "breaker_min_calls",
    "breaker_window_ms",
    "breaker_open_ms",
    "settle_interval_ms",
    "settle_queue_max",
    "settle_batch_max",
    "settle_retries",
    "nodes",
    "degraded_share",
    "connection",
    "store",
];

/// Longest rendering of a bad value inside a message (bytes).
const MAX_SHOWN: usize = 60;

pub(super) fn config(json: &[u8]) -> Result<Config, ConfigError> {
    let root: Value = serde_json::from_slice(json)
        .map_err(|e| ConfigError::new("config", format!("not valid JSON: {e}")))?;
    if !root.is_object() {
        return Err(ConfigError::new(
            "config",
            format!("expected a JSON object, got {}", show(&root)),
        ));
    }
    let top = Obj::of(String::new(), &root, TOP)?;
    let Some(sources_obj) = top.object("sources", &[])? else {
        return Err(ConfigError::new(
            "sources",
            "is required: name at least one source",
        ));
    };
    let mut sources = BTreeMap::new();
    for (id, value) in sources_obj.map {
        check_id("sources", id, "source id")?;
        sources.insert(
            id.clone(),
            source(&Obj::of(sources_obj.path(id), value, SOURCE)?)?,
        );
    }
    let Some(rate_limits_obj) = top.object("rate_limits", RATE_LIMITS)? else {
        return Err(ConfigError::new(
            "rate_limits",
            "is required: give at least {\"default\": {\"rate\": N, \"burst\": N}}",
        ));
    };
    let dedupe = match top.object("dedupe", DEDUPE)? {
        Some(obj) => DedupeConfig {
            scope: scope(&obj)?,
        },
        None => DedupeConfig::default(),
    };
    let fleet = match top.object("fleet", FLEET)? {
        Some(obj) => fleet(&obj)?,
        None => FleetConfig::default(),
    };
    Ok(Config {
        node: top.string("node")?.map(str::to_string),
        sources,
        rate_limits: rate_limits(&rate_limits_obj)?,
        dedupe,
        fleet,
        max_body_bytes: top.u64("max_body_bytes")?.unwrap_or(DEFAULT_MAX_BODY_BYTES),
    })
}

fn source(obj: &Obj) -> Result<Source, ConfigError> {
    let dedupe = match obj.get("dedupe") {
        Some(value) => Some(dedupe_rule(&obj.path("dedupe"), value)?),
        None => None,
    };
    let tenant = obj.string("tenant")?;
    Ok(Source {
        tenant: tenant.map(str::to_string),
        dedupe,
        ttl_ms: obj.u64("ttl_ms")?.unwrap_or(DEFAULT_TTL_MS),
        verify: match obj.object("verify", verify::VERIFY)? {
            Some(rule) => Some(verify::rule(&rule, tenant)?),
            None => None,
        },
    })
}

/// A preset name, `{"header": NAME}` or `{"json": PATH}`.
fn dedupe_rule(field: &str, value: &Value) -> Result<DedupeRule, ConfigError> {
    let expected = "{\"header\": NAME} or {\"json\": PATH}";
    match value {
        Value::String(name) => DedupeRule::preset(name).ok_or_else(|| {
            ConfigError::new(
                field,
                format!(
                    "unknown preset {name:?}; expected one of {}, or {expected}",
                    PRESETS.join(", ")
                ),
            )
        }),
        Value::Object(_) => {
            let obj = Obj::of(field.to_string(), value, DEDUPE_RULE)?;
            match (obj.string("header")?, obj.string("json")?) {
                (Some(header), None) => {
                    DedupeRule::header(header).map_err(|m| ConfigError::new(obj.path("header"), m))
                }
                (None, Some(path)) => {
                    DedupeRule::json_path(path).map_err(|m| ConfigError::new(obj.path("json"), m))
                }
                _ => Err(ConfigError::new(
                    field,
                    format!("expected exactly one of {expected}, got {}", show(value)),
                )),
            }
        }
        other => Err(ConfigError::new(
            field,
            format!("expected a preset name, {expected}, got {}", show(other)),
        )),
    }
}

fn scope(obj: &Obj) -> Result<Scope, ConfigError> {
    match obj.string("scope")? {
        None | Some("node") => Ok(Scope::Node),
        Some("fleet") => Ok(Scope::Fleet),
        Some(other) => Err(ConfigError::new(
            obj.path("scope"),
            format!("unknown scope {other:?}; expected \"node\" or \"fleet\""),
        )),
    }
}

fn rate_limits(obj: &Obj) -> Result<RateLimits, ConfigError> {
    let Some(default_obj) = obj.object("default", LIMITS)? else {
        return Err(ConfigError::new(
            obj.path("default"),
            "is required: {\"rate\": N, \"burst\": N}",
        ));
    };
    let Some(hooks) = pair(&default_obj, "rate", "burst")? else {
        return Err(ConfigError::new(
            default_obj.path("rate"),
            "is required, with burst",
        ));
    };
    let default = Limits {
        hooks,
        bytes: pair(&default_obj, "bytes_rate", "bytes_burst")?,
    };
    let default_shadow = operating::shadow(&default_obj)?.unwrap_or_default();
    let mut shadows = BTreeMap::new();
    let mut tenants = BTreeMap::new();
    if let Some(tenants_obj) = obj.object("tenants", &[])? {
        for (tenant, value) in tenants_obj.map {
            check_id(&tenants_obj.path, tenant, "tenant name")?;
            let entry = Obj::of(tenants_obj.path(tenant), value, LIMITS)?;
            let limits = Limits {
                hooks: pair(&entry, "rate", "burst")?.unwrap_or(default.hooks),
                bytes: pair(&entry, "bytes_rate", "bytes_burst")?.or(default.bytes),
            };
            tenants.insert(tenant.clone(), limits);
            if let Some(shadow) = operating::shadow(&entry)? {
                shadows.insert(tenant.clone(), shadow);
            }
        }
    }
    Ok(RateLimits {
        scope: scope(obj)?,
        default,
        tenants,
        headers: operating::headers(obj)?,
        default_shadow,
        shadows,
    })
}

/// `rate` and `burst` keys of one quota: both or neither.
fn pair(obj: &Obj, rate_key: &str, burst_key: &str) -> Result<Option<Quota>, ConfigError> {
    match (obj.u64(rate_key)?, obj.u64(burst_key)?) {
        (Some(rate), Some(burst)) => Ok(Some(Quota { rate, burst })),
        (None, None) => Ok(None),
        (Some(rate), None) => Err(ConfigError::new(
            obj.path(burst_key),
            format!("is missing but {rate_key} is set ({rate}); give both or neither"),
        )),
        (None, Some(burst)) => Err(ConfigError::new(
            obj.path(rate_key),
            format!("is missing but {burst_key} is set ({burst}); give both or neither"),
        )),
    }
}

fn fleet(obj: &Obj) -> Result<FleetConfig, ConfigError> {
    let d = FleetConfig::default();
    let b = d.breaker;
    Ok(FleetConfig {
        cluster: obj.string("cluster")?.map_or(d.cluster, str::to_string),
        authority: obj.string("authority")?.map_or(d.authority, str::to_string),
        timeout_ms: obj.u64("timeout_ms")?.unwrap_or(d.timeout_ms),
        pending_ttl_ms: obj.u64("pending_ttl_ms")?.unwrap_or(d.pending_ttl_ms),
        breaker: BreakerPolicy {
            failure_rate: obj.f64("breaker_failure_rate")?.unwrap_or(b.failure_rate),
            min_calls: obj.u32("breaker_min_calls")?.unwrap_or(b.min_calls),
            window_ms: obj.u64("breaker_window_ms")?.unwrap_or(b.window_ms),
            open_ms: obj.u64("breaker_open_ms")?.unwrap_or(b.open_ms),
        },
        settle_interval_ms: obj
            .u64("settle_interval_ms")?
            .unwrap_or(d.settle_interval_ms),
        // u32 first so a value is accepted or refused the same way on 32-bit wasm and natively.
        settle_queue_max: obj
            .u32("settle_queue_max")?
            .map_or(d.settle_queue_max, |n| n as usize),
        settle_batch_max: obj
            .u32("settle_batch_max")?
            .map_or(d.settle_batch_max, |n| n as usize),
        settle_retries: obj.u32("settle_retries")?.unwrap_or(d.settle_retries),
        declared: true,
        nodes: obj.u64("nodes")?.unwrap_or(d.nodes),
        degraded_share: obj.f64("degraded_share")?,
        connection: StoreConnection::read(obj.string("connection")?, obj.string("store")?)?,
    })
}

/// One JSON object and its dot path; keys outside its known list were refused on entry.
struct Obj<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Obj<'a> {
    /// `known` empty: any key (maps keyed by name, like `sources`).
    fn of(path: String, value: &'a Value, known: &[&str]) -> Result<Self, ConfigError> {
        let Value::Object(map) = value else {
            return Err(ConfigError::new(
                path,
                format!("expected an object, got {}", show(value)),
            ));
        };
        let obj = Obj { path, map };
        if let Some(key) = map
            .keys()
            .find(|k| !known.is_empty() && !known.contains(&k.as_str()))
        {
            return Err(ConfigError::new(
                obj.path(key),
                format!("unknown field; expected one of {}", known.join(", ")),
            ));
        }
        Ok(obj)
    }

    fn path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// A JSON `null` counts as absent.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn wrong_type(&self, key: &str, expected: &str, value: &Value) -> ConfigError {
        ConfigError::new(
            self.path(key),
            format!("expected {expected}, got {}", show(value)),
        )
    }

    fn object(&self, key: &str, known: &[&str]) -> Result<Option<Obj<'a>>, ConfigError> {
        self.get(key)
            .map(|v| Obj::of(self.path(key), v, known))
            .transpose()
    }

    fn string(&self, key: &str) -> Result<Option<&'a str>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.wrong_type(key, "a string", other)),
        }
    }

    fn u64(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.wrong_type(key, "a whole number", v)),
        }
    }

    fn u32(&self, key: &str) -> Result<Option<u32>, ConfigError> {
        match self.u64(key)? {
            None => Ok(None),
            Some(n) => u32::try_from(n).map(Some).map_err(|_| {
                ConfigError::new(
                    self.path(key),
                    format!("must be at most {}, got {n}", u32::MAX),
                )
            }),
        }
    }

    fn f64(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.wrong_type(key, "a number", v)),
        }
    }
}

/// A value as JSON, cut short so a huge value can't flood the log.
fn show(value: &Value) -> String {
    let mut text = value.to_string();
    if text.len() > MAX_SHOWN {
        let mut end = MAX_SHOWN;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests;
