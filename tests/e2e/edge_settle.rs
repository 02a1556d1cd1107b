//! Settling claims off the request path: every claim an edge makes ends
//! committed or released in Redis, in batches, and a lost settle never loses a hook.

use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use serde_json::json;
use std::time::Duration;

fn roomy(settle_interval_ms: u64) -> serde_json::Value {
    let mut config = fleet_config(100_000, settle_interval_ms);
    config["rate_limits"]["tenants"]["acme"] = json!({"rate": 100_000, "burst": 100_000});
    config
}

fn settle_calls(store: &Store) -> f64 {
    metric_sum(
        &store.url_of("/metrics"),
        "ankusa_store_requests_total",
        r#"endpoint="settle""#,
    )
}

#[test]
fn a_thousand_hooks_from_fifty_clients_all_end_committed_in_few_batches() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let edge = edge("edge-settle", intake.port, store.port, roomy(50));
    // One hook first, committed, so the burst meets an edge whose store
    // cluster has its host: on a loaded machine the first calls can find
    // none yet ("the store cluster took no call") and go unclaimed.
    let warm = deliver(&edge, "/webhooks/gh", "many-warm-up");
    assert_eq!(warm.status, 201, "{}", warm.text());
    assert!(
        eventually(Duration::from_secs(20), || claim_value(
            &redis,
            "many-warm-up"
        )
        .starts_with("c:")),
        "the warm-up hook was never committed:\n{}",
        edge.log_tail()
    );
    let url = edge.url("/webhooks/gh");
    let answers = concurrently(50, 1_000, move |i| {
        let r = ankusa_testkit::http::request(
            "POST",
            &url,
            &[("x-github-delivery", &format!("many-{i}"))],
            b"{}",
            Duration::from_secs(20),
        )
        .expect("edge answers");
        (
            r.status,
            r.json()["id"].as_str().unwrap_or_default().to_string(),
        )
    });
    assert!(
        answers.iter().all(|(s, _)| *s == 201),
        "every hook admitted"
    );
    let committed = |i: usize| claim_value(&redis, &format!("many-{i}"));
    let all_committed = eventually(Duration::from_secs(30), || {
        (0..1_000)
            .step_by(50)
            .all(|i| committed(i).starts_with("c:"))
    });
    assert!(all_committed, "claims still pending:\n{}", edge.log_tail());
    for (i, (_, id)) in answers.iter().enumerate() {
        assert_eq!(committed(i), format!("c:{id}"), "claim of hook {i}");
    }
    let calls = settle_calls(&store);
    eprintln!("settle callouts for 1000 hooks: {calls}");
    assert!(
        (1.0..=200.0).contains(&calls),
        "{calls} settle callouts for 1000 hooks"
    );
    assert_eq!(edge.stat("ankusa_fleet_settle_dropped_total"), 0.0);
    assert_eq!(edge.stat("ankusa_fleet_settle_queue_depth"), 0.0);
}

#[test]
fn an_upstream_failure_releases_the_claim_and_the_retry_is_admitted() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start_obeying();
    let edge = edge("edge-release", intake.port, store.port, roomy(5));
    let failed = edge
        .post(
            "/webhooks/gh",
            &[("x-github-delivery", "fail-1"), ("x-intake-status", "500")],
            b"{}",
        )
        .unwrap();
    assert_eq!(failed.status, 500);
    assert!(
        eventually(Duration::from_secs(10), || redis
            .cli(&["EXISTS", &claim_key("fail-1")])
            == "0"),
        "the claim was never released: {}",
        claim_value(&redis, "fail-1")
    );
    let retry = deliver(&edge, "/webhooks/gh", "fail-1");
    assert_eq!(retry.status, 201, "{}", retry.text());
    let hooks = intake.hooks();
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0]["event_key"], "fail-1");
}

#[test]
fn an_upstream_duplicate_commits_the_claim_under_the_older_id() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    // The upstream already holds this event (stored before the fleet knew it).
    let older = ankusa_testkit::http::request(
        "POST",
        &intake.url(),
        &[
            ("x-ankusa-tenant", "acme"),
            ("x-ankusa-source", "gh"),
            ("x-ankusa-event-key", "own-1"),
        ],
        b"{}",
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(older.status, 201);
    let older_id = older.json()["id"].as_str().unwrap().to_string();
    let edge = edge("edge-own-dup", intake.port, store.port, roomy(5));
    let r = deliver(&edge, "/webhooks/gh", "own-1");
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(
        r.json()["id"],
        older_id.as_str(),
        "the upstream's answer passes through"
    );
    let expected = format!("c:{older_id}");
    assert!(
        eventually(Duration::from_secs(10), || claim_value(&redis, "own-1")
            == expected),
        "claim is {} not {expected}",
        claim_value(&redis, "own-1")
    );
}

#[test]
fn a_claim_held_by_a_killed_edge_expires_and_the_retry_is_admitted() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start_obeying();
    let mut config = roomy(5);
    config["fleet"]["pending_ttl_ms"] = json!(2_000);
    let mut a = edge("edge-doomed", intake.port, store.port, config.clone());
    let b = edge("edge-survivor", intake.port, store.port, config);
    let slow_url = a.url("/webhooks/gh");
    let slow = std::thread::spawn(move || {
        ankusa_testkit::http::request(
            "POST",
            &slow_url,
            &[
                ("x-github-delivery", "orphan-1"),
                ("x-intake-delay-ms", "3000"),
                ("x-intake-status", "503"),
            ],
            b"{}",
            Duration::from_secs(20),
        )
    });
    assert!(
        eventually(Duration::from_secs(10), || claim_value(&redis, "orphan-1")
            .starts_with("p:")),
        "the doomed edge never claimed the key"
    );
    a.proc.kill();
    let _ = slow.join();
    let pending = deliver(&b, "/webhooks/gh", "orphan-1");
    assert_eq!(
        pending.status,
        409,
        "still pending right after the kill: {}",
        pending.text()
    );
    let admitted = eventually(Duration::from_secs(15), || {
        let r = deliver(&b, "/webhooks/gh", "orphan-1");
        assert!(
            r.status == 201 || r.status == 409,
            "{} {}",
            r.status,
            r.text()
        );
        r.status == 201
    });
    assert!(admitted, "the orphaned claim never expired");
    assert!(intake.hooks().iter().any(|h| h["event_key"] == "orphan-1"));
}

#[test]
fn a_full_queue_drops_and_counts_settles_but_loses_no_hook() {
    let redis = Redis::start();
    let mut store = Store::start(&redis.url());
    let intake = Intake::start();
    // Every settle is a batch's worth (settle_batch_max 1), so it goes to
    // the node's queue at once instead of waiting for a hit call to carry
    // it. The first takes the drainer's node-wide lease; the next batch may
    // leave a minute later, so meanwhile settles pile up in a queue of 10.
    let mut config = roomy(60_000);
    config["fleet"]["settle_queue_max"] = json!(10);
    config["fleet"]["settle_batch_max"] = json!(1);
    let edge = edge("edge-overflow", intake.port, store.port, config);
    let first = deliver(&edge, "/webhooks/gh", "flood-first");
    assert_eq!(first.status, 201);
    assert!(
        eventually(Duration::from_secs(10), || claim_value(
            &redis,
            "flood-first"
        )
        .starts_with("c:")),
        "the first settle never left"
    );
    for i in 0..30 {
        let r = deliver(&edge, "/webhooks/gh", &format!("flood-{i}"));
        assert_eq!(r.status, 201, "{}", r.text());
    }
    // 10 fit, 20 are dropped.
    assert!(
        eventually(Duration::from_secs(5), || edge
            .stat("ankusa_fleet_settle_dropped_total")
            == 20.0),
        "dropped {}",
        edge.stat("ankusa_fleet_settle_dropped_total")
    );
    assert_eq!(edge.stat("ankusa_fleet_settle_queue_depth"), 10.0);
    // The store goes away: hooks keep being admitted.
    store.proc.stop(Duration::from_secs(5));
    for i in 30..40 {
        let r = deliver(&edge, "/webhooks/gh", &format!("flood-{i}"));
        assert_eq!(r.status, 201, "{}", r.text());
    }
    assert_eq!(intake.hooks().len(), 41, "no hook lost");
}

#[test]
fn settles_are_held_while_the_breaker_is_open_and_sent_once_it_closes() {
    let redis = Redis::start();
    let mut store = Store::start(&redis.url());
    let port = store.port;
    let intake = Intake::start_obeying();
    let mut config = roomy(5);
    config["fleet"]["breaker_min_calls"] = json!(5);
    config["fleet"]["breaker_failure_rate"] = json!(0.5);
    config["fleet"]["breaker_window_ms"] = json!(60_000);
    config["fleet"]["breaker_open_ms"] = json!(1_000);
    let edge = edge("edge-held", intake.port, store.port, config);
    // Four hooks claim their keys, then sit upstream for 6 s.
    let slow: Vec<_> = (0..4)
        .map(|i| {
            let url = edge.url("/webhooks/gh");
            std::thread::spawn(move || {
                ankusa_testkit::http::request(
                    "POST",
                    &url,
                    &[
                        ("x-github-delivery", &format!("held-{i}")),
                        ("x-intake-delay-ms", "6000"),
                    ],
                    b"{}",
                    Duration::from_secs(30),
                )
            })
        })
        .collect();
    let pending = |i: usize| claim_value(&redis, &format!("held-{i}"));
    assert!(eventually(Duration::from_secs(10), || (0..4)
        .all(|i| pending(i).starts_with("p:"))));
    // The store goes away and failed calls open the breaker.
    store.proc.stop(Duration::from_secs(5));
    let opened = (0..20).any(|i| {
        assert_eq!(
            deliver(&edge, "/webhooks/gh", &format!("down-{i}")).status,
            201
        );
        edge.stat("ankusa_fleet_breaker_state") == 1.0
    });
    assert!(opened, "the breaker never opened");
    // The test's premise: the four come back only once the breaker is open
    // (had they come back before, their promotes would have met the dead
    // store, been retried and dropped).
    assert!(
        slow.iter().all(|t| !t.is_finished()),
        "the held hooks came back before the breaker opened"
    );
    for t in slow {
        assert_eq!(t.join().unwrap().expect("answered").status, 201);
    }
    // Their promotes wait in the queue instead of going to a sick store.
    assert!(
        eventually(Duration::from_secs(5), || edge
            .stat("ankusa_fleet_settle_queue_depth")
            == 4.0),
        "queue depth {}, breaker {}, batches failed {} dropped {}, claims {:?}\n{}",
        edge.stat("ankusa_fleet_settle_queue_depth"),
        edge.stat("ankusa_fleet_breaker_state"),
        edge.stat(r#"ankusa_fleet_settle_batches_total{result="failed"}"#),
        edge.stat("ankusa_fleet_settle_dropped_total"),
        (0..4).map(pending).collect::<Vec<_>>(),
        edge.log_tail()
    );
    assert_eq!(
        edge.stat(r#"ankusa_fleet_settle_batches_total{result="failed"}"#),
        0.0
    );
    // The store is back; a probe closes the breaker and the held promotes land.
    let _store = Store::start_on(port, &redis.url(), &[]);
    let closed = eventually(Duration::from_secs(15), || {
        assert_eq!(
            deliver(&edge, "/webhooks/gh", &format!("up-{}", free_port())).status,
            201
        );
        edge.stat("ankusa_fleet_breaker_state") == 0.0
    });
    assert!(closed, "the breaker never closed:\n{}", edge.log_tail());
    assert!(
        eventually(Duration::from_secs(10), || (0..4)
            .all(|i| pending(i).starts_with("c:"))),
        "held promotes never landed: {:?}",
        (0..4).map(pending).collect::<Vec<_>>()
    );
}

#[test]
fn a_sender_that_goes_away_before_the_upstream_answers_releases_the_claim() {
    use std::io::Write;
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start_obeying();
    let edge = edge("edge-gone", intake.port, store.port, roomy(5));
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", edge.spec.listen_port)).unwrap();
    conn.write_all(
        b"POST /webhooks/gh HTTP/1.1\r\nhost: x\r\nx-github-delivery: gone-1\r\nx-intake-delay-ms: 2000\r\nx-intake-status: 503\r\ncontent-length: 2\r\n\r\n{}",
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || claim_value(&redis, "gone-1")
            .starts_with("p:")),
        "never claimed"
    );
    drop(conn);
    assert!(
        eventually(Duration::from_secs(10), || redis
            .cli(&["EXISTS", &claim_key("gone-1")])
            == "0"),
        "the claim outlived its sender: {}",
        claim_value(&redis, "gone-1")
    );
    assert_eq!(
        deliver(&edge, "/webhooks/gh", "gone-1").status,
        201,
        "the retry is admitted"
    );
}

/// An upstream that answers every request 201 with an `x-ankusa-hook-id`
/// that isn't UTF-8 (HTTP allows such obs-text bytes in a value).
fn upstream_with_binary_hook_id() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut buf = [0u8; 4096];
                // Read the head, then the body its content-length announces.
                let complete = |seen: &[u8]| {
                    let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
                        return false;
                    };
                    let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    seen.len() >= end + 4 + length
                };
                while !complete(&seen) {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let mut answer =
                    b"HTTP/1.1 201 Created\r\nx-ankusa-hook-id: id-\xff\xfe\r\n".to_vec();
                answer.extend_from_slice(
                    b"content-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
                );
                let _ = stream.write_all(&answer);
            });
        }
    });
    port
}

/// Regression: the SDK's string getter panics on a header value that isn't
/// UTF-8, which took the worker's VM down when an upstream answered with one.
#[test]
fn an_upstream_hook_id_that_is_not_utf8_is_ignored_and_the_claim_committed_under_ours() {
    let redis = Redis::start();
    // This upstream sends no receipt: the store commits without one.
    let store = Store::start_without_receipts(&redis.url());
    let upstream = upstream_with_binary_hook_id();
    let edge = edge("edge-binary-id", upstream, store.port, roomy(5));
    let r = deliver(&edge, "/webhooks/gh", "binary-1");
    assert_eq!(r.status, 201, "{}", edge.log_tail());
    let ours = edge.log_tail();
    let committed = || claim_value(&redis, "binary-1");
    assert!(
        eventually(Duration::from_secs(10), || committed().starts_with("c:")),
        "claim is {:?}:\n{ours}",
        committed()
    );
    // The VM still answers: the same event is now a duplicate of the committed id.
    let again = deliver(&edge, "/webhooks/gh", "binary-1");
    assert_eq!(again.status, 201, "{}", edge.log_tail());
    assert_eq!(again.json()["duplicate"], true, "{}", again.text());
    assert_eq!(
        committed(),
        format!("c:{}", again.json()["id"].as_str().unwrap_or_default())
    );
    assert!(!edge.log().contains("panicked"), "{}", edge.log_tail());
}
