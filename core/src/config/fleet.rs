//! The `fleet` section: how the filter talks to the store, and when its
//! breaker opens.

use super::connection::StoreConnection;
use super::validate::{at_least, between, bound};
use super::ConfigError;
use crate::limit::limits::{self, MAX_SETTLE_OPS};

/// How the filter talks to the store; used only when a scope is `fleet`.
#[derive(Clone, PartialEq, Debug)]
pub struct FleetConfig {
    /// Envoy cluster of the store service.
    pub cluster: String,
    /// `:authority` of store calls.
    pub authority: String,
    /// Hard budget of one store call (ms), 1..=10 000.
    pub timeout_ms: u64,
    /// How long a claim may stay pending before it expires on its own (ms).
    pub pending_ttl_ms: u64,
    pub breaker: BreakerPolicy,
    /// How often queued settle operations are drained (ms).
    pub settle_interval_ms: u64,
    /// Queued settle operations per node; one more is dropped and counted.
    pub settle_queue_max: usize,
    /// Operations per settle call, at most [`MAX_SETTLE_OPS`].
    pub settle_batch_max: usize,
    /// Further attempts of a failed settle batch before it is dropped.
    pub settle_retries: u32,
    /// The configuration has a `fleet` section: this edge has a store, so it
    /// polls the fleet override list even when every scope is `node`.
    pub declared: bool,
    /// Edges assumed live until the store reports a count (see [`crate::limit::share`]).
    pub nodes: u64,
    /// A pinned share of a fleet quota for node-local answers, in [0.001, 1].
    pub degraded_share: Option<f64>,
    /// How store calls leave: Envoy's callouts, or a connection the shell
    /// owns (`fleet.connection`, `fleet.store`).
    pub connection: StoreConnection,
}

impl Default for FleetConfig {
    fn default() -> Self {
        FleetConfig {
            cluster: "ankusa_store".to_string(),
            authority: "ankusa-store".to_string(),
            timeout_ms: 25,
            pending_ttl_ms: 30_000,
            breaker: BreakerPolicy::default(),
            settle_interval_ms: 5,
            settle_queue_max: 50_000,
            settle_batch_max: 500,
            settle_retries: 3,
            declared: false,
            nodes: 1,
            degraded_share: None,
            connection: StoreConnection::Callout,
        }
    }
}

/// When the fleet breaker opens and for how long. JSON keys under `fleet`:
/// `breaker_failure_rate`, `breaker_min_calls`, `breaker_window_ms`, `breaker_open_ms`.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct BreakerPolicy {
    /// Failed fraction of the window's calls that opens the breaker, in (0, 1].
    pub failure_rate: f64,
    /// Calls the window must hold before it may open (≥ 1).
    pub min_calls: u32,
    /// Length of the sliding window (ms, ≥ 1).
    pub window_ms: u64,
    /// How long it stays open before one probe (ms, ≥ 1).
    pub open_ms: u64,
}

impl Default for BreakerPolicy {
    fn default() -> Self {
        BreakerPolicy {
            failure_rate: 0.5,
            min_calls: 20,
            window_ms: 10_000,
            open_ms: 5_000,
        }
    }
}

impl BreakerPolicy {
    /// Errors name the JSON key under `fleet`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        // Written as a negated range so NaN is refused too.
        if !(self.failure_rate > 0.0 && self.failure_rate <= 1.0) {
            return Err(ConfigError::new(
                "fleet.breaker_failure_rate",
                format!(
                    "must be greater than 0 and at most 1, got {}",
                    self.failure_rate
                ),
            ));
        }
        at_least("fleet.breaker_min_calls", u64::from(self.min_calls), 1)?;
        bound(
            "fleet.breaker_window_ms",
            limits::BREAKER_MS,
            self.window_ms,
        )?;
        bound("fleet.breaker_open_ms", limits::BREAKER_MS, self.open_ms)
    }
}

impl FleetConfig {
    /// `degraded_share` in parts per million.
    pub fn degraded_share_ppm(&self) -> Option<u64> {
        // Validated to [0.001, 1]: the product is within u64.
        self.degraded_share.map(|s| (s * 1e6).round() as u64)
    }

    /// Every range; whether `cluster` may be empty depends on the scopes
    /// (see [`super::Config::validate`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        bound("fleet.timeout_ms", limits::TIMEOUT_MS, self.timeout_ms)?;
        bound(
            "fleet.pending_ttl_ms",
            limits::PENDING_TTL_MS,
            self.pending_ttl_ms,
        )?;
        self.breaker.validate()?;
        bound(
            "fleet.settle_interval_ms",
            limits::SETTLE_INTERVAL_MS,
            self.settle_interval_ms,
        )?;
        at_least("fleet.settle_queue_max", self.settle_queue_max as u64, 1)?;
        bound("fleet.nodes", limits::EDGES, self.nodes)?;
        if let Some(share) = self.degraded_share.filter(|s| !(0.001..=1.0).contains(s)) {
            let e = format!("must be a number from 0.001 to 1, got {share}");
            return Err(ConfigError::new("fleet.degraded_share", e));
        }
        between(
            "fleet.settle_batch_max",
            self.settle_batch_max as u64,
            1,
            MAX_SETTLE_OPS as u64,
        )
    }
}
