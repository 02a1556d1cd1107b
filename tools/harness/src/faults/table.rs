//! A row's figures, kept as one JSON file per fault, and the tables of
//! `RELIABILITY.md` rendered from them.

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

/// The row whose store is slow but answers within the budget.
const SLOW_BELOW: &str = "store-slow-below-timeout";

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
    /// `p99_edge_during_ms` with the time each request's Envoy worker waited
    /// for a CPU taken out (see `faults::stalls`): what the budget check holds.
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
    /// The most `breaker_closed_after_heal_ms` may be, for a fault whose heal
    /// is whole at once: the breaker's open time plus a probe (see
    /// [`resume_bound_ms`]).
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
    /// The fewest live edges an edge had heard, as it changed over the row.
    #[serde(default)]
    pub live_edges: Transitions,
}

/// How far over its quota the metered tenant may go in a row: 10 % and two
/// hooks (a window's edges are the run's clock, not the store's).
pub fn metered_limit(quota: u64) -> u64 {
    quota + quota / 10 + 2
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
    /// Writes the row as `DIR/NAME.json` when `ANKUSA_RELIABILITY_DIR` is set.
    pub fn save_if_asked(&self) {
        let Ok(dir) = std::env::var("ANKUSA_RELIABILITY_DIR") else {
            return;
        };
        let _ = std::fs::create_dir_all(&dir);
        let file = Path::new(&dir).join(format!("{}.json", self.fault));
        let text = serde_json::to_string_pretty(self).unwrap_or_default();
        if let Err(e) = std::fs::write(&file, text) {
            eprintln!("cannot write {}: {e}", file.display());
        }
    }

    /// A failure message naming the row, or `None` when it holds the promise:
    /// nothing acknowledged is lost and every event got acknowledged.
    pub fn broken_promise(&self) -> Option<String> {
        if self.lost > 0 {
            return Some(format!(
                "{}: {} acknowledged hooks lost (e.g. {:?})",
                self.fault, self.lost, self.lost_keys
            ));
        }
        if self.acknowledged_events < self.events {
            return Some(format!(
                "{}: only {} of {} events acknowledged before the deadline",
                self.fault, self.acknowledged_events, self.events
            ));
        }
        if self.store_proxy_refused > 0 {
            return Some(format!(
                "{}: the fault proxy in front of the store closed {} connections at its bound: \
                 the row measured the proxy, not the fault",
                self.fault, self.store_proxy_refused
            ));
        }
        if self.metered_quota > 0 && self.metered_admitted > metered_limit(self.metered_quota) {
            return Some(format!(
                "{}: the fleet admitted {} hooks of the metered tenant during the fault, over its \
                 fleet quota for the window, {} (allowed {})",
                self.fault,
                self.metered_admitted,
                self.metered_quota,
                metered_limit(self.metered_quota)
            ));
        }
        let budget = self.timeout_ms + BUDGET_MARGIN_MS;
        if self.p99_edge_during_running_ms > budget as f64 {
            return Some(format!(
                "{}: p99 time at the edge during the fault was {} ms ({} ms less the time the \
                 Envoy worker waited for a CPU), over fleet.timeout_ms {} plus {BUDGET_MARGIN_MS} ms",
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
        if self.fault.starts_with(SLOW_BELOW) && self.fallbacks * 10 > self.deliveries {
            return Some(format!(
                "{}: {} of {} hooks fell back on a store slower than usual but within fleet.timeout_ms \
                 (at most 1 in 10 may)",
                self.fault, self.fallbacks, self.deliveries
            ));
        }
        if let Some(bound) = self.resume_bound_ms {
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

    fn resume_cell(&self) -> String {
        if self.fallbacks == 0 {
            return "never stopped".into();
        }
        let bound = self
            .resume_bound_ms
            .map_or(String::new(), |b| format!(" ≤ {b}"));
        let mut cell = format!(
            "{}; breaker closed at {}{bound}",
            self.resume_after_heal_ms, self.breaker_closed_after_heal_ms
        );
        if self.fallbacks_after_close > 0 {
            cell.push_str(&format!(
                "; {} single calls failed after",
                self.fallbacks_after_close
            ));
        }
        if self.store_errors_after_heal > 0 {
            cell.push_str(&format!(
                "; the store failed {} hits itself after the heal",
                self.store_errors_after_heal
            ));
        }
        cell
    }

    fn markdown(&self) -> String {
        let answers: Vec<String> = self
            .answers
            .iter()
            .map(|(code, n)| format!("{code}×{n}"))
            .collect();
        let counts = format!(
            "{} / {}",
            self.intake_duplicates_caught, self.stored_duplicates
        );
        let duplicates = match &self.duplicates_reason {
            Some(why) => format!("{counts} ({why})"),
            None => counts,
        };
        let fault = if self.notes.is_empty() {
            self.fault.clone()
        } else {
            format!("{} ({})", self.fault, self.notes.join("; "))
        };
        let metered = if self.metered_quota == 0 {
            "-".to_string()
        } else {
            format!(
                "{} / {} (live edges {})",
                self.metered_admitted,
                self.metered_quota,
                self.live_edges.render()
            )
        };
        let running = format!(
            "{} (worker waited {} ms)",
            self.p99_edge_during_running_ms, self.stalled_during_ms
        );
        format!(
            "| {} | {:.1}–{:.1} | {}/{} | {} | **{}** | {} | {} | {} / {} ({:+}) | {} | {} | {} | {} | {} | {} | {} | {} |",
            fault,
            self.fault_s[0],
            self.fault_s[1],
            self.acknowledged_events,
            self.events,
            self.deliveries,
            self.lost,
            duplicates,
            answers.join(" "),
            self.p99_edge_before_ms,
            self.p99_edge_during_ms,
            self.added_edge_p99_ms,
            running,
            self.p99_during_ms,
            self.timeout_ms,
            self.breaker.render(),
            self.degraded.render(),
            self.fallbacks,
            self.resume_cell(),
            metered,
        )
    }
}

/// The fault table, rows in `order` (names), then any others by name.
pub fn fault_table(rows: &[Row], order: &[&str]) -> String {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| {
        (
            order
                .iter()
                .position(|n| *n == r.fault)
                .unwrap_or(usize::MAX),
            r.fault.clone(),
        )
    });
    let mut out = String::from(
        "| fault | fault window (s) | events acked | deliveries | lost | duplicates caught by the intake / stored | answers to the provider | p99 ms at the edge before / during (added) | p99 ms at the edge during, less the worker's wait for a CPU | p99 ms end to end during | fleet.timeout_ms | breaker | degraded | fall-backs | after the heal (ms): last fall-back; breaker closed for good | admitted during the fault / the fleet quota for that window |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in sorted {
        out.push_str(&row.markdown());
        out.push('\n');
    }
    out
}

/// The fault table of `rows`, keeping the lines of `old` (a table this module
/// rendered) for faults `rows` doesn't have, so a partial run updates only
/// its own rows. Lines in `order` (fault names), then any others by name.
pub fn merge_table(old: &str, rows: &[Row], order: &[&str]) -> String {
    let fresh = fault_table(rows, order);
    let mut lines: Vec<(String, String)> = Vec::new();
    let name_of = |line: &str| -> Option<String> {
        let cell = line.strip_prefix("| ")?.split(" |").next()?;
        let name = cell.split(" (").next()?.trim();
        (!name.is_empty() && name != "fault" && !name.starts_with("---")).then(|| name.to_string())
    };
    for line in fresh.lines().chain(old.lines()) {
        if let Some(name) = name_of(line) {
            if !lines.iter().any(|(n, _)| *n == name) {
                lines.push((name, line.to_string()));
            }
        }
    }
    lines.sort_by_key(|(name, _)| {
        (
            order.iter().position(|n| n == name).unwrap_or(usize::MAX),
            name.clone(),
        )
    });
    let mut out: String = fresh.lines().take(2).map(|l| format!("{l}\n")).collect();
    for (_, line) in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The text between `<!-- NAME:begin -->` and `<!-- NAME:end -->`, if any.
pub fn section<'a>(doc: &'a str, name: &str) -> Option<&'a str> {
    let (begin, end) = (
        format!("<!-- {name}:begin -->"),
        format!("<!-- {name}:end -->"),
    );
    let b = doc.find(&begin)? + begin.len();
    let e = doc.find(&end)?;
    doc.get(b..e)
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

/// `doc` with the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->` replaced.
pub fn replace_section(doc: &str, name: &str, body: &str) -> Result<String, String> {
    let (begin, end) = (
        format!("<!-- {name}:begin -->"),
        format!("<!-- {name}:end -->"),
    );
    let (Some(b), Some(e)) = (doc.find(&begin), doc.find(&end)) else {
        return Err(format!("RELIABILITY.md has no {begin} … {end} section"));
    };
    if e < b {
        return Err(format!("{end} comes before {begin}"));
    }
    Ok(format!("{}{begin}\n{body}{}", &doc[..b], &doc[e..]))
}

#[cfg(test)]
mod tests;
