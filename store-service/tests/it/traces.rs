//! Traces: each hit carrying a sampled `traceparent` gets one span, exported
//! over OTLP/HTTP under the sender's trace, whether it came alone
//! (`/v1/hit`) or in a batch (`/v1/hits`); a hit without one, or with an
//! unsampled one, exports nothing.

use ankusa_testkit::http::request;
use ankusa_testkit::otlp::Receiver;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::auth_header;
use serde_json::{json, Value};
use std::time::Duration;

fn traceparent(trace: u8, span: u8, sampled: bool) -> String {
    format!(
        "00-{}-{}-0{}",
        format!("{trace:02x}").repeat(16),
        format!("{span:02x}").repeat(8),
        u8::from(sampled)
    )
}

fn hit(key: &str, traceparent: Option<&str>) -> Value {
    let mut hit = json!({"charges": [{"kind": "hooks", "tenant": "traced", "units": 1,
                                      "rate": 100, "burst": 100}],
                         "claim": {"tenant": "traced", "source_id": "gh", "key": key,
                                   "hook_id": format!("h-{key}"), "node": "edge-1",
                                   "ttl_ms": 60_000, "pending_ttl_ms": 30_000}});
    if let Some(t) = traceparent {
        hit["traceparent"] = json!(t);
    }
    hit
}

fn post(store: &Store, path: &str, body: &Value) -> Value {
    let (name, value) = auth_header();
    let headers = [("content-type", "application/json"), (name, value.as_str())];
    let url = store.url_of(path);
    let answer = request(
        "POST",
        &url,
        &headers,
        body.to_string().as_bytes(),
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()
}

#[test]
fn each_traced_hit_is_one_span_under_the_senders_trace() {
    let redis = Redis::start();
    let receiver = Receiver::start();
    let store = receiver.store(&redis.url());
    let alone = traceparent(0xa1, 0x11, true);
    let first = traceparent(0xb2, 0x22, true);
    let second = traceparent(0xc3, 0x33, true);
    let unsampled = traceparent(0xd4, 0x44, false);
    assert_eq!(
        post(&store, "/v1/hit", &hit("t1", Some(&alone)))["result"],
        "ok"
    );
    assert_eq!(post(&store, "/v1/hit", &hit("t2", None))["result"], "ok");
    assert_eq!(
        post(&store, "/v1/hit", &hit("t3", Some(&unsampled)))["result"],
        "ok"
    );
    let batch =
        json!({"hits": [hit("t4", Some(&first)), hit("t5", None), hit("t6", Some(&second))]});
    let answer = post(&store, "/v1/hits", &batch);
    assert_eq!(
        answer["results"].as_array().map(Vec::len),
        Some(3),
        "{answer}"
    );
    let spans = receiver.spans_after_stopping(store);
    let mut traced: Vec<&str> = spans.iter().map(|s| s.trace_id.as_str()).collect();
    traced.sort();
    let expected: Vec<&str> = [&alone, &first, &second].map(|t| &t[3..35]).to_vec();
    assert_eq!(
        traced, expected,
        "one span per sampled hit, none else: {spans:#?}"
    );
    for sent in [&alone, &first, &second] {
        let span = spans
            .iter()
            .find(|s| s.trace_id == sent[3..35])
            .expect("its span");
        assert_eq!(span.name, "hit");
        assert_eq!(
            span.parent_span_id,
            sent[36..52],
            "a child of the sender's span"
        );
        assert_ne!(span.span_id, span.parent_span_id);
        assert_eq!(span.service, "ankusa-store");
        assert_eq!(span.attribute("tenant"), Some("traced"));
        assert_eq!(span.attribute("source"), Some("gh"));
        assert_eq!(span.attribute("result"), Some("ok"));
        let waited = span
            .attribute("redis_us")
            .and_then(|v| v.parse::<u64>().ok());
        assert!(waited.is_some(), "{span:?}");
    }
}

#[test]
fn an_otlp_endpoint_that_is_not_http_stops_the_start_naming_the_flag() {
    let out = std::process::Command::new(ankusa_testkit::paths::workspace_bin("ankusa-store"))
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--otlp-endpoint", "otel:4318"])
        .output()
        .expect("run ankusa-store");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--otlp-endpoint: \"otel:4318/v1/traces\" is not an http:// URL"),
        "{err}"
    );
}
