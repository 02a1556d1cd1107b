//! The connection to Redis: one server through a `ConnectionManager`, or a
//! Cluster through `cluster_async`. Neither is needed to start: a background
//! task connects, probes, and keeps `redis_up` current, so an outage is a
//! quick 503 and never a stuck or dead service.

use crate::config::RedisTarget;
use crate::errors::StoreError;
use crate::metrics::Metrics;
use crate::scripts::Scripts;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{get_slot, SingleNodeRoutingInfo};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// A connection handle; cheap to clone, every clone shares the sockets.
#[derive(Clone)]
pub enum Conn {
    Single(Box<ConnectionManager>),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// A Cluster master and the slots it serves (from `CLUSTER SLOTS`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SlotOwner {
    pub start: u16,
    pub end: u16,
    pub host: String,
    pub port: u16,
}

/// Where a pipeline goes: the single Redis, or one Cluster master.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Node {
    Single,
    Master {
        host: String,
        port: u16,
    },
    /// The slot map doesn't know this slot yet; route by the slot itself.
    Slot(u16),
}

pub struct Backend {
    target: RedisTarget,
    conn: RwLock<Option<Conn>>,
    /// For a Cluster, a second client that never sends a command again by
    /// itself (on a redirect, a dropped connection, a TRYAGAIN): hits go on
    /// it, as a hit is not idempotent and a resent pipeline would run again
    /// every hit in it that had already run. On one Redis, the same connection.
    once: RwLock<Option<Conn>>,
    slots: RwLock<Vec<SlotOwner>>,
    up: AtomicBool,
    pub metrics: Arc<Metrics>,
    pub scripts: Scripts,
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
    pub fn new(target: RedisTarget, metrics: Arc<Metrics>) -> Arc<Backend> {
        Arc::new(Backend {
            target,
            conn: RwLock::new(None),
            once: RwLock::new(None),
            slots: RwLock::new(Vec::new()),
            up: AtomicBool::new(false),
            metrics,
            scripts: Scripts::new(),
        })
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.target, RedisTarget::Cluster(_))
    }

    /// The live connection, or `redis_unavailable` at once when there is none yet.
    pub fn conn(&self) -> Result<Conn, StoreError> {
        live(&self.conn)
    }

    /// The connection for hits (see [`Backend`]'s `once`), or
    /// `redis_unavailable` at once when there is none yet.
    pub fn conn_once(&self) -> Result<Conn, StoreError> {
        live(&self.once)
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    fn set_up(&self, up: bool) {
        if self.up.swap(up, Ordering::Relaxed) != up {
            if up {
                log::info!("Redis answers");
            } else {
                log::warn!("Redis does not answer");
            }
        }
        self.metrics.redis_up.set(i64::from(up));
    }

    /// The connection, and the one hits go on (see [`Backend`]'s `once`).
    async fn connect(&self) -> RedisResult<(Conn, Conn)> {
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
                let conn = Conn::Single(Box::new(manager));
                Ok((conn.clone(), conn))
            }
            RedisTarget::Cluster(nodes) => {
                let client = |retries: u32| {
                    redis::cluster::ClusterClientBuilder::new(nodes.clone())
                        .connection_timeout(PROBE_TIMEOUT)
                        .retries(retries)
                        .min_retry_wait(10)
                        .max_retry_wait(200)
                        .build()
                };
                let conn = Conn::Cluster(client(2)?.get_async_connection().await?);
                let once = Conn::Cluster(client(0)?.get_async_connection().await?);
                Ok((conn, once))
            }
        }
    }

    /// PING on the live connection within `limit`.
    pub async fn ping(&self, limit: Duration) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        match tokio::time::timeout(limit, redis::cmd("PING").query_async::<String>(&mut conn)).await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(StoreError::from_redis(&e)),
            Err(_) => Err(StoreError::Timeout {
                budget_ms: limit.as_millis() as u64,
            }),
        }
    }

    /// Connects, probes and (for a Cluster) re-reads the slot map, forever.
    pub fn spawn_monitor(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let mut carried = false;
            loop {
                let up = this.probe().await;
                if up && !carried {
                    match crate::override_log::carry_over(&this).await {
                        Ok(n) => {
                            carried = true;
                            if n > 0 {
                                log::info!("{n} overrides carried over into the change log");
                            }
                        }
                        Err(e) => log::warn!("carrying overrides into the change log: {e}"),
                    }
                }
                let pause = if up { 500 } else { 200 };
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
        })
    }

    async fn probe(&self) -> bool {
        let has_conn = self.conn().is_ok();
        if !has_conn {
            match tokio::time::timeout(PROBE_TIMEOUT, self.connect()).await {
                Ok(Ok((conn, once))) => {
                    *self.once.write().unwrap_or_else(|p| p.into_inner()) = Some(once);
                    *self.conn.write().unwrap_or_else(|p| p.into_inner()) = Some(conn);
                }
                Ok(Err(e)) => {
                    log::debug!("connecting to Redis: {e}");
                    self.set_up(false);
                    return false;
                }
                Err(_) => {
                    self.set_up(false);
                    return false;
                }
            }
        }
        let was_up = self.is_up();
        let up = self.ping(PROBE_TIMEOUT).await.is_ok();
        if up
            && self.is_cluster()
            && (!was_up
                || self
                    .slots
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_empty())
        {
            self.refresh_slots().await;
        }
        self.set_up(up);
        up
    }

    /// Re-reads which master serves which slots, to send one pipeline per master.
    pub async fn refresh_slots(&self) {
        let Ok(mut conn) = self.conn() else { return };
        let reply = tokio::time::timeout(
            PROBE_TIMEOUT,
            redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async::<Value>(&mut conn),
        )
        .await;
        match reply {
            Ok(Ok(value)) => {
                let owners = parse_cluster_slots(&value);
                if !owners.is_empty() {
                    *self.slots.write().unwrap_or_else(|p| p.into_inner()) = owners;
                }
            }
            Ok(Err(e)) => log::warn!("CLUSTER SLOTS: {e}"),
            Err(_) => log::warn!("CLUSTER SLOTS did not answer in {PROBE_TIMEOUT:?}"),
        }
    }

    /// The node that owns `key`.
    pub fn node_of(&self, key: &str) -> Node {
        if !self.is_cluster() {
            return Node::Single;
        }
        let slot = get_slot(key.as_bytes());
        let owners = self.slots.read().unwrap_or_else(|p| p.into_inner());
        owners
            .iter()
            .find(|o| o.start <= slot && slot <= o.end)
            .map_or(Node::Slot(slot), |o| Node::Master {
                host: o.host.clone(),
                port: o.port,
            })
    }

    /// Sends `pipe` (settle operations: idempotent, so a Cluster client may
    /// resend it after a redirect) to `node` in one round trip, counted and timed.
    pub async fn send_pipeline(
        &self,
        node: &Node,
        pipe: &Pipeline,
        count: usize,
    ) -> Result<Vec<Value>, redis::RedisError> {
        let conn = self
            .conn()
            .map_err(|e| redis::RedisError::from(std::io::Error::other(e.to_string())))?;
        self.send_on(conn, node, pipe, count).await
    }

    async fn send_on(
        &self,
        mut conn: Conn,
        node: &Node,
        pipe: &Pipeline,
        count: usize,
    ) -> Result<Vec<Value>, redis::RedisError> {
        let started = Instant::now();
        self.metrics.pipeline_round_trips.inc();
        let result = match (&mut conn, node) {
            (Conn::Cluster(c), Node::Master { host, port }) => {
                let route = SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                };
                c.route_pipeline(pipe, 0, count, route).await
            }
            (Conn::Cluster(c), Node::Slot(slot)) => {
                let route = redis::cluster_routing::Route::new(
                    *slot,
                    redis::cluster_routing::SlotAddr::Master,
                );
                c.route_pipeline(pipe, 0, count, SingleNodeRoutingInfo::SpecificNode(route))
                    .await
            }
            (conn, _) => pipe.query_async::<Vec<Value>>(conn).await,
        };
        self.metrics
            .redis_seconds
            .observe(started.elapsed().as_secs_f64());
        result
    }
}

impl Backend {
    /// Sends `pipe` (hits among them) to `node` in one round trip, never
    /// twice, and returns every command's own reply, a command's error among
    /// them as a `Value::ServerError` (on one Redis; a Cluster node's error
    /// fails the whole pipeline, which is then answered as failed: the hits
    /// that ran were charged once).
    pub async fn send_pipeline_values(
        &self,
        node: &Node,
        pipe: &Pipeline,
        count: usize,
    ) -> Result<Vec<Value>, redis::RedisError> {
        let mut conn = self
            .conn_once()
            .map_err(|e| redis::RedisError::from(std::io::Error::other(e.to_string())))?;
        if !matches!(node, Node::Single) {
            return self.send_on(conn, node, pipe, count).await;
        }
        let started = Instant::now();
        self.metrics.pipeline_round_trips.inc();
        let result = conn.req_packed_commands(pipe, 0, count).await;
        self.metrics
            .redis_seconds
            .observe(started.elapsed().as_secs_f64());
        result
    }
}

/// `CLUSTER SLOTS` → masters and their slot ranges; malformed rows are skipped.
pub fn parse_cluster_slots(value: &Value) -> Vec<SlotOwner> {
    let Value::Array(rows) = value else {
        return Vec::new();
    };
    rows.iter()
        .filter_map(|row| {
            let Value::Array(fields) = row else {
                return None;
            };
            let start = int(fields.first()?)?;
            let end = int(fields.get(1)?)?;
            let Value::Array(master) = fields.get(2)? else {
                return None;
            };
            let host = match master.first()? {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                _ => return None,
            };
            let port = int(master.get(1)?)?;
            Some(SlotOwner {
                start: u16::try_from(start).ok()?,
                end: u16::try_from(end).ok()?,
                host,
                port: u16::try_from(port).ok()?,
            })
        })
        .collect()
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_slots_reply_lists_each_master_and_its_range() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("127.0.0.1", 7000),
                node("127.0.0.1", 7003),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                node("127.0.0.1", 7001),
            ]),
            Value::Array(vec![Value::Int(1)]),
        ]);
        assert_eq!(
            parse_cluster_slots(&reply),
            vec![
                SlotOwner {
                    start: 0,
                    end: 5460,
                    host: "127.0.0.1".into(),
                    port: 7000
                },
                SlotOwner {
                    start: 5461,
                    end: 16383,
                    host: "127.0.0.1".into(),
                    port: 7001
                },
            ]
        );
    }
}
