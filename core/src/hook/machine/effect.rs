//! What a step of the machine returns: the effects for the host to perform, in
//! order, and whether the request goes on.

use crate::hook::decision::Decision;
use crate::hook::outcome::{Kind, Outcome};
use crate::hook::reply::{self, LocalReply};
use crate::hook::settle::Queued;

/// Whether the request goes on after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Pause,
}

/// A metric delta.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Admission(Outcome),
    /// A refusal computed under the tenant's shadow mode and not enforced:
    /// the hook was forwarded (counted `shadow="true"`, not as admitted).
    Shadowed(Outcome),
    Fallback,
    /// A store call's duration (ms).
    CallMs(u64),
    /// The breaker gauge: 0 closed, 1 open, 2 probing.
    BreakerState(u64),
    Degraded(Kind, bool),
    /// Node buckets admitted without a charge (compare-and-swap contention).
    Contended,
    /// The store reported a new live edge count: the node's share of a fleet
    /// quota answered node-local is now `share_ppm` parts per million.
    Edges {
        live: u64,
        share_ppm: u64,
    },
    /// The store's wire version changed, as its answers name it
    /// (`ankusa_fleet_store_wire`; see [`crate::wire::version`]).
    StoreWire(u64),
    /// Fields of a store answer skipped as unknown (a newer store's).
    WireUnknown(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
}

/// One thing for the host to do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Remove (None) or set a request header.
    Header(&'static str, Option<String>),
    /// Remove a request header the sender set in the edge's namespace
    /// ([`super::OWN_PREFIX`]).
    RemoveHeader(String),
    /// Set a header on the upstream's response (rate-limit headers).
    ResponseHeader(&'static str, String),
    /// Remove a header from the upstream's response before the sender sees
    /// it (the upstream's receipt).
    RemoveResponseHeader(&'static str),
    /// Send this local reply now.
    Reply(LocalReply),
    /// Publish the hook's decision where Envoy's access log reads it
    /// ([`Decision::render`] into the filter state [`crate::hook::decision::PROPERTY`]).
    Decision(Decision),
    /// Queue a settle operation.
    Settle(Queued),
    Metric(Metric),
    Log(Level, String),
}

/// The effects of one event and whether the request goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub flow: Flow,
    pub effects: Vec<Effect>,
    /// The hook's hit call, sent once the effects are performed: alone, or
    /// with its worker's next call, as the host's batching decides (see
    /// [`crate::hook::batch`]). Should the host refuse the dispatch, it
    /// reports [`super::Hook::on_dispatch_failed`] and performs that step
    /// instead of this step's flow.
    pub hit: Option<HitCall>,
}

/// A hit for the store: the request's JSON and the hook's budget (ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HitCall {
    pub body: Vec<u8>,
    pub timeout_ms: u64,
}

/// The step of a filter with no configuration: 503, come back in a second.
pub fn not_configured() -> Step {
    Step {
        flow: Flow::Pause,
        effects: vec![Effect::Reply(reply::not_configured())],
        hit: None,
    }
}
