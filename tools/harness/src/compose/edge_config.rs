//! The edges' bootstrap of the rows across hosts: the shipped one
//! (`envoy/edge.yaml`) with its plugin configuration changed as every fault
//! row changes it (`faults::fleet::row_settings`: the metered tenant, a
//! short pending time and breaker), rendered at run time so it never drifts
//! from the shipped file. Its `fleet.timeout_ms` stays the shipped budget.

use crate::faults::fleet::row_settings;
use crate::faults::target::Budget;

/// The plugin configuration in `bootstrap`: the JSON block under the only
/// `value: |` line, and the line range it spans.
fn plugin_block(bootstrap: &str) -> Result<(serde_json::Value, usize, usize), String> {
    let lines: Vec<&str> = bootstrap.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_end().ends_with("value: |"))
        .ok_or("the bootstrap holds no plugin configuration (`value: |`)")?;
    let indent_of = |l: &str| l.len() - l.trim_start().len();
    let indent = lines.get(at + 1).map_or(0, |l| indent_of(l));
    let end = (at + 1..lines.len())
        .find(|&i| !lines[i].trim().is_empty() && indent_of(lines[i]) < indent)
        .unwrap_or(lines.len());
    let text = lines[at + 1..end].join("\n");
    let config = serde_json::from_str(&text)
        .map_err(|e| format!("the plugin configuration is not JSON: {e}"))?;
    Ok((config, at + 1, end))
}

/// `bootstrap` with its plugin configuration changed by [`row_settings`].
pub fn render(bootstrap: &str) -> Result<String, String> {
    let (mut config, from, to) = plugin_block(bootstrap)?;
    row_settings(&mut config);
    let lines: Vec<&str> = bootstrap.lines().collect();
    let indent = " ".repeat(lines[from].len() - lines[from].trim_start().len());
    let pretty = serde_json::to_string_pretty(&config).map_err(|e| e.to_string())?;
    let mut out: Vec<String> = lines[..from].iter().map(|l| l.to_string()).collect();
    out.extend(pretty.lines().map(|l| format!("{indent}{l}")));
    out.extend(lines[to..].iter().map(|l| l.to_string()));
    Ok(out.join("\n") + "\n")
}

/// The fleet budget `bootstrap`'s plugin configuration sets (the filter's
/// defaults where it sets none).
pub fn budget(bootstrap: &str) -> Result<Budget, String> {
    let (config, _, _) = plugin_block(bootstrap)?;
    let fleet = &config["fleet"];
    let defaults = ankusa_core::config::FleetConfig::default();
    Ok(Budget {
        timeout_ms: fleet["timeout_ms"].as_u64().unwrap_or(defaults.timeout_ms),
        breaker_open_ms: fleet["breaker_open_ms"]
            .as_u64()
            .unwrap_or(defaults.breaker.open_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::fleet::BREAKER_OPEN_MS;
    use crate::faults::metered;

    const SHIPPED: &str = include_str!("../../../../envoy/edge.yaml");

    #[test]
    fn the_shipped_bootstrap_gets_the_rows_settings_and_keeps_its_budget() {
        let rendered = render(SHIPPED).expect("renders");
        let (config, _, _) = plugin_block(&rendered).expect("still one block");
        assert_eq!(
            config["rate_limits"]["tenants"][metered::TENANT]["rate"],
            metered::RATE
        );
        assert_eq!(
            config["sources"][metered::TENANT]["tenant"],
            metered::TENANT
        );
        let (shipped, _, _) = plugin_block(SHIPPED).expect("shipped block");
        assert_eq!(
            config["fleet"]["timeout_ms"],
            shipped["fleet"]["timeout_ms"]
        );
        assert_eq!(config["sources"]["gh"], shipped["sources"]["gh"]);
        let budget = budget(&rendered).expect("budget");
        assert_eq!(budget.breaker_open_ms, BREAKER_OPEN_MS);
        assert_eq!(
            Some(budget.timeout_ms),
            shipped["fleet"]["timeout_ms"].as_u64()
        );
        // Everything around the block is the shipped file, line for line.
        let tail = |t: &str| {
            t.lines()
                .rev()
                .take(40)
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(tail(&rendered), tail(SHIPPED));
    }

    #[test]
    fn a_bootstrap_without_a_plugin_configuration_is_refused() {
        assert!(render("static_resources: {}\n").is_err());
        assert!(render("value: |\n  {not json\n").is_err());
    }
}
