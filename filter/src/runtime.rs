//! Everything a hook needs, built once per configuration: the parsed config,
//! the signing keys and the store token from the VM environment, the
//! metrics, the node's shared-data keys and settle queue; and the one way to
//! call the store.

use crate::metrics::Metrics;
use crate::settle;
use crate::shared::SharedData;
use ankusa_core::config::{Config, FleetConfig};
use ankusa_core::fleet::edges;
use ankusa_core::fleet::token;
use ankusa_core::hook::hook_id::{IdBits, RANDOM_BYTES};
use ankusa_core::hook::settle::{Enqueued, Queued};
use ankusa_core::hook::worker::Worker;
use ankusa_core::node::edge_keys;
use ankusa_core::node::{node_name, reload};
use ankusa_core::wire;
use proxy_wasm::hostcalls;
use proxy_wasm::types::{BufferType, Status};
use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::time::Duration;

/// The one shared-data map, seen through the core's seam.
pub static SHARED: SharedData = SharedData;

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
    } else if authorization.is_none() && config.polls_overrides() {
        log::error!(
            "ankusa: {} is not set in the VM environment: override list polls carry no token; \
             a store that requires one answers 401 and the configuration's limits apply",
            token::EDGE_TOKEN_ENV
        );
    }
    AUTHORIZATION.with(|a| *a.borrow_mut() = authorization);
    Ok(())
}

/// Everything a hook needs, built once per configuration and shared by the
/// VM's HTTP contexts.
pub struct Runtime {
    /// The configuration, keys and worker state every hook reads.
    pub worker: Worker,
    /// This edge's name in claims: the config's "node", else Envoy's node id,
    /// read on first use (Envoy's canary VM runs `on_configure` before the
    /// node properties are available).
    node: OnceCell<String>,
    pub metrics: Metrics,
    /// The settle queue (None if Envoy refused to register it: settles are then dropped and counted).
    pub queue_id: Option<u32>,
    /// The random bits of this VM's hook ids: one draw from the host's
    /// randomness per configuration, none per hook.
    ids: RefCell<IdBits>,
}

impl Runtime {
    /// Parses the plugin configuration (refused with the field named), reads
    /// the token and signing secrets, defines the metrics, pre-creates every
    /// shared-data key (a compare-and-swap on a key never written can't be
    /// checked), and resets the buckets of tenants a reload changed.
    pub fn configure() -> Result<Rc<Runtime>, String> {
        let bytes = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX)
            .ok()
            .flatten()
            .unwrap_or_default();
        let worker = Worker::configure(&bytes, |name| std::env::var(name).ok(), &SHARED)?;
        if let Some(refused) = worker.config.fleet.connection.refused_without_sockets() {
            return Err(refused.to_string());
        }
        read_token(&worker.config)?;
        let metrics = Metrics::define(crate::metrics::ProxyStats);
        let queue_id = hostcalls::register_shared_queue(edge_keys::SETTLE_QUEUE).ok();
        let runtime = Runtime {
            worker,
            node: OnceCell::new(),
            metrics,
            queue_id,
            ids: RefCell::new(IdBits::new(id_seed())),
        };
        if runtime.config().uses_store() {
            // The share in force before any answer: the count the node last
            // heard (kept across reloads), or the configuration's.
            let live = edges::heard(&SHARED);
            let share_ppm = edges::share_of(&runtime.config().fleet, live).ppm();
            runtime.metrics.edges(live, share_ppm);
        }
        let changed = reload::note_limit_changes(&SHARED, runtime.config());
        if !changed.is_empty() {
            log::info!("ankusa: limits changed for {changed:?}; their buckets were reset");
        }
        Ok(Rc::new(runtime))
    }

    pub fn config(&self) -> &Config {
        &self.worker.config
    }

    pub fn node(&self) -> &str {
        self.node.get_or_init(|| match &self.worker.config.node {
            Some(node) => node.clone(),
            None => envoy_node_id(),
        })
    }

    /// The random bytes of the next hook id.
    pub fn id_bits(&self) -> [u8; RANDOM_BYTES] {
        self.ids.borrow_mut().next_bits()
    }

    /// Keeps a settle operation for this worker's next batched hit call;
    /// a batch's worth goes to the node's queue at once.
    pub fn settle(&self, item: Queued) {
        let full = self.worker.held.borrow_mut().hold(
            item,
            crate::shared::now_us(),
            self.worker.config.fleet.settle_batch_max,
        );
        if full {
            self.spill();
        }
    }

    /// Up to `max` of this worker's settle operations, oldest first, to ride
    /// on a call (a failed call gives them back through `drain::settled`).
    pub fn take_held(&self, max: usize) -> Vec<Queued> {
        self.worker.held.borrow_mut().take(max)
    }

    /// Whether this worker's settle operations go to the node's queue now:
    /// no hit call carried them within the settle interval.
    pub fn spill_due(&self, now_us: u64) -> bool {
        self.worker
            .held
            .borrow()
            .spill_due(now_us, self.worker.config.fleet.settle_interval_ms)
    }

    /// Moves this worker's settle operations to the node's queue, where any
    /// worker's tick drains them.
    pub fn spill(&self) {
        let items = self.worker.held.borrow_mut().take_all();
        for item in items {
            self.enqueue(item);
        }
    }

    /// Queues a settle operation on the node's queue; a full queue drops it
    /// and counts the drop.
    fn enqueue(&self, item: Queued) {
        let outcome = match self.queue_id {
            Some(id) => settle::enqueue(
                &SHARED,
                id,
                self.worker.config.fleet.settle_queue_max,
                &item,
            ),
            None => Enqueued::Dropped,
        };
        match outcome {
            Enqueued::Queued(depth) => self.metrics.settle_depth(depth),
            Enqueued::Dropped => self.metrics.settle_dropped(1),
        }
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
    dispatch(fleet, "POST", path, Some(body), timeout_ms)
}

/// GETs the store's `path` (the override list), as [`call_store`] posts.
pub fn get_store(fleet: &FleetConfig, path: &str, timeout_ms: u64) -> Result<u32, Status> {
    dispatch(fleet, "GET", path, None, timeout_ms)
}

fn dispatch(
    fleet: &FleetConfig,
    method: &str,
    path: &str,
    body: Option<&[u8]>,
    timeout_ms: u64,
) -> Result<u32, Status> {
    let budget = timeout_ms.to_string();
    AUTHORIZATION.with(|authorization| {
        let authorization = authorization.borrow();
        let mut headers = vec![
            (":method", method),
            (":path", path),
            (":authority", fleet.authority.as_str()),
            (wire::BUDGET_HEADER, budget.as_str()),
        ];
        if body.is_some() {
            headers.push(("content-type", "application/json"));
        }
        if let Some(value) = authorization.as_deref() {
            headers.push(("authorization", value));
        }
        hostcalls::dispatch_http_call(
            &fleet.cluster,
            headers,
            body,
            vec![],
            Duration::from_millis(timeout_ms),
        )
    })
}

/// The seed of this VM's hook ids. Should the host's randomness fail, the
/// clock's µs still make one VM's seed differ from another's.
fn id_seed() -> [u8; RANDOM_BYTES] {
    let mut seed = [0u8; RANDOM_BYTES];
    if getrandom::getrandom(&mut seed).is_err() {
        seed[2..].copy_from_slice(&crate::shared::now_us().to_le_bytes());
    }
    seed
}

/// Envoy's node id (`--service-node`) as a wire name.
fn envoy_node_id() -> String {
    // Envoy 1.40 names the local node `xds.node`; older ones `node`.
    let id = [vec!["xds", "node", "id"], vec!["node", "id"]]
        .into_iter()
        .find_map(|path| {
            hostcalls::get_property(path)
                .ok()
                .flatten()
                .and_then(|b| String::from_utf8(b).ok())
                .filter(|id| !id.is_empty())
        })
        .unwrap_or_default();
    node_name::wire_name(&id)
}
