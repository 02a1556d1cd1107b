//! The request's trailers: the sender is done, so the body is complete.
//!
//! A body followed by trailers never arrives with `end_of_stream`: HTTP/2
//! ends the stream on the trailers frame, chunked HTTP/1.1 on its trailer
//! section, and Envoy hands the filter the body's last chunk with
//! `end_of_stream = false`, then the trailers. So the trailers are the end of
//! the body, and everything the body's last chunk would decide is decided
//! here: the signature, a key in the body, the charges and the claim, the
//! body limit, and a refusal held until the upload was all in. Until a hook
//! is decided and let through, the request stays paused: going on here would
//! send it upstream undecided.

use super::{Effect, Env, Flow, Hook, Step};
use crate::hook::admit;
use crate::node::cas::CasStore;

impl Hook {
    /// The request's trailers arrived: the body (`read` fetches what was
    /// buffered, perhaps nothing) is complete.
    pub fn on_trailers<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        read: impl FnOnce() -> Vec<u8>,
        now_us: impl FnOnce() -> u64,
    ) -> Step {
        self.request_done = true;
        if let Some(reply) = self.deferred.take() {
            // Refused before the upload was all in: now it is.
            self.emit(Effect::Reply(reply));
            return self.step(Flow::Pause);
        }
        if self.awaiting_body {
            self.awaiting_body = false;
            let body = read();
            if let Err((outcome, refusal)) = admit::check_body_size(env.config, body.len() as u64) {
                return self.reply(outcome, refusal);
            }
            return self.admit(env, Some(&body), now_us());
        }
        // Decided already. Only a hook let through goes on (its facts are
        // spent then); one waiting for the store, or refused, stays paused.
        let flow = if self.facts.is_none() && self.call.is_none() {
            Flow::Continue
        } else {
            Flow::Pause
        };
        self.step(flow)
    }
}

#[cfg(test)]
mod tests;
