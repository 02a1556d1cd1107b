//! Sending a pipeline to one node in one round trip, counted and timed:
//! settles on the client that may resend them, hits on the one that never does.

use super::{Backend, Conn, Node};
use redis::aio::ConnectionLike;
use redis::cluster_routing::SingleNodeRoutingInfo;
use redis::{Pipeline, Value};
use std::time::Instant;

impl Backend {
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
