//! One hook's life as a state machine: events in, effects out.
//!
//! The host turns its callbacks into events (request headers, a body chunk,
//! the request's trailers (the body's end, [`Hook::on_trailers`]), the store's
//! answer or a failed dispatch, the upstream's response headers,
//! the end of the stream) and performs the effects each step returns (set or
//! remove a request header, reply, call the store, queue a settle, count a
//! metric, log), then continues or pauses the request as the step's
//! [`Flow`] says. Node buckets, the breaker and the degraded warning's stamp
//! live in shared data, reached through the [`CasStore`] in [`Env`].
//!
//! The rules, in the order a hook meets them: a request that isn't a webhook
//! of a configured source is 404; only POSTs (405); a body over
//! `max_body_bytes` is 413, declared or counted; a source that verifies is
//! checked before any charge (401); then the hook is planned and charged,
//! node-local or by one store call with a node-local answer for every way
//! that call can fail. A refusal decided before the whole body arrived waits
//! for it, so the sender isn't reset mid-upload. A forwarded hook holding a
//! claim settles it once: promoted on a 2xx, released on anything else or
//! when the stream ends first.

use crate::config::{Config, Scope};
use crate::fleet::breaker::{Breaker, CallPermit, KeptSuccesses, SeenClosed};
use crate::fleet::edges::EdgesSeen;
use crate::fleet::overrides::{self, Effective, Override};
use crate::hook::decision::Decision;
use crate::hook::headers::RequestHeaders;
use crate::hook::outcome::Outcome;
use crate::hook::plan::{HookFacts, Plan};
use crate::hook::rate_headers::{self, Header};
use crate::hook::reply::LocalReply;
use crate::hook::shadow::{self, Refusal};
use crate::node::cas::CasStore;
use crate::node::edge_keys::{BREAKER_KEY, BUCKET_PREFIX, BUCKET_SLOTS};
use crate::node::node_buckets::NodeBuckets;
use crate::verify::Keys;
use crate::wire::version::StoreWire;
use crate::wire::Claim;
use std::cell::Cell;

/// Request headers the filter sets on every forwarded hook.
pub const HOOK_ID: &str = "x-ankusa-hook-id";
pub const TENANT: &str = "x-ankusa-tenant";
pub const SOURCE: &str = "x-ankusa-source";
pub const EVENT_KEY: &str = "x-ankusa-event-key";
pub use crate::hook::headers::OWN_PREFIX;

/// What a step needs besides the event: the configuration, the signing keys,
/// this edge's name in claims, and the node's shared data.
pub struct Env<'a, S: CasStore> {
    pub config: &'a Config,
    pub keys: &'a Keys,
    pub node: &'a str,
    pub store: &'a S,
    /// When this worker last read the fleet breaker closed.
    pub seen_closed: &'a SeenClosed,
    /// The successes of this worker's store calls not yet written to the breaker.
    pub kept_successes: &'a KeptSuccesses,
    /// This worker's copy of the node's live edge count.
    pub edges: &'a EdgesSeen,
    /// The store's wire version as this worker's calls last heard it.
    pub store_wire: &'a Cell<StoreWire>,
}

impl<S: CasStore> Env<'_, S> {
    fn buckets(&self) -> NodeBuckets<'_, S> {
        NodeBuckets::new(self.store, BUCKET_PREFIX, BUCKET_SLOTS)
    }

    fn breaker(&self) -> Breaker<'_, S> {
        Breaker::new(self.store, BREAKER_KEY, self.config.fleet.breaker)
    }
}

/// A store call in flight.
#[derive(Debug)]
struct Call {
    permit: CallPermit,
    started_us: u64,
    plan: Plan,
}

/// One hook, from its request headers to the settle of its claim.
#[derive(Debug, Default)]
pub struct Hook {
    facts: Option<HookFacts>,
    /// The request's headers (ours stripped), until admission has used them.
    headers: RequestHeaders,
    /// Headers were held until the whole body arrives.
    awaiting_body: bool,
    call: Option<Call>,
    /// Forwarded holding this claim: settle it on the upstream's answer.
    claim: Option<Claim>,
    /// The replay guard's body claim the store may have written for this
    /// hook (its answer was `ok`, or the call failed after it was sent):
    /// settled with `claim`, and released whenever `claim` would be.
    replay: Option<Claim>,
    /// The sender has sent its whole request.
    request_done: bool,
    /// A refusal decided before the body was all in: sent once it is, so the
    /// sender isn't reset mid-upload (Envoy closes a connection after a local
    /// reply, and a body arriving at a closed socket draws a TCP reset that
    /// destroys the answer).
    deferred: Option<LocalReply>,
    /// Rate-limit headers for the upstream's response to a forwarded hook.
    rate_headers: Vec<Header>,
    /// The hook was forwarded by an edge that uses a store: the upstream's
    /// response is cleared of any receipt (see [`Hook::on_upstream_headers`]).
    clears_receipt: bool,
    /// The tenant's fleet override, as the store's answer carried it (or,
    /// for a node-local charge, as the node's polled list holds it).
    in_force: Option<Override>,
    /// The store answered this hook: its word on the override stands.
    answered: bool,
    /// The hook's call is shared with others whose outcome the breaker
    /// counts (see [`Hook::share_call`]).
    shares_call: bool,
    /// What the access log will tell, gathered until it is published.
    decision: Decision,
    /// The decision was published (see [`Hook::decide`]).
    decided: bool,
    effects: Vec<Effect>,
    /// The hit call of the step being built.
    hit: Option<HitCall>,
}

impl Hook {
    pub fn new() -> Hook {
        Hook::default()
    }

    /// Whether the hook was forwarded holding a claim (so the upstream's
    /// status and hook id are worth reading).
    pub fn holds_claim(&self) -> bool {
        self.claim.is_some() || self.replay.is_some()
    }

    /// Whether the upstream's response headers are worth a step: to settle
    /// a claim, to carry rate-limit headers, or to clear a receipt.
    pub fn reads_upstream(&self) -> bool {
        self.holds_claim() || !self.rate_headers.is_empty() || self.clears_receipt
    }

    /// Whether a body chunk's size is read ([`Hook::on_body`]): the hook
    /// waits for the body to decide, and was not refused already.
    pub fn awaits_body(&self) -> bool {
        self.awaiting_body && self.deferred.is_none()
    }

    /// Whether a store call is in flight.
    pub fn calling(&self) -> bool {
        self.call.is_some()
    }

    /// The hook rides in a store call another hook's outcome is counted
    /// for (see [`crate::hook::batch`]): the breaker counts calls, so this
    /// hook's answer or failure is not counted again (unless it is the
    /// breaker's probe).
    pub fn share_call(&mut self) {
        self.shares_call = true;
    }

    fn emit(&mut self, effect: Effect) {
        self.effects.push(effect);
    }

    fn metric(&mut self, metric: Metric) {
        self.emit(Effect::Metric(metric));
    }

    fn step(&mut self, flow: Flow) -> Step {
        Step {
            flow,
            effects: std::mem::take(&mut self.effects),
            hit: self.hit.take(),
        }
    }

    /// Answers the sender (now, or once its upload is complete) and counts the outcome.
    fn reply(&mut self, outcome: Outcome, reply: LocalReply) -> Step {
        self.metric(Metric::Admission(outcome));
        self.decide(outcome, false);
        if self.request_done {
            self.emit(Effect::Reply(reply));
        } else {
            self.deferred = Some(reply);
        }
        self.step(Flow::Pause)
    }

    /// The tenant's limits and shadow: the configuration's, with the fleet
    /// override the store's answer carried where it is in force at `now_us`.
    fn effective<S: CasStore>(&self, env: &Env<'_, S>, tenant: &str, now_us: u64) -> Effective {
        let r = &env.config.rate_limits;
        overrides::effective(
            r.for_tenant(tenant),
            r.shadow_for(tenant),
            self.in_force.as_ref(),
            now_us / 1_000,
        )
    }

    /// `reply` with the tenant's policy headers: a duplicate or pending
    /// answer charged nothing, so it has no standing to describe.
    fn with_policy<S: CasStore>(
        &self,
        env: &Env<'_, S>,
        mut reply: LocalReply,
        now: u64,
    ) -> LocalReply {
        if let Some(facts) = &self.facts {
            let limits = self.effective(env, &facts.tenant, now).limits;
            reply.headers = rate_headers::policy_only(env.config.rate_limits.headers, &limits);
        }
        reply
    }

    /// Whether the tenant's shadow mode forwards this refusal instead of enforcing it.
    fn shadows<S: CasStore>(&self, env: &Env<'_, S>, refusal: Refusal, now_us: u64) -> bool {
        self.facts.as_ref().is_some_and(|facts| {
            let setting = self.effective(env, &facts.tenant, now_us).shadow;
            !shadow::outcome(refusal, setting).enforce
        })
    }

    /// Adds the hook's headers and lets it through, counted as `counted`.
    fn pass(&mut self, claim: Option<Claim>, counted: Metric) -> Step {
        // Receipts exist only where a store does: an edge with none (both
        // scopes node) spends no host call on them.
        self.clears_receipt =
            self.decision.scopes.0 == Scope::Fleet || self.decision.scopes.1 == Scope::Fleet;
        match counted {
            Metric::Shadowed(outcome) => self.decide(outcome, true),
            _ => self.decide(Outcome::Admitted, false),
        }
        // The facts are spent: nothing is decided after a hook is let through.
        if let Some(facts) = self.facts.take() {
            self.emit(Effect::Header(HOOK_ID, Some(facts.hook_id)));
            self.emit(Effect::Header(TENANT, Some(facts.tenant)));
            self.emit(Effect::Header(SOURCE, Some(facts.source_id)));
            // Without a key there is nothing to set: the sender's was stripped.
            if let Some(key) = facts.event_key {
                self.emit(Effect::Header(EVENT_KEY, Some(key)));
            }
        }
        self.claim = claim;
        self.metric(counted);
        self.step(Flow::Continue)
    }
}

mod decision;
mod effect;
mod node;
mod node_override;
mod request;
mod store_answer;
mod trailers;
mod upstream;

pub use effect::{not_configured, Effect, Flow, HitCall, Level, Metric, Step};

#[cfg(test)]
mod receipt_tests;
#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod share_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod world;
