//! What every hook on one worker shares, built once per configuration: the
//! parsed configuration, the signing keys, the worker's view of the fleet
//! breaker and of the live edge count, and the settle operations it holds.
//!
//! The filter's runtime wraps one (beside what only Envoy has: metrics,
//! queues, the token, the node id), and so do the tests: the state machine's
//! and the filter's mock host build exactly what the filter builds.

use crate::config::Config;
use crate::fleet::breaker::{KeptSuccesses, SeenClosed};
use crate::fleet::edges::EdgesSeen;
use crate::hook::machine::Env;
use crate::hook::settle::held::Held;
use crate::node::cas::{ensure_keys, CasStore};
use crate::node::edge_keys::{BUCKET_PREFIX, BUCKET_SLOTS, FIXED};
use crate::node::node_buckets::NodeBuckets;
use crate::verify::Keys;
use crate::wire::version::StoreWire;
use std::cell::Cell;
use std::cell::RefCell;

pub struct Worker {
    pub config: Config,
    /// Signing keys of the sources that verify their deliveries.
    pub keys: Keys,
    /// When this worker last read the fleet breaker closed.
    pub seen_closed: SeenClosed,
    /// The successes of this worker's store calls not yet written to the breaker.
    pub kept_successes: KeptSuccesses,
    /// This worker's copy of the node's live edge count.
    pub edges_seen: EdgesSeen,
    /// The store's wire version as this worker's calls last heard it.
    pub store_wire: Cell<StoreWire>,
    /// Settle operations this worker made, not yet on the node's queue.
    pub held: RefCell<Held>,
}

impl Worker {
    /// Parses the plugin configuration `bytes` (refused with the field
    /// named), resolves the signing secrets it names through `secret` (the
    /// VM environment), and pre-creates every shared-data key in `store`: a
    /// compare-and-swap on a key never written can't be checked.
    pub fn configure<S: CasStore>(
        bytes: &[u8],
        secret: impl Fn(&str) -> Option<String>,
        store: &S,
    ) -> Result<Worker, String> {
        let config = Config::parse(bytes).map_err(|e| e.to_string())?;
        let keys = Keys::resolve(&config, secret)?;
        let buckets = NodeBuckets::new(store, BUCKET_PREFIX, BUCKET_SLOTS);
        ensure_keys(
            store,
            buckets.keys().chain(FIXED.iter().map(|k| k.to_string())),
        );
        Ok(Worker {
            config,
            keys,
            seen_closed: SeenClosed::default(),
            kept_successes: KeptSuccesses::default(),
            edges_seen: EdgesSeen::default(),
            store_wire: Cell::default(),
            held: RefCell::default(),
        })
    }

    /// [`Worker::configure`] with the VM environment given as (name, value)
    /// pairs, as the tests of the hook's machine and of the filter's host
    /// glue give it.
    pub fn configure_with_env<S: CasStore>(
        bytes: &[u8],
        env: &[(&str, &str)],
        store: &S,
    ) -> Result<Worker, String> {
        let secret = |name: &str| {
            env.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        Worker::configure(bytes, secret, store)
    }

    /// What a hook's step reads: this worker, the edge's name in claims
    /// (`node`) and the node's shared data (`store`).
    pub fn env<'a, S: CasStore>(&'a self, node: &'a str, store: &'a S) -> Env<'a, S> {
        Env {
            config: &self.config,
            keys: &self.keys,
            node,
            store,
            seen_closed: &self.seen_closed,
            kept_successes: &self.kept_successes,
            edges: &self.edges_seen,
            store_wire: &self.store_wire,
        }
    }
}
