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

use crate::breaker::{Breaker, BreakerState, CallPermit, SeenClosed};
use crate::cas::{update_u64, CasStore};
use crate::config::Config;
use crate::edge_keys::{BREAKER_KEY, BUCKET_PREFIX, BUCKET_SLOTS, WARNED_KEY};
use crate::edges::{self, EdgesSeen};
use crate::hook::admit;
use crate::hook::decision::Decision;
use crate::hook::degraded::fleet_kinds;
use crate::hook::headers::RequestHeaders;
use crate::hook::outcome::{Kind, Outcome};
use crate::hook::plan::{self, CallFailure, HookFacts, Plan};
use crate::hook::rate_headers::{self, Header};
use crate::hook::reply::{self, LocalReply};
use crate::hook::settle::{settle_op, Queued};
use crate::node_buckets::{NodeBuckets, NodeVerdict};
use crate::overrides::{self, Effective, Override};
use crate::shadow::{self, Refusal};
use crate::share::Share;
use crate::verify::Keys;
use crate::wire::{Charge, Claim, HitAnswer, HitReply, SettleOp};

/// Request headers the filter sets on every forwarded hook (and strips from
/// the sender's request, so a sender can't pick its own dedupe key).
pub const HOOK_ID: &str = "x-ankusa-hook-id";
pub const TENANT: &str = "x-ankusa-tenant";
pub const SOURCE: &str = "x-ankusa-source";
pub const EVENT_KEY: &str = "x-ankusa-event-key";
pub const OWN_HEADERS: [&str; 4] = [HOOK_ID, TENANT, SOURCE, EVENT_KEY];

/// The store path of a hook's one call.
pub const HIT_PATH: &str = "/v1/hit";

/// What a step needs besides the event: the configuration, the signing keys,
/// this edge's name in claims, and the node's shared data.
pub struct Env<'a, S: CasStore> {
    pub config: &'a Config,
    pub keys: &'a Keys,
    pub node: &'a str,
    pub store: &'a S,
    /// When this worker last read the fleet breaker closed.
    pub seen_closed: &'a SeenClosed,
    /// This worker's copy of the node's live edge count.
    pub edges: &'a EdgesSeen,
}

impl<S: CasStore> Env<'_, S> {
    fn buckets(&self) -> NodeBuckets<'_, S> {
        NodeBuckets::new(self.store, BUCKET_PREFIX, BUCKET_SLOTS)
    }

    fn breaker(&self) -> Breaker<'_, S> {
        Breaker::new(self.store, BREAKER_KEY, self.config.fleet.breaker)
    }
}

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
    /// Set a header on the upstream's response (rate-limit headers).
    ResponseHeader(&'static str, String),
    /// Send this local reply now.
    Reply(LocalReply),
    /// Publish the hook's decision where Envoy's access log reads it
    /// ([`Decision::render`] into the filter state [`crate::hook::decision::PROPERTY`]).
    Decision(Decision),
    /// POST `body` to the store's `path` with `timeout_ms`. Always a step's
    /// last effect: should the host refuse the dispatch, it reports
    /// [`Hook::on_dispatch_failed`] and performs that step instead of
    /// this step's flow.
    CallStore {
        path: &'static str,
        body: Vec<u8>,
        timeout_ms: u64,
    },
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
}

/// The step of a filter with no configuration: 503, come back in a second.
pub fn not_configured() -> Step {
    Step {
        flow: Flow::Pause,
        effects: vec![Effect::Reply(reply::not_configured())],
    }
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
    /// a claim or to carry rate-limit headers.
    pub fn reads_upstream(&self) -> bool {
        self.holds_claim() || !self.rate_headers.is_empty()
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

    /// Charges the node buckets, then forwards (holding `claim`) or answers 429
    /// (releasing `claim`: nothing will be stored under it). A denial under
    /// the tenant's shadow mode forwards, counted as shadowed.
    fn answer_node<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        charges: &[Charge],
        claim: Option<Claim>,
        now: u64,
    ) -> Step {
        let admitted = Metric::Admission(Outcome::Admitted);
        self.answer_node_share(env, charges, claim, now, admitted, Share::WHOLE)
    }

    /// [`Hook::answer_node`], counting a forwarded hook as `counted` and
    /// spending from `share` of each quota (a fleet quota answered
    /// node-local, see [`crate::share`]): the verdict, the wait and the
    /// RateLimit headers all follow the share.
    fn answer_node_share<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        charges: &[Charge],
        claim: Option<Claim>,
        now: u64,
        counted: Metric,
        share: Share,
    ) -> Step {
        let charges = match self.node_charges(env, charges, now) {
            Ok(charges) => charges,
            Err(e) => return self.too_large_now(claim, e),
        };
        let charges = &charges;
        let mode = env.config.rate_limits.headers;
        let (verdict, headers) = match (&self.facts, charges.is_empty()) {
            (Some(facts), false) => {
                let (verdict, buckets) =
                    env.buckets()
                        .charge_share(&facts.tenant, now, charges, share);
                let limits = self.effective(env, &facts.tenant, now).limits;
                let headers =
                    rate_headers::node_share(mode, &limits, charges, &buckets, now, share);
                (verdict, headers)
            }
            (Some(facts), true) if self.rate_headers.is_empty() => {
                let limits = self.effective(env, &facts.tenant, now).limits;
                (NodeVerdict::Admit, rate_headers::policy_only(mode, &limits))
            }
            _ => (NodeVerdict::Admit, std::mem::take(&mut self.rate_headers)),
        };
        match verdict {
            NodeVerdict::Admit => {
                self.rate_headers = headers;
                self.pass(claim, counted)
            }
            NodeVerdict::Contended => {
                self.rate_headers = headers;
                self.metric(Metric::Contended);
                self.pass(claim, counted)
            }
            NodeVerdict::RateLimited { .. } if self.shadows(env, Refusal::RateLimited, now) => {
                // Nothing was spent on a denial; the claim is ours as usual.
                self.rate_headers = headers;
                self.pass(claim, Metric::Shadowed(Outcome::RateLimited))
            }
            NodeVerdict::RateLimited { retry_after_us } => {
                for claim in claim.into_iter().chain(self.replay.take()) {
                    self.emit(Effect::Settle(Queued {
                        retries: 0,
                        op: SettleOp::Release { claim },
                    }));
                }
                let mut reply = LocalReply::rate_limited(retry_after_us.div_ceil(1_000));
                reply.headers = headers;
                self.reply(Outcome::RateLimited, reply)
            }
        }
    }

    /// The breaker's state as the gauge shows it.
    fn show_breaker<S: CasStore>(&mut self, env: &Env<'_, S>, now: u64) {
        let value = match env.breaker().state(now) {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::Probing => 2,
        };
        self.metric(Metric::BreakerState(value));
    }

    /// The store can't answer: this node alone does, with every charge. A
    /// call that was sent may have written its claim late, so the hook keeps
    /// it (`claim`, see [`plan::claim_after_failure`]) and settles it as usual.
    fn fall_back<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        plan: &Plan,
        claim: Option<Claim>,
        why: &str,
        now: u64,
    ) -> Step {
        self.metric(Metric::Fallback);
        self.note_fallback();
        for kind in fleet_kinds(env.config) {
            self.metric(Metric::Degraded(kind, true));
        }
        // At most once a minute node-wide; a stamp in the future (the clock
        // stepped back) warns at once.
        let now_ms = now / 1_000;
        let won = update_u64(env.store, WARNED_KEY, |last| {
            crate::clock::every_due(last, now_ms, 60_000).then_some(now_ms)
        });
        if matches!(won, Some(Ok(_))) {
            self.emit(Effect::Log(
                Level::Warn,
                format!("ankusa: fleet limiter degraded, answering from this node alone: {why}"),
            ));
        }
        // A fleet quota answered here spends this node's share of it; a
        // node-scope quota (fleet dedupe alone) is this node's already.
        let share = if plan::is_fleet(&env.config.rate_limits.scope) {
            edges::share_of(&env.config.fleet, edges::heard(env.store))
        } else {
            Share::WHOLE
        };
        let counted = Metric::Admission(Outcome::Admitted);
        self.answer_node_share(env, &plan.charges, claim, now, counted, share)
    }

    /// Reports a call's outcome (`failure`: why it failed) to the breaker.
    fn record<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        permit: CallPermit,
        failure: Option<&CallFailure>,
        now: u64,
    ) {
        if self.shares_call && permit != CallPermit::Probe {
            return;
        }
        let Some(transition) = env.breaker().record(now, permit, failure.is_none()) else {
            return;
        };
        env.seen_closed.forget();
        let line = match failure {
            Some(why) => (
                Level::Warn,
                format!("ankusa: fleet breaker {transition:?}: {why}"),
            ),
            None => (
                Level::Info,
                format!("ankusa: fleet breaker {transition:?}: the store answered"),
            ),
        };
        self.emit(Effect::Log(line.0, line.1));
        self.show_breaker(env, now);
    }

    /// The request's headers: route, strip our own headers, check the
    /// request rules, and admit now or wait for the body.
    pub fn on_headers<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        mut headers: RequestHeaders,
        end_of_stream: bool,
        now_us: impl FnOnce() -> u64,
        random: impl FnOnce(u64) -> [u8; 10],
    ) -> Step {
        self.request_done = end_of_stream;
        self.note_scopes(env);
        // A sender must not choose the hook's id or dedupe key. Removing a
        // name that isn't there would still be a hostcall.
        for name in OWN_HEADERS {
            if headers.remove(name) {
                self.emit(Effect::Header(name, None));
            }
        }
        let path = headers.get_str(":path").unwrap_or_default();
        let route = match crate::route::route(env.config, path) {
            Ok(route) => route,
            Err(e) => return self.reply(Outcome::NotFound, LocalReply::not_found(&e.to_string())),
        };
        let method = headers.get_str(":method").unwrap_or_default();
        let length = headers.get_str("content-length");
        let needs_body = match admit::check_headers(
            env.config,
            &route.tenant,
            route.source,
            env.keys.verifies(&route.source_id),
            method,
            length,
        ) {
            Ok(checked) => checked.needs_body,
            Err((outcome, refusal)) => {
                self.note_route(&route);
                return self.reply(outcome, refusal);
            }
        };
        let now = now_us();
        let hook_id = crate::hook_id::hook_id(now / 1_000, random(now));
        self.facts = Some(HookFacts {
            tenant: route.tenant,
            source_id: route.source_id,
            hook_id,
            event_key: None,
            body_len: 0,
            replay_key: None,
            traceparent: headers
                .get_str(crate::trace_context::TRACEPARENT)
                .and_then(crate::trace_context::parse),
        });
        self.headers = headers;
        if needs_body && !end_of_stream {
            self.awaiting_body = true;
            return self.step(Flow::Pause);
        }
        self.admit(env, None, now)
    }

    /// A body chunk: `size` bytes buffered so far; `read` fetches them.
    pub fn on_body<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        size: u64,
        end_of_stream: bool,
        read: impl FnOnce() -> Vec<u8>,
        now_us: impl FnOnce() -> u64,
    ) -> Step {
        self.request_done = end_of_stream;
        if self.deferred.is_some() {
            // Refused already: swallow the rest of the upload, then answer.
            if end_of_stream {
                if let Some(reply) = self.deferred.take() {
                    self.emit(Effect::Reply(reply));
                }
            }
            return self.step(Flow::Pause);
        }
        if !self.awaiting_body {
            let flow = if self.call.is_some() {
                Flow::Pause
            } else {
                Flow::Continue
            };
            return self.step(flow);
        }
        if let Err((outcome, refusal)) = admit::check_body_size(env.config, size) {
            self.awaiting_body = false;
            // Past the limit there is no waiting for the end: answer now.
            self.request_done = true;
            return self.reply(outcome, refusal);
        }
        if !end_of_stream {
            return self.step(Flow::Pause); // the host buffers until the last chunk
        }
        self.awaiting_body = false;
        let body = read();
        self.admit(env, Some(&body), now_us())
    }

    /// Everything is known (headers, and the body if it was needed): decide.
    fn admit<S: CasStore>(&mut self, env: &Env<'_, S>, body: Option<&[u8]>, now: u64) -> Step {
        let headers = std::mem::take(&mut self.headers);
        let Some(facts) = self.facts.as_mut() else {
            return self.step(Flow::Continue);
        };
        let Some(source) = env.config.sources.get(&facts.source_id) else {
            return self.step(Flow::Continue);
        };
        // A forgery spends nothing: checked before any charge, claim or store call.
        if let Err(refusal) = env.keys.check(
            &facts.source_id,
            &facts.tenant,
            &headers,
            body,
            now / 1_000_000,
        ) {
            return self.reply(Outcome::Unverified, reply::unverified(refusal));
        }
        if source
            .verify
            .as_ref()
            .is_some_and(|v| v.replay_window_ms.is_some())
        {
            let body = body.unwrap_or_default();
            facts.replay_key = Some(crate::verify::replay::body_key(&facts.source_id, body));
        }
        facts.event_key = source
            .dedupe
            .as_ref()
            .and_then(|rule| rule.extract(|name| headers.bytes(name), body));
        facts.body_len = admit::charged_body_len(env.config, &facts.tenant, body);
        let plan = match plan::plan(env.config, env.node, facts) {
            Ok(plan) => plan,
            Err(e) => return self.reply(Outcome::TooLarge, LocalReply::too_large(e.size, e.limit)),
        };
        let Some(request) = &plan.fleet else {
            return self.answer_node(env, &plan.charges, None, now);
        };
        let permit = env.breaker().admit_call_seen(now, env.seen_closed);
        match permit {
            CallPermit::Skip => {
                self.show_breaker(env, now);
                // No call, so no claim was written: there is nothing to settle.
                return self.fall_back(env, &plan, None, "the breaker is open", now);
            }
            CallPermit::Probe => {
                self.emit(Effect::Log(
                    Level::Info,
                    "ankusa: fleet breaker probing the store".to_string(),
                ));
                self.show_breaker(env, now);
            }
            CallPermit::Call => {}
        }
        let body = serde_json::to_vec(request).unwrap_or_default();
        self.emit(Effect::CallStore {
            path: HIT_PATH,
            body,
            timeout_ms: env.config.fleet.timeout_ms,
        });
        self.call = Some(Call {
            permit,
            started_us: now,
            plan,
        });
        self.step(Flow::Pause)
    }

    /// The host refused to dispatch the store call of the step before.
    pub fn on_dispatch_failed<S: CasStore>(&mut self, env: &Env<'_, S>, now: u64) -> Step {
        let Some(call) = self.call.take() else {
            return self.step(Flow::Continue);
        };
        let failure = CallFailure::Dispatch;
        self.note_call(false, now.saturating_sub(call.started_us));
        self.record(env, call.permit, Some(&failure), now);
        let claim = plan::claim_after_failure(&call.plan, &failure);
        self.replay = plan::replay_after_failure(&call.plan, &failure);
        self.fall_back(env, &call.plan, claim, &failure.to_string(), now)
    }

    /// The store's answer to this hook's call: its `:status` (None: a reset) and body.
    pub fn on_store_answer<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        status: Option<&str>,
        body: Option<&[u8]>,
        now: u64,
    ) -> Step {
        self.on_store_reply(env, plan::parse_reply(status, body), now)
    }

    /// [`Hook::on_store_answer`] with the answer already read: the hook's
    /// reply, or how its call failed (a batched call's share, see
    /// [`crate::hook::batch::split`]).
    pub fn on_store_reply<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        answer: Result<HitReply, CallFailure>,
        now: u64,
    ) -> Step {
        let Some(call) = self.call.take() else {
            return self.step(Flow::Pause);
        };
        // One sample per call, as the breaker counts calls: the hook the
        // call is counted for records it.
        let waited_us = now.saturating_sub(call.started_us);
        if !self.shares_call {
            self.metric(Metric::CallMs(waited_us / 1_000));
        }
        self.note_call(answer.is_ok(), waited_us);
        self.record(env, call.permit, answer.as_ref().err(), now);
        let (answer, levels) = match answer {
            Ok(reply) => {
                if let Some(live) = env.edges.learn(env.store, reply.edges, now / 1_000) {
                    let share_ppm = edges::share_of(&env.config.fleet, live).ppm();
                    self.metric(Metric::Edges { live, share_ppm });
                }
                self.in_force = reply.in_force;
                self.answered = true;
                (reply.answer, reply.levels)
            }
            Err(failure) => {
                let claim = plan::claim_after_failure(&call.plan, &failure);
                self.replay = plan::replay_after_failure(&call.plan, &failure);
                return self.fall_back(env, &call.plan, claim, &failure.to_string(), now);
            }
        };
        for kind in fleet_kinds(env.config) {
            self.metric(Metric::Degraded(kind, false));
        }
        // Shadow mode forwards a refusal it would have answered. The store
        // wrote no claim for it (a taken claim or a denied charge writes
        // nothing), so the hook holds none: a shadowed duplicate is forwarded
        // anyway and never settled as if the claim were its own.
        let shadowed = match &answer {
            HitAnswer::Ok => None,
            HitAnswer::RateLimited { .. } => Some((Refusal::RateLimited, Outcome::RateLimited)),
            HitAnswer::Duplicate { .. } => Some((Refusal::Duplicate, Outcome::Duplicate)),
            HitAnswer::Pending { .. } => Some((Refusal::Duplicate, Outcome::Pending)),
        };
        if let (HitAnswer::RateLimited { retry_after_ms }, Some(facts)) = (&answer, &self.facts) {
            let limits = self.effective(env, &facts.tenant, now).limits;
            let mode = env.config.rate_limits.headers;
            self.rate_headers = rate_headers::fleet_denied(mode, &limits, *retry_after_ms);
        }
        if let (HitAnswer::Ok, Some(facts), Some(hit)) = (&answer, &self.facts, &call.plan.fleet) {
            let limits = self.effective(env, &facts.tenant, now).limits;
            let mode = env.config.rate_limits.headers;
            self.rate_headers =
                rate_headers::fleet_admitted(mode, &limits, &hit.charges, &levels, now);
        }
        if let Some((_, outcome)) = shadowed.filter(|(r, _)| self.shadows(env, *r, now)) {
            // A forwarded duplicate still spends the node charges it would
            // have spent as a new hook (node rate, fleet dedupe).
            return self.answer_node_share(
                env,
                &call.plan.node_after_ok,
                None,
                now,
                Metric::Shadowed(outcome),
                Share::WHOLE,
            );
        }
        match answer {
            HitAnswer::Ok => {
                let (claim, replay) = call
                    .plan
                    .fleet
                    .map_or((None, None), |r| (r.claim, r.replay));
                self.replay = replay;
                self.answer_node(env, &call.plan.node_after_ok, claim, now)
            }
            HitAnswer::Duplicate { hook_id } => {
                let reply = self.with_policy(env, LocalReply::duplicate(&hook_id), now);
                self.reply(Outcome::Duplicate, reply)
            }
            HitAnswer::Pending { retry_after_ms } => {
                let reply = self.with_policy(env, LocalReply::pending(retry_after_ms), now);
                self.reply(Outcome::Pending, reply)
            }
            HitAnswer::RateLimited { retry_after_ms } => {
                let mut reply = LocalReply::rate_limited(retry_after_ms);
                reply.headers = std::mem::take(&mut self.rate_headers);
                self.reply(Outcome::RateLimited, reply)
            }
        }
    }

    /// The upstream's response headers: settles the claim once.
    /// Adds the hook's rate-limit headers to that response.
    pub fn on_upstream_headers(&mut self, status: Option<&str>, upstream_id: Option<&str>) -> Step {
        for (name, value) in std::mem::take(&mut self.rate_headers) {
            self.emit(Effect::ResponseHeader(name, value));
        }
        self.settle(status, upstream_id);
        self.step(Flow::Continue)
    }

    /// The stream ended (the sender went away, or the stream was reset,
    /// before the upstream answered): a claim still held is released.
    pub fn on_stream_end(&mut self) -> Step {
        // The sender went away while the store call was in flight: the
        // store may have written this hook's pending claim, and nothing will
        // be stored under it. Releasing it lets a redelivery in at once
        // rather than after `pending_ttl_ms` (a claim the store never wrote
        // is left alone: a release only deletes this hook's own).
        if let Some(call) = self.call.take() {
            let sent = call
                .plan
                .fleet
                .map_or((None, None), |r| (r.claim, r.replay));
            for claim in sent.0.into_iter().chain(sent.1) {
                self.emit(Effect::Settle(Queued {
                    retries: 0,
                    op: SettleOp::Release { claim },
                }));
            }
        }
        self.settle(None, None);
        self.step(Flow::Continue)
    }

    fn settle(&mut self, status: Option<&str>, upstream_id: Option<&str>) {
        for claim in self.claim.take().into_iter().chain(self.replay.take()) {
            let op = settle_op(claim, status, upstream_id);
            self.emit(Effect::Settle(Queued { retries: 0, op }));
        }
    }
}

mod decision;
mod node_override;
mod trailers;

#[cfg(test)]
mod replay_tests;
#[cfg(test)]
mod share_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) mod world;
