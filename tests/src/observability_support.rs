//! Shared pieces of the tests of what operators get: the shipped dashboard,
//! alert rules and scrape config, read from `deploy/`, and promtool's checks.

use ankusa_testkit::paths::workspace_root;
use ankusa_testkit::prometheus::promtool;
use std::collections::BTreeSet;
use std::path::PathBuf;

pub fn dashboard_path() -> PathBuf {
    workspace_root().join("deploy/grafana/ankusa.json")
}

pub fn alerts_path() -> PathBuf {
    workspace_root().join("deploy/prometheus/alerts.yml")
}

pub fn scrape_config_path() -> PathBuf {
    workspace_root().join("deploy/prometheus/prometheus.yml")
}

/// A dashboard query as Prometheus reads it: Grafana's `$__rate_interval`
/// becomes `1m`; any other `$variable` is refused, since nothing would fill it.
pub fn as_promql(expr: &str) -> Result<String, String> {
    let text = expr.replace("$__rate_interval", "1m");
    match text.find('$') {
        Some(i) => Err(format!(
            "query uses a variable Prometheus cannot fill at {:?}: {expr}",
            &text[i..]
        )),
        None => Ok(text),
    }
}

/// Every (panel title, PromQL) of the shipped dashboard.
pub fn dashboard_queries() -> Vec<(String, String)> {
    let path = dashboard_path();
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let dashboard: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    queries_of(&dashboard).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The (panel title, PromQL) pairs of a dashboard; a panel without a query is an error.
pub fn queries_of(dashboard: &serde_json::Value) -> Result<Vec<(String, String)>, String> {
    let panels = dashboard["panels"]
        .as_array()
        .ok_or("the dashboard has no panels")?;
    let mut out = Vec::new();
    for panel in panels {
        let title = panel["title"].as_str().unwrap_or("(untitled)").to_string();
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        if targets.is_empty() {
            return Err(format!("panel {title:?} has no query"));
        }
        for target in targets {
            let expr = target["expr"]
                .as_str()
                .ok_or_else(|| format!("panel {title:?} has a target without expr"))?;
            out.push((title.clone(), as_promql(expr)?));
        }
    }
    Ok(out)
}

/// Has promtool parse every expression (as recording rules of one group): Ok
/// or promtool's complaint.
pub fn check_parse(exprs: &[String]) -> Result<(), String> {
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, expr) in exprs.iter().enumerate() {
        // A JSON string is a valid YAML double-quoted scalar.
        let quoted = serde_json::Value::String(expr.clone()).to_string();
        rules.push_str(&format!(
            "      - record: dashboard:query_{i}\n        expr: {quoted}\n"
        ));
    }
    let dir = ankusa_testkit::process::scratch_dir("promql");
    let file = dir.join("dashboard-rules.yml");
    std::fs::write(&file, &rules).expect("write rules");
    let (code, out) = promtool(&["check", "rules", &file.display().to_string()], None);
    if code == 0 {
        Ok(())
    } else {
        Err(out)
    }
}

/// The `ankusa_*` metric names an expression reads.
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut word = String::new();
    for c in expr.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            if word.starts_with("ankusa_") {
                names.insert(std::mem::take(&mut word));
            }
            word.clear();
        }
    }
    names
}

/// Metric families in Prometheus text, from its `# TYPE` lines.
pub fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Whether `name` is a family or one of a histogram's `_bucket`/`_sum`/`_count` series.
pub fn is_exported(name: &str, families: &BTreeSet<String>) -> bool {
    families.contains(name)
        || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
            name.strip_suffix(suffix)
                .is_some_and(|base| families.contains(base))
        })
}

/// The `ankusa_*` families of an exposition (each `# TYPE` line with its samples).
pub fn ankusa_part(text: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            inside = rest.starts_with("ankusa_");
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// `promtool check metrics` on `text`: its problems, one per line (empty when clean).
pub fn lint(text: &str) -> Vec<String> {
    let (code, out) = promtool(&["check", "metrics"], Some(text));
    let problems: Vec<String> = out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    assert!(
        code == 0 || !problems.is_empty(),
        "promtool check metrics failed ({code}) without saying why"
    );
    problems
}

/// The shipped scrape config with its compose targets replaced by loopback
/// ones and its intervals by 1 s; panics if one of them is not found, so a
/// change to the shipped file cannot silently leave the test on stale text.
pub fn shipped_config_for(edge_admins: &[String], store: &str) -> String {
    let text = std::fs::read_to_string(scrape_config_path()).expect("read prometheus.yml");
    let quoted = |ts: &[String]| {
        ts.iter()
            .map(|t| format!("\"{t}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let swaps = [
        (
            r#"["edge-1:9901", "edge-2:9901"]"#.to_string(),
            format!("[{}]", quoted(edge_admins)),
        ),
        (r#"["store:7070"]"#.to_string(), format!("[\"{store}\"]")),
        (
            "scrape_interval: 5s".to_string(),
            "scrape_interval: 1s".to_string(),
        ),
        (
            "evaluation_interval: 5s".to_string(),
            "evaluation_interval: 1s".to_string(),
        ),
    ];
    let mut out = text;
    for (from, to) in swaps {
        assert!(out.contains(&from), "prometheus.yml no longer has {from}");
        out = out.replace(&from, &to);
    }
    out
}
