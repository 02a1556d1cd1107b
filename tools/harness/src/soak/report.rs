//! The soak's run as one JSON file and as the summary printed at its end.

use super::checker::{Evidence, Verdict};
use super::schedule::{self, seconds, Slot, EXCLUDED};
use crate::faults::Fault;
use crate::provider::report::Tally;
use serde::Serialize;
use std::path::Path;
use std::time::Duration;

/// A fault as it was applied: when it was injected and healed, what the
/// injection and the heal did when more than the name says.
#[derive(Clone, Debug, Serialize)]
pub struct Applied {
    pub fault: &'static str,
    #[serde(serialize_with = "seconds")]
    pub from: Duration,
    #[serde(serialize_with = "seconds")]
    pub to: Duration,
    pub notes: Vec<String>,
}

impl Applied {
    pub fn new(slot: &Slot, from: Duration, to: Duration, notes: &mut Vec<String>) -> Applied {
        Applied {
            fault: slot.fault.name(),
            from,
            to,
            notes: std::mem::take(notes),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub seed: u64,
    pub minutes: f64,
    /// The dedupe window of the edges and the intake.
    pub dedupe_ttl_s: f64,
    pub schedule: Vec<Slot>,
    pub applied: Vec<Applied>,
    /// Hooks the edges answered without the store, over the run.
    pub fallbacks: u64,
    pub tally: Tally,
    pub evidence: Evidence,
    pub verdict: Verdict,
}

/// The command that runs the soak of `seed` again.
pub fn replay_command(minutes: f64, seed: u64) -> String {
    format!("MINUTES={minutes} SEED={seed} bash scripts/soak.sh")
}

/// The faults left out, one line each.
pub fn excluded() -> String {
    EXCLUDED
        .iter()
        .map(|(f, why)| format!("  {}: {why}", f.name()))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Report {
    pub fn save(&self, dir: &Path) -> Result<(), String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create --out {}: {e}", dir.display()))?;
        let file = dir.join(format!("soak-{}.json", self.seed));
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| format!("cannot encode the run: {e}"))?;
        std::fs::write(&file, text).map_err(|e| format!("cannot write {}: {e}", file.display()))
    }

    /// The summary: the traffic, the faults applied, every check with its
    /// figure and bound, each process's memory.
    pub fn summary(&self) -> String {
        let t = &self.tally;
        let mut out = vec![
            format!(
                "soak: seed {}, {} min, warm-up {} s, dedupe window {} s; replay: {}",
                self.seed,
                self.minutes,
                self.evidence.warm_up_s,
                self.dedupe_ttl_s,
                replay_command(self.minutes, self.seed)
            ),
            format!(
                "traffic: {} events, {} requests, {} acknowledged, 429 {}, 409 {}, other non-2xx {}, transport errors {}, forged {} ({} refused), fall-backs {}",
                t.events, t.requests, t.acknowledged, t.rate_limited, t.pending, t.other_non_2xx,
                t.transport_errors, t.forged_sent, t.forged_rejected, self.fallbacks
            ),
            format!("faults applied ({}):", self.applied.len()),
        ];
        for a in &self.applied {
            let notes = if a.notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", a.notes.join("; "))
            };
            out.push(format!(
                "  {:>7.1}s – {:>7.1}s  {}{notes}",
                a.from.as_secs_f64(),
                a.to.as_secs_f64(),
                a.fault
            ));
        }
        out.push("checks:".into());
        for c in &self.verdict.checks {
            let mark = if c.passed { "ok  " } else { "FAIL" };
            out.push(format!(
                "  {mark} {}: {} (bound {})",
                c.name, c.figure, c.bound
            ));
        }
        out.push("memory (KiB: after warm-up → end, peak):".into());
        for m in &self.verdict.memory {
            let level = m
                .level
                .map_or("-".to_string(), |(at, kib)| format!("{kib} at {at:.0} s"));
            let end = if m.to_the_end {
                "end"
            } else {
                "ended by a fault"
            };
            out.push(format!(
                "  {} (pid {}): {level} → {} at {:.0} s ({end}), peak {}",
                m.process.role, m.process.pid, m.last.1, m.last.0, m.peak_kib
            ));
        }
        out.join("\n")
    }
}

/// What the start of a run prints: the seed, how to replay it, the schedule.
pub fn opening(minutes: f64, seed: u64, slots: &[Slot]) -> String {
    format!(
        "soak: seed {seed} (replay: {})\nschedule ({} faults, drawn from {} of the {} in the table):\n{}\nleft out:\n{}",
        replay_command(minutes, seed),
        slots.len(),
        schedule::drawn_from().len(),
        Fault::ALL.len(),
        schedule::render(slots),
        excluded()
    )
}
