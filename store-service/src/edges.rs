//! The edges the store heard from lately, counted for every replica alike.
//!
//! Every hit names its edge (`node`). The store keeps the names it heard in
//! memory (no Redis work on the hot path) and, about once a second, a
//! background task hands them to one script (`edges.lua`) that adds them to a
//! sorted set scored by Redis's clock, drops the names older than the TTL, and
//! returns the count. Every answer carries the last count (`edges`), so an
//! edge always knows by how many live edges to divide a fleet quota when it
//! has to answer alone (see `ankusa_core::limit::share`). Store replicas share the
//! set, so they agree; the key has its own hash tag, so it works on Redis
//! Cluster.

use crate::backend::Backend;
use crate::errors::StoreError;
use redis::Script;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `ankusa:{edges}:live`: sorted set of edge names, scored by when each was
/// last heard (unix ms on Redis's clock).
pub const KEY: &str = "ankusa:{edges}:live";

/// Most distinct names kept between two refreshes; further names wait for
/// the next one (edges are authenticated callers, so this is never reached
/// by a real fleet; it bounds memory whatever arrives).
pub const MAX_HEARD: usize = 10_000;

const SCRIPT: &str = include_str!("scripts/edges.lua");

pub struct LiveEdges {
    heard: Mutex<HashSet<String>>,
    /// The last count the script returned (0: none yet).
    count: AtomicU64,
    ttl: Duration,
    script: Script,
}

impl LiveEdges {
    pub fn new(ttl: Duration) -> LiveEdges {
        LiveEdges {
            heard: Mutex::new(HashSet::new()),
            count: AtomicU64::new(0),
            ttl,
            script: Script::new(SCRIPT),
        }
    }

    /// A hit from `node`: counted at the next refresh.
    pub fn note(&self, node: &str) {
        let mut heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
        if heard.len() < MAX_HEARD && !heard.contains(node) {
            heard.insert(node.to_string());
        }
    }

    /// What answers carry: the last count, None before the first.
    pub fn count(&self) -> Option<u64> {
        Some(self.count.load(Ordering::Relaxed)).filter(|n| *n > 0)
    }

    /// Sends the names heard since the last refresh and reads the count. On
    /// a failure the names are kept for the next try.
    pub async fn refresh(&self, backend: &Backend) -> Result<u64, StoreError> {
        let names: Vec<String> = {
            let mut heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
            heard.drain().collect()
        };
        let ran = async {
            let mut conn = backend.conn()?;
            let mut call = self.script.key(KEY);
            call.arg(
                u64::try_from(self.ttl.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
            );
            for name in &names {
                call.arg(name);
            }
            call.invoke_async::<u64>(&mut conn)
                .await
                .map_err(|e| StoreError::from_redis(&e))
        }
        .await;
        match ran {
            Ok(count) => {
                self.count.store(count, Ordering::Relaxed);
                let shown = i64::try_from(count).unwrap_or(i64::MAX);
                backend.metrics.live_edges.set(shown);
                Ok(count)
            }
            Err(e) => {
                for name in names {
                    self.note(&name);
                }
                Err(e)
            }
        }
    }

    /// Refreshes every `every` until the task is aborted.
    pub fn spawn(
        self: &Arc<Self>,
        backend: Arc<Backend>,
        every: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let edges = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = edges.refresh(&backend).await {
                    tracing::debug!("live edges: {e}");
                }
            }
        })
    }
}
