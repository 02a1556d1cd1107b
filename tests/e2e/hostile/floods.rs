//! Connection floods with the descriptor limits of the fleet that found them
//! (issue 35): 1 100 slow-header connections at an edge allowed 1 024 open
//! files, which stopped it for over 60 s; 300 idle h2c connections with no
//! token at a store allowed 256, which then answered no edge until they
//! closed. Each flood is bounded in count and time, on loopback. The figures
//! go to `hostile-floods.md` (RELIABILITY.md's hostile-input section).

use super::save;
use ankusa_core::verify::{body_mac, Encoding};
use ankusa_testkit::envoy::{fleet_filter_config, Edge, EdgeSpec};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The edge's descriptor limit in the issue, and the slow-header connections
/// that stopped it: more than the bootstrap's listener cap (768) and than
/// the descriptors themselves.
const EDGE_DESCRIPTORS: u64 = 1024;
const SLOW_HEADERS: usize = 1100;
/// The store's descriptor limit in the issue, and the idle h2c connections.
const STORE_DESCRIPTORS: u64 = 256;
const IDLE_H2C: usize = 300;

const SECRET: &str = "floods-signing-secret";
const H2C_OPENING: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// Sets the open-file limit (soft and hard) of process `pid` with util-linux's
/// `prlimit`: lowering another process's, or raising this one's soft limit
/// up to its hard one.
fn set_descriptor_limit(pid: u32, limit: &str) {
    let out = Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--nofile={limit}")])
        .output()
        .expect("prlimit (util-linux) runs");
    assert!(
        out.status.success(),
        "prlimit --pid {pid} --nofile={limit}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// This process's (soft, hard) open-file limits, from /proc.
fn own_descriptor_limits() -> (u64, u64) {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or_default();
    let mut numbers = line.split_whitespace().filter_map(|w| {
        w.parse::<u64>()
            .ok()
            .or((w == "unlimited").then_some(u64::MAX))
    });
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// The flood needs its sockets and the test's own: the soft limit is raised
/// to the hard one when it is lower than `need`.
fn allow_own_descriptors(need: u64) {
    let (soft, hard) = own_descriptor_limits();
    if soft < need {
        assert!(
            hard >= need,
            "this test opens {need} sockets; the hard open-file limit is {hard}"
        );
        set_descriptor_limit(std::process::id(), &format!("{hard}:"));
    }
}

/// A signed GitHub delivery of `id` to `/webhooks/acme/signed`.
fn signed(id: &str, keep_alive: bool) -> Vec<u8> {
    let body = format!(r#"{{"zen":"{id}"}}"#);
    let signature = body_mac::sign(SECRET.as_bytes(), "sha256=", Encoding::Hex, body.as_bytes());
    let connection = if keep_alive { "keep-alive" } else { "close" };
    format!(
        "POST /webhooks/acme/signed HTTP/1.1\r\nhost: edge\r\nconnection: {connection}\r\n\
         content-type: application/json\r\nx-github-delivery: {id}\r\n\
         x-hub-signature-256: {signature}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one answer's status off `stream` (head and a `content-length` body).
fn status_of(stream: &mut TcpStream) -> Option<u16> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 2048];
    loop {
        let n = stream.read(&mut buf).ok().filter(|n| *n > 0)?;
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen).into_owned();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length = text[..end]
            .lines()
            .find_map(|l| {
                let l = l.to_ascii_lowercase();
                l.strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            })
            .unwrap_or(0);
        if seen.len() >= end + 4 + length {
            return text.split_whitespace().nth(1)?.parse().ok();
        }
    }
}

/// One delivery on a new connection, as a provider makes it: tried again
/// after 100 ms whenever the connection is refused, reset or closed with no
/// answer, for at most `patience`. The status and how many tries it took.
fn deliver(port: u16, id: &str, patience: Duration) -> (Option<u16>, u32) {
    let until = Instant::now() + patience;
    let mut tries = 0;
    while Instant::now() < until {
        tries += 1;
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            if s.write_all(&signed(id, false)).is_ok() {
                if let Some(status) = status_of(&mut s) {
                    return (Some(status), tries);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    (None, tries)
}

/// One of Envoy's own stats by its dotted name (`/stats`), 0 if absent.
fn envoy_stat(edge: &Edge, name: &str) -> f64 {
    let text = ankusa_testkit::http::get(&edge.admin_url(&format!("/stats?filter=^{name}$")))
        .map(|r| r.text())
        .unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

fn signed_config() -> serde_json::Value {
    let mut config = fleet_filter_config();
    config["sources"]["signed"] = serde_json::json!({
        "tenant": "acme", "dedupe": "github",
        "verify": {"scheme": "github", "secret_env": "ANKUSA_T_FLOODS"}
    });
    config["rate_limits"]["tenants"]["acme"] = serde_json::json!({"rate": 100000, "burst": 100000});
    config["fleet"]["timeout_ms"] = 1000.into();
    config
}

/// 1 100 connections each send half a request head, then a byte a second,
/// at an edge allowed 1 024 open files. Before the bootstrap bounded
/// senders, Envoy took them until it had no descriptor left (for its own
/// connections to the intake and the store either), kept them while they
/// trickled, and answered no new delivery. Now its listener takes at most
/// 768 (a connection over that is closed at once), each slow head is cut at
/// `request_headers_timeout` (10 s, answered 408), and the admin ignores the
/// cap. Signed deliveries on a connection opened before the flood are
/// answered throughout; each on a new connection is answered once a place
/// is free, at most about the header timeout later.
#[test]
fn slow_header_connections_do_not_stop_an_edge() {
    allow_own_descriptors(SLOW_HEADERS as u64 + 512);
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let mut spec = EdgeSpec::new("edge-floods", intake.port, store.port, signed_config());
    spec.vm_env = vec![("ANKUSA_T_FLOODS".into(), SECRET.into())];
    let edge = Edge::start(spec);
    let port = edge.spec.listen_port;
    set_descriptor_limit(
        edge.proc.pid(),
        &format!("{EDGE_DESCRIPTORS}:{EDGE_DESCRIPTORS}"),
    );
    // A sender's keep-alive connection, open before the flood.
    let mut kept = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    kept.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    kept.write_all(&signed("floods-warm", true)).expect("write");
    assert_eq!(status_of(&mut kept), Some(201), "the warm-up delivery");

    let flood_started = Instant::now();
    let held = Mutex::new(
        (0..SLOW_HEADERS)
            .filter_map(|_| {
                let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
                s.set_nonblocking(true).ok()?;
                let _ =
                    s.write_all(b"POST /webhooks/acme/signed HTTP/1.1\r\nhost: edge\r\nx-slow: ");
                Some(s)
            })
            .collect::<Vec<_>>(),
    );
    let opened = held.lock().map(|h| h.len()).unwrap_or(0);
    let stop = AtomicBool::new(false);
    let mut kept_answers = Vec::new();
    let mut deliveries = Vec::new();
    let mut admin_answered = 0;
    std::thread::scope(|s| {
        // The slowloris: a byte a second on every connection still open.
        s.spawn(|| {
            while !stop.load(Ordering::SeqCst) {
                if let Ok(mut held) = held.lock() {
                    held.retain_mut(|c| match c.write(b"a") {
                        Ok(_) => true,
                        Err(e) => e.kind() == ErrorKind::WouldBlock,
                    });
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        for i in 0..20 {
            let id = format!("floods-new-{i}");
            let started = Instant::now();
            let (status, tries) = deliver(port, &id, Duration::from_secs(40));
            deliveries.push((status, tries, started.elapsed()));
            if status.is_none() {
                break; // the edge is stopped: no need to wait 40 s more each
            }
            let kept_id = format!("floods-kept-{i}");
            let answer = kept
                .write_all(&signed(&kept_id, true))
                .ok()
                .and_then(|()| status_of(&mut kept));
            kept_answers.push(answer);
            if ankusa_testkit::http::get(&edge.admin_url("/ready")).is_ok_and(|r| r.status == 200) {
                admin_answered += 1;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        stop.store(true, Ordering::SeqCst);
    });
    let took = flood_started.elapsed();
    let stat = |name: &str| envoy_stat(&edge, name);
    let header_timeouts = stat("http.webhooks.downstream_rq_header_timeout");
    let overflows = stat(&format!("listener.127.0.0.1_{port}.downstream_cx_overflow"));
    let answered = deliveries
        .iter()
        .filter(|(s, _, _)| *s == Some(201))
        .count();
    let longest = deliveries
        .iter()
        .map(|(_, _, t)| *t)
        .max()
        .unwrap_or_default();
    let retried = deliveries.iter().filter(|(_, tries, _)| *tries > 1).count();
    let kept_ok = kept_answers.iter().filter(|a| **a == Some(201)).count();
    let line = format!(
        "| {SLOW_HEADERS} slow-header HTTP/1.1 connections (half a head, then a byte a second) at an edge allowed {EDGE_DESCRIPTORS} open files ({opened} connected) | {answered} of {} signed deliveries on new connections answered 201 ({retried} needed more than one connection, the longest {:.1} s); {kept_ok} of {} on a keep-alive connection opened before; the admin answered {admin_answered} of {} times | {header_timeouts:.0} slow heads answered 408 at the 10 s header timeout, {overflows:.0} connections over the listener's cap of 768 closed at once; {:.0} s in all |\n",
        deliveries.len(),
        longest.as_secs_f64(),
        kept_answers.len(),
        deliveries.len(),
        took.as_secs_f64(),
    );
    eprintln!("{line}");
    save("hostile-floods-1-edge.md", &line);
    assert_eq!(answered, deliveries.len(), "{deliveries:?}\n{line}");
    assert_eq!(kept_ok, kept_answers.len(), "{kept_answers:?}\n{line}");
    assert_eq!(admin_answered, deliveries.len(), "{line}");
    assert!(header_timeouts > 0.0 && overflows > 0.0, "{line}");
}

/// 300 h2c connections that open and say nothing, no token, at a store
/// allowed 256 open files, before the edge's first call. Before, they took
/// every descriptor: the edge's connections were never accepted, and every
/// hook fell back to the edge's own answer. Now the store closes the oldest
/// of them for the edge's connection (its limit, from its descriptor limit,
/// is 192), and every hook is decided by the store.
#[test]
fn idle_h2c_connections_at_the_store_leave_the_edges_calls_answered() {
    let redis = Redis::start();
    let store = Store::start_limited(&redis.url(), STORE_DESCRIPTORS);
    assert!(store.wait_ready(Duration::from_secs(10)));
    let intake = Intake::start();
    let flood: Vec<TcpStream> = (0..IDLE_H2C)
        .filter_map(|_| {
            let mut s = TcpStream::connect(("127.0.0.1", store.port)).ok()?;
            let _ = s.write_all(H2C_OPENING);
            Some(s)
        })
        .collect();
    let mut spec = EdgeSpec::new("edge-store-flood", intake.port, store.port, signed_config());
    spec.vm_env = vec![("ANKUSA_T_FLOODS".into(), SECRET.into())];
    let edge = Edge::start(spec);
    let hooks = 20;
    let mut statuses = Vec::new();
    for i in 0..hooks {
        let key = format!("store-flood-{i}");
        let answer = edge.post(
            "/webhooks/acme/gh",
            &[("x-github-delivery", key.as_str())],
            b"{}",
        );
        statuses.push(answer.map(|r| r.status).unwrap_or(0));
    }
    let fallbacks = edge.stat("ankusa_fleet_fallback_total");
    // Hits carried by the store's hit calls, lone (`/v1/hit`) or batched (`/v1/hits`).
    let decided = store.metric("ankusa_store_hits_per_call_sum");
    let shed = store.metric("ankusa_store_connections_closed_total{why=\"limit_unauthenticated\"}");
    let admitted = statuses.iter().filter(|s| **s == 201).count();
    let line = format!(
        "| {IDLE_H2C} idle h2c connections (an opening, then nothing; no token) at a store allowed {STORE_DESCRIPTORS} open files, before the edge's first call ({} connected) | {admitted} of {hooks} hooks admitted, {decided:.0} decided by the store, {fallbacks:.0} fell back | the store (its limit: 256 descriptors less 64, 192 connections) closed {shed:.0} unauthenticated connections to make room |\n",
        flood.len()
    );
    eprintln!("{line}");
    save("hostile-floods-2-store.md", &line);
    assert_eq!(admitted, hooks, "{statuses:?}\n{line}");
    assert_eq!(fallbacks, 0.0, "{line}\n{}", store.proc.log_tail());
    assert!(decided >= hooks as f64, "{line}");
    drop(flood);
}
