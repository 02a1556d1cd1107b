//! Sending settle operations to one node in one round trip, counted and
//! timed, on the client that may resend them (hits go through `once`).

use super::{Backend, Conn, Node};
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
        let mut conn = self
            .conn()
            .map_err(|e| redis::RedisError::from(std::io::Error::other(e.to_string())))?;
        let started = Instant::now();
        self.metrics.pipeline_round_trips.inc();
        let result = match (&mut conn, node) {
            (Conn::Cluster(c), Node::Master(addr)) => {
                let route = SingleNodeRoutingInfo::ByAddress {
                    host: addr.host.clone(),
                    port: addr.port,
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
