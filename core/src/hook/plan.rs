//! What one hook costs where, and what the store's answer (or its failure) means.
//!
//! Pure: no host, no clock. The rule that shapes it: a duplicate spends no
//! charge. With both kinds in the fleet, the store checks the claim before it
//! charges (one script). With fleet dedupe and node rate, the claim goes alone
//! and the node buckets are charged only once the store says `ok` — and if
//! they then refuse, the claim is released. With fleet rate and node dedupe,
//! the charges go alone and dedupe is the upstream's own index.

use crate::config::{Config, Scope};
use crate::limit::gcra::ChargeError;
use crate::wire::{tolerant, Charge, ChargeKind, Claim, HitAnswer, HitReply, HitRequest};

/// One routed hook, as far as admission cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookFacts {
    pub tenant: String,
    pub source_id: String,
    pub hook_id: String,
    pub event_key: Option<String>,
    /// Body bytes (0: no body, or bytes not limited).
    pub body_len: u64,
    /// The body claim's key when the source has a replay guard
    /// ([`crate::verify::replay::body_key`]).
    pub replay_key: Option<String>,
    /// The sender's trace context ([`crate::hook::trace_context::parse`]d), carried in the hit.
    pub traceparent: Option<String>,
}

/// Where the charges of one hook go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Every charge of the hook: what a node-local answer spends.
    pub charges: Vec<Charge>,
    /// The one store call, when any kind is fleet-scoped and has something to send.
    pub fleet: Option<HitRequest>,
    /// Charges to take from the node buckets once the store said `ok` (node rate, fleet dedupe).
    pub node_after_ok: Vec<Charge>,
}

/// Why a hook can't be planned: its body could never be admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooLarge {
    pub size: u64,
    pub limit: u64,
}

pub fn is_fleet(scope: &Scope) -> bool {
    matches!(scope, Scope::Fleet)
}

/// The hook's charges and, for fleet scopes, the store request.
pub fn plan(config: &Config, node: &str, hook: &HookFacts) -> Result<Plan, TooLarge> {
    let limits = config.rate_limits.for_tenant(&hook.tenant);
    let mut charges = Vec::with_capacity(2);
    let too_large = |e: ChargeError| match e {
        ChargeError::TooLarge { size, burst } => TooLarge { size, limit: burst },
    };
    if let Some(c) = limits
        .hooks
        .charge(ChargeKind::Hooks, &hook.tenant, 1)
        .map_err(too_large)?
    {
        charges.push(c);
    }
    if let Some(bytes) = &limits.bytes {
        if let Some(c) = bytes
            .charge(ChargeKind::Bytes, &hook.tenant, hook.body_len)
            .map_err(too_large)?
        {
            charges.push(c);
        }
    }
    let claim = match (&hook.event_key, is_fleet(&config.dedupe.scope)) {
        (Some(key), true) => {
            let ttl_ms = config
                .sources
                .get(&hook.source_id)
                .map_or(259_200_000, |s| s.ttl_ms);
            Some(Claim {
                tenant: hook.tenant.clone(),
                source_id: hook.source_id.clone(),
                key: key.clone(),
                hook_id: hook.hook_id.clone(),
                node: node.to_string(),
                ttl_ms,
                pending_ttl_ms: config.fleet.pending_ttl_ms,
            })
        }
        _ => None,
    };
    let replay = match (&hook.replay_key, is_fleet(&config.dedupe.scope)) {
        (Some(key), true) => config
            .sources
            .get(&hook.source_id)
            .and_then(|s| s.verify.as_ref())
            .and_then(|v| v.replay_window_ms)
            .map(|window_ms| Claim {
                tenant: hook.tenant.clone(),
                source_id: crate::verify::replay::CLAIM_SOURCE.to_string(),
                key: key.clone(),
                hook_id: hook.hook_id.clone(),
                node: node.to_string(),
                ttl_ms: window_ms,
                pending_ttl_ms: config.fleet.pending_ttl_ms,
            }),
        _ => None,
    };
    let fleet_rate = is_fleet(&config.rate_limits.scope);
    let (fleet_charges, node_after_ok) = if fleet_rate {
        (charges.clone(), Vec::new())
    } else {
        (Vec::new(), charges.clone())
    };
    let claims = claim.is_some() || replay.is_some();
    let fleet = (!fleet_charges.is_empty() || claims).then_some(HitRequest {
        charges: fleet_charges,
        claim,
        replay,
        node: Some(node.to_string()),
        traceparent: hook.traceparent.clone(),
    });
    Ok(Plan {
        charges,
        fleet,
        node_after_ok,
    })
}

/// How a fleet call failed; every shape means "answer node-local".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallFailure {
    /// `dispatch_http_call` refused at once (no healthy host, bad cluster).
    Dispatch,
    /// Envoy's own 503: no connection to the store could be made, so the
    /// request never left the edge.
    Unreached,
    /// A reset: the callback came with no `:status`.
    NoStatus,
    /// Any status but 200 (Envoy's own 503 for a refused connect, 504 for a timeout).
    Status(String),
    /// 200 with a body that is not a hit answer.
    Unparsable,
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::Dispatch => write!(f, "the store cluster took no call"),
            CallFailure::Unreached => write!(f, "no connection to the store could be made"),
            CallFailure::NoStatus => write!(f, "the store call was reset"),
            CallFailure::Status(s) => write!(f, "the store answered {s}"),
            CallFailure::Unparsable => write!(f, "the store's answer is not a hit answer"),
        }
    }
}

impl CallFailure {
    /// Whether the call left this edge, so the store may have run it (and
    /// written the claim) after the edge stopped waiting: a late answer, a
    /// reset, a status or a garbled body all say nothing about whether the
    /// script ran. Only a dispatch the host refused, or a connection Envoy
    /// could not make, never reached the store.
    pub fn was_sent(&self) -> bool {
        !matches!(self, CallFailure::Dispatch | CallFailure::Unreached)
    }
}

/// Envoy's 503 bodies for a request that never left the edge: "upstream
/// connect error or disconnect/reset before headers. reset reason: remote
/// connection failure" (or local, or "connection timeout": the connect
/// failed; "overflow": the pool had no room), and "no healthy upstream". A
/// reset after the request went out ("connection termination", "remote
/// reset") is not among them. An unknown wording counts as sent: settling a
/// claim that was never written is harmless, leaving one pending is not.
fn never_left(body: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(body) else {
        return false;
    };
    text == "no healthy upstream"
        || text.starts_with("upstream connect error")
            && ["connection failure", "connection timeout", "overflow"]
                .iter()
                .any(|reason| text.ends_with(reason))
}

/// The claim a hook holds after its store call failed: the one it sent, if
/// the call was sent, so that a claim the store wrote late is settled like
/// any other (promoted once the upstream stores the hook, released
/// otherwise) instead of standing pending for `pending_ttl_ms`. Settling a
/// claim that was never written is a no-op: the store moves only a claim
/// pending under this hook.
pub fn claim_after_failure(plan: &Plan, failure: &CallFailure) -> Option<Claim> {
    if !failure.was_sent() {
        return None;
    }
    plan.fleet.as_ref().and_then(|r| r.claim.clone())
}

/// The body claim a hook holds after its store call failed, by the same
/// rule as [`claim_after_failure`].
pub fn replay_after_failure(plan: &Plan, failure: &CallFailure) -> Option<Claim> {
    if !failure.was_sent() {
        return None;
    }
    plan.fleet.as_ref().and_then(|r| r.replay.clone())
}

/// The store's answer from the callout's `:status` and body.
pub fn parse_answer(status: Option<&str>, body: Option<&[u8]>) -> Result<HitAnswer, CallFailure> {
    parse_reply(status, body).map(|r| r.answer)
}

/// [`parse_answer`] with the tenant's override in force, when the store sent it.
pub fn parse_reply(status: Option<&str>, body: Option<&[u8]>) -> Result<HitReply, CallFailure> {
    match status {
        None => Err(CallFailure::NoStatus),
        Some("200") => {
            let mut unknown = 0;
            let read = tolerant::from_slice::<HitReply>(body.unwrap_or_default(), |_| unknown += 1);
            read.map(|reply| HitReply {
                unknown_fields: unknown,
                ..reply
            })
            .map_err(|_| CallFailure::Unparsable)
        }
        Some("503") if body.is_some_and(never_left) => Err(CallFailure::Unreached),
        Some(other) => Err(CallFailure::Status(other.to_string())),
    }
}

/// The upstream's hook id when it reported an older copy of its own, else
/// ours. An id the store would refuse (it must be 1 to 64 of `[A-Za-z0-9_-]`)
/// is ignored: one odd header must not sink the whole settle batch it rides in.
pub fn committed_id<'a>(ours: &'a str, upstream: Option<&'a str>) -> &'a str {
    let valid = |id: &str| {
        !id.is_empty()
            && id.len() <= crate::wire::MAX_HOOK_ID_LEN
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    match upstream {
        Some(id) if valid(id) => id,
        _ => ours,
    }
}

#[cfg(test)]
mod tests;
