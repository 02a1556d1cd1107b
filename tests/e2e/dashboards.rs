//! The shipped dashboard, alert rules and scrape config, checked without a
//! fleet: promtool accepts the rules and the config, the alerts fire after
//! their `for:` and not before (`promtool test rules`), every dashboard query
//! parses as PromQL (and a query that does not parse fails the check), and the
//! dashboard shows each signal operators need. `tests/e2e/prometheus.rs`
//! runs them against a real Prometheus scraping a real fleet.

use ankusa_testkit::prometheus::promtool;
use ankusa_tests::observability_support::*;
use std::collections::BTreeSet;

#[test]
fn the_alert_rules_pass_promtool_check_rules() {
    let (code, out) = promtool(
        &["check", "rules", &alerts_path().display().to_string()],
        None,
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("SUCCESS: 9 rules found"), "{out}");
}

#[test]
fn the_alerts_fire_after_their_for_and_not_before_in_promtool_test_rules() {
    let tests = alerts_path().with_file_name("alerts.test.yml");
    let (code, out) = promtool(&["test", "rules", &tests.display().to_string()], None);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("SUCCESS"), "{out}");
    // Every shipped alert has a case.
    let cases = std::fs::read_to_string(&tests).expect("read alerts.test.yml");
    for alert in [
        "AnkusaLimiterDegraded",
        "AnkusaBreakerOpen",
        "AnkusaSettleDropped",
        "AnkusaStoreDown",
        "AnkusaRedisDown",
        "AnkusaHigh409Rate",
        "AnkusaUnprovenPromotes",
        "AnkusaStoreForbidden",
    ] {
        assert!(
            cases.contains(&format!(
                "alertname: {alert}\n        exp_alerts:\n          - "
            )),
            "no case of alerts.test.yml sees {alert} fire"
        );
    }
}

#[test]
fn the_scrape_config_passes_promtool_check_config_with_its_rules() {
    let (code, out) = promtool(
        &[
            "check",
            "config",
            &scrape_config_path().display().to_string(),
        ],
        None,
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("SUCCESS: 1 rule files found"), "{out}");
}

#[test]
fn every_dashboard_query_parses() {
    let queries = dashboard_queries();
    assert!(queries.len() >= 10, "{queries:?}");
    let exprs: Vec<String> = queries.into_iter().map(|(_, e)| e).collect();
    check_parse(&exprs).unwrap_or_else(|e| panic!("a dashboard query does not parse:\n{e}"));
}

#[test]
fn a_query_that_does_not_parse_fails_the_check() {
    let good = r#"sum by (outcome) (rate(ankusa_admissions_total[1m]))"#.to_string();
    let bad = r#"sum by (outcome) (rate(ankusa_admissions_total[1m])"#.to_string();
    assert_eq!(check_parse(std::slice::from_ref(&good)), Ok(()));
    let err = check_parse(&[good, bad]).expect_err("an unclosed parenthesis parses");
    assert!(err.contains("dashboard:query_1"), "{err}");
}

#[test]
fn a_panel_without_a_query_or_with_an_unfilled_variable_is_refused() {
    let empty = serde_json::json!({"panels": [{"title": "x", "targets": []}]});
    assert_eq!(
        queries_of(&empty),
        Err("panel \"x\" has no query".to_string())
    );
    let variable = serde_json::json!({"panels": [{"title": "y", "targets": [
        {"expr": "sum(ankusa_admissions_total{instance=~\"$edge\"})"}]}]});
    let err = queries_of(&variable).expect_err("$edge is never filled");
    assert!(err.contains("$edge"), "{err}");
}

#[test]
fn the_dashboard_shows_every_signal_operators_need() {
    let named: BTreeSet<String> = dashboard_queries()
        .iter()
        .flat_map(|(_, e)| metric_names(e))
        .collect();
    for metric in [
        "ankusa_admissions_total",
        "ankusa_fleet_fallback_total",
        "ankusa_fleet_limiter_degraded",
        "ankusa_fleet_breaker_state",
        "ankusa_fleet_call_duration_bucket",
        "ankusa_store_redis_seconds_bucket",
        "ankusa_fleet_settle_queue_depth",
        "ankusa_fleet_settle_dropped_total",
        "ankusa_store_redis_up",
    ] {
        assert!(named.contains(metric), "no panel reads {metric}: {named:?}");
    }
}

#[test]
fn metric_names_and_exported_families_are_read_as_prometheus_does() {
    let names = metric_names(
        r#"histogram_quantile(0.99, sum by (le) (rate(ankusa_fleet_call_duration_bucket[1m]))) / up{job="ankusa-store"}"#,
    );
    assert_eq!(
        names,
        BTreeSet::from(["ankusa_fleet_call_duration_bucket".to_string()])
    );
    let text = "# TYPE ankusa_fleet_call_duration histogram\nankusa_fleet_call_duration_bucket{le=\"1\"} 1\n# TYPE envoy_x counter\nenvoy_x 1\n# TYPE ankusa_a_total counter\nankusa_a_total 2\n";
    let f = families(text);
    assert!(is_exported("ankusa_fleet_call_duration_bucket", &f));
    assert!(is_exported("ankusa_a_total", &f));
    assert!(!is_exported("ankusa_fleet_call_ms_bucket", &f));
    assert_eq!(
        ankusa_part(text),
        "# TYPE ankusa_fleet_call_duration histogram\nankusa_fleet_call_duration_bucket{le=\"1\"} 1\n# TYPE ankusa_a_total counter\nankusa_a_total 2\n"
    );
}
