//! Answers from this node: its buckets charged (whole, or its share of a fleet
//! quota when the store can't answer), the fall-back when a call fails or the
//! breaker is open, and a call's outcome reported to the breaker.

use super::{Effect, Env, Hook, Level, Metric, Step};
use crate::fleet::breaker::{BreakerState, CallPermit};
use crate::fleet::edges;
use crate::hook::degraded::fleet_kinds;
use crate::hook::outcome::Outcome;
use crate::hook::plan::{self, CallFailure, Plan};
use crate::hook::rate_headers;
use crate::hook::reply::LocalReply;
use crate::hook::settle::Queued;
use crate::hook::shadow::Refusal;
use crate::limit::share::Share;
use crate::node::cas::{update_u64, CasStore};
use crate::node::edge_keys::WARNED_KEY;
use crate::node::node_buckets::NodeVerdict;
use crate::wire::{Charge, Claim, SettleOp};

impl Hook {
    /// Charges the node buckets, then forwards (holding `claim`) or answers 429
    /// (releasing `claim`: nothing will be stored under it). A denial under
    /// the tenant's shadow mode forwards, counted as shadowed.
    pub(super) fn answer_node<S: CasStore>(
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
    /// node-local, see [`crate::limit::share`]): the verdict, the wait and the
    /// RateLimit headers all follow the share.
    pub(super) fn answer_node_share<S: CasStore>(
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
                let mut reply =
                    LocalReply::rate_limited(crate::limit::gcra::wait_ms(retry_after_us));
                reply.headers = headers;
                self.reply(Outcome::RateLimited, reply)
            }
        }
    }

    /// The breaker's state as the gauge shows it.
    pub(super) fn show_breaker<S: CasStore>(&mut self, env: &Env<'_, S>, now: u64) {
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
    pub(super) fn fall_back<S: CasStore>(
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
            crate::node::clock::every_due(last, now_ms, 60_000).then_some(now_ms)
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
    pub(super) fn record<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        permit: CallPermit,
        failure: Option<&CallFailure>,
        now: u64,
    ) {
        if self.shares_call && permit != CallPermit::Probe {
            return;
        }
        let recorded =
            env.breaker()
                .record_kept(now, permit, failure.is_none(), env.kept_successes);
        let Some(transition) = recorded else {
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
}
