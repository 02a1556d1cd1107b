//! After the hook was let through: the upstream's answer settles its claim
//! once; a stream that ends first releases it.

use super::{Effect, Flow, Hook, Step};
use crate::hook::settle::{settle_op, Queued};
use crate::wire::SettleOp;

impl Hook {
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

    pub(super) fn settle(&mut self, status: Option<&str>, upstream_id: Option<&str>) {
        for claim in self.claim.take().into_iter().chain(self.replay.take()) {
            let op = settle_op(claim, status, upstream_id);
            self.emit(Effect::Settle(Queued { retries: 0, op }));
        }
    }
}
