//! The request path: headers, then the body if it is needed, then the decision
//! (404/405/413/401, the plan, a node-local answer or the store call).

use super::{Call, Effect, Env, Flow, HitCall, Hook, Level, Step, OWN_PREFIX};
use crate::fleet::breaker::CallPermit;
use crate::hook::admit;
use crate::hook::headers::RequestHeaders;
use crate::hook::outcome::Outcome;
use crate::hook::plan::{self, HookFacts};
use crate::hook::reply::{self, LocalReply};
use crate::node::cas::CasStore;

const CONNECT: &str = "CONNECT";

impl Hook {
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
        // A CONNECT's stream is a tunnel: it has no end to wait for, so any
        // refusal is answered at once (it was decided, then never sent).
        self.request_done = end_of_stream || headers.get_str(":method") == Some(CONNECT);
        self.note_scopes(env);
        // Nothing under the edge's own prefix comes from a sender. Only the
        // names present are removed: removing an absent one is a hostcall too.
        for name in headers.remove_prefixed(OWN_PREFIX) {
            self.emit(Effect::RemoveHeader(name));
        }
        let traceparent = headers
            .get_str(crate::hook::trace_context::TRACEPARENT)
            .and_then(crate::hook::trace_context::parse);
        self.decision.trace.clone_from(&traceparent);
        let path = headers.get_str(":path").unwrap_or_default();
        let route = match crate::hook::route::route(env.config, path) {
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
        let hook_id = crate::hook::hook_id::hook_id(now / 1_000, random(now));
        self.facts = Some(HookFacts {
            tenant: route.tenant,
            source_id: route.source_id,
            hook_id,
            event_key: None,
            body_len: 0,
            replay_key: None,
            traceparent,
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
    pub(super) fn admit<S: CasStore>(
        &mut self,
        env: &Env<'_, S>,
        body: Option<&[u8]>,
        now: u64,
    ) -> Step {
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
        self.hit = Some(HitCall {
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
}
