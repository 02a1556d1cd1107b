//! A hook's trace context crosses the edge: senders POST hooks carrying
//! their own `traceparent` through real Envoy, the edge carries each in its
//! hit (alone, or batched with others on one call), and the store exports
//! one span per hook under the sender's trace to an OTLP receiver. Each
//! hook's access log line is its own, batched or not.

use crate::edge_shapes::shapes_support::{self, Framing, H2Body, Request};
use ankusa_testkit::access_log;
use ankusa_testkit::envoy::{fleet_filter_config, Edge, EdgeSpec};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::otlp::Receiver;
use ankusa_testkit::redis::Redis;
use ankusa_tests::edge_support::{concurrently, eventually};
use std::time::Duration;

const HOOKS: usize = 48;

/// Hook `i`'s traceparent: its own trace id and parent span id.
fn traceparent(i: usize) -> (String, String, String) {
    let trace = format!("{:032x}", 0x7ace_0000 + i);
    let parent = format!("{:016x}", 0x5e7d_0000 + i);
    (format!("00-{trace}-{parent}-01"), trace, parent)
}

fn request(i: usize) -> Request {
    let body = format!(r#"{{"delivery":"traced-{i}"}}"#).into_bytes();
    Request {
        path: "/webhooks/gh".into(),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("x-github-delivery".into(), format!("traced-{i}")),
            ("traceparent".into(), traceparent(i).0),
        ],
        body,
    }
}

#[test]
fn each_hooks_store_span_has_its_senders_trace_id() {
    let redis = Redis::start();
    let receiver = Receiver::start();
    let store = receiver.store(&redis.url());
    let intake = Intake::start();
    let edge = Edge::start_lds_logged(EdgeSpec::new(
        "edge-traced",
        intake.port,
        store.port,
        fleet_filter_config(),
    ));
    let port = edge.spec.listen_port;
    // Concurrent senders, so that some hooks wait for their worker's call in
    // flight and leave together on /v1/hits; half over HTTP/1.1, half h2c.
    let statuses = concurrently(8, HOOKS, move |i| {
        let sent = if i % 2 == 0 {
            shapes_support::h1(port, &request(i), "HTTP/1.1", Framing::Length)
        } else {
            let body = H2Body {
                frame: 1024,
                trailers: false,
                declared: true,
            };
            shapes_support::h2(port, &request(i), body)
        };
        sent.map(|a| a.status).unwrap_or(0)
    });
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    let batched = store.metric("ankusa_store_requests_total{endpoint=\"hits\",result=\"ok\"}");
    println!("{HOOKS} hooks: {batched} of the edge's calls carried several");
    let spans = receiver.spans_after_stopping(store);
    let mut wrong = Vec::new();
    for i in 0..HOOKS {
        let (_, trace, parent) = traceparent(i);
        let found: Vec<_> = spans.iter().filter(|s| s.trace_id == trace).collect();
        match found[..] {
            [span]
                if span.name == "hit"
                    && span.parent_span_id == parent
                    && span.attribute("tenant") == Some("acme")
                    && span.attribute("result") == Some("ok") => {}
            _ => wrong.push(format!("hook {i}: {found:?}")),
        }
    }
    // A batched call's answer is handed to each hook in its own context: each
    // request's access log line (found by its traceparent) has its own hook.
    let log = edge.access_log.clone().expect("the edge's access log");
    let mut lines = Vec::new();
    eventually(Duration::from_secs(30), || {
        lines = access_log::lines(&log);
        (0..HOOKS).all(|i| lines.iter().any(|l| l.contains(&traceparent(i).0)))
    });
    for i in 0..HOOKS {
        let line = lines.iter().find(|l| l.contains(&traceparent(i).0));
        let decided = line
            .and_then(|l| access_log::decision(l))
            .unwrap_or_default();
        let key = format!("traced-{i}");
        let fields = ["outcome", "key", "decided"].map(|f| access_log::field(decided, f));
        if fields != [Some("admitted"), Some(key.as_str()), Some("store")] {
            wrong.push(format!("hook {i}'s line: {line:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {HOOKS} hooks without their span or line ({} spans received):\n{}",
        wrong.len(),
        spans.len(),
        wrong.join("\n")
    );
}
