//! After the hook was let through: the upstream's answer settles its claim
//! once; a stream that ends first releases it.

use super::{Effect, Flow, Hook, Step};
use crate::hook::settle::{settle_op, Queued, UpstreamAnswer};
use crate::wire::{receipt, SettleOp};

impl Hook {
    /// The upstream's response headers: settles the claim once. The host
    /// reads `status`, `upstream_id` (`x-ankusa-hook-id`) and `receipt`
    /// (`x-ankusa-receipt`) only for a hook that [holds a claim](Hook::holds_claim).
    /// Adds the hook's rate-limit headers to that response, and takes the
    /// upstream's receipt out of it: the sender never sees one.
    pub fn on_upstream_headers(
        &mut self,
        status: Option<&str>,
        upstream_id: Option<&str>,
        receipt: Option<&str>,
    ) -> Step {
        let upstream = UpstreamAnswer {
            status,
            hook_id: upstream_id,
            receipt,
        };
        for (name, value) in std::mem::take(&mut self.rate_headers) {
            self.emit(Effect::ResponseHeader(name, value));
        }
        // A receipt that reached a sender, with a leaked edge token, would
        // commit any key under that hook's id. A hook holding a claim was
        // read, so it is removed only when there; any other forwarded hook
        // of an edge that uses a store has its response cleared unread (one
        // host call, where a read would be one too).
        let read = self.holds_claim();
        if (read && upstream.receipt.is_some()) || (!read && self.clears_receipt) {
            self.emit(Effect::RemoveResponseHeader(receipt::HEADER));
        }
        self.clears_receipt = false;
        self.settle(upstream);
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
        self.settle(UpstreamAnswer::default());
        self.step(Flow::Continue)
    }

    pub(super) fn settle(&mut self, upstream: UpstreamAnswer<'_>) {
        // One receipt covers both claims: it names the hook, not the key.
        for claim in self.claim.take().into_iter().chain(self.replay.take()) {
            let op = settle_op(claim, upstream);
            self.emit(Effect::Settle(Queued { retries: 0, op }));
        }
    }
}
