//! The root's side of a worker's micro-batched hits over proxy-wasm: the
//! core's [`Root`] as [`ProxyRoot`]. Which hooks leave together, the calls
//! the root sends and each hook's share of the answer are the core's
//! ([`ankusa_core::shell::batch_call`], [`ankusa_core::shell::batch`]).

use crate::host::{Host, ProxyHost};
use crate::runtime::{call_store, Runtime, SHARED};
use crate::shared::now_us;
use ankusa_core::hook::machine::Metric;
use ankusa_core::hook::settle::Queued;
use ankusa_core::node::cas::read_u64;
use ankusa_core::node::edge_keys::DEPTH_KEY;
pub use ankusa_core::shell::batch_call::{on_call_answer, on_wake, Root};
use ankusa_core::wire::version::StoreWire;
use proxy_wasm::hostcalls;
use std::rc::Rc;

/// Envoy's root context, through proxy-wasm.
pub struct ProxyRoot(pub Rc<Runtime>);

impl Root for ProxyRoot {
    type HookHost = ProxyHost;

    fn now_us(&self) -> u64 {
        now_us()
    }

    fn send(&self, path: &str, body: &[u8], timeout_ms: u64, _members: &[u32]) -> Option<u32> {
        call_store(&self.0.config().fleet, path, body, timeout_ms).ok()
    }

    fn riding_settles(&self) -> Vec<Queued> {
        let rt = &self.0;
        let max = rt.config().fleet.settle_batch_max;
        let mut batch = rt.take_held(max);
        let Some(queue_id) = rt.queue_id else {
            return batch;
        };
        let (queued, garbage) = crate::settle::dequeue_batch(&SHARED, queue_id, max - batch.len());
        rt.metrics.settle_dropped(garbage);
        if !queued.is_empty() {
            rt.metrics.settle_depth(read_u64(&SHARED, DEPTH_KEY).0);
        }
        batch.extend(queued);
        batch
    }

    fn settled(&self, settles: Vec<Queued>, ok: bool) {
        crate::drain::settled(&self.0, settles, ok);
    }

    fn store_wire(&self) -> StoreWire {
        StoreWire::of_node(&SHARED)
    }

    fn store_refused(&self) {
        let version = StoreWire::refused(&SHARED, &self.0.worker.store_wire);
        self.0.metrics.apply(Metric::StoreWire(u64::from(version)));
    }

    fn call_answer(&self, body_size: usize) -> (Option<String>, Option<Vec<u8>>) {
        Host::call_answer(&ProxyHost(Rc::clone(&self.0)), body_size)
    }

    fn enter(&self, id: u32) -> Option<ProxyHost> {
        hostcalls::set_effective_context(id).ok()?;
        Some(ProxyHost(Rc::clone(&self.0)))
    }
}

#[cfg(test)]
mod tests;
