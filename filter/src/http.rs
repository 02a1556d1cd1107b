//! One hook's admission: the HTTP context.
//!
//! Headers route the hook (404 for anything that isn't a webhook of a
//! configured source) and decide whether the body is needed (a JSON dedupe
//! rule or a bytes quota); the body, if needed, is buffered and then the hook
//! is planned ([`crate::plan`]) and answered: node buckets alone, or one call
//! to the store with a node-local answer for every way that call can fail. A
//! forwarded hook that holds a claim settles it when the upstream answers.

use crate::headers::{self, RequestHeaders};
use crate::metrics::Outcome;
use crate::root::Runtime;
use crate::shared::now_us;
use ankusa_core::breaker::CallPermit;
use ankusa_core::hook::plan::{self, CallFailure, HookFacts, Plan};
use ankusa_core::hook::reply::{self, LocalReply};
use ankusa_core::hook::settle::{settle_op, Queued};
use ankusa_core::hook::{admit, degraded::fleet_kinds};
use ankusa_core::node_buckets::NodeVerdict;
use ankusa_core::wire::{Charge, Claim, HitAnswer, SettleOp};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::{Action, BufferType, MapType};
use std::rc::Rc;

/// Request headers the filter sets on every forwarded hook (and strips from
/// the sender's request, so a sender can't pick its own dedupe key).
const HOOK_ID: &str = "x-ankusa-hook-id";
const TENANT: &str = "x-ankusa-tenant";
const SOURCE: &str = "x-ankusa-source";
const EVENT_KEY: &str = "x-ankusa-event-key";

/// A store call in flight for this hook.
struct Call {
    permit: CallPermit,
    started_us: u64,
    plan: Plan,
}

pub struct Hook {
    rt: Option<Rc<Runtime>>,
    facts: Option<HookFacts>,
    /// The request's headers (x-ankusa-* already stripped), until admission has used them.
    headers: RequestHeaders,
    /// Headers were held until the whole body arrives.
    awaiting_body: bool,
    call: Option<Call>,
    /// Forwarded holding this claim: settle it on the upstream's answer.
    claim: Option<Claim>,
    /// The sender has sent its whole request.
    request_done: bool,
    /// A refusal decided before the body was all in: sent once it is, so the
    /// sender isn't reset mid-upload (Envoy closes a connection after a local
    /// reply, and a body arriving at a closed socket draws a TCP reset that
    /// destroys the answer).
    deferred: Option<LocalReply>,
}

fn set_header(name: &str, value: Option<&str>) {
    let _ = hostcalls::set_map_value(MapType::HttpRequestHeaders, name, value);
}

/// A fresh UUIDv7; should the host's randomness fail, the clock's low bits
/// still make ids distinct per µs (a hook id names a hook, it guards nothing).
fn new_hook_id(now_us: u64) -> String {
    let mut random = [0u8; 10];
    if getrandom::getrandom(&mut random).is_err() {
        random[..8].copy_from_slice(&now_us.to_le_bytes());
    }
    ankusa_core::hook_id::hook_id(now_us / 1_000, random)
}

/// A local reply: JSON, with `Retry-After` when it says when to come back.
fn send(reply: LocalReply) {
    let retry = reply.retry_after.map(|s| s.to_string());
    let mut headers = vec![("content-type", "application/json")];
    if let Some(r) = &retry {
        headers.push(("retry-after", r.as_str()));
    }
    let _ = hostcalls::send_http_response(reply.status, headers, Some(reply.body.as_bytes()));
}

impl Hook {
    pub fn new(rt: Option<Rc<Runtime>>) -> Hook {
        Hook {
            rt,
            facts: None,
            headers: RequestHeaders::default(),
            awaiting_body: false,
            call: None,
            claim: None,
            request_done: false,
            deferred: None,
        }
    }

    /// Answers the sender (now, or once its upload is complete) and counts the outcome.
    fn reply(&mut self, rt: &Runtime, outcome: Outcome, reply: LocalReply) -> Action {
        rt.metrics.admission(outcome);
        if self.request_done {
            send(reply);
        } else {
            self.deferred = Some(reply);
        }
        Action::Pause
    }

    /// Adds the hook's headers and lets it through.
    fn forward(&mut self, rt: &Runtime, claim: Option<Claim>) -> Action {
        if let Some(facts) = &self.facts {
            set_header(HOOK_ID, Some(&facts.hook_id));
            set_header(TENANT, Some(&facts.tenant));
            set_header(SOURCE, Some(&facts.source_id));
            // Without a key there is nothing to set: the sender's was stripped.
            if let Some(key) = &facts.event_key {
                set_header(EVENT_KEY, Some(key));
            }
        }
        self.claim = claim;
        rt.metrics.admission(Outcome::Admitted);
        Action::Continue
    }

    /// Charges the node buckets, then forwards (holding `claim`) or answers 429
    /// (releasing `claim`: nothing will be stored under it).
    fn answer_node(
        &mut self,
        rt: &Runtime,
        charges: &[Charge],
        claim: Option<Claim>,
        now: u64,
    ) -> Action {
        let tenant = self
            .facts
            .as_ref()
            .map(|f| f.tenant.as_str())
            .unwrap_or_default();
        let verdict = if charges.is_empty() {
            NodeVerdict::Admit
        } else {
            rt.buckets().charge(tenant, now, charges)
        };
        match verdict {
            NodeVerdict::Admit => self.forward(rt, claim),
            NodeVerdict::Contended => {
                rt.metrics.contended();
                self.forward(rt, claim)
            }
            NodeVerdict::RateLimited { retry_after_us } => {
                if let Some(claim) = claim {
                    rt.settle(Queued {
                        retries: 0,
                        op: SettleOp::Release { claim },
                    });
                }
                self.reply(
                    rt,
                    Outcome::RateLimited,
                    LocalReply::rate_limited(retry_after_us.div_ceil(1_000)),
                )
            }
        }
    }

    /// The store can't answer: this node alone does, with every charge. A
    /// call that was sent may have written its claim late, so the hook keeps
    /// it (`claim`, see [`plan::claim_after_failure`]) and settles it as usual.
    fn fall_back(
        &mut self,
        rt: &Runtime,
        plan: &Plan,
        claim: Option<Claim>,
        why: &str,
        now: u64,
    ) -> Action {
        rt.metrics.fallback();
        for kind in fleet_kinds(&rt.config) {
            rt.metrics.degraded(kind, true);
        }
        rt.warn_degraded(why, now / 1_000);
        self.answer_node(rt, &plan.charges, claim, now)
    }

    /// Everything is known (headers, and the body if it was needed): decide.
    fn admit(&mut self, rt: &Runtime, body: Option<&[u8]>, now: u64) -> Action {
        let headers = std::mem::take(&mut self.headers);
        let Some(facts) = self.facts.as_mut() else {
            return Action::Continue;
        };
        let Some(source) = rt.config.sources.get(&facts.source_id) else {
            return Action::Continue;
        };
        // A forgery spends nothing: checked before any charge, claim or store call.
        if let Err(refusal) = rt
            .keys
            .check(&facts.source_id, &headers, body, now / 1_000_000)
        {
            return self.reply(rt, Outcome::Unverified, reply::unverified(refusal));
        }
        facts.event_key = source
            .dedupe
            .as_ref()
            .and_then(|rule| rule.extract(|name| headers.bytes(name), body));
        facts.body_len = admit::charged_body_len(&rt.config, &facts.tenant, body);
        let plan = match plan::plan(&rt.config, rt.node(), facts) {
            Ok(plan) => plan,
            Err(e) => {
                return self.reply(
                    rt,
                    Outcome::TooLarge,
                    LocalReply::too_large(e.size, e.limit),
                )
            }
        };
        let Some(request) = &plan.fleet else {
            return self.answer_node(rt, &plan.charges, None, now);
        };
        let breaker = rt.breaker();
        let permit = breaker.admit_call(now);
        match permit {
            CallPermit::Skip => {
                rt.show_breaker(now);
                // No call, so no claim was written: there is nothing to settle.
                return self.fall_back(rt, &plan, None, "the breaker is open", now);
            }
            CallPermit::Probe => {
                log::info!("ankusa: fleet breaker probing the store");
                rt.show_breaker(now);
            }
            CallPermit::Call => {}
        }
        let body = serde_json::to_vec(request).unwrap_or_default();
        let fleet = &rt.config.fleet;
        match crate::root::call_store(fleet, "/v1/hit", &body, fleet.timeout_ms) {
            Ok(_token) => {
                self.call = Some(Call {
                    permit,
                    started_us: now,
                    plan,
                });
                Action::Pause
            }
            Err(_) => {
                let failure = CallFailure::Dispatch;
                self.record(rt, permit, Some(&failure), now);
                let claim = plan::claim_after_failure(&plan, &failure);
                self.fall_back(rt, &plan, claim, &failure.to_string(), now)
            }
        }
    }

    /// Reports a call's outcome (`failure`: why it failed) to the breaker.
    fn record(&self, rt: &Runtime, permit: CallPermit, failure: Option<&CallFailure>, now: u64) {
        let Some(transition) = rt.breaker().record(now, permit, failure.is_none()) else {
            return;
        };
        match failure {
            Some(why) => log::warn!("ankusa: fleet breaker {transition:?}: {why}"),
            None => log::info!("ankusa: fleet breaker {transition:?}: the store answered"),
        }
        rt.show_breaker(now);
    }

    /// The store's answer to this hook's call.
    fn answered(
        &mut self,
        rt: &Runtime,
        call: Call,
        answer: Result<HitAnswer, CallFailure>,
        now: u64,
    ) -> Action {
        self.record(rt, call.permit, answer.as_ref().err(), now);
        let answer = match answer {
            Ok(answer) => answer,
            Err(failure) => {
                let claim = plan::claim_after_failure(&call.plan, &failure);
                return self.fall_back(rt, &call.plan, claim, &failure.to_string(), now);
            }
        };
        for kind in fleet_kinds(&rt.config) {
            rt.metrics.degraded(kind, false);
        }
        match answer {
            HitAnswer::Ok => {
                let claim = call.plan.fleet.and_then(|r| r.claim);
                self.answer_node(rt, &call.plan.node_after_ok, claim, now)
            }
            HitAnswer::Duplicate { hook_id } => {
                self.reply(rt, Outcome::Duplicate, LocalReply::duplicate(&hook_id))
            }
            HitAnswer::Pending { retry_after_ms } => {
                self.reply(rt, Outcome::Pending, LocalReply::pending(retry_after_ms))
            }
            HitAnswer::RateLimited { retry_after_ms } => self.reply(
                rt,
                Outcome::RateLimited,
                LocalReply::rate_limited(retry_after_ms),
            ),
        }
    }

    /// Queues the claim's outcome once: promote on a 2xx, release otherwise.
    fn settle(&mut self, rt: &Runtime, status: Option<&str>, upstream_id: Option<&str>) {
        let Some(claim) = self.claim.take() else {
            return;
        };
        let op = settle_op(claim, status, upstream_id);
        rt.settle(Queued { retries: 0, op });
    }
}

impl Context for Hook {
    fn on_http_call_response(
        &mut self,
        _token: u32,
        _headers: usize,
        body_size: usize,
        _trailers: usize,
    ) {
        let (Some(rt), Some(call)) = (self.rt.clone(), self.call.take()) else {
            return;
        };
        let status = headers::value(MapType::HttpCallResponseHeaders, ":status");
        let body = hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, body_size)
            .ok()
            .flatten();
        let now = now_us();
        rt.metrics
            .call_ms(now.saturating_sub(call.started_us) / 1_000);
        let answer = plan::parse_answer(status.as_deref(), body.as_deref());
        if let Action::Continue = self.answered(&rt, call, answer, now) {
            let _ = hostcalls::resume_http_request();
        }
    }
}

impl HttpContext for Hook {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        self.request_done = end_of_stream;
        let Some(rt) = self.rt.clone() else {
            send(reply::not_configured());
            return Action::Pause;
        };
        let mut headers = RequestHeaders::read();
        // A sender must not choose the hook's id or dedupe key. Removing a
        // name that isn't there would still be a hostcall.
        for name in [HOOK_ID, TENANT, SOURCE, EVENT_KEY] {
            if headers.remove(name) {
                set_header(name, None);
            }
        }
        let path = headers.get(":path").unwrap_or_default();
        let route = match ankusa_core::route::route(&rt.config, &path) {
            Ok(route) => route,
            Err(e) => {
                return self.reply(
                    &rt,
                    Outcome::NotFound,
                    LocalReply::not_found(&e.to_string()),
                )
            }
        };
        let method = headers.get(":method").unwrap_or_default();
        let length = headers.get("content-length");
        let verifies = rt.keys.verifies(&route.source_id);
        let needs_body = match admit::check_headers(
            &rt.config,
            &route.tenant,
            route.source,
            verifies,
            &method,
            length.as_deref(),
        ) {
            Ok(checked) => checked.needs_body,
            Err((outcome, refusal)) => return self.reply(&rt, outcome, refusal),
        };
        let now = now_us();
        self.facts = Some(HookFacts {
            tenant: route.tenant,
            source_id: route.source_id,
            hook_id: new_hook_id(now),
            event_key: None,
            body_len: 0,
        });
        self.headers = headers;
        if needs_body && !end_of_stream {
            self.awaiting_body = true;
            return Action::Pause;
        }
        self.admit(&rt, None, now)
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let Some(rt) = self.rt.clone() else {
            return Action::Pause;
        };
        self.request_done = end_of_stream;
        if self.deferred.is_some() {
            // Refused already: swallow the rest of the upload, then answer.
            if end_of_stream {
                if let Some(reply) = self.deferred.take() {
                    send(reply);
                }
            }
            return Action::Pause;
        }
        if !self.awaiting_body {
            return if self.call.is_some() {
                Action::Pause
            } else {
                Action::Continue
            };
        }
        if let Err((outcome, refusal)) = admit::check_body_size(&rt.config, body_size as u64) {
            self.awaiting_body = false;
            // Past the limit there is no waiting for the end: answer now.
            self.request_done = true;
            return self.reply(&rt, outcome, refusal);
        }
        if !end_of_stream {
            return Action::Pause; // Envoy buffers until the last chunk
        }
        self.awaiting_body = false;
        let body = hostcalls::get_buffer(BufferType::HttpRequestBody, 0, body_size)
            .ok()
            .flatten()
            .unwrap_or_default();
        self.admit(&rt, Some(&body), now_us())
    }

    fn on_http_response_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        if let Some(rt) = self.rt.clone() {
            if self.claim.is_some() {
                let get = |name| headers::value(MapType::HttpResponseHeaders, name);
                let (status, upstream_id) = (get(":status"), get(HOOK_ID));
                self.settle(&rt, status.as_deref(), upstream_id.as_deref());
            }
        }
        Action::Continue
    }

    fn on_log(&mut self) {
        // The downstream went away (or the stream was reset) before the upstream answered.
        if let Some(rt) = self.rt.clone() {
            self.settle(&rt, None, None);
        }
    }
}
