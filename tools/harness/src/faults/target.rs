//! The fleet a row runs against, whatever it is made of: processes on
//! loopback ([`super::fleet::FaultFleet`]) or the containers of a Compose
//! stack (`crate::compose::Stack`). The drive sends traffic through it and
//! reads its gauges; the figures read its intake, its edges' access logs and
//! the store's own errors; the row keeps what it says of the fault.

use ankusa_testkit::access_log::Held;
use std::time::Duration;

/// The edges' fleet budget, as their plugin configuration sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// `fleet.timeout_ms`: the longest a hook waits for the store.
    pub timeout_ms: u64,
    /// `fleet.breaker_open_ms`: how long an open breaker skips the store.
    pub breaker_open_ms: u64,
}

/// What the fault and the heal did beyond the figures, as the fleet saw it.
#[derive(Clone, Debug, Default)]
pub struct Account {
    /// In words, for the table.
    pub notes: Vec<String>,
    /// Keys a restarted Redis held the moment it answered again.
    pub redis_keys_after_restart: Option<u64>,
    /// How long after a master was killed its replica answered as master.
    pub promoted_after: Option<Duration>,
    /// Connections a fault proxy in front of the store closed unserved.
    pub store_proxy_refused: u64,
    /// Edges the fault froze (`docker pause`): a frozen worker can't run,
    /// so a hook it held meanwhile says nothing of the filter.
    pub frozen: Vec<Frozen>,
}

/// An edge frozen from `from_unix_ms` until `to_unix_ms` (`u64::MAX` while
/// not yet thawed), by the pid its held hooks carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frozen {
    pub pid: u32,
    pub from_unix_ms: u64,
    pub to_unix_ms: u64,
}

impl Frozen {
    /// How long within `[from, to)` (Unix ms) the edge was frozen.
    pub fn overlap_ms(&self, from: u64, to: u64) -> u64 {
        to.min(self.to_unix_ms)
            .saturating_sub(from.max(self.from_unix_ms))
    }
}

/// A row's target: a fleet of edges, a store and an intake that it breaks
/// and heals.
pub trait Target {
    /// The edges' listeners (`http://host:port`), edge 1 first. They stay
    /// the same for the whole row, an edge restarted or replaced included.
    fn edge_urls(&self) -> Vec<String>;
    /// The edges' Prometheus stats (`…/stats/prometheus`), in the same order.
    fn admin_urls(&self) -> Vec<String>;
    /// The intake's base URL (its `/hooks` and `/stats`).
    fn intake_url(&self) -> String;
    /// The edges' Envoy pids as the host sees them, now (an edge restarted
    /// mid-run has a new one).
    fn edge_pids(&self) -> Vec<u32>;
    /// Finds the edges' pids from another thread while the fault is being
    /// injected, for a fleet whose edges change within it (replaced one by
    /// one); `None` when they change only with the fault or the heal.
    fn edge_pid_finder(&self) -> Option<Box<dyn Fn() -> Vec<u32> + Send>> {
        None
    }
    /// Every hook the edges answered so far, a replaced edge's included,
    /// with the pid of the Envoy that answered it.
    fn held(&self) -> Vec<(Held, u32)>;
    /// Hits the store itself failed so far (Redis over the budget or
    /// unreachable), over every replica that answers.
    fn store_hit_errors(&self) -> u64;
    fn budget(&self) -> Budget;
    /// What the fault and the heal did, taken (a second call finds it empty).
    fn account(&mut self) -> Account;
}

/// Hits a store failed itself, read from its `/metrics` text.
pub fn hit_errors(metrics: &str) -> u64 {
    ["timeout", "redis_unavailable"]
        .iter()
        .filter_map(|r| {
            ankusa_testkit::metrics::find_metric(
                metrics,
                &format!("ankusa_store_requests_total{{endpoint=\"hit\",result=\"{r}\"}}"),
            )
        })
        .sum::<f64>() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_errors_add_timeouts_and_redis_outages_only() {
        let text = "ankusa_store_requests_total{endpoint=\"hit\",result=\"ok\"} 90\n\
                    ankusa_store_requests_total{endpoint=\"hit\",result=\"timeout\"} 3\n\
                    ankusa_store_requests_total{endpoint=\"hit\",result=\"redis_unavailable\"} 4\n\
                    ankusa_store_requests_total{endpoint=\"settle\",result=\"timeout\"} 9\n";
        assert_eq!(hit_errors(text), 7);
        assert_eq!(hit_errors(""), 0);
    }
}
