//! The checked-in JSON Schema and the filter's parser agree on every
//! configuration fixture, judged by a JSON Schema validator from PyPI
//! (`check-jsonschema`, installed into `.venv` by `scripts/setup.sh`): each
//! fixture the parser loads validates, and each one it refuses is refused by
//! the schema, at the field the parser names (or one of its parents); the
//! ones refused for a rule that spans fields are listed here and in the
//! schema's `x-ankusa-cross-field-rules`, by fixture name.

use ankusa_core::config::Config;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// (fixture, the cross-field rule it breaks, as the schema names it).
const CROSS_FIELD: &[(&str, &str)] = &[
    ("burst_without_rate", "pairs"),
    ("bytes_rate_without_burst", "pairs"),
    ("bytes_burst_without_rate", "pairs"),
    ("empty_default_limits", "default pair"),
    ("dedupe_header_and_json", "one dedupe rule"),
    ("verify_tolerance_without_timestamp", "verify scheme"),
    ("verify_header_on_a_preset", "verify scheme"),
    ("verify_generic_without_header", "verify scheme"),
    ("fleet_scope_without_cluster", "fleet store"),
    ("fleet_dedupe_without_authority", "fleet store"),
    ("verify_path_tenants_one_secret", "verify tenants"),
    ("verify_shared_on_one_tenant", "verify tenants"),
    ("verify_tenant_map_on_one_tenant", "verify tenants"),
    ("verify_replay_guard_node_dedupe", "replay guard dedupe"),
    ("fleet_direct_without_store", "direct store"),
    ("fleet_store_without_direct", "direct store"),
];

/// Refused for a rule no JSON Schema can state (the schema lists it as
/// "beyond JSON Schema"): the schema accepts them, the parser alone refuses.
const BEYOND_SCHEMA: &[&str] = &["verify_tenant_map_shared_variable"];

/// Not JSON at all: the validator cannot parse them, as the filter cannot.
const NOT_JSON: &[&str] = &["empty", "not_json", "truncated_json"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn schema() -> Value {
    let text = std::fs::read(root().join("deploy/schema/ankusa-config.schema.json")).unwrap();
    serde_json::from_slice(&text).unwrap()
}

/// check-jsonschema's JSON report over every fixture at once.
fn validate_all(stems: &[String]) -> Value {
    let bin = root().join(".venv/bin/check-jsonschema");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/setup.sh",
        bin.display()
    );
    let dir = root().join("core/tests/fixtures/config");
    let out = Command::new(bin)
        .args(["--output-format", "json", "--schemafile"])
        .arg(root().join("deploy/schema/ankusa-config.schema.json"))
        .args(stems.iter().map(|s| format!("{s}.json")))
        .current_dir(&dir)
        .output()
        .expect("run check-jsonschema");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "unreadable report ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn stems() -> Vec<String> {
    let dir = root().join("core/tests/fixtures/config");
    let mut stems: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    stems.sort();
    stems
}

/// Every path an error of `file` names (`$.a.b` as `a.b`), its sub-matches too.
fn error_paths(report: &Value, file: &str) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    for error in report["errors"].as_array().into_iter().flatten() {
        if error["filename"] != file {
            continue;
        }
        for at in [
            &error["path"],
            &error["best_match"]["path"],
            &error["best_deep_match"]["path"],
        ] {
            if let Some(path) = at.as_str() {
                paths.insert(
                    path.trim_start_matches('$')
                        .trim_start_matches('.')
                        .to_string(),
                );
            }
        }
    }
    paths
}

#[test]
fn schema_and_parser_agree_on_every_fixture() {
    let stems = stems();
    let report = validate_all(&stems);
    let parse_failed: BTreeSet<&str> = report["parse_errors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["filename"].as_str()?.strip_suffix(".json"))
        .collect();
    assert_eq!(parse_failed, NOT_JSON.iter().copied().collect());
    let cross: BTreeSet<&str> = CROSS_FIELD.iter().map(|(f, _)| *f).collect();
    let mut wrong = Vec::new();
    let mut refused = 0;
    for stem in &stems {
        let bytes =
            std::fs::read(root().join(format!("core/tests/fixtures/config/{stem}.json"))).unwrap();
        let file = format!("{stem}.json");
        let paths = error_paths(&report, &file);
        match Config::parse(&bytes) {
            Ok(_) if !paths.is_empty() => wrong.push(format!(
                "{stem}: loads, but the schema refuses it at {paths:?}"
            )),
            Ok(_) => {}
            Err(_) if NOT_JSON.contains(&stem.as_str()) => refused += 1,
            Err(_) if paths.is_empty() && BEYOND_SCHEMA.contains(&stem.as_str()) => refused += 1,
            Err(e) if paths.is_empty() => {
                wrong.push(format!("{stem}: refused ({e}), but the schema accepts it"))
            }
            Err(e) => {
                refused += 1;
                // The schema's error sits at the parser's field or a parent of it
                // (`config` is the whole document).
                let field = if e.field == "config" {
                    String::new()
                } else {
                    e.field.clone()
                };
                let at_field = paths
                    .iter()
                    .any(|p| field == *p || field.starts_with(&format!("{p}.")) || p.is_empty());
                if !at_field && !cross.contains(stem.as_str()) {
                    wrong.push(format!(
                        "{stem}: the parser names {field}, the schema {paths:?}"
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(refused > 40, "only {refused} refused fixtures");
    for (stem, _) in CROSS_FIELD {
        assert!(stems.contains(&stem.to_string()), "{stem} is no fixture");
    }
}

#[test]
fn the_schema_documents_each_cross_field_rule_with_its_fixtures() {
    let schema = schema();
    let rules: Vec<&str> = schema["x-ankusa-cross-field-rules"]
        .as_array()
        .expect("x-ankusa-cross-field-rules")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let description = schema["description"].as_str().unwrap();
    for rule in &rules {
        assert!(description.contains(rule), "the description omits {rule:?}");
    }
    for (stem, name) in CROSS_FIELD {
        let rule = rules
            .iter()
            .find(|r| r.starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no rule named {name:?} in the schema"));
        assert!(
            rule.contains(stem),
            "rule {name:?} does not name fixture {stem}"
        );
    }
    // And every fixture a rule names is in the table above.
    let named: BTreeSet<String> = rules
        .iter()
        .flat_map(|r| r.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|w| stems().contains(&w.to_string()))
        .map(str::to_string)
        .collect();
    let listed: BTreeSet<String> = CROSS_FIELD
        .iter()
        .map(|(s, _)| s.to_string())
        .chain(BEYOND_SCHEMA.iter().map(|s| s.to_string()))
        .collect();
    assert_eq!(named, listed);
    for stem in BEYOND_SCHEMA {
        assert!(
            rules
                .iter()
                .any(|r| r.starts_with("beyond JSON Schema") && r.contains(stem)),
            "no \"beyond JSON Schema\" rule names {stem}"
        );
    }
}
