//! The override a node-local charge applies.
//!
//! A hook the store answered carries the store's word on its tenant's
//! override (none, or the one in force). A hook charged on this node alone
//! (node scope, or a fall-back when the store failed or the breaker is open)
//! has no answer to read, so it takes the override from the node's polled
//! list ([`crate::fleet::overrides::node_list`]), which goes stale when the store
//! has been unreachable too long. Either way the node charges are re-quoted
//! to the effective limits before they are charged.

use super::{Effect, Env, Hook, Step};
use crate::fleet::overrides::{self, node_list};
use crate::hook::outcome::Outcome;
use crate::hook::plan::TooLarge;
use crate::hook::reply::LocalReply;
use crate::hook::settle::Queued;
use crate::node::cas::CasStore;
use crate::wire::{Charge, Claim, SettleOp};

impl Hook {
    /// `charges` re-quoted to the tenant's limits in force at `now` (µs),
    /// learning the override from the node's list when no store answered.
    /// A charge over its burst as re-quoted (a body over a lowered
    /// `bytes_burst`) could never pass: it is too large.
    pub(super) fn node_charges<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        charges: &[Charge],
        now: u64,
    ) -> Result<Vec<Charge>, TooLarge> {
        let Some(facts) = &self.facts else {
            return Ok(charges.to_vec());
        };
        // An edge with no store polls no list: nothing to read.
        if !self.answered && env.config.polls_overrides() {
            self.in_force = node_list::lookup(env.store, &facts.tenant, now / 1_000);
        }
        let limits = self.effective(env, &facts.tenant, now).limits;
        let charges = overrides::requota(charges, &limits);
        match charges.iter().find(|c| c.units > c.burst) {
            Some(c) => Err(TooLarge {
                size: c.units,
                limit: c.burst,
            }),
            None => Ok(charges),
        }
    }

    /// Answers 413 for a charge no override in force lets pass, releasing
    /// `claim` (nothing will be stored under it).
    pub(super) fn too_large_now(&mut self, claim: Option<Claim>, e: TooLarge) -> Step {
        if let Some(claim) = claim {
            self.emit(Effect::Settle(Queued {
                retries: 0,
                op: SettleOp::Release { claim },
            }));
        }
        self.reply(Outcome::TooLarge, LocalReply::too_large(e.size, e.limit))
    }
}

#[cfg(test)]
mod tests;
