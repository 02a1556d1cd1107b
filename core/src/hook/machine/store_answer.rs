//! The store's answer to a hook's call, or the call's failure.

use super::{Env, Flow, Hook, Metric, Step};
use crate::fleet::edges;
use crate::hook::degraded::fleet_kinds;
use crate::hook::outcome::Outcome;
use crate::hook::plan::{self, CallFailure};
use crate::hook::rate_headers;
use crate::hook::reply::LocalReply;
use crate::hook::shadow::Refusal;
use crate::limit::share::Share;
use crate::node::cas::CasStore;
use crate::wire::{HitAnswer, HitReply};

impl Hook {
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
                let mut wire = env.store_wire.get();
                if wire.heard(reply.wire) {
                    env.store_wire.set(wire);
                    // Settle batches leave from any worker: the node's
                    // version decides what they may carry.
                    wire.share(env.store);
                    self.metric(Metric::StoreWire(u64::from(wire.version())));
                }
                if reply.unknown_fields > 0 {
                    self.metric(Metric::WireUnknown(u64::from(reply.unknown_fields)));
                }
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
}
