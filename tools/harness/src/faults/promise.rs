//! What a row must hold to pass: nothing acknowledged lost, nothing stored
//! twice, every event acknowledged, the metered tenant within its fleet quota, the time at the
//! edge within the budget, the breaker closed within its bound after a heal.

use super::row::Row;
use super::scenario::Fault;

/// How far over its quota the metered tenant may go in a row: 10 % and two
/// hooks (a window's edges are the run's clock, not the store's), and one
/// burst more where Redis loses the tenant's bucket (`loses_buckets`: a
/// restart empty, a flush, a replica promoted without its master's last
/// writes), as the bucket then starts full again.
pub fn metered_limit(quota: u64, loses_buckets: bool) -> u64 {
    let lost = if loses_buckets {
        super::metered::BURST
    } else {
        0
    };
    quota + quota / 10 + 2 + lost
}

/// What a hook may spend at the edge beyond `fleet.timeout_ms` (Envoy's own
/// work, the filter's, the callout's timer): the "small margin" of the
/// budget promise.
pub const BUDGET_MARGIN_MS: u64 = 50;

/// The longest fleet answers may take to resume after a heal that is whole at
/// once: a probe sent to the broken place just before the heal fails after up
/// to `timeout_ms` and opens the breaker again; the next probe leaves
/// `open_ms` later and takes up to `timeout_ms`; the gauges are read every
/// `sample_ms`.
pub fn resume_bound_ms(open_ms: u64, timeout_ms: u64, sample_ms: u64) -> u64 {
    open_ms + 2 * timeout_ms + sample_ms
}

impl Row {
    /// A failure message naming the row, or `None` when it holds the promise:
    /// nothing acknowledged is lost and every event got acknowledged.
    pub fn broken_promise(&self) -> Option<String> {
        if self.lost > 0 {
            return Some(format!(
                "{}: {} acknowledged hooks lost (e.g. {:?})",
                self.fault, self.lost, self.lost_keys
            ));
        }
        if self.stored_duplicates > 0 {
            return Some(format!(
                "{}: {} events stored twice (the intake caught {} copies)",
                self.fault, self.stored_duplicates, self.intake_duplicates_caught
            ));
        }
        if self.acknowledged_events < self.events {
            return Some(format!(
                "{}: only {} of {} events acknowledged before the deadline",
                self.fault, self.acknowledged_events, self.events
            ));
        }
        if self.fault == Fault::RedisKilledAof.name()
            && self.redis_keys_after_restart.unwrap_or(0) == 0
        {
            return Some(format!(
                "{}: Redis came back with {:?} keys: its append-only file kept no dedupe window",
                self.fault, self.redis_keys_after_restart
            ));
        }
        if self.store_proxy_refused > 0 {
            return Some(format!(
                "{}: the fault proxy in front of the store closed {} connections at its bound: \
                 the row measured the proxy, not the fault",
                self.fault, self.store_proxy_refused
            ));
        }
        let limit = match self.metered_limit {
            0 => metered_limit(self.metered_quota, false),
            limit => limit,
        };
        if self.metered_quota > 0 && self.metered_admitted > limit {
            return Some(format!(
                "{}: the fleet admitted {} hooks of the metered tenant during the fault, over its \
                 fleet quota for the window, {} (allowed {})",
                self.fault, self.metered_admitted, self.metered_quota, limit
            ));
        }
        let budget = self.timeout_ms + BUDGET_MARGIN_MS;
        if self.p99_edge_during_running_ms > budget as f64 {
            return Some(format!(
                "{}: p99 time at the edge during the fault was {} ms ({} ms less the time the \
                 Envoy worker waited for a CPU or was frozen), over fleet.timeout_ms {} plus {BUDGET_MARGIN_MS} ms",
                self.fault,
                self.p99_edge_during_ms,
                self.p99_edge_during_running_ms,
                self.timeout_ms
            ));
        }
        // A store slow but within the budget answers every hook: hooks that
        // can't afford to wait for a worker's call in flight get their own
        // call. A few may still fall back while a worker learns the new
        // latency (the hooks waiting on its first slow call).
        if self.fault.starts_with(Fault::StoreSlowBelow.name())
            && self.fallbacks * 10 > self.deliveries
        {
            return Some(format!(
                "{}: {} of {} hooks fell back on a store slower than usual but within fleet.timeout_ms \
                 (at most 1 in 10 may)",
                self.fault, self.fallbacks, self.deliveries
            ));
        }
        // A slot moving is followed by the store (each hit a node did not
        // run is sent where the Cluster says): at most 1 hook in 100 falls back.
        if self.fault == Fault::ClusterSlotMigration.name()
            && self.fallbacks * 100 > self.deliveries
        {
            return Some(format!(
                "{}: {} of {} hooks fell back while a slot moved (at most 1 in 100 may)",
                self.fault, self.fallbacks, self.deliveries
            ));
        }
        // Once a replica has taken over, the store finds it: fall-backs stop
        // when a master owns every slot again (the promotion, or the heal).
        let once_owned = self
            .fallbacks_once_owned
            .unwrap_or(self.fallbacks_after_heal);
        if self.fault == Fault::ClusterFailover.name() && once_owned * 100 > self.deliveries {
            return Some(format!(
                "{}: {once_owned} of {} hooks fell back after the replica had taken over \
                 (at most 1 in 100 may)",
                self.fault, self.deliveries
            ));
        }
        if let Some(bound) = self.resume_bound_ms {
            if self.breaker.0.last().is_some_and(|b| *b != 0.0) {
                return Some(format!(
                    "{}: a breaker was still open when the traffic ended, past the heal's \
                     bound of {bound} ms",
                    self.fault
                ));
            }
            if self.breaker_closed_after_heal_ms > bound {
                return Some(format!(
                    "{}: the breaker closed {} ms after the heal, over {bound} ms \
                     (fleet.breaker_open_ms {} plus a probe)",
                    self.fault, self.breaker_closed_after_heal_ms, self.breaker_open_ms
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests;
