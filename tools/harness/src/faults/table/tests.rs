use super::*;
use crate::faults::row::Transitions;

#[test]
fn transitions_collapse_repeats() {
    let t = Transitions::of([0.0, 0.0, 1.0, 1.0, 2.0, 0.0].into_iter());
    assert_eq!(t.render(), "0→1→2→0");
}

#[test]
fn a_partial_run_replaces_only_its_own_rows() {
    let old = "| fault | x |\n|---|---|\n| store-killed | old |\n| redis-frozen (note) | old |\n";
    let row: Row = serde_json::from_value(serde_json::json!({
        "fault": "redis-frozen", "events": 1, "deliveries": 1, "acknowledged_events": 1,
        "lost": 0, "lost_keys": [], "stored": 1, "stored_duplicates": 0,
        "duplicates_reason": null, "answers": {}, "transport_errors": 0,
        "p99_before_ms": 1.0, "p99_during_ms": 2.0, "added_p99_ms": 1.0, "timeout_ms": 250,
        "breaker": [0.0], "degraded": [0.0], "fallbacks": 0, "settle_dropped": 0,
        "resume_after_heal_ms": 0, "fault_s": [1.0, 2.0]
    }))
    .expect("row");
    let merged = merge_table(old, &[row], &["store-killed", "redis-frozen"]);
    let lines: Vec<&str> = merged.lines().collect();
    assert_eq!(lines.len(), 4, "{merged}");
    assert_eq!(lines[2], "| store-killed | old |");
    assert!(
        lines[3].starts_with("| redis-frozen | 1.0–2.0 | 1/1 |"),
        "{merged}"
    );
}

#[test]
fn replaces_only_the_named_section() {
    let doc = "a\n<!-- t:begin -->\nold\n<!-- t:end -->\nz\n";
    assert_eq!(
        replace_section(doc, "t", "new\n").expect("section"),
        "a\n<!-- t:begin -->\nnew\n<!-- t:end -->\nz\n"
    );
    assert!(replace_section(doc, "x", "").is_err());
}

#[test]
fn a_run_takes_its_rows_from_the_runs_that_made_them_before() {
    let old = "- a, b: `x.sh all`, Monday\n- c: `x.sh c`, Sunday\n";
    assert_eq!(
        merge_runs(old, "- b, c: `x.sh b,c`, Tuesday"),
        "- b, c: `x.sh b,c`, Tuesday\n- a: `x.sh all`, Monday\n"
    );
    assert_eq!(
        merge_runs("", "- a: `x.sh a`, now\n"),
        "- a: `x.sh a`, now\n"
    );
}
