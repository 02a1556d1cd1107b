//! The root context: one per worker VM (plus Envoy's throw-away canary).
//!
//! `on_configure` parses and validates the plugin configuration, refusing a
//! bad one with a log line naming the field; defines the metrics; pre-creates
//! every shared-data key the filter will touch (a compare-and-swap on a key
//! that was never written can't be checked); and notices a reload that changed
//! a tenant's limits. `on_tick` drives the settle drainer and sends queued
//! store resets.

use crate::host::ProxyHost;
use crate::http::Hook;
use crate::metrics::Metrics;
use crate::settle;
use crate::shared::{now_us, HostStore};
use ankusa_core::breaker::{Breaker, BreakerState};
use ankusa_core::cas::read_u64;
use ankusa_core::cas::{ensure_keys, CasStore};
use ankusa_core::config::{Config, FleetConfig};
use ankusa_core::edge_keys::{self, BREAKER_KEY, BUCKET_PREFIX, BUCKET_SLOTS, RESETS_KEY};
use ankusa_core::hook::settle::{after_failure, request_body, take_lease, Enqueued, Queued};
use ankusa_core::node_buckets::NodeBuckets;
use ankusa_core::reload;
use ankusa_core::token;
use ankusa_core::wire::{self, ResetRequest};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{BufferType, ContextType, MapType, Status};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

/// The one shared-data map, seen through the core's seam.
pub static HOST: HostStore = HostStore;

thread_local! {
    /// `Bearer <token>` for every store call, read once per VM in
    /// `on_configure` from the VM environment (never from the plugin
    /// configuration, which Envoy's config dump shows). None: no credential.
    static AUTHORIZATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Reads the store token from the VM environment (Envoy passes it with
/// `vm_config.environment_variables.host_env_keys`). Without one, fleet calls
/// go out bare: a store that requires a token answers 401 and every hook is
/// answered from this node alone (`ankusa_fleet_fallback_total`).
fn read_token(config: &Config) -> Result<(), String> {
    let value = std::env::var(token::EDGE_TOKEN_ENV).ok();
    let authorization = token::edge_authorization(value.as_deref())?;
    if authorization.is_none() && config.uses_store() {
        log::error!(
            "ankusa: {} is not set in the VM environment: store calls carry no token; \
             a store that requires one answers 401 and hooks are answered from this node alone",
            token::EDGE_TOKEN_ENV
        );
    }
    AUTHORIZATION.with(|a| *a.borrow_mut() = authorization);
    Ok(())
}

/// The longest wait between two ticks of a root context (ms).
pub const MAX_TICK_MS: u64 = 50;

/// A settle batch or reset may take longer than one hit: it carries up to
/// `settle_batch_max` operations and nobody waits on it.
pub const BACKGROUND_TIMEOUT_MS: u64 = 2_000;

/// Everything a hook needs, built once per configuration and shared by the
/// VM's HTTP contexts.
pub struct Runtime {
    pub config: Config,
    /// This edge's name in claims: the config's "node", else Envoy's node id,
    /// read on first use (Envoy's canary VM runs `on_configure` before the
    /// node properties are available).
    node: std::cell::OnceCell<String>,
    pub metrics: Metrics,
    /// The settle queue (None if Envoy refused to register it: settles are then dropped and counted).
    pub queue_id: Option<u32>,
    /// Signing keys of the sources that verify their deliveries.
    pub keys: ankusa_core::verify::Keys,
}

impl Runtime {
    pub fn node(&self) -> &str {
        self.node.get_or_init(|| match &self.config.node {
            Some(node) => node.clone(),
            None => envoy_node_id(),
        })
    }

    pub fn breaker(&self) -> Breaker<'static, HostStore> {
        Breaker::new(&HOST, BREAKER_KEY, self.config.fleet.breaker)
    }

    /// Queues a settle operation; a full queue drops it and counts the drop.
    pub fn settle(&self, item: Queued) {
        let outcome = match self.queue_id {
            Some(id) => settle::enqueue(&HOST, id, self.config.fleet.settle_queue_max, &item),
            None => Enqueued::Dropped,
        };
        match outcome {
            Enqueued::Queued(depth) => self.metrics.settle_depth(depth),
            Enqueued::Dropped => self.metrics.settle_dropped(1),
        }
    }
}

/// Background calls in flight from this root context.
enum Background {
    Settle(Vec<Queued>),
    Reset,
}

pub struct Root {
    runtime: Option<Rc<Runtime>>,
    inflight: HashMap<u32, Background>,
}

impl Root {
    pub fn new(_context_id: u32) -> Root {
        Root {
            runtime: None,
            inflight: HashMap::new(),
        }
    }

    fn configure(&mut self) -> Result<Rc<Runtime>, String> {
        let bytes = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX)
            .ok()
            .flatten()
            .unwrap_or_default();
        let config = Config::parse(&bytes).map_err(|e| e.to_string())?;
        read_token(&config)?;
        let keys = ankusa_core::verify::Keys::resolve(&config, |name| std::env::var(name).ok())?;
        let metrics = Metrics::define();
        let buckets = NodeBuckets::new(&HOST, BUCKET_PREFIX, BUCKET_SLOTS);
        ensure_keys(
            &HOST,
            buckets
                .keys()
                .chain(edge_keys::FIXED.iter().map(|k| k.to_string())),
        );
        let queue_id = hostcalls::register_shared_queue(edge_keys::SETTLE_QUEUE).ok();
        let runtime = Runtime {
            config,
            node: std::cell::OnceCell::new(),
            metrics,
            queue_id,
            keys,
        };
        let changed = reload::note_limit_changes(&HOST, &runtime.config);
        if !changed.is_empty() {
            log::info!("ankusa: limits changed for {changed:?}; their buckets were reset");
        }
        Ok(Rc::new(runtime))
    }

    fn drain(&mut self, rt: &Runtime) {
        let fleet = &rt.config.fleet;
        let Some(queue_id) = rt.queue_id else { return };
        // One batch in flight per worker: a slow store makes batches bigger, not more.
        if self
            .inflight
            .values()
            .any(|b| matches!(b, Background::Settle(_)))
        {
            return;
        }
        // An idle node costs one read per tick, not a lease write.
        if read_u64(&HOST, edge_keys::DEPTH_KEY).0 == 0 {
            return;
        }
        let now = now_us();
        if rt.breaker().state(now) == BreakerState::Open {
            return; // held, within the same bound, until the store is back
        }
        if !take_lease(&HOST, now / 1_000, fleet.settle_interval_ms) {
            return;
        }
        let (batch, garbage) = settle::dequeue_batch(&HOST, queue_id, fleet.settle_batch_max);
        rt.metrics.settle_dropped(garbage);
        if batch.is_empty() {
            return;
        }
        rt.metrics
            .settle_depth(read_u64(&HOST, edge_keys::DEPTH_KEY).0);
        let body = request_body(&batch);
        match self.call(rt, "/v1/settle", &body) {
            Ok(token) => {
                self.inflight.insert(token, Background::Settle(batch));
            }
            Err(()) => settled(rt, batch, false),
        }
    }

    fn send_resets(&mut self, rt: &Runtime) {
        let (bytes, version) = HOST.get(RESETS_KEY);
        if bytes.is_empty() || !HOST.compare_and_set(RESETS_KEY, &[], version) {
            return;
        }
        let tenants: Vec<String> = serde_json::from_slice(&bytes).unwrap_or_default();
        for tenant in tenants {
            let body = serde_json::to_vec(&ResetRequest { tenant }).unwrap_or_default();
            if let Ok(token) = self.call(rt, "/v1/reset", &body) {
                rt.metrics.reset_sent();
                self.inflight.insert(token, Background::Reset);
            }
        }
    }

    fn call(&self, rt: &Runtime, path: &str, body: &[u8]) -> Result<u32, ()> {
        call_store(&rt.config.fleet, path, body, BACKGROUND_TIMEOUT_MS).map_err(|_| ())
    }
}

/// POSTs `body` to the store's `path` through the fleet cluster, with
/// `timeout_ms` as both Envoy's timeout and the budget the store is told.
pub fn call_store(
    fleet: &FleetConfig,
    path: &str,
    body: &[u8],
    timeout_ms: u64,
) -> Result<u32, Status> {
    let budget = timeout_ms.to_string();
    AUTHORIZATION.with(|authorization| {
        let authorization = authorization.borrow();
        let mut headers = vec![
            (":method", "POST"),
            (":path", path),
            (":authority", fleet.authority.as_str()),
            ("content-type", "application/json"),
            (wire::BUDGET_HEADER, budget.as_str()),
        ];
        if let Some(value) = authorization.as_deref() {
            headers.push(("authorization", value));
        }
        hostcalls::dispatch_http_call(
            &fleet.cluster,
            headers,
            Some(body),
            vec![],
            Duration::from_millis(timeout_ms),
        )
    })
}

/// A batch's fate: counted, and on failure queued again or dropped.
fn settled(rt: &Runtime, batch: Vec<Queued>, ok: bool) {
    rt.metrics.settle_batch(ok);
    if ok {
        return;
    }
    let (again, dropped) = after_failure(batch, rt.config.fleet.settle_retries);
    rt.metrics.settle_dropped(dropped);
    for item in again {
        rt.settle(item);
    }
}

/// Envoy's node id (`--service-node`) as a wire name: characters outside
/// `[A-Za-z0-9_.-]` become `-`, at most 64 bytes, "edge" if there is none.
fn envoy_node_id() -> String {
    let id = hostcalls::get_property(vec!["node", "id"])
        .ok()
        .flatten()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default();
    wire_name(&id)
}

pub fn wire_name(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(wire::MAX_NAME_LEN)
        .collect();
    if clean.is_empty() {
        "edge".to_string()
    } else {
        clean
    }
}

impl Context for Root {
    fn on_http_call_response(
        &mut self,
        token: u32,
        _headers: usize,
        _body: usize,
        _trailers: usize,
    ) {
        let Some(background) = self.inflight.remove(&token) else {
            return;
        };
        let Some(rt) = self.runtime.clone() else {
            return;
        };
        let status = crate::headers::value(MapType::HttpCallResponseHeaders, ":status");
        let ok = status.as_deref().is_some_and(|s| s.starts_with('2'));
        match background {
            Background::Settle(batch) => settled(&rt, batch, ok),
            Background::Reset => {
                if !ok {
                    log::info!("ankusa: store reset answered {status:?}; its buckets converge on their own");
                }
            }
        }
    }
}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        match self.configure() {
            Ok(runtime) => {
                // The lease paces batches to settle_interval_ms node-wide; the
                // tick itself stays short so store resets leave promptly too.
                let tick = runtime
                    .config
                    .fleet
                    .settle_interval_ms
                    .clamp(1, MAX_TICK_MS);
                let _ = hostcalls::set_tick_period(Duration::from_millis(tick));
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
        if !rt.config.uses_store() {
            return;
        }
        self.send_resets(&rt);
        self.drain(&rt);
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Hook::new(self.runtime.clone().map(ProxyHost))))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envoy_node_ids_become_wire_names() {
        assert_eq!(wire_name("edge-1"), "edge-1");
        assert_eq!(wire_name("pod/edge 1"), "pod-edge-1");
        assert_eq!(wire_name(""), "edge");
        assert_eq!(wire_name(&"x".repeat(80)).len(), 64);
    }
}
