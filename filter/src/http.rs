//! One hook's HTTP context: Envoy's callbacks in, the core's state machine
//! ([`ankusa_core::hook::machine`]) deciding, its effects performed on the
//! [`Host`]. Nothing here decides anything about admission.

use crate::host::Host;
use ankusa_core::hook::machine::HOOK_ID;
use ankusa_core::hook::machine::{self, Effect, Flow, Step};
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::Action;

pub struct Hook<H: Host> {
    /// None: the filter has no configuration.
    host: Option<H>,
    machine: machine::Hook,
}

/// Performs a step's effects in order; the request's flow after them.
fn perform<H: Host>(host: &H, machine: &mut machine::Hook, step: Step) -> Flow {
    for effect in step.effects {
        match effect {
            Effect::Header(name, value) => host.set_request_header(name, value.as_deref()),
            Effect::ResponseHeader(name, value) => host.set_response_header(name, &value),
            Effect::Reply(reply) => host.reply(&reply),
            Effect::CallStore {
                path,
                body,
                timeout_ms,
            } => {
                if !host.dispatch(path, &body, timeout_ms) {
                    let next = machine.on_dispatch_failed(&host.env(), host.now_us());
                    return perform(host, machine, next);
                }
            }
            Effect::Settle(item) => host.settle(item),
            Effect::Metric(metric) => host.metric(metric),
            Effect::Log(level, line) => host.log(level, &line),
        }
    }
    step.flow
}

fn action(flow: Flow) -> Action {
    match flow {
        Flow::Continue => Action::Continue,
        Flow::Pause => Action::Pause,
    }
}

impl<H: Host> Hook<H> {
    pub fn new(host: Option<H>) -> Hook<H> {
        Hook {
            host,
            machine: machine::Hook::new(),
        }
    }
}

impl<H: Host> Context for Hook<H> {
    fn on_http_call_response(
        &mut self,
        _token: u32,
        _headers: usize,
        body_size: usize,
        _trailers: usize,
    ) {
        let Some(host) = &self.host else { return };
        if !self.machine.calling() {
            return;
        }
        let (status, body) = host.call_answer(body_size);
        let now = host.now_us();
        let step =
            self.machine
                .on_store_answer(&host.env(), status.as_deref(), body.as_deref(), now);
        if perform(host, &mut self.machine, step) == Flow::Continue {
            host.resume();
        }
    }
}

impl<H: Host> HttpContext for Hook<H> {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        let Some(host) = &self.host else {
            for effect in machine::not_configured().effects {
                if let Effect::Reply(reply) = effect {
                    H::reply_unconfigured(&reply);
                }
            }
            return Action::Pause;
        };
        let step = self.machine.on_headers(
            &host.env(),
            host.request_headers(),
            end_of_stream,
            || host.now_us(),
            |now| host.random(now),
        );
        action(perform(host, &mut self.machine, step))
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let Some(host) = &self.host else {
            return Action::Pause;
        };
        let step = self.machine.on_body(
            &host.env(),
            body_size as u64,
            end_of_stream,
            || host.request_body(body_size),
            || host.now_us(),
        );
        action(perform(host, &mut self.machine, step))
    }

    fn on_http_response_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        if let Some(host) = &self.host {
            if self.machine.reads_upstream() {
                // Only a claim's settle reads the upstream's answer.
                let (status, upstream_id) = if self.machine.holds_claim() {
                    (
                        host.response_header(":status"),
                        host.response_header(HOOK_ID),
                    )
                } else {
                    (None, None)
                };
                let step = self
                    .machine
                    .on_upstream_headers(status.as_deref(), upstream_id.as_deref());
                perform(host, &mut self.machine, step);
            }
        }
        Action::Continue
    }

    fn on_log(&mut self) {
        if let Some(host) = &self.host {
            let step = self.machine.on_stream_end();
            perform(host, &mut self.machine, step);
        }
    }
}

#[cfg(test)]
mod tests;
