//! The plugin configuration: JSON in, validated types out.
//!
//! [`Config::parse`] reads the JSON (see `read`), then [`Config::validate`]
//! checks every range. Either way a refusal is one [`ConfigError`] naming the
//! field path (`rate_limits.tenants.acme.burst`) and the bad value, so a bad
//! config is refused at load with a sentence the operator can act on. Unknown
//! keys are refused too: a misspelt key must not fall back to a default.

pub mod connection;
mod fleet;
mod read;
pub mod since;
mod validate;

pub use connection::{StoreAddr, StoreConnection};
pub use fleet::{BreakerPolicy, FleetConfig};

use crate::hook::event_key::DedupeRule;
use crate::hook::shadow::Shadow;
use crate::limit::gcra::Quota;
use crate::limit::limits;
use crate::limit::ratelimit_headers::HeadersMode;
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
    /// override may change it: see [`crate::fleet::overrides::effective`]).
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
    /// the fleet override list from (see [`crate::fleet::overrides::node_list`]).
    pub fn polls_overrides(&self) -> bool {
        (self.uses_store() || self.fleet.declared) && !self.fleet.cluster.is_empty()
    }
}

/// A source id or tenant name: the one rule of [`crate::limit::limits::is_valid_id`].
pub use crate::limit::limits::is_valid_id;

#[cfg(test)]
mod tests;
