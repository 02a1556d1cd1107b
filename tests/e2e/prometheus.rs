//! What an operator's Prometheus sees: a real Prometheus (Debian's package)
//! with the shipped scrape config and alert rules scrapes a real fleet (Redis,
//! store, two Envoy edges, intake), and reports the admissions the edges counted,
//! the degraded gauge turning 1 when the store stops, and the alerts going
//! pending. Every dashboard query runs against it and every metric a query or
//! an alert names is checked against a live scrape. promtool's metric lint is
//! clean on the store's `/metrics` and on the edges' `ankusa_*` metrics.

use ankusa_testkit::envoy::{fleet_filter_config, Edge, EdgeSpec};
use ankusa_testkit::http;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::prometheus::{self, Prometheus};
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::observability_support::*;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;

/// How long Prometheus gets to see a change (it scrapes and evaluates every second).
const SEEN_WITHIN: Duration = Duration::from_secs(30);

/// Fleet scopes; tenant acme holds 5 hooks then 1/s; a breaker that opens after 5 failed calls.
fn config() -> Value {
    let mut config = fleet_filter_config();
    config["rate_limits"]["tenants"]["acme"] = json!({"rate": 1, "burst": 5});
    config["fleet"]["timeout_ms"] = json!(500);
    config["fleet"]["breaker_min_calls"] = json!(5);
    config["fleet"]["breaker_failure_rate"] = json!(0.5);
    config["fleet"]["breaker_window_ms"] = json!(60_000);
    config
}

/// One GitHub delivery to `edge`; its status.
fn deliver(edge: &Edge, delivery: &str) -> u16 {
    let body = format!(r#"{{"delivery":"{delivery}"}}"#);
    let r = edge
        .post(
            "/webhooks/acme/gh",
            &[
                ("content-type", "application/json"),
                ("x-github-delivery", delivery),
            ],
            body.as_bytes(),
        )
        .unwrap_or_else(|e| panic!("POST to {}: {e}\n{}", edge.spec.node, edge.log_tail()));
    r.status
}

fn scrape(url: &str) -> String {
    http::get(url)
        .unwrap_or_else(|e| panic!("GET {url}: {e}"))
        .text()
}

/// `ankusa_admissions_total{outcome}` summed over `edges`, as the edges count it.
fn edges_count(edges: &[Edge], outcome: &str) -> f64 {
    let name = format!(r#"ankusa_admissions_total{{outcome="{outcome}"}}"#);
    edges.iter().map(|e| e.stat(&name)).sum()
}

/// The value Prometheus holds for `sum by (outcome)` of the admissions counter.
fn prometheus_count(prom: &Prometheus, outcome: &str) -> Option<f64> {
    prom.vector(r#"sum by (outcome) (ankusa_admissions_total{job="ankusa-edge"})"#)
        .into_iter()
        .find(|(labels, _)| labels["outcome"] == outcome)
        .map(|(_, v)| v)
}

/// The rules Prometheus loaded, by name: (health, state, lastError).
fn loaded_rules(prom: &Prometheus) -> Vec<(String, String, String, String)> {
    let answer = prom.rules();
    let mut out = Vec::new();
    for group in answer["data"]["groups"].as_array().into_iter().flatten() {
        for rule in group["rules"].as_array().into_iter().flatten() {
            let s = |k: &str| rule[k].as_str().unwrap_or_default().to_string();
            out.push((s("name"), s("health"), s("state"), s("lastError")));
        }
    }
    out
}

fn alert_state(prom: &Prometheus, alert: &str) -> String {
    loaded_rules(prom)
        .into_iter()
        .find(|(name, ..)| name == alert)
        .map(|(_, _, state, _)| state)
        .unwrap_or_else(|| format!("{alert} not loaded"))
}

#[test]
fn a_real_prometheus_sees_admissions_then_degraded_when_the_store_stops_and_the_alerts_pend() {
    prometheus::require("prometheus");
    let redis = Redis::start();
    let mut store = Store::start(&redis.url());
    let intake = Intake::start();
    let edges: Vec<Edge> = ["edge-p1", "edge-p2"]
        .iter()
        .map(|node| Edge::start(EdgeSpec::new(node, intake.port, store.port, config())))
        .collect();

    // The shipped scrape config and alert rules, pointed at this fleet.
    let admins: Vec<String> = edges
        .iter()
        .map(|e| format!("127.0.0.1:{}", e.spec.admin_port))
        .collect();
    let prometheus_yml = shipped_config_for(&admins, &format!("127.0.0.1:{}", store.port));
    let prom = Prometheus::start(&prometheus_yml, &[&alerts_path()]);

    // More than the tenant's burst, across both edges: some admitted, some 429.
    for i in 0..12 {
        deliver(&edges[i % 2], &format!("prom-up-{i}"));
    }
    let (admitted, limited) = (
        edges_count(&edges, "admitted"),
        edges_count(&edges, "rate_limited"),
    );
    assert!(
        admitted >= 5.0 && limited >= 1.0,
        "admitted {admitted}, 429 {limited}"
    );
    let seen = prom.wait(SEEN_WITHIN, || {
        prometheus_count(&prom, "admitted") == Some(admitted)
            && prometheus_count(&prom, "rate_limited") == Some(limited)
    });
    assert!(
        seen,
        "prometheus reports admitted {:?}, rate_limited {:?}; the edges counted {admitted}, {limited}\n{}",
        prometheus_count(&prom, "admitted"),
        prometheus_count(&prom, "rate_limited"),
        prom.proc.log_tail()
    );
    let degraded = prom.vector("ankusa_fleet_limiter_degraded");
    assert_eq!(degraded.len(), 4, "2 edges × 2 kinds: {degraded:?}");
    assert!(
        degraded.iter().all(|(_, v)| *v == 0.0),
        "nothing degraded yet: {degraded:?}"
    );

    // Every dashboard query is valid PromQL to this Prometheus, and every
    // metric a query or an alert names is in a live scrape.
    // Each also finds series once two scrapes fall in its 1m window (a job
    // name or label the fleet doesn't have would leave a panel empty).
    for (title, expr) in dashboard_queries() {
        let answer = prom.query(&expr);
        assert_eq!(
            answer["status"], "success",
            "panel {title:?}: {expr}\n{answer}"
        );
        let shows = prom.wait(SEEN_WITHIN, || !prom.vector(&expr).is_empty());
        assert!(shows, "panel {title:?} finds no series: {expr}");
    }
    let all_loaded = prom.wait(SEEN_WITHIN, || {
        let rules = loaded_rules(&prom);
        !rules.is_empty() && rules.iter().all(|(_, health, ..)| health == "ok")
    });
    let rules = loaded_rules(&prom);
    assert!(all_loaded, "alert rules not all healthy: {rules:?}");
    let names: BTreeSet<&str> = rules.iter().map(|(n, ..)| n.as_str()).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "AnkusaBreakerOpen",
            "AnkusaHigh409Rate",
            "AnkusaLimiterDegraded",
            "AnkusaOverridesLeftOut",
            "AnkusaRedisDown",
            "AnkusaSettleDropped",
            "AnkusaStoreDown",
            "AnkusaStoreForbidden",
            "AnkusaUnprovenPromotes"
        ]),
        "the shipped alerts"
    );
    let mut exported = families(&scrape(&store.url_of("/metrics")));
    for edge in &edges {
        exported.extend(families(&scrape(&edge.admin_url("/stats/prometheus"))));
    }
    let mut named: Vec<(String, String)> = dashboard_queries()
        .into_iter()
        .flat_map(|(title, expr)| {
            metric_names(&expr)
                .into_iter()
                .map(move |m| (title.clone(), m))
        })
        .collect();
    for group in prom.rules()["data"]["groups"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for rule in group["rules"].as_array().into_iter().flatten() {
            let query = rule["query"].as_str().unwrap_or_default();
            let name = rule["name"].as_str().unwrap_or_default();
            named.extend(
                metric_names(query)
                    .into_iter()
                    .map(|m| (name.to_string(), m)),
            );
        }
    }
    assert!(named.len() > 10, "{named:?}");
    for (what, metric) in &named {
        assert!(
            is_exported(metric, &exported),
            "{what} reads {metric}, which neither the edges nor the store export"
        );
    }
    assert_eq!(alert_state(&prom, "AnkusaLimiterDegraded"), "inactive");
    assert_eq!(alert_state(&prom, "AnkusaStoreDown"), "inactive");

    // The store stops: the edges answer node-local, the gauge turns 1, and
    // Prometheus sees it, the store's `up` at 0, and the alerts pending.
    store.proc.stop(Duration::from_secs(5));
    for (e, edge) in edges.iter().enumerate() {
        let mut i = 0;
        while edge.stat(r#"ankusa_fleet_limiter_degraded{kind="rate_limit"}"#) != 1.0
            || edge.stat("ankusa_fleet_breaker_state") == 0.0
        {
            assert!(
                i < 40,
                "{} never degraded:\n{}",
                edge.spec.node,
                edge.log_tail()
            );
            deliver(edge, &format!("prom-down-{e}-{i}"));
            i += 1;
        }
    }
    let seen = prom.wait(SEEN_WITHIN, || {
        prom.vector(r#"ankusa_fleet_limiter_degraded{kind="rate_limit"} == 1"#)
            .len()
            == 2
            && prom.vector(r#"up{job="ankusa-store"} == 0"#).len() == 1
    });
    assert!(
        seen,
        "prometheus reports degraded {:?}, store up {:?}",
        prom.vector("ankusa_fleet_limiter_degraded"),
        prom.vector(r#"up{job="ankusa-store"}"#)
    );
    let pending = prom.wait(SEEN_WITHIN, || {
        [
            "AnkusaLimiterDegraded",
            "AnkusaStoreDown",
            "AnkusaBreakerOpen",
        ]
        .iter()
        .all(|a| matches!(alert_state(&prom, a).as_str(), "pending" | "firing"))
    });
    assert!(pending, "alerts: {:?}", loaded_rules(&prom));
    let per_edge_and_kind = prom.wait(SEEN_WITHIN, || {
        prom.vector(r#"ALERTS{alertname="AnkusaLimiterDegraded"}"#)
            .iter()
            .map(|(l, _)| format!("{} {}", l["instance"], l["kind"]))
            .collect::<BTreeSet<String>>()
            .len()
            == 4
    });
    assert!(
        per_edge_and_kind,
        "one alert per edge and kind: {:?}",
        prom.vector(r#"ALERTS{alertname="AnkusaLimiterDegraded"}"#)
    );
    assert_eq!(alert_state(&prom, "AnkusaSettleDropped"), "inactive");
    drop(redis);
}

#[test]
fn promtool_check_metrics_is_clean_on_the_store_and_on_the_edges_ankusa_metrics() {
    prometheus::require("promtool");
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let edge = Edge::start(EdgeSpec::new(
        "edge-lint",
        intake.port,
        store.port,
        config(),
    ));
    // Two admitted hooks: store calls observed in the histograms, settles sent.
    assert_eq!(deliver(&edge, "lint-1"), 201);
    assert_eq!(deliver(&edge, "lint-2"), 201);

    let store_text = scrape(&store.url_of("/metrics"));
    assert!(
        store_text.contains("ankusa_store_requests_total"),
        "{store_text}"
    );
    let problems = lint(&store_text);
    assert!(problems.is_empty(), "store /metrics: {problems:#?}");

    let edge_text = ankusa_part(&scrape(&edge.admin_url("/stats/prometheus")));
    // Envoy prints no `# HELP` line for any stat, its own or a filter's, and
    // has no way to; that is the one finding allowed here.
    let problems: Vec<String> = lint(&edge_text)
        .into_iter()
        .filter(|p| !p.ends_with(" no help text"))
        .collect();
    assert!(problems.is_empty(), "edge ankusa_* metrics: {problems:#?}");
    let exported = families(&edge_text);
    for family in [
        "ankusa_admissions_total",
        "ankusa_fleet_call_duration",
        "ankusa_fleet_limiter_degraded",
    ] {
        assert!(exported.contains(family), "{family} missing:\n{edge_text}");
    }
}
