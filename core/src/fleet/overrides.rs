//! Fleet overrides: a tenant's limits and shadow setting changed at runtime
//! through the store (`PUT /v1/overrides/<tenant>`), in force until they
//! expire or are deleted, then the plugin configuration again.
//!
//! [`OverrideRequest`] is what an operator writes; the store validates it
//! and keeps an [`Override`] (with an absolute expiry and a version) in
//! Redis. [`effective`] is the merge every edge applies: an override in force
//! at `now` replaces the pairs it names, the configuration gives the rest.
//! A fleet-scope hook learns the override from its hit answer; a node-local
//! charge from the node's polled list ([`node_list`], kept in step with the
//! store's changes by [`node_sync`] over the [`page`]s the store answers),
//! re-quoted by [`requota`].

use crate::config::Limits;
use crate::hook::shadow::Shadow;
use crate::limit::gcra::Quota;
use crate::limit::limits::{self, Bound};
use crate::wire::{Charge, ChargeKind, WireError, MAX_NAME_LEN};
use serde::{Deserialize, Serialize};

/// How long an override may be set for (`ttl_ms`, or `expires_at_ms` less
/// now): up to 30 days.
pub const TTL_MS: Bound = Bound {
    min: 1,
    max: 30 * 24 * 3_600_000,
};

/// The body of `PUT /v1/overrides/<tenant>`. Each pair is optional (absent:
/// the configuration's); at least one of the pairs or `shadow` is set. At
/// most one of `expires_at_ms` (unix ms) and `ttl_ms`; neither: no expiry.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct OverrideRequest {
    pub rate: Option<u64>,
    pub burst: Option<u64>,
    pub bytes_rate: Option<u64>,
    pub bytes_burst: Option<u64>,
    pub shadow: Option<Shadow>,
    pub expires_at_ms: Option<u64>,
    pub ttl_ms: Option<u64>,
}

pub use crate::wire::Override;

/// A list of overrides, as the node keeps it in shared data.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug, Default)]
pub struct OverrideList {
    pub overrides: Vec<Override>,
}

/// The tenant an override is for (the `<tenant>` of its path): the
/// config's rule for a tenant name ([`limits::is_valid_id`]), so no override
/// is kept for a tenant no edge can route.
pub fn check_tenant(tenant: &str) -> Result<(), WireError> {
    if limits::is_valid_id(tenant) {
        return Ok(());
    }
    Err(invalid(
        "tenant",
        format!("{tenant:?} is not 1 to {MAX_NAME_LEN} {}", limits::ID_CHARS),
    ))
}

fn invalid(field: &str, problem: impl Into<String>) -> WireError {
    WireError {
        field: field.into(),
        problem: problem.into(),
    }
}

pub(crate) fn pair(
    names: (&str, &str),
    values: (Option<u64>, Option<u64>),
) -> Result<Option<Quota>, WireError> {
    match values {
        (None, None) => Ok(None),
        (Some(rate), Some(burst)) => {
            limits::RATE.check(rate).map_err(|p| invalid(names.0, p))?;
            limits::BURST
                .check(burst)
                .map_err(|p| invalid(names.1, p))?;
            Ok(Some(Quota { rate, burst }))
        }
        (Some(_), None) => Err(invalid(
            names.1,
            format!("is missing: {} and {} are set together", names.0, names.1),
        )),
        (None, Some(_)) => Err(invalid(
            names.0,
            format!("is missing: {} and {} are set together", names.0, names.1),
        )),
    }
}

impl OverrideRequest {
    /// Checks the request against [`crate::limit::limits`] and makes the stored
    /// override for `tenant`, accepted at `now_ms` (unix ms). Every error
    /// names the field and the value.
    pub fn into_override(self, tenant: &str, now_ms: u64) -> Result<Override, WireError> {
        check_tenant(tenant)?;
        let hooks = pair(("rate", "burst"), (self.rate, self.burst))?;
        let bytes = pair(
            ("bytes_rate", "bytes_burst"),
            (self.bytes_rate, self.bytes_burst),
        )?;
        if hooks.is_none() && bytes.is_none() && self.shadow.is_none() {
            return Err(invalid(
                "override",
                "sets nothing: give rate and burst, bytes_rate and bytes_burst, or shadow",
            ));
        }
        let expires_at_ms = match (self.expires_at_ms, self.ttl_ms) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "ttl_ms",
                    "and expires_at_ms are both set: give one",
                ))
            }
            (None, None) => None,
            (None, Some(ttl)) => {
                TTL_MS.check(ttl).map_err(|p| invalid("ttl_ms", p))?;
                Some(now_ms.saturating_add(ttl))
            }
            (Some(at), None) => {
                if at <= now_ms {
                    return Err(invalid(
                        "expires_at_ms",
                        format!("{at} is not after now ({now_ms})"),
                    ));
                }
                TTL_MS
                    .check(at - now_ms)
                    .map_err(|p| invalid("expires_at_ms", format!("less now {p}")))?;
                Some(at)
            }
        };
        Ok(Override {
            tenant: tenant.into(),
            rate: hooks.map(|q| q.rate),
            burst: hooks.map(|q| q.burst),
            bytes_rate: bytes.map(|q| q.rate),
            bytes_burst: bytes.map(|q| q.burst),
            shadow: self.shadow,
            expires_at_ms,
            version: now_ms,
        })
    }
}

impl Override {
    /// In force at `now_ms`: not expired.
    pub fn in_force(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_none_or(|at| now_ms < at)
    }

    pub fn hooks(&self) -> Option<Quota> {
        Some(Quota {
            rate: self.rate?,
            burst: self.burst?,
        })
    }

    pub fn bytes(&self) -> Option<Quota> {
        Some(Quota {
            rate: self.bytes_rate?,
            burst: self.bytes_burst?,
        })
    }
}

/// A tenant's limits and shadow setting once an override is merged in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Effective {
    pub limits: Limits,
    pub shadow: Shadow,
    /// The version of the override that applied; None: the configuration alone.
    pub version: Option<u64>,
}

/// The limits in force for a tenant at `now_ms`: the override's pairs and
/// shadow where it sets them and is not expired, the configuration's
/// (`config`, `config_shadow`) otherwise.
pub fn effective(
    config: &Limits,
    config_shadow: Shadow,
    over: Option<&Override>,
    now_ms: u64,
) -> Effective {
    let Some(o) = over.filter(|o| o.in_force(now_ms)) else {
        return Effective {
            limits: *config,
            shadow: config_shadow,
            version: None,
        };
    };
    Effective {
        limits: Limits {
            hooks: o.hooks().unwrap_or(config.hooks),
            bytes: o.bytes().or(config.bytes),
        },
        shadow: o.shadow.unwrap_or(config_shadow),
        version: Some(o.version),
    }
}

/// A hook's charges with each quota replaced by the tenant's effective
/// limits (`limits`), for a node-local charge: the store re-quotas fleet
/// charges itself. A bytes charge stays only while a bytes quota is in force.
pub fn requota(charges: &[Charge], limits: &Limits) -> Vec<Charge> {
    charges
        .iter()
        .filter_map(|c| {
            let quota = match c.kind {
                ChargeKind::Hooks => limits.hooks,
                ChargeKind::Bytes => limits.bytes?,
            };
            Some(Charge {
                rate: quota.rate,
                burst: quota.burst,
                ..c.clone()
            })
        })
        .collect()
}

pub mod node_list;
pub mod node_sync;
pub mod page;

#[cfg(test)]
mod tests;
