//! The override a node-local charge applies.
//!
//! A hook the store answered carries the store's word on its tenant's
//! override (none, or the one in force). A hook charged on this node alone
//! (node scope, or a fall-back when the store failed or the breaker is open)
//! has no answer to read, so it takes the override from the node's polled
//! list ([`crate::overrides::node_list`]), which goes stale when the store
//! has been unreachable too long. Either way the node charges are re-quoted
//! to the effective limits before they are charged.

use super::{Env, Hook};
use crate::cas::CasStore;
use crate::overrides::{self, node_list};
use crate::wire::Charge;

impl Hook {
    /// `charges` re-quoted to the tenant's limits in force at `now` (µs),
    /// learning the override from the node's list when no store answered.
    pub(super) fn node_charges<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        charges: &[Charge],
        now: u64,
    ) -> Vec<Charge> {
        let Some(facts) = &self.facts else {
            return charges.to_vec();
        };
        if !self.answered {
            self.in_force = node_list::lookup(env.store, &facts.tenant, now / 1_000);
        }
        let limits = self.effective(env, &facts.tenant, now).limits;
        overrides::requota(charges, &limits)
    }
}

#[cfg(test)]
mod tests;
