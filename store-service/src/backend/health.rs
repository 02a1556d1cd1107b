//! Keeping `redis_up` current: connect, probe and (for a Cluster) re-read the
//! slot map in the background, forever.

use super::{Backend, PROBE_TIMEOUT};
use crate::errors::StoreError;
use std::sync::Arc;
use std::time::Duration;

/// Every how many probes a Cluster's slot map is read again unasked.
const SLOTS_EVERY: u32 = 10;

impl Backend {
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
            let mut beat: u32 = 0;
            loop {
                let up = this.probe().await;
                if up && !carried {
                    match crate::override_log::carry_over(&this).await {
                        Ok(n) => {
                            carried = true;
                            if n > 0 {
                                tracing::info!("{n} overrides carried over into the change log");
                            }
                        }
                        Err(e) => tracing::warn!("carrying overrides into the change log: {e}"),
                    }
                }
                let pause = if up { 500 } else { 200 };
                // A redirect or a master gone wakes the loop early; the map
                // is read again then, and every few seconds anyway.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(pause)) => {}
                    _ = this.stale.notified() => {
                        this.refresh_slots().await;
                        continue;
                    }
                }
                beat += 1;
                if beat.is_multiple_of(SLOTS_EVERY) {
                    this.refresh_slots().await;
                }
            }
        })
    }

    async fn probe(&self) -> bool {
        let has_conn = self.conn().is_ok();
        if !has_conn {
            match tokio::time::timeout(PROBE_TIMEOUT, self.connect()).await {
                Ok(Ok(conn)) => {
                    *self.conn.write().unwrap_or_else(|p| p.into_inner()) = Some(conn);
                }
                Ok(Err(e)) => {
                    tracing::debug!("connecting to Redis: {e}");
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
}
