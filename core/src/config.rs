//! The plugin configuration: JSON in, validated types out.
//!
//! [`Config::parse`] reads the JSON (see `read`), then [`Config::validate`]
//! checks every range. Either way a refusal is one [`ConfigError`] naming the
//! field path (`rate_limits.tenants.acme.burst`) and the bad value, so a bad
//! config is refused at load with a sentence the operator can act on. Unknown
//! keys are refused too: a misspelt key must not fall back to a default.

mod read;

use crate::event_key::DedupeRule;
use crate::gcra::Quota;
use crate::limits::{self, Bound};
use crate::limits::{is_valid_name, MAX_SETTLE_OPS};
use crate::ratelimit_headers::HeadersMode;
use crate::shadow::Shadow;
use crate::verify::VerifyRule;
use std::collections::BTreeMap;

/// Longest source id or tenant name (bytes): the wire's name bound.
pub const MAX_ID_LEN: usize = limits::MAX_NAME_LEN;
/// Default `sources.*.ttl_ms`: 72 h, covering Stripe's 3-day and Shopify's retry schedules.
pub const DEFAULT_TTL_MS: u64 = 259_200_000;
/// Default `max_body_bytes` (1 MiB, Envoy's default connection buffer).
pub const DEFAULT_MAX_BODY_BYTES: u64 = 1_048_576;
/// Longest `fleet.timeout_ms`: the store call holds the hook, so it must stay short.
pub const MAX_TIMEOUT_MS: u64 = limits::TIMEOUT_MS.max;

/// A refused configuration. Display: `"{field}: {message}"`.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// Dot path of the offending key (`fleet.timeout_ms`), or `config` for the whole document.
    pub field: String,
    /// What is wrong, naming the bad value.
    pub message: String,
}

impl ConfigError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            message: message.into(),
        }
    }
}

#[derive(Clone, PartialEq, Debug)]
pub struct Config {
    /// None: the filter uses Envoy's node id.
    pub node: Option<String>,
    /// At least one; keyed by source id (`[A-Za-z0-9_-]{1,64}`).
    pub sources: BTreeMap<String, Source>,
    pub rate_limits: RateLimits,
    pub dedupe: DedupeConfig,
    pub fleet: FleetConfig,
    /// A body over this many bytes is refused with 413.
    pub max_body_bytes: u64,
}

/// One webhook sender, reached at `/webhooks/[{tenant}/]{source_id}`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Source {
    /// The tenant this source belongs to; None: any tenant, named in the path.
    pub tenant: Option<String>,
    /// None: hooks from this source are never deduplicated.
    pub dedupe: Option<DedupeRule>,
    /// How long a committed event key is remembered (ms).
    pub ttl_ms: u64,
    /// None: deliveries are not checked for a provider signature.
    pub verify: Option<VerifyRule>,
}

/// Where a limit or the dedupe window is counted.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Scope {
    /// On this node alone (shared by its workers); no store call.
    #[default]
    Node,
    /// Across every edge, through the store.
    Fleet,
}

impl Scope {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Node => "node",
            Scope::Fleet => "fleet",
        }
    }
}

/// A tenant's limits. JSON `{"rate", "burst", "bytes_rate", "bytes_burst"}`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Limits {
    pub hooks: Quota,
    /// None: bodies are not rate limited (`max_body_bytes` still applies).
    pub bytes: Option<Quota>,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RateLimits {
    pub scope: Scope,
    pub default: Limits,
    /// Per-tenant overrides, fully resolved: a tenant entry that omits a pair
    /// (`rate`+`burst`, or `bytes_rate`+`bytes_burst`) has the default's.
    pub tenants: BTreeMap<String, Limits>,
    /// `rate_limits.headers`: which rate-limit headers answers carry
    /// (default `"ietf"`).
    pub headers: HeadersMode,
    /// `rate_limits.default.shadow`: off unless set.
    pub default_shadow: Shadow,
    /// `rate_limits.tenants.<t>.shadow`, for tenants that set it (the others
    /// have the default's).
    pub shadows: BTreeMap<String, Shadow>,
}

impl RateLimits {
    pub fn for_tenant(&self, tenant: &str) -> &Limits {
        self.tenants.get(tenant).unwrap_or(&self.default)
    }

    /// The tenant's shadow setting from the configuration alone (a fleet
    /// override may change it: see [`crate::overrides::effective`]).
    pub fn shadow_for(&self, tenant: &str) -> Shadow {
        self.shadows
            .get(tenant)
            .copied()
            .unwrap_or(self.default_shadow)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct DedupeConfig {
    pub scope: Scope,
}

/// How the filter talks to the store; used only when a scope is `fleet`.
#[derive(Clone, PartialEq, Debug)]
pub struct FleetConfig {
    /// Envoy cluster of the store service.
    pub cluster: String,
    /// `:authority` of store calls.
    pub authority: String,
    /// Hard budget of one store call (ms), 1..=10 000.
    pub timeout_ms: u64,
    /// How long a claim may stay pending before it expires on its own (ms).
    pub pending_ttl_ms: u64,
    pub breaker: BreakerPolicy,
    /// How often queued settle operations are drained (ms).
    pub settle_interval_ms: u64,
    /// Queued settle operations per node; one more is dropped and counted.
    pub settle_queue_max: usize,
    /// Operations per settle call, at most [`MAX_SETTLE_OPS`].
    pub settle_batch_max: usize,
    /// Further attempts of a failed settle batch before it is dropped.
    pub settle_retries: u32,
    /// The configuration has a `fleet` section: this edge has a store, so it
    /// polls the fleet override list even when every scope is `node`.
    pub declared: bool,
    /// Edges assumed live until the store reports a count (see [`crate::share`]).
    pub nodes: u64,
    /// A pinned share of a fleet quota for node-local answers, in [0.001, 1].
    pub degraded_share: Option<f64>,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            cluster: "ankusa_store".to_string(),
            authority: "ankusa-store".to_string(),
            timeout_ms: 25,
            pending_ttl_ms: 30_000,
            breaker: BreakerPolicy::default(),
            settle_interval_ms: 5,
            settle_queue_max: 50_000,
            settle_batch_max: 500,
            settle_retries: 3,
            declared: false,
            nodes: 1,
            degraded_share: None,
        }
    }
}

/// When the fleet breaker opens and for how long. JSON keys under `fleet`:
/// `breaker_failure_rate`, `breaker_min_calls`, `breaker_window_ms`, `breaker_open_ms`.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct BreakerPolicy {
    /// Failed fraction of the window's calls that opens the breaker, in (0, 1].
    pub failure_rate: f64,
    /// Calls the window must hold before it may open (≥ 1).
    pub min_calls: u32,
    /// Length of the sliding window (ms, ≥ 1).
    pub window_ms: u64,
    /// How long it stays open before one probe (ms, ≥ 1).
    pub open_ms: u64,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        BreakerPolicy {
            failure_rate: 0.5,
            min_calls: 20,
            window_ms: 10_000,
            open_ms: 5_000,
        }
    }
}

impl BreakerPolicy {
    /// Errors name the JSON key under `fleet`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // Written as a negated range so NaN is refused too.
        if !(self.failure_rate > 0.0 && self.failure_rate <= 1.0) {
            return Err(ConfigError::new(
                "fleet.breaker_failure_rate",
                format!(
                    "must be greater than 0 and at most 1, got {}",
                    self.failure_rate
                ),
            ));
        }
        at_least("fleet.breaker_min_calls", u64::from(self.min_calls), 1)?;
        bound(
            "fleet.breaker_window_ms",
            limits::BREAKER_MS,
            self.window_ms,
        )?;
        bound("fleet.breaker_open_ms", limits::BREAKER_MS, self.open_ms)
    }
}

impl FleetConfig {
    /// `degraded_share` in parts per million.
    pub fn degraded_share_ppm(&self) -> Option<u64> {
        // Validated to [0.001, 1]: the product is within u64.
        self.degraded_share.map(|s| (s * 1e6).round() as u64)
    }

    /// Every range; whether `cluster` may be empty depends on the scopes (see [`Config::validate`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        bound("fleet.timeout_ms", limits::TIMEOUT_MS, self.timeout_ms)?;
        bound(
            "fleet.pending_ttl_ms",
            limits::PENDING_TTL_MS,
            self.pending_ttl_ms,
        )?;
        self.breaker.validate()?;
        bound(
            "fleet.settle_interval_ms",
            limits::SETTLE_INTERVAL_MS,
            self.settle_interval_ms,
        )?;
        at_least("fleet.settle_queue_max", self.settle_queue_max as u64, 1)?;
        bound("fleet.nodes", limits::EDGES, self.nodes)?;
        if let Some(share) = self.degraded_share.filter(|s| !(0.001..=1.0).contains(s)) {
            let e = format!("must be a number from 0.001 to 1, got {share}");
            return Err(ConfigError::new("fleet.degraded_share", e));
        }
        between(
            "fleet.settle_batch_max",
            self.settle_batch_max as u64,
            1,
            MAX_SETTLE_OPS as u64,
        )
    }
}

impl Config {
    /// Reads and validates the plugin configuration.
    pub fn parse(json: &[u8]) -> Result<Config, ConfigError> {
        let config = read::config(json)?;
        config.validate()?;
        Ok(config)
    }

    /// Some scope is `fleet`: the filter calls the store.
    pub fn uses_store(&self) -> bool {
        self.rate_limits.scope == Scope::Fleet || self.dedupe.scope == Scope::Fleet
    }

    /// This edge has a store (a fleet scope, or a `fleet` section) to poll
    /// the fleet override list from (see [`crate::overrides::node_list`]).
    pub fn polls_overrides(&self) -> bool {
        (self.uses_store() || self.fleet.declared) && !self.fleet.cluster.is_empty()
    }

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

/// A source id or tenant name: the one rule of [`crate::limits::is_valid_id`].
pub use crate::limits::is_valid_id;

fn check_id(field: &str, name: &str, what: &str) -> Result<(), ConfigError> {
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
fn bound(field: &str, bound: Bound, value: u64) -> Result<(), ConfigError> {
    bound
        .check(value)
        .map_err(|message| ConfigError::new(field, message))
}

fn at_least(field: &str, value: u64, min: u64) -> Result<(), ConfigError> {
    if value < min {
        return Err(ConfigError::new(
            field,
            format!("must be at least {min}, got {value}"),
        ));
    }
    Ok(())
}

fn between(field: &str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if !(min..=max).contains(&value) {
        return Err(ConfigError::new(
            field,
            format!("must be between {min} and {max}, got {value}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
