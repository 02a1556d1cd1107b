//! One hook's HTTP context over proxy-wasm: Envoy's callbacks mapped onto
//! the core's [`Stream`] (which drives the state machine and performs its
//! effects on the [`Host`]), its [`Flow`] mapped back to an [`Action`].
//! Nothing here decides anything about admission.

use crate::host::Host;
use ankusa_core::hook::machine::Flow;
use ankusa_core::shell::hook::Stream;
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::Action;

/// A hook's HTTP context: the core's stream under proxy-wasm's callbacks.
pub struct HookContext<H: Host>(Stream<H>);

fn action(flow: Flow) -> Action {
    match flow {
        Flow::Continue => Action::Continue,
        Flow::Pause => Action::Pause,
    }
}

impl<H: Host> HookContext<H> {
    /// None: the filter has no configuration.
    pub fn new(host: Option<H>) -> HookContext<H> {
        HookContext(Stream::new(host))
    }

    /// The hook of HTTP context `id`.
    pub fn in_context(self, id: u32) -> HookContext<H> {
        HookContext(self.0.in_context(id))
    }
}

impl<H: Host> Context for HookContext<H> {
    fn on_http_call_response(
        &mut self,
        _token: u32,
        _headers: usize,
        body_size: usize,
        _trailers: usize,
    ) {
        self.0.on_call_answer(body_size);
    }
}

// Every callback of proxy-wasm 0.2's `Context` and `HttpContext` this hook
// leaves to the SDK's default, and why that default can't let a request pass
// undecided. On the request path the hook implements every callback Envoy
// makes (headers, body, trailers): each one pauses until the hook is decided
// and let through, and a request goes upstream only when one of them returns
// `Continue` or the store's answer resumes it.
//
// - `on_http_response_body`, `on_http_response_trailers` (default
//   `Continue`): a response exists only for a request already decided — the
//   upstream's answer to a hook let through, or a local reply. Going on with
//   it moves no request.
// - Request metadata: the SDK 0.2 exports no `proxy_on_request_metadata`,
//   so Envoy's wasm filter answers HTTP/2 METADATA with `Continue` itself.
//   That passes the metadata on without resuming a filter paused on the
//   headers, body or trailers, and the listener doesn't enable the codec's
//   `allow_metadata` anyway, so none reaches a filter.
// - `on_done` (default `true`: the context may be deleted): Envoy calls it
//   as the stream is torn down, when there is nothing left to let through;
//   what the hook holds is released in `on_log`, which every stream gets.
// - `on_grpc_call_response`, `on_grpc_stream_*`: the hook makes no gRPC call,
//   so they never come; `on_foreign_function`: it calls none. They return
//   nothing a stream's flow could read.
// - `HttpContext::on_log` and `Context::on_http_call_response` are
//   implemented above and below.
impl<H: Host> HttpContext for HookContext<H> {
    fn on_http_request_headers(&mut self, _headers: usize, end_of_stream: bool) -> Action {
        action(self.0.on_request_headers(end_of_stream))
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        action(self.0.on_request_body(|| body_size, end_of_stream))
    }

    /// The trailers end the body (its last chunk came without
    /// `end_of_stream`): the stream decides now if it was waiting for the
    /// body, and the request stays paused until the hook is let through.
    /// Left to the SDK's default (`Continue`), Envoy would move a request
    /// on that the body callback was holding, undecided.
    fn on_http_request_trailers(&mut self, _trailers: usize) -> Action {
        action(self.0.on_request_trailers())
    }

    fn on_http_response_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        self.0.on_response_headers();
        Action::Continue
    }

    fn on_log(&mut self) {
        self.0.on_stream_end();
    }
}

#[cfg(test)]
mod tests;
