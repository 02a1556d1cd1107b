//! Node scope through real Envoy (2 workers): the node's buckets are one
//! limit however connections spread over workers, and stay bounded in memory.

use ankusa_testkit::envoy;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_tests::edge_support::*;
use std::time::{Duration, Instant};

#[test]
fn a_burst_over_many_connections_admits_exactly_burst_per_node() {
    let intake = Intake::start();
    let burst = 40;
    let edge = edge("edge-burst", intake.port, free_port(), node_config(burst));
    let edge_url = edge.url("/webhooks/gh");
    let started = Instant::now();
    let statuses = concurrently(16, 160, move |i| {
        let r = ankusa_testkit::http::request(
            "POST",
            &edge_url,
            &[("x-github-delivery", &format!("d-{i}"))],
            b"{}",
            Duration::from_secs(10),
        )
        .expect("edge answers");
        (r.status, r.header("retry-after").map(str::to_string))
    });
    let elapsed_s = started.elapsed().as_secs();
    let admitted = statuses.iter().filter(|(s, _)| *s == 201).count() as u64;
    let limited: Vec<_> = statuses.iter().filter(|(s, _)| *s == 429).collect();
    assert_eq!(
        admitted + limited.len() as u64,
        160,
        "every answer is 201 or 429: {statuses:?}"
    );
    // The bucket refills at 1/s: a burst that took s seconds may admit s + 1 more, never 2 × burst.
    assert!(
        admitted >= burst && admitted <= burst + elapsed_s + 1,
        "admitted {admitted} of 160 with burst {burst} over {elapsed_s} s"
    );
    for (_, retry) in &limited {
        let secs: u64 = retry
            .as_deref()
            .expect("429 carries Retry-After")
            .parse()
            .expect("whole seconds");
        assert!(secs >= 1);
    }
    assert_eq!(
        edge.stat(r#"ankusa_admissions_total{outcome="admitted"}"#) as u64,
        admitted,
        "admissions counter"
    );
    assert_eq!(
        intake.hooks().len() as u64,
        admitted,
        "only admitted hooks reach the upstream"
    );

    // Another tenant is unaffected by acme's empty bucket.
    let other = deliver(&edge, "/webhooks/globex/any", "other-1");
    assert_eq!(other.status, 201, "{}", other.text());

    // Retry-After is honoured: after waiting it out, acme is admitted again.
    // The bucket refills at 1/s while the test looks around: spend what came back first.
    let denied = (0..10)
        .map(|i| deliver(&edge, "/webhooks/gh", &format!("late-{i}")))
        .find(|r| r.status == 429)
        .expect("acme is limited again within 10 hooks");
    assert_eq!(denied.json()["error"], "rate_limited");
    let wait: u64 = denied.header("retry-after").unwrap().parse().unwrap();
    std::thread::sleep(Duration::from_secs(wait));
    let retried = deliver(&edge, "/webhooks/gh", "late-retry");
    assert_eq!(retried.status, 201, "{}", retried.text());
}

#[test]
fn forwarded_hooks_carry_id_tenant_source_and_event_key() {
    let intake = Intake::start();
    let edge = edge("edge-headers", intake.port, free_port(), node_config(10));
    let r = edge
        .post(
            "/webhooks/gh",
            &[
                ("x-github-delivery", "abc-1"),
                ("x-ankusa-event-key", "forged"),
                ("x-ankusa-hook-id", "forged-id"),
                ("x-ankusa-tenant", "forged-tenant"),
                ("X-Ankusa-Source", "forged-source"),
            ],
            b"{}",
        )
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 36);
    assert_eq!(&id[14..15], "7", "UUIDv7: {id}");
    let hooks = intake.hooks();
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0]["id"], id.as_str());
    assert_eq!(hooks[0]["tenant"], "acme");
    assert_eq!(hooks[0]["source"], "gh");
    assert_eq!(
        hooks[0]["event_key"], "abc-1",
        "the sender's own x-ankusa-event-key is dropped"
    );
    // The intake refuses a repeated x-ankusa-* header (400): the 201 says
    // each forwarded fact arrived once, the edge's, no sender copy beside it.

    // JSON body rule: Stripe's id.
    let r = edge
        .post(
            "/webhooks/stripe",
            &[("content-type", "application/json")],
            br#"{"id":"evt_9"}"#,
        )
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text());
    assert!(intake.hooks().iter().any(|h| h["event_key"] == "evt_9"));
}

#[test]
fn unknown_sources_bad_tenants_and_big_bodies_are_refused_with_json() {
    let intake = Intake::start();
    let mut config = node_config(10);
    config["max_body_bytes"] = serde_json::json!(100);
    let edge = edge("edge-refuse", intake.port, free_port(), config);
    for path in [
        "/webhooks/nope",
        "/webhooks/bad%20tenant/any",
        "/elsewhere",
        "/webhooks/other/gh",
    ] {
        let r = edge.post(path, &[], b"{}").unwrap();
        assert_eq!(r.status, 404, "{path}: {}", r.text());
        assert_eq!(r.json()["error"], "not_found", "{path}");
    }
    let big = vec![b'x'; 101];
    let r = edge.post("/webhooks/gh", &[], &big).unwrap();
    assert_eq!(r.status, 413, "{}", r.text());
    let r = edge.post("/webhooks/stripe", &[], &big).unwrap();
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(intake.hooks().is_empty());
    assert_eq!(
        edge.stat(r#"ankusa_admissions_total{outcome="not_found"}"#),
        4.0
    );
}

/// Allocated bytes of Envoy's heap, from admin `/memory`.
fn allocated(edge: &envoy::Edge) -> u64 {
    let r = ankusa_testkit::http::get(&edge.admin_url("/memory")).unwrap();
    r.json()["allocated"].as_str().unwrap().parse().unwrap()
}

#[test]
fn ten_thousand_tenant_names_do_not_grow_shared_data_without_bound() {
    let intake = Intake::start_obeying();
    let edge = edge("edge-tenants", intake.port, free_port(), node_config(10));
    let send = |range: std::ops::Range<usize>| {
        let url = edge.url("");
        let answers = concurrently(8, range.len(), move |i| {
            let path = format!("{url}/webhooks/tenant-{}-{}/any", range.start, i);
            // The intake answers without storing: this test is about the edge's memory.
            ankusa_testkit::http::request(
                "POST",
                &path,
                &[("x-intake-status", "200")],
                b"",
                Duration::from_secs(10),
            )
            .map(|r| r.status)
            .unwrap_or(0)
        });
        assert!(
            answers.iter().all(|s| *s == 200),
            "every new tenant admitted"
        );
    };
    send(0..2_000); // warm every slot, connection pool and stat
    let before = allocated(&edge);
    send(2_000..12_000);
    let after = allocated(&edge);
    let growth = after.saturating_sub(before);
    eprintln!("heap growth over 10 000 new tenant names: {growth} bytes");
    // A key per tenant would cost ≥ 100 bytes each (≥ 1 MB for 10 000).
    assert!(
        growth < 1_000_000,
        "heap grew {growth} bytes over 10 000 new tenant names"
    );
}

/// Sends a chunked POST by hand (the testkit client always declares a length).
fn post_chunked(edge: &envoy::Edge, path: &str, chunks: &[&[u8]]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", edge.spec.listen_port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ntransfer-encoding: chunked\r\nx-github-delivery: chunky\r\n\r\n"
    )
    .into_bytes();
    for c in chunks {
        req.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        req.extend_from_slice(c);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    s.write_all(&req).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn body_limits_hold_for_chunked_bodies_and_the_bytes_quota() {
    let intake = Intake::start();
    let mut config = node_config(10);
    config["max_body_bytes"] = serde_json::json!(100);
    config["rate_limits"]["tenants"]["globex"] =
        serde_json::json!({"rate": 1000, "burst": 1000, "bytes_rate": 1, "bytes_burst": 50});
    let edge = edge("edge-bytes", intake.port, free_port(), config);
    let answer = post_chunked(&edge, "/webhooks/gh", &[&[b'x'; 60], &[b'y'; 41]]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let answer = post_chunked(&edge, "/webhooks/gh", &[&[b'x'; 60], &[b'y'; 40]]);
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    // globex may send 50 body bytes at once, refilled at 1 byte/s.
    let too_big = edge.post("/webhooks/globex/any", &[], &[b'z'; 51]).unwrap();
    assert_eq!(
        too_big.status,
        413,
        "over the bytes burst can never pass: {}",
        too_big.text()
    );
    assert_eq!(
        edge.post("/webhooks/globex/any", &[], &[b'z'; 40])
            .unwrap()
            .status,
        201
    );
    let limited = edge.post("/webhooks/globex/any", &[], &[b'z'; 40]).unwrap();
    assert_eq!(limited.status, 429, "{}", limited.text());
    assert_eq!(intake.hooks().len(), 2);
}
