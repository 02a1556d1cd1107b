//! The connection to Redis: one server through a `ConnectionManager`, or a
//! Cluster through `cluster_async` (and, for hits, a connection of its own
//! to each master: `direct`, `once`). Neither is needed to start: a
//! background task connects, probes, and keeps `redis_up` current, so an
//! outage is a quick 503 and never a stuck or dead service.

use crate::committed::Layout;
use crate::config::RedisTarget;
use crate::errors::StoreError;
use crate::metrics::Metrics;
use crate::scripts::Scripts;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::RedisResult;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

mod conn;
mod direct;
mod health;
mod once;
mod pipeline;
mod scan;
mod slots;

pub use conn::Conn;
pub use direct::Addr;
pub use once::Once;
pub use scan::{Pairs, ScanAt, Step};
pub use slots::{parse_cluster_slots, Node, SlotOwner};

pub struct Backend {
    target: RedisTarget,
    conn: RwLock<Option<Conn>>,
    /// For a Cluster, a connection of its own to each master, which never
    /// sends a command again by itself: hits go on it (see `once`), as a hit
    /// is not idempotent and a resent pipeline would run again every hit in
    /// it that had already run.
    direct: direct::Direct,
    slots: RwLock<Vec<SlotOwner>>,
    /// Woken when the slot map should be read again now.
    stale: tokio::sync::Notify,
    up: AtomicBool,
    pub metrics: Arc<Metrics>,
    pub scripts: Scripts,
    /// Where promotes write committed claims (`--committed-layout`).
    pub layout: Layout,
}

/// The connection in `slot`, or `redis_unavailable` when there is none yet.
fn live(slot: &RwLock<Option<Conn>>) -> Result<Conn, StoreError> {
    let guard = slot.read().unwrap_or_else(|p| p.into_inner());
    guard
        .clone()
        .ok_or_else(|| StoreError::RedisUnavailable("not connected to Redis yet".into()))
}

/// How long one connection attempt or probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_millis(1000);

impl Backend {
    pub fn new(target: RedisTarget, metrics: Arc<Metrics>, layout: Layout) -> Arc<Backend> {
        let seed = match &target {
            RedisTarget::Cluster(seeds) => seeds.first().map(String::as_str),
            RedisTarget::Single(_) => None,
        };
        Arc::new(Backend {
            direct: direct::Direct::new(seed),
            target,
            conn: RwLock::new(None),
            slots: RwLock::new(Vec::new()),
            stale: tokio::sync::Notify::new(),
            up: AtomicBool::new(false),
            metrics,
            scripts: Scripts::new(),
            layout,
        })
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.target, RedisTarget::Cluster(_))
    }

    /// The live connection, or `redis_unavailable` at once when there is none yet.
    pub fn conn(&self) -> Result<Conn, StoreError> {
        live(&self.conn)
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    fn set_up(&self, up: bool) {
        if self.up.swap(up, Ordering::Relaxed) != up {
            if up {
                tracing::info!("Redis answers");
            } else {
                tracing::warn!("Redis does not answer");
            }
        }
        self.metrics.redis_up.set(i64::from(up));
    }

    /// The connection.
    async fn connect(&self) -> RedisResult<Conn> {
        match &self.target {
            RedisTarget::Single(url) => {
                let client = redis::Client::open(url.as_str())?;
                // Few, short retries: while Redis is down a request should fail
                // fast, and the next one triggers the next reconnect.
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(1)
                    .set_factor(50)
                    .set_max_delay(200)
                    .set_connection_timeout(PROBE_TIMEOUT);
                let manager = ConnectionManager::new_with_config(client, config).await?;
                Ok(Conn::Single(Box::new(manager)))
            }
            RedisTarget::Cluster(nodes) => {
                let client = redis::cluster::ClusterClientBuilder::new(nodes.clone())
                    .connection_timeout(PROBE_TIMEOUT)
                    .retries(2)
                    .min_retry_wait(10)
                    .max_retry_wait(200)
                    .build()?;
                Ok(Conn::Cluster(client.get_async_connection().await?))
            }
        }
    }
}
