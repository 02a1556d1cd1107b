//! A world for hook lives in tests: a parsed configuration, the keys its
//! `secret_env` names, and an in-memory node store holding the node's keys.

use super::Env;
use crate::breaker::SeenClosed;
use crate::cas::{ensure_keys, MapStore};
use crate::config::Config;
use crate::edge_keys::{BUCKET_PREFIX, BUCKET_SLOTS, FIXED};
use crate::edges::EdgesSeen;
use crate::node_buckets::NodeBuckets;
use crate::verify::Keys;

pub struct World {
    pub config: Config,
    pub keys: Keys,
    pub store: MapStore,
    pub seen_closed: SeenClosed,
    pub edges: EdgesSeen,
}

impl World {
    /// `config` (JSON) with the VM environment `env` (name, value).
    pub fn new(config: &str, env: &[(&str, &str)]) -> World {
        let config = Config::parse(config.as_bytes()).unwrap();
        let keys = Keys::resolve(&config, |name| {
            env.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
        .unwrap();
        let store = MapStore::new();
        let buckets = NodeBuckets::new(&store, BUCKET_PREFIX, BUCKET_SLOTS);
        ensure_keys(&store, buckets.keys().chain(FIXED.map(String::from)));
        World {
            config,
            keys,
            store,
            seen_closed: SeenClosed::default(),
            edges: EdgesSeen::default(),
        }
    }

    pub fn env(&self) -> Env<'_, MapStore> {
        Env {
            config: &self.config,
            keys: &self.keys,
            node: "edge-1",
            store: &self.store,
            seen_closed: &self.seen_closed,
            edges: &self.edges,
        }
    }
}
