//! One hook's stream, whatever the shell: the host's callbacks in, the
//! core's state machine ([`crate::hook::machine`]) deciding, its effects
//! performed on the [`Host`], the request's [`Flow`] out. Nothing here
//! decides anything about admission; a shell maps its own callbacks onto
//! these (the proxy-wasm filter's `HttpContext`, the native module's hooks).

use crate::hook::batch::{own_answer, Submitted};
use crate::hook::machine::HOOK_ID;
use crate::hook::machine::{self, Effect, Flow, Metric, Step};
use crate::hook::settle::{refused_receipts, wire_for, Queued};
use crate::shell::batch;
use crate::shell::host::{perform, perform_riding, Host};
use crate::wire::receipt;
use crate::wire::version::StoreWire;

/// One hook's stream: its host (None: the filter has no configuration),
/// its state machine and how its hit call leaves.
pub struct Stream<H: Host> {
    /// None: the filter has no configuration.
    host: Option<H>,
    machine: machine::Hook,
    batching: Batching,
}

/// How this hook's hit call leaves: alone, or with its worker's next call.
#[derive(Default)]
struct Batching {
    /// The stream's id on its worker: how a batched call's answer finds this hook.
    id: u32,
    /// A hit call this hook sent on its own is in flight.
    own_call: bool,
    /// The worker's settle operations riding on that call.
    riding: Vec<Queued>,
    /// The store's wire they were written for.
    riding_for: StoreWire,
}

impl Batching {
    /// Performs a step. A hit call waits for the worker's next call when
    /// one is in flight (see [`crate::shell::batch`]): the machine is parked there,
    /// paused, until the root answers it.
    fn run<H: Host>(&mut self, host: &H, machine: &mut machine::Hook, mut step: Step) -> Flow {
        if let Some(hit) = &step.hit {
            match batch::submit(host, self.id, &hit.body, hit.timeout_ms) {
                Submitted::SendNow => {
                    // Alone, it carries what the worker's hooks settled.
                    self.own_call = true;
                    self.riding = host.take_riding();
                    self.riding_for = wire_for(host.store(), &self.riding);
                    let flow = perform_riding(host, machine, step, &self.riding, self.riding_for);
                    if !machine.calling() {
                        // The host refused the dispatch: no call is in flight.
                        self.call_done(host);
                        self.give_back(host);
                    }
                    return flow;
                }
                Submitted::Queued | Submitted::QueuedFlush => {
                    step.hit = None;
                    let flow = perform(host, machine, step);
                    batch::park(self.id, std::mem::take(machine));
                    return flow;
                }
            }
        }
        let flow = perform(host, machine, step);
        if !machine.calling() {
            // The host refused the dispatch: no call is in flight.
            self.call_done(host);
        }
        flow
    }

    /// This hook's own call is over (answered, refused, or never to be answered).
    fn call_done<H: Host>(&mut self, host: &H) {
        if std::mem::take(&mut self.own_call) {
            batch::own_call_done(host);
        }
    }

    /// The riding settle operations of a call that will never be answered:
    /// held again (or dropped once out of retries), as a failed call's are.
    fn give_back<H: Host>(&mut self, host: &H) {
        let riding = std::mem::take(&mut self.riding);
        if !riding.is_empty() {
            host.riding_settled(riding, false);
        }
    }

    /// Takes back a machine the root answered.
    fn reclaim(&self, machine: &mut machine::Hook) {
        if let Some(answered) = batch::reclaim(self.id) {
            *machine = answered;
        }
    }
}

impl<H: Host> Stream<H> {
    pub fn new(host: Option<H>) -> Stream<H> {
        Stream {
            host,
            machine: machine::Hook::new(),
            batching: Batching::default(),
        }
    }

    /// The hook of stream `id` (unique on its worker while it lives).
    pub fn in_context(mut self, id: u32) -> Stream<H> {
        self.batching.id = id;
        self
    }

    /// The hook's host (None: no configuration).
    pub fn host(&self) -> Option<&H> {
        self.host.as_ref()
    }

    /// A step of the request's body or trailers. A machine parked waiting
    /// for its worker's batched call (see [`crate::shell::batch`]) takes the event
    /// where it is parked and stays there, the request paused meanwhile.
    fn request_event(&mut self, event: impl FnOnce(&mut machine::Hook, &H) -> Step) -> Flow {
        let Some(host) = &self.host else {
            return Flow::Pause;
        };
        self.batching.reclaim(&mut self.machine);
        if let Some(mut parked) = batch::take_waiting(self.batching.id) {
            // Its call is in flight: the machine learns the body is all in
            // (a refusal waits for that) and keeps the request paused.
            let step = event(&mut parked, host);
            let flow = perform(host, &mut parked, step);
            batch::park(self.batching.id, parked);
            return flow;
        }
        let step = event(&mut self.machine, host);
        self.batching.run(host, &mut self.machine, step)
    }

    /// The answer (`body_size` bytes) to the hit call this hook sent on its own.
    pub fn on_call_answer(&mut self, body_size: usize) {
        let Some(host) = &self.host else { return };
        if !self.machine.calling() {
            return;
        }
        self.batching.call_done(host);
        let (status, body) = host.call_answer(body_size);
        let now = host.now_us();
        let riding = std::mem::take(&mut self.batching.riding);
        if refused_receipts(status.as_deref(), &riding, self.batching.riding_for) {
            // An older store: they go again without their receipts.
            let version = StoreWire::refused(host.store(), &host.worker().store_wire);
            host.metric(Metric::StoreWire(u64::from(version)));
        }
        let (share, applied) = own_answer(riding.len(), status.as_deref(), body.as_deref());
        if let Some(applied) = applied {
            host.riding_settled(riding, applied);
        }
        let step = self.machine.on_store_reply(&host.env(), share, now);
        if perform(host, &mut self.machine, step) == Flow::Continue {
            host.resume();
        }
    }
}

impl<H: Host> Stream<H> {
    /// The request's headers (`end_of_stream`: no body follows).
    pub fn on_request_headers(&mut self, end_of_stream: bool) -> Flow {
        let Some(host) = &self.host else {
            for effect in machine::not_configured().effects {
                if let Effect::Reply(reply) = effect {
                    H::reply_unconfigured(&reply);
                }
            }
            return Flow::Pause;
        };
        let step = self.machine.on_headers(
            &host.env(),
            host.request_headers(),
            end_of_stream,
            || host.now_us(),
            |now| host.random(now),
        );
        self.batching.run(host, &mut self.machine, step)
    }

    /// A chunk of the request's body: `body_size` gives the bytes buffered
    /// so far, asked only when the machine waits for the body (a hook
    /// decided on its headers costs the host no body call).
    pub fn on_request_body(
        &mut self,
        body_size: impl FnOnce() -> usize,
        end_of_stream: bool,
    ) -> Flow {
        self.request_event(|machine, host| {
            // Unread by a machine that doesn't wait for the body.
            let body_size = if machine.awaits_body() {
                body_size()
            } else {
                0
            };
            machine.on_body(
                &host.env(),
                body_size as u64,
                end_of_stream,
                || host.request_body(body_size),
                || host.now_us(),
            )
        })
    }

    /// The trailers end the body (its last chunk came without
    /// `end_of_stream`): the machine decides now if it was waiting for the
    /// body, and the request stays paused until the hook is let through.
    /// A shell that let trailers pass (`Continue`) would move a request on
    /// that the body callback was holding, undecided.
    pub fn on_request_trailers(&mut self) -> Flow {
        self.request_event(|machine, host| {
            // Everything buffered: the host reads no more than there is.
            machine.on_trailers(
                &host.env(),
                || host.request_body(usize::MAX),
                || host.now_us(),
            )
        })
    }

    /// The upstream's response headers (the response always goes on).
    pub fn on_response_headers(&mut self) {
        if let Some(host) = &self.host {
            self.batching.reclaim(&mut self.machine);
            if self.machine.reads_upstream() {
                // Only a claim's settle reads the upstream's answer.
                let (status, upstream_id, receipt) = if self.machine.holds_claim() {
                    (
                        host.response_header(":status"),
                        host.response_header(HOOK_ID),
                        host.response_header(receipt::HEADER),
                    )
                } else {
                    (None, None, None)
                };
                let step = self.machine.on_upstream_headers(
                    status.as_deref(),
                    upstream_id.as_deref(),
                    receipt.as_deref(),
                );
                perform(host, &mut self.machine, step);
            }
        }
    }

    /// The stream is over (every stream gets this, once): what the hook
    /// holds is released.
    pub fn on_stream_end(&mut self) {
        if let Some(host) = &self.host {
            if let Some(parked) = batch::forget(self.batching.id) {
                self.machine = parked;
            }
            self.batching.call_done(host);
            // Its own call's answer will not come: what rode on it is held again.
            self.batching.give_back(host);
            let step = self.machine.on_stream_end();
            perform(host, &mut self.machine, step);
        }
    }
}
