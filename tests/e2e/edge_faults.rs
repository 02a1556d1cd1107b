//! Faults between the edge and the store that the other edge tests don't
//! reach: a store cluster with no healthy host, and a store that takes hits
//! but refuses every settle batch. Neither may cost a hook.

use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::http;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::{bind_free, free_port};
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The store cluster's endpoint list in the rendered bootstrap, emptied.
fn without_store_hosts(bootstrap: String, store_port: u16) -> String {
    let hosts = format!(
        "      cluster_name: ankusa_store\n      endpoints:\n      - lb_endpoints:\n        - endpoint:\n            address:\n              socket_address: {{ address: 127.0.0.1, port_value: {store_port} }}\n"
    );
    assert!(
        bootstrap.contains(&hosts),
        "the template's store cluster changed shape:\n{bootstrap}"
    );
    bootstrap.replace(
        &hosts,
        "      cluster_name: ankusa_store\n      endpoints: []\n",
    )
}

#[test]
fn a_store_cluster_with_no_healthy_host_admits_every_hook_node_local_and_opens_the_breaker() {
    let intake = Intake::start();
    let mut config = fleet_config(1_000, 5);
    config["fleet"]["breaker_min_calls"] = json!(5);
    config["fleet"]["breaker_failure_rate"] = json!(0.5);
    config["fleet"]["breaker_window_ms"] = json!(60_000);
    // No probe within the test: every call after the fifth is skipped.
    config["fleet"]["breaker_open_ms"] = json!(600_000);
    let spec = EdgeSpec::new("edge-nohost", intake.port, free_port(), config);
    let store_port = spec.store_port;
    let edge = Edge::start_with(spec, |b| without_store_hosts(b, store_port));

    for i in 0..12 {
        let r = deliver(&edge, "/webhooks/gh", &format!("nohost-{i}"));
        assert_eq!(r.status, 201, "hook {i}: {}\n{}", r.text(), edge.log_tail());
    }
    assert_eq!(intake.hooks().len(), 12, "no hook lost");
    assert_eq!(edge.stat("ankusa_fleet_fallback_total"), 12.0);
    assert_eq!(
        edge.stat(r#"ankusa_admissions_total{outcome="admitted"}"#),
        12.0
    );
    assert_eq!(edge.stat("ankusa_fleet_breaker_state"), 1.0, "open");
    assert_eq!(
        edge.stat(r#"ankusa_fleet_limiter_degraded{kind="rate_limit"}"#),
        1.0
    );
    let log = edge.log();
    assert!(
        log.contains(
            "fleet breaker Opened { calls: 5, failures: 5 }: the store cluster took no call"
        ),
        "the breaker opened after min_calls failed dispatches:\n{}",
        edge.log_tail()
    );
    // Envoy found no host for exactly the calls made before the breaker
    // opened, and refused them inline: dispatch_http_call itself failed.
    // Those are the 5 hits and the override-list polls sent meanwhile (an
    // open breaker holds the polls too, so neither count moves any more).
    let polls = edge.stat(r#"ankusa_overrides_polls_total{result="failed"}"#);
    assert_eq!(
        edge.stat(r#"ankusa_overrides_polls_total{result="ok"}"#),
        0.0
    );
    assert_eq!(
        edge.stat(r#"envoy_cluster_upstream_cx_none_healthy{envoy_cluster_name="ankusa_store"}"#),
        5.0 + polls
    );
}

/// How the proxy treats `/v1/settle`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SettleFault {
    /// Answers 500.
    Refuse,
    /// Never answers (the edge's call times out).
    Hang,
}

/// A proxy in front of the real store that passes every call through except
/// `/v1/settle`, which fails as told; it counts the settle calls and the
/// operations they carried.
struct SettleBreaker {
    port: u16,
    settle_calls: Arc<AtomicU64>,
    settle_ops: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SettleBreaker {
    fn start(store_port: u16, fault: SettleFault) -> SettleBreaker {
        let listener = bind_free();
        let port = listener.local_addr().expect("the proxy's address").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let settle_calls = Arc::new(AtomicU64::new(0));
        let settle_ops = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (calls, ops, s) = (settle_calls.clone(), settle_ops.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut workers = Vec::new();
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (calls, ops, s) = (calls.clone(), ops.clone(), s.clone());
                        workers.push(std::thread::spawn(move || {
                            serve(stream, store_port, fault, &calls, &ops, &s)
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            for w in workers {
                let _ = w.join();
            }
        });
        SettleBreaker {
            port,
            settle_calls,
            settle_ops,
            stop,
            thread: Some(thread),
        }
    }

    fn calls(&self) -> u64 {
        self.settle_calls.load(Ordering::SeqCst)
    }

    fn ops(&self) -> u64 {
        self.settle_ops.load(Ordering::SeqCst)
    }
}

impl Drop for SettleBreaker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One keep-alive connection from the edge: requests in, answers out.
fn serve(
    mut stream: TcpStream,
    store_port: u16,
    fault: SettleFault,
    calls: &AtomicU64,
    ops: &AtomicU64,
    stop: &AtomicBool,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let mut pending = Vec::new();
    let mut buf = [0u8; 65536];
    while !stop.load(Ordering::SeqCst) {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end]).to_string();
            let mut lines = head.lines();
            let mut first = lines.next().unwrap_or_default().split(' ');
            let (method, path) = (
                first.next().unwrap_or_default().to_string(),
                first.next().unwrap_or_default().to_string(),
            );
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let len: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            if pending.len() < end + 4 + len {
                break;
            }
            let body = pending[end + 4..end + 4 + len].to_vec();
            pending.drain(..end + 4 + len);
            let (status, content_type, answer) = if path == "/v1/settle" {
                calls.fetch_add(1, Ordering::SeqCst);
                let carried = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["ops"].as_array().map(|a| a.len() as u64))
                    .unwrap_or(0);
                ops.fetch_add(carried, Ordering::SeqCst);
                if fault == SettleFault::Hang {
                    continue; // never answered; the edge gives up on its own
                }
                (
                    500,
                    "application/json".to_string(),
                    br#"{"error":"injected"}"#.to_vec(),
                )
            } else {
                let pass: Vec<(&str, &str)> = headers
                    .iter()
                    .filter(|(k, _)| {
                        !matches!(k.as_str(), "host" | "content-length" | "connection")
                    })
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let url = format!("http://127.0.0.1:{store_port}{path}");
                match http::request(&method, &url, &pass, &body, Duration::from_secs(5)) {
                    Ok(r) => (
                        r.status,
                        r.header("content-type").unwrap_or("text/plain").to_string(),
                        r.body,
                    ),
                    Err(_) => (502, "text/plain".to_string(), b"store unreachable".to_vec()),
                }
            };
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
                answer.len()
            );
            let mut out = head.into_bytes();
            out.extend_from_slice(&answer);
            if stream.write_all(&out).is_err() {
                return;
            }
        }
    }
}

/// Fleet scopes, settles every 5 ms, a failed batch retried `retries` times.
/// Every settle is a batch's worth (`settle_batch_max` 1), so it goes to the
/// node's queue and a settle call of its own (the calls the fault breaks)
/// instead of riding on the next hit call.
fn settle_config(retries: u32) -> serde_json::Value {
    let mut config = fleet_config(1_000, 5);
    config["fleet"]["settle_retries"] = json!(retries);
    config["fleet"]["settle_batch_max"] = json!(1);
    config
}

/// Sends `n` hooks tagged `tag`; every one must be admitted. Their ids.
fn send(edge: &Edge, tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let r = deliver(edge, "/webhooks/gh", &format!("{tag}-{i}"));
            assert_eq!(
                r.status,
                201,
                "{tag}-{i}: {}\n{}",
                r.text(),
                edge.log_tail()
            );
            r.json()["id"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

/// Every hook of `ids` is in the intake.
fn assert_stored(intake: &Intake, ids: &[String]) {
    let stored: Vec<String> = intake
        .hooks()
        .iter()
        .map(|h| h["id"].as_str().unwrap_or_default().to_string())
        .collect();
    for id in ids {
        assert!(
            stored.contains(id),
            "hook {id} was acknowledged but not stored"
        );
    }
}

/// Runs `n` hooks through an edge whose settles fail as `fault` says and
/// checks every operation is tried exactly `1 + retries` times, then dropped
/// and counted, with no hook lost and the edge still answering.
fn settles_failing(fault: SettleFault, retries: u32, n: usize) {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let proxy = SettleBreaker::start(store.port, fault);
    let intake = Intake::start();
    let spec = EdgeSpec::new(
        &format!("edge-settle-{fault:?}").to_lowercase(),
        intake.port,
        proxy.port,
        settle_config(retries),
    );
    let edge = Edge::start(spec);
    let ids = send(&edge, "doomed", n);
    assert_stored(&intake, &ids);
    let tries = (1 + u64::from(retries)) * n as u64;
    let dropped = eventually(Duration::from_secs(30), || {
        edge.stat("ankusa_fleet_settle_dropped_total") >= n as f64
    });
    assert!(
        dropped,
        "dropped {} of {n} (the store refused {} ops in {} calls)\n{}",
        edge.stat("ankusa_fleet_settle_dropped_total"),
        proxy.ops(),
        proxy.calls(),
        edge.log_tail()
    );
    // Quiet for a while: nothing dropped is sent again.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(edge.stat("ankusa_fleet_settle_dropped_total"), n as f64);
    assert_eq!(
        proxy.ops(),
        tries,
        "each operation tried once plus {retries} retries"
    );
    let failed = edge.stat(r#"ankusa_fleet_settle_batches_total{result="failed"}"#);
    assert_eq!(failed, proxy.calls() as f64, "every refused batch counted");
    assert!(failed >= f64::from(retries + 1));
    assert_eq!(
        edge.stat(r#"ankusa_fleet_settle_batches_total{result="ok"}"#),
        0.0
    );
    assert_eq!(edge.stat("ankusa_fleet_settle_queue_depth"), 0.0);
    for i in 0..n {
        let claim = claim_value(&redis, &format!("doomed-{i}"));
        assert!(
            !claim.is_empty() && !claim.starts_with("c:"),
            "claim {i} was never promoted, so it stays pending: {claim:?}"
        );
    }
    // Settles never touched the hit path: the edge still answers from the fleet.
    let more = send(&edge, "after", 5);
    assert_stored(&intake, &more);
    assert_eq!(edge.stat("ankusa_fleet_fallback_total"), 0.0);
    let hits = metric_sum(
        &store.url_of("/metrics"),
        "ankusa_store_requests_total",
        r#"endpoint="hit""#,
    );
    assert_eq!(
        hits,
        (n + 5) as f64,
        "every hook was one hit through the proxy"
    );
    eprintln!(
        "{fault:?}: {n} hooks, {} settle calls carrying {} ops, {failed} failed batches counted",
        proxy.calls(),
        proxy.ops()
    );
}

#[test]
fn a_store_refusing_settles_has_each_batch_retried_then_dropped_and_counted() {
    settles_failing(SettleFault::Refuse, 2, 20);
}

#[test]
fn settles_that_time_out_are_retried_then_dropped_and_counted() {
    settles_failing(SettleFault::Hang, 1, 10);
}
