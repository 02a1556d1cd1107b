//! The root context: one per worker VM (plus Envoy's throw-away canary).
//!
//! `on_configure` builds the [`Runtime`] (refusing a bad configuration with a
//! log line naming the field) and sets the tick; `on_tick` drives the
//! [`Drainer`] and the override [`Poller`], then sets the tick the work left
//! waiting needs ([`Ticker`]: none at all for node scopes); every HTTP
//! context gets a [`HookContext`] over the runtime.

use crate::batch_call::ProxyRoot;
use crate::drain::{Drainer, ProxyBackground};
use crate::host::{Host, ProxyHost};
use crate::http::HookContext;
use crate::runtime::Runtime;
use crate::tick::{ProxyTicks, Ticker};
use ankusa_core::hook::settle::tick::Waiting;
use ankusa_core::shell::poll::Poller;
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{BufferType, ContextType, MapType};
use std::rc::Rc;

pub struct Root {
    runtime: Option<Rc<Runtime>>,
    drainer: Drainer,
    poller: Poller,
    ticker: Ticker,
}

impl Root {
    pub fn new(_context_id: u32) -> Root {
        Root {
            runtime: None,
            drainer: Drainer::default(),
            poller: Poller::default(),
            ticker: Ticker::default(),
        }
    }

    /// What waits on this root's ticks under `rt`.
    fn waiting(&self, rt: &Runtime) -> Waiting {
        Waiting {
            held: !rt.worker.held.borrow().is_empty(),
            queued: self.drainer.queued(),
            in_flight: self.drainer.in_flight(),
        }
    }
}

impl Context for Root {
    /// The VM is going away: this worker's settle operations go to the
    /// node's queue, which outlives it.
    fn on_done(&mut self) -> bool {
        if let Some(rt) = &self.runtime {
            rt.spill();
        }
        true
    }

    fn on_http_call_response(
        &mut self,
        token: u32,
        _headers: usize,
        body: usize,
        _trailers: usize,
    ) {
        let Some(rt) = self.runtime.clone() else {
            return;
        };
        if crate::batch_call::on_call_answer(&ProxyRoot(Rc::clone(&rt)), token, body) {
            return;
        }
        let token = u64::from(token);
        let status = crate::headers::value(MapType::HttpCallResponseHeaders, ":status");
        let host = ProxyBackground(&rt);
        if self.poller.owns(token) {
            let read = || {
                hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, body)
                    .ok()
                    .flatten()
            };
            self.poller.answered(&host, status.as_deref(), body, read);
        } else {
            self.drainer
                .answered(&host, &rt.worker, token, status.as_deref());
        }
    }
}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        match Runtime::configure() {
            Ok(runtime) => {
                self.ticker
                    .want(&ProxyTicks, runtime.config(), self.waiting(&runtime));
                // Settles made under the configuration before go to the
                // node's queue; they are not lost with the old runtime.
                if let Some(before) = &self.runtime {
                    before.spill();
                }
                if runtime.config().uses_store() {
                    // A wake queue of this worker's own: a name no other
                    // worker draws.
                    let name =
                        hex::encode(ProxyHost(Rc::clone(&runtime)).random(crate::shared::now_us()));
                    let queue = hostcalls::register_shared_queue(&format!("ankusa.hits.{name}"));
                    ankusa_core::shell::batch::init(queue.ok());
                }
                self.runtime = Some(runtime);
                true
            }
            Err(message) => {
                log::error!("ankusa: configuration refused: {message}");
                false
            }
        }
    }

    fn on_tick(&mut self) {
        let Some(rt) = self.runtime.clone() else {
            return;
        };
        if rt.config().polls_overrides() {
            self.poller.tick(&ProxyBackground(&rt));
        }
        if rt.config().uses_store() {
            if rt.spill_due(crate::shared::now_us()) {
                rt.spill();
            }
            self.drainer.tick(&ProxyBackground(&rt));
        }
        self.ticker
            .want(&ProxyTicks, rt.config(), self.waiting(&rt));
    }

    fn on_queue_ready(&mut self, queue_id: u32) {
        let Some(rt) = self.runtime.clone() else {
            return;
        };
        if ankusa_core::shell::batch::woken(queue_id) {
            while let Ok(Some(_)) = hostcalls::dequeue_shared_queue(queue_id) {}
            crate::batch_call::on_wake(&ProxyRoot(rt));
        }
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(
            HookContext::new(self.runtime.clone().map(ProxyHost)).in_context(context_id),
        ))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}
