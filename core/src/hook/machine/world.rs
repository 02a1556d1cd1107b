//! A world for hook lives in tests: the [`Worker`] the filter builds for a
//! configuration (with the keys its `secret_env` names) over an in-memory
//! node store.

use super::Env;
use crate::hook::worker::Worker;
use crate::node::cas::MapStore;

pub struct World {
    pub worker: Worker,
    pub store: MapStore,
}

impl World {
    /// `config` (JSON) with the VM environment `env` (name, value).
    pub fn new(config: &str, env: &[(&str, &str)]) -> World {
        let store = MapStore::new();
        let worker = Worker::configure_with_env(config.as_bytes(), env, &store).unwrap();
        World { worker, store }
    }

    pub fn env(&self) -> Env<'_, MapStore> {
        self.worker.env("edge-1", &self.store)
    }
}
