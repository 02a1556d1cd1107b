//! What the hook tells Envoy's access log ([`crate::hook::decision`]):
//! gathered as the hook goes (its route, where its answer came from, how
//! long the store took) and published once, as it is answered or let through.

use super::{Effect, Env, Hook};
use crate::hook::decision::Decided;
use crate::hook::outcome::Outcome;
use crate::hook::route::Route;
use crate::node::cas::CasStore;

impl Hook {
    /// The configuration's scopes, known before anything else.
    pub(super) fn note_scopes<S: CasStore>(&mut self, env: &Env<'_, S>) {
        self.decision.scopes = (env.config.rate_limits.scope, env.config.dedupe.scope);
    }

    /// The route of a request refused before its hook was made (405, 413).
    pub(super) fn note_route(&mut self, route: &Route<'_>) {
        self.decision.tenant = Some(route.tenant.clone());
        self.decision.source = Some(route.source_id.clone());
    }

    /// The store's answer (`answered`) or the call's failure came `waited_us` after the hook's admission.
    pub(super) fn note_call(&mut self, answered: bool, waited_us: u64) {
        self.decision.store_us = Some(waited_us);
        if answered {
            self.decision.decided = Decided::Store;
        }
    }

    /// The hook is answered from this node alone because the store can't answer.
    pub(super) fn note_fallback(&mut self) {
        self.decision.decided = Decided::Fallback;
    }

    /// Publishes the decision: `outcome`, a refusal forwarded under shadow
    /// mode when `shadow`. Once: a hook has one decision.
    pub(super) fn decide(&mut self, outcome: Outcome, shadow: bool) {
        if std::mem::replace(&mut self.decided, true) {
            return;
        }
        let mut decision = std::mem::take(&mut self.decision);
        decision.outcome = Some(outcome);
        decision.shadow = shadow;
        if let Some(facts) = &self.facts {
            decision.tenant = Some(facts.tenant.clone());
            decision.source = Some(facts.source_id.clone());
            decision.hook_id = Some(facts.hook_id.clone());
            decision.event_key.clone_from(&facts.event_key);
        }
        self.emit(Effect::Decision(decision));
    }
}

#[cfg(test)]
mod tests;
