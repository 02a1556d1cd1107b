//! Micro-batched fleet hits through real Envoy: hooks that arrive while
//! their worker's hit call is in flight share the next call, and each gets
//! its own answer; a lone hook still goes alone on `/v1/hit`.

use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::http::{get, request};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::metrics::metric_value;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use std::collections::HashSet;
use std::time::{Duration, Instant};

fn store_metric(store: &Store, name: &str) -> f64 {
    let text = get(&store.url_of("/metrics"))
        .map(|r| r.text())
        .unwrap_or_default();
    metric_value(&text, name)
}

/// Hit calls the store answered, and the hits they carried.
fn calls_and_hits(store: &Store) -> (f64, f64) {
    (
        store_metric(store, "ankusa_store_hits_per_call_count"),
        store_metric(store, "ankusa_store_hits_per_call_sum"),
    )
}

#[test]
fn concurrent_hooks_share_store_calls_and_the_quota_holds_exactly() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let burst = 60;
    let edge = edge("edge-a", intake.port, store.port, fleet_config(burst, 5));
    let url = edge.url("/webhooks/gh");
    let total = 240;
    let started = Instant::now();
    let answers = concurrently(32, total, move |i| {
        request(
            "POST",
            &url,
            &[("x-github-delivery", &format!("batch-{i}"))],
            b"{}",
            Duration::from_secs(10),
        )
        .map(|r| (r.status, r.text()))
        .unwrap_or((0, String::new()))
    });
    let elapsed_s = started.elapsed().as_secs();
    let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 429),
        "{statuses:?}\n{}",
        edge.log_tail()
    );
    let admitted = statuses.iter().filter(|s| **s == 201).count() as u64;
    assert!(
        admitted >= burst && admitted <= burst + elapsed_s + 1,
        "admitted {admitted} of {total} with burst {burst} over {elapsed_s} s"
    );
    assert_eq!(edge.stat("ankusa_fleet_fallback_total"), 0.0);
    // Each admitted hook reached the upstream once, under its own id.
    let ids: HashSet<String> = answers
        .iter()
        .filter(|a| a.0 == 201)
        .filter_map(|a| serde_json::from_str::<serde_json::Value>(&a.1).ok())
        .filter_map(|v| v["id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(ids.len() as u64, admitted);
    assert_eq!(intake.hooks().len() as u64, admitted);
    let (calls, hits) = calls_and_hits(&store);
    assert_eq!(hits, total as f64, "every hook reached the store once");
    assert!(
        calls < hits,
        "{calls} store calls for {hits} hooks: nothing was batched"
    );
    assert!(
        store_metric(
            &store,
            r#"ankusa_store_requests_total{endpoint="hits",result="ok"}"#
        ) >= 1.0
    );
}

#[test]
fn concurrent_copies_of_one_delivery_pass_once_and_the_rest_are_409() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start_obeying();
    let edge = edge("edge-a", intake.port, store.port, fleet_config(1000, 5));
    let url = edge.url("/webhooks/gh");
    // The copy that passes is slow upstream, so its claim stays pending
    // while every other copy is answered.
    let answers = concurrently(32, 96, move |i| {
        request(
            "POST",
            &url,
            &[
                ("x-github-delivery", &format!("same-{}", i % 3)),
                ("x-intake-delay-ms", "1500"),
            ],
            b"{}",
            Duration::from_secs(10),
        )
        .map(|r| r.status)
        .unwrap_or(0)
    });
    let passed = answers.iter().filter(|s| **s == 201).count();
    let pending = answers.iter().filter(|s| **s == 409).count();
    assert_eq!(
        (passed, pending),
        (3, 93),
        "{answers:?}\n{}",
        edge.log_tail()
    );
    assert_eq!(intake.hooks().len(), 3);
    assert_eq!(edge.stat("ankusa_fleet_fallback_total"), 0.0);
    let (calls, hits) = calls_and_hits(&store);
    assert_eq!(hits, 96.0);
    assert!(calls < hits, "{calls} store calls for {hits} hooks");
}

#[test]
fn a_lone_hook_goes_alone_and_carries_the_settles_held_before_it() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    // One worker, whose held settles wait up to a minute for a hit call to
    // carry them (a worker carries only its own).
    let mut spec = EdgeSpec::new(
        "edge-a",
        intake.port,
        store.port,
        fleet_config(1000, 60_000),
    );
    spec.concurrency = 1;
    let edge = Edge::start(spec);
    for i in 0..5 {
        let r = deliver(&edge, "/webhooks/gh", &format!("lone-{i}"));
        assert_eq!(r.status, 201, "{}", r.text());
    }
    let single = store_metric(
        &store,
        r#"ankusa_store_requests_total{endpoint="hit",result="ok"}"#,
    );
    let batched = store_metric(
        &store,
        r#"ankusa_store_requests_total{endpoint="hits",result="ok"}"#,
    );
    // The first goes on the single path; each later one carries the
    // promote of the one before, as a batch of one hit.
    assert_eq!((single, batched), (1.0, 4.0));
    let (calls, hits) = calls_and_hits(&store);
    assert_eq!((calls, hits), (5.0, 5.0));
    for i in 0..4 {
        let key = format!("lone-{i}");
        assert!(claim_value(&redis, &key).starts_with("c:"), "{key}");
    }
    assert_eq!(edge.stat("ankusa_fleet_fallback_total"), 0.0);
}

#[test]
fn a_store_that_fails_mid_batch_leaves_every_hook_answered_from_the_node() {
    for fault in [Fault::Garbage, Fault::Blackhole] {
        let fake = FakeStore::start(fault);
        let intake = Intake::start();
        let mut config = fleet_config(1000, 5);
        config["fleet"]["timeout_ms"] = serde_json::json!(200);
        // Keep calling the store throughout: every hook meets the fault.
        config["fleet"]["breaker_min_calls"] = serde_json::json!(1_000_000);
        let edge = edge("edge-a", intake.port, fake.port, config);
        let url = edge.url("/webhooks/gh");
        let total = 96;
        let answers = concurrently(32, total, move |i| {
            request(
                "POST",
                &url,
                &[("x-github-delivery", &format!("fail-{i}"))],
                b"{}",
                Duration::from_secs(10),
            )
            .map(|r| r.status)
            .unwrap_or(0)
        });
        assert!(
            answers.iter().all(|s| *s == 201),
            "{fault:?}: {answers:?}\n{}",
            edge.log_tail()
        );
        assert_eq!(
            edge.stat("ankusa_fleet_fallback_total"),
            total as f64,
            "{fault:?}"
        );
        assert_eq!(intake.hooks().len(), total, "{fault:?}");
        assert!(
            fake.hits() < total as u64,
            "{fault:?}: {} hit calls for {total} hooks",
            fake.hits()
        );
    }
}

#[test]
fn settles_ride_on_batched_hit_calls_and_every_claim_is_committed() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let edge = edge("edge-a", intake.port, store.port, fleet_config(100_000, 5));
    let url = edge.url("/webhooks/gh");
    let total = 300;
    let statuses = concurrently(32, total, move |i| {
        request(
            "POST",
            &url,
            &[("x-github-delivery", &format!("ride-{i}"))],
            b"{}",
            Duration::from_secs(10),
        )
        .map(|r| r.status)
        .unwrap_or(0)
    });
    assert!(statuses.iter().all(|s| *s == 201), "{statuses:?}");
    let promoted = r#"ankusa_store_settle_ops_total{op="promote"}"#;
    assert!(
        eventually(Duration::from_secs(10), || store_metric(&store, promoted)
            == total as f64),
        "{} of {total} claims promoted",
        store_metric(&store, promoted)
    );
    for i in [0, total / 2, total - 1] {
        let value = claim_value(&redis, &format!("ride-{i}"));
        assert!(value.starts_with("c:"), "ride-{i}: {value:?}");
    }
    // Those the settle endpoint carried are fewer: the rest rode on hit calls.
    let alone = store_metric(&store, "ankusa_store_settle_batch_ops_sum");
    assert!(
        alone < total as f64,
        "{alone} of {total} promotions went on /v1/settle: none rode on a hit call"
    );
    assert_eq!(edge.stat("ankusa_fleet_settle_dropped_total"), 0.0);
}

/// A hook whose sender goes away while the batched call carrying its hit is
/// in flight releases the claim that call wrote: a redelivery is admitted at
/// once, not told 409 until `fleet.pending_ttl_ms` (30 s here).
#[test]
fn a_sender_gone_while_its_batched_call_is_in_flight_releases_the_claim() {
    use ankusa_testkit::fault::{FaultProxy, Mode};
    use std::io::Write;
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    // The store runs each call at once; its answer reaches the edge 400 ms
    // later, so each call stays in flight that long after its claim exists.
    let proxy = FaultProxy::start(store.port);
    proxy.set_mode(Mode::DelayResponse(Duration::from_millis(400)));
    let intake = Intake::start();
    let mut config = fleet_config(100, 5);
    config["fleet"]["timeout_ms"] = serde_json::json!(2_000);
    config["fleet"]["pending_ttl_ms"] = serde_json::json!(30_000);
    // One worker: both hooks' connections land on the same worker, so the
    // second finds the first's call in flight.
    let mut spec = ankusa_testkit::envoy::EdgeSpec::new("edge-a", intake.port, proxy.port, config);
    spec.concurrency = 1;
    let edge = ankusa_testkit::envoy::Edge::start(spec);
    let send = |delivery: &str| {
        let mut conn =
            std::net::TcpStream::connect(("127.0.0.1", edge.spec.listen_port)).expect("connect");
        let head = format!(
            "POST /webhooks/gh HTTP/1.1\r\nhost: x\r\nx-github-delivery: {delivery}\r\n\
             content-length: 2\r\n\r\n{{}}"
        );
        conn.write_all(head.as_bytes()).expect("send");
        conn
    };
    // The first hook's own call is in flight: the second waits for it, then
    // leaves on the call the worker's root sends.
    let first = send("lead-1");
    assert!(
        eventually(Duration::from_secs(10), || redis
            .cli(&["EXISTS", &claim_key("lead-1")])
            == "1"),
        "the first hook's call never reached the store"
    );
    let sent = Instant::now();
    let second = send("gone-b");
    assert!(
        eventually(Duration::from_secs(10), || claim_value(&redis, "gone-b")
            .starts_with("p:")),
        "the second hook's call never reached the store\n{}",
        edge.log_tail()
    );
    // It waited for the first call's answer (held 400 ms): it rode the
    // worker's next call, not a call of its own.
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(200),
        "the second hook's hit reached the store after {waited:?}: it did not wait for the call in flight"
    );
    // Its call is in flight (the answer held 400 ms): the sender leaves.
    drop(second);
    assert!(
        eventually(Duration::from_secs(10), || redis
            .cli(&["EXISTS", &claim_key("gone-b")])
            == "0"),
        "the claim outlived its sender: {}\n{}",
        claim_value(&redis, "gone-b"),
        edge.log_tail()
    );
    assert_eq!(
        deliver(&edge, "/webhooks/gh", "gone-b").status,
        201,
        "the redelivery is admitted"
    );
    drop(first);
}
