//! A row's figures, kept as one JSON file per fault.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The values a gauge went through during a row, repeats collapsed:
/// `[0, 1, 2, 0]` is closed → open → half-open → closed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Transitions(pub Vec<f64>);

impl Transitions {
    pub fn of(values: impl Iterator<Item = f64>) -> Transitions {
        let mut seen: Vec<f64> = Vec::new();
        for v in values {
            if seen.last() != Some(&v) {
                seen.push(v);
            }
        }
        Transitions(seen)
    }

    /// `0→1→0`, or `0` when it never moved.
    pub fn render(&self) -> String {
        if self.0.is_empty() {
            return "-".into();
        }
        let parts: Vec<String> = self.0.iter().map(|v| format!("{v}")).collect();
        parts.join("→")
    }
}

/// One fault's figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub fault: String,
    /// What the fault and the heal did, when more than the name says.
    #[serde(default)]
    pub notes: Vec<String>,
    pub events: u64,
    /// Deliveries sent (first deliveries and redeliveries).
    pub deliveries: u64,
    /// Events with at least one 2xx.
    pub acknowledged_events: u64,
    /// Acknowledged events the intake doesn't hold. Must be 0.
    pub lost: u64,
    pub lost_keys: Vec<String>,
    /// Hooks of the run the intake holds, copies counted.
    pub stored: u64,
    pub stored_duplicates: u64,
    /// Copies offered to the intake that its own dedupe index caught
    /// (answered as duplicates, not stored again).
    #[serde(default)]
    pub intake_duplicates_caught: u64,
    pub duplicates_reason: Option<String>,
    /// Answers to the provider by status.
    pub answers: BTreeMap<u16, u64>,
    pub transport_errors: u64,
    /// The provider's whole attempts (the intake's time included).
    pub p99_before_ms: f64,
    pub p99_during_ms: f64,
    pub added_p99_ms: f64,
    /// The time the edges held a request, from their access logs: Envoy's
    /// whole time less the intake's part (`x-envoy-upstream-service-time`).
    #[serde(default)]
    pub p99_edge_before_ms: f64,
    #[serde(default)]
    pub p99_edge_during_ms: f64,
    #[serde(default)]
    pub added_edge_p99_ms: f64,
    /// `p99_edge_during_ms` with the time each request's Envoy worker could
    /// not run taken out: its waits for a CPU (see `faults::stalls`) and the
    /// time the fault froze its edge. What the budget check holds.
    #[serde(default)]
    pub p99_edge_during_running_ms: f64,
    /// The most one edge's worker waited for a CPU during the fault (ms).
    #[serde(default)]
    pub stalled_during_ms: u64,
    pub timeout_ms: u64,
    #[serde(default)]
    pub breaker_open_ms: u64,
    /// Highest `ankusa_fleet_breaker_state` over the edges (0 closed, 1 open, 2 half-open).
    pub breaker: Transitions,
    /// Highest `ankusa_fleet_limiter_degraded` over the edges and kinds.
    pub degraded: Transitions,
    /// Hooks the edges answered without the store (`ankusa_fleet_fallback_total`).
    pub fallbacks: u64,
    pub settle_dropped: u64,
    /// From the heal to the last hook answered without the store.
    pub resume_after_heal_ms: u64,
    /// From the heal until every edge's breaker was closed for good (0: it
    /// was by the heal, or never opened).
    #[serde(default)]
    pub breaker_closed_after_heal_ms: u64,
    /// Fall-backs after that: single calls that failed (mostly over the
    /// budget) with the breaker closed.
    #[serde(default)]
    pub fallbacks_after_close: u64,
    /// Fall-backs from the heal to the end of the row.
    #[serde(default)]
    pub fallbacks_after_heal: u64,
    /// When the cluster promoted the killed master's replica (s from the
    /// start of traffic), and the fall-backs from then (or the heal, if
    /// sooner) to the end: a master owned every slot again.
    #[serde(default)]
    pub promoted_s: Option<f64>,
    #[serde(default)]
    pub fallbacks_once_owned: Option<u64>,
    /// The most `breaker_closed_after_heal_ms` may be, for a fault whose heal
    /// is whole at once: the breaker's open time plus a probe (see
    /// [`super::promise::resume_bound_ms`]).
    #[serde(default)]
    pub resume_bound_ms: Option<u64>,
    /// Connections the fault proxy in front of the store closed unserved
    /// because it was at its bound: the row would then measure the proxy.
    #[serde(default)]
    pub store_proxy_refused: u64,
    /// Hits the store itself failed (Redis over the budget or unreachable,
    /// answered 503) from the heal to the end: fall-backs after a heal that
    /// the store, not the breaker, caused.
    #[serde(default)]
    pub store_errors_after_heal: u64,
    /// When the fault was injected and healed (s from the start of traffic).
    pub fault_s: [f64; 2],
    /// Hooks of the metered tenant the edges admitted (started during the
    /// fault), and its fleet quota for that window (burst + rate × window;
    /// see `faults::metered`). 0 / 0: a row from before it was measured.
    #[serde(default)]
    pub metered_admitted: u64,
    #[serde(default)]
    pub metered_quota: u64,
    /// The most of the metered tenant the row may admit during the fault:
    /// its quota with the promise's margin (see
    /// [`super::promise::metered_limit`]). 0: from the quota alone.
    #[serde(default)]
    pub metered_limit: u64,
    /// The fewest live edges an edge had heard, as it changed over the row.
    #[serde(default)]
    pub live_edges: Transitions,
    /// Keys a restarted Redis held the moment it answered again (None: no
    /// Redis was restarted in the row).
    #[serde(default)]
    pub redis_keys_after_restart: Option<u64>,
}

impl Row {
    /// Writes the row as `DIR/NAME.json` when `ANKUSA_RELIABILITY_DIR` is set.
    pub fn save_if_asked(&self) {
        let Ok(dir) = std::env::var("ANKUSA_RELIABILITY_DIR") else {
            return;
        };
        if let Err(e) = self.save(Path::new(&dir)) {
            eprintln!("{e}");
        }
    }

    /// Writes the row as `DIR/NAME.json` (making `DIR`).
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        let _ = std::fs::create_dir_all(dir);
        let file = dir.join(format!("{}.json", self.fault));
        let text = serde_json::to_string_pretty(self).unwrap_or_default();
        std::fs::write(&file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))
    }
}

/// Reads every `*.json` row in `dir`.
pub fn read_rows(dir: &Path) -> Result<Vec<Row>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut rows = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if let Ok(row) = serde_json::from_str::<Row>(&text) {
            rows.push(row);
        }
    }
    Ok(rows)
}
