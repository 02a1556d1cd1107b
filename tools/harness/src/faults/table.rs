//! The tables of `RELIABILITY.md`, rendered from the rows, and the
//! sections of the document they go in.

use super::promise::metered_limit;
use super::row::Row;

impl Row {
    fn resume_cell(&self) -> String {
        if self.fallbacks == 0 {
            return "never stopped".into();
        }
        let bound = self
            .resume_bound_ms
            .map_or(String::new(), |b| format!(" ≤ {b}"));
        let closed = if self.breaker.0.last().is_some_and(|b| *b != 0.0) {
            "breaker still open at the end".to_string()
        } else {
            format!(
                "breaker closed at {}{bound}",
                self.breaker_closed_after_heal_ms
            )
        };
        let mut cell = format!("{}; {closed}", self.resume_after_heal_ms);
        if self.fallbacks_after_close > 0 {
            cell.push_str(&format!(
                "; {} single calls failed after",
                self.fallbacks_after_close
            ));
        }
        if let Some(n) = self.fallbacks_once_owned {
            cell.push_str(&format!("; {n} fell back once a master owned every slot"));
        }
        if self.store_errors_after_heal > 0 {
            cell.push_str(&format!(
                "; the store failed {} hits itself after the heal",
                self.store_errors_after_heal
            ));
        }
        cell
    }

    /// The row's line of the fault table.
    pub fn markdown(&self) -> String {
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
        // The bound is shown where the row is allowed more than the quota's
        // own margin (Redis lost the bucket, an edge was cut off).
        let bound = if self.metered_limit > metered_limit(self.metered_quota, false) {
            format!("; allowed {}", self.metered_limit)
        } else {
            String::new()
        };
        let metered = if self.metered_quota == 0 {
            "-".to_string()
        } else {
            format!(
                "{} / {} (live edges {}{bound})",
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
        "| fault | fault window (s) | events acked | deliveries | lost | duplicates caught by the intake / stored | answers to the provider | p99 ms at the edge before / during (added) | p99 ms at the edge during, less the worker's wait for a CPU or freeze | p99 ms end to end during | fleet.timeout_ms | breaker | degraded | fall-backs | after the heal (ms): last fall-back; breaker closed for good | admitted during the fault / the fleet quota for that window |\n\
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

/// The list of runs beside a table: `line` (the rows a run made, then how:
/// `- a, b: COMMAND …`) first, then each line of `old` with the rows `line`
/// made again taken out, and dropped when none is left, so every row of the
/// table is named under the run that made it.
pub fn merge_runs(old: &str, line: &str) -> String {
    let rows_of = |line: &str| -> Vec<String> {
        line.strip_prefix("- ")
            .and_then(|l| l.split_once(": "))
            .map(|(rows, _)| rows.split(", ").map(str::to_string).collect())
            .unwrap_or_default()
    };
    let fresh = rows_of(line);
    let mut out = format!("{}\n", line.trim_end());
    for old_line in old.lines().filter(|l| l.starts_with("- ")) {
        let Some((_, how)) = old_line.split_once(": ") else {
            continue;
        };
        let kept: Vec<String> = rows_of(old_line)
            .into_iter()
            .filter(|r| !fresh.contains(r))
            .collect();
        if !kept.is_empty() {
            out.push_str(&format!("- {}: {how}\n", kept.join(", ")));
        }
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
