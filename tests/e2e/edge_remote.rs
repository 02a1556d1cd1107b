//! Envoy fetching the filter module by URL and sha256, as `envoy/edge-remote.yaml`
//! ships it: the test's edge is the usual one with that file's `code.remote`
//! block, `failure_policy` and `ankusa_modules` cluster put in, pointed at a
//! module server of the test's on loopback. The right hash gives a working
//! filter; a wrong hash or an unreachable server never lets a hook through
//! unchecked: Envoy stays up, says LIVE, and answers every request 503 itself,
//! and the bootstrap's readiness path (`GET /ankusa/ready`) says 200 only with a
//! working filter. A control edge with `FAIL_OPEN` shows the difference the policy makes.

use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::paths::{filter_wasm, workspace_root};
use ankusa_testkit::ports::free_port;
use ankusa_tests::edge_support::*;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SHIPPED_URI: &str = "http://ankusa-modules/ankusa_filter-0.1.0.wasm";
const SHIPPED_SHA: &str = "0000000000000000000000000000000000000000000000000000000000000000";
const SHIPPED_HOST: &str = "address: ankusa-modules, port_value: 80";

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Serves one file to any GET, on a free loopback port, counting requests.
struct ModuleServer {
    port: u16,
    requests: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl ModuleServer {
    fn start(body: Vec<u8>) -> ModuleServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().unwrap().port();
        let (requests, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (count, done) = (Arc::clone(&requests), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let _ = conn.set_nonblocking(false);
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                count.fetch_add(1, Ordering::Relaxed);
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn
                    .write_all(reply.as_bytes())
                    .and_then(|_| conn.write_all(&body));
            }
        });
        ModuleServer {
            port,
            requests,
            stop,
        }
    }
}

impl Drop for ModuleServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The lines of the block that starts at the line `key` (trimmed) of `text`,
/// up to the next line at its indent or less.
fn block(text: &str, key: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim() == key)
        .unwrap_or_else(|| panic!("no {key} block"));
    let indent = lines[start].len() - lines[start].trim_start().len();
    let end = (start + 1..lines.len())
        .find(|&i| {
            let l = lines[i];
            !l.trim().is_empty() && l.len() - l.trim_start().len() <= indent
        })
        .unwrap_or(lines.len());
    lines[start..end].join("\n") + "\n"
}

/// What the shipped bootstrap adds to the usual edge: its `code:` block, its
/// `failure_policy`, its readiness mapper and its `ankusa_modules` cluster.
struct Shipped {
    code: String,
    policy: String,
    local_reply: String,
    cluster: String,
}

fn shipped() -> Shipped {
    let text = std::fs::read_to_string(workspace_root().join("envoy/edge-remote.yaml")).unwrap();
    let code = block(&text, "code:");
    assert!(
        code.contains("remote:") && code.contains(SHIPPED_URI) && code.contains(SHIPPED_SHA),
        "{code}"
    );
    let policy = text
        .lines()
        .find(|l| l.trim_start().starts_with("failure_policy:"))
        .expect("a failure_policy")
        .trim()
        .to_string();
    let local_reply = block(&text, "local_reply_config:");
    let cluster_at = text
        .find("  - name: ankusa_modules\n")
        .expect("the ankusa_modules cluster");
    let cluster = text[cluster_at..].to_string();
    assert!(cluster.contains(SHIPPED_HOST), "{cluster}");
    Shipped {
        code,
        policy,
        local_reply,
        cluster,
    }
}

/// The test's rendered bootstrap with the shipped remote code, policy and
/// cluster, fetching from 127.0.0.1:`port` and pinned to `sha256`.
fn remote(bootstrap: String, port: u16, sha256: &str, policy: Option<&str>) -> String {
    let shipped = shipped();
    let code = shipped
        .code
        .replace(
            SHIPPED_URI,
            &format!("http://127.0.0.1:{port}/ankusa_filter.wasm"),
        )
        .replace(SHIPPED_SHA, sha256);
    let cluster = shipped.cluster.replace(
        SHIPPED_HOST,
        &format!("address: 127.0.0.1, port_value: {port}"),
    );
    let local = block(&bootstrap, "code:");
    assert!(local.contains("local:"), "{local}");
    let mut out = bootstrap.replacen(&local, &code, 1);
    let prefix = "          stat_prefix: webhooks\n";
    assert!(
        out.contains(prefix),
        "the template's connection manager moved"
    );
    out = out.replacen(prefix, &format!("{prefix}{}", shipped.local_reply), 1);
    let policy_line = out
        .lines()
        .find(|l| l.trim_start().starts_with("failure_policy:"))
        .unwrap()
        .to_string();
    let indent = &policy_line[..policy_line.len() - policy_line.trim_start().len()];
    let policy = policy.map_or(shipped.policy, |p| format!("failure_policy: {p}"));
    out = out.replace(&policy_line, &format!("{indent}{policy}"));
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out + &cluster
}

fn spawn_remote(
    name: &str,
    intake: &Intake,
    port: u16,
    sha256: &str,
    policy: Option<&str>,
) -> Edge {
    let spec = EdgeSpec::new(name, intake.port, free_port(), node_config(100));
    let sha = sha256.to_string();
    let policy = policy.map(str::to_string);
    Edge::spawn_with(spec, move |b| remote(b, port, &sha, policy.as_deref()))
}

/// Over `window`, what a hook sent to the edge gets: each attempt's status, or 0
/// when nothing answers (not listening, connection closed); ending early once
/// `enough` says the answers so far are.
fn attempts_until(edge: &Edge, window: Duration, enough: impl Fn(&[u16]) -> bool) -> Vec<u16> {
    let deadline = Instant::now() + window;
    let mut seen = Vec::new();
    let mut i = 0;
    while Instant::now() < deadline && !enough(&seen) {
        i += 1;
        let status = edge
            .post(
                "/webhooks/acme/gh",
                &[("x-github-delivery", &format!("d-{i}"))],
                b"{}",
            )
            .map_or(0, |r| r.status);
        seen.push(status);
        std::thread::sleep(Duration::from_millis(200));
    }
    seen
}

#[test]
fn the_right_hash_gives_a_working_filter() {
    let wasm = std::fs::read(filter_wasm()).unwrap();
    let server = ModuleServer::start(wasm.clone());
    let intake = Intake::start();
    let mut edge = spawn_remote("edge-remote-ok", &intake, server.port, &hex(&wasm), None);
    edge.wait_ready(Duration::from_secs(30));
    assert!(
        server.requests.load(Ordering::Relaxed) >= 1,
        "the module came from the server"
    );
    let hook = deliver(&edge, "/webhooks/acme/gh", "remote-1");
    assert_eq!(hook.status, 201, "{}", hook.text());
    let stored = intake.hooks();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(
        stored[0]["event_key"], "remote-1",
        "the filter extracted the key: {stored:?}"
    );
    // The filter's own answer, which no upstream gives.
    let unknown = deliver(&edge, "/webhooks/acme/nope", "remote-2");
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["error"], "not_found");
    let ready = ankusa_testkit::http::get(&edge.url("/ankusa/ready")).unwrap();
    assert_eq!((ready.status, ready.text().as_str()), (200, "ready\n"));
    assert_eq!(
        intake.hooks().len(),
        1,
        "the probe never reaches the upstream"
    );
}

#[test]
fn a_wrong_hash_or_no_server_never_serves_a_hook_unchecked() {
    let wasm = std::fs::read(filter_wasm()).unwrap();
    let server = ModuleServer::start(wasm.clone());
    let intake = Intake::start();
    let wrong = hex(b"not the module");
    let dead_port = free_port(); // nothing listens there
    for (name, port) in [
        ("edge-remote-badhash", server.port),
        ("edge-remote-noserver", dead_port),
    ] {
        let sha = if port == server.port {
            wrong.clone()
        } else {
            hex(&wasm)
        };
        let mut edge = spawn_remote(name, &intake, port, &sha, None);
        // Envoy retries the fetch before it gives up and the listener comes
        // up refusing: on a loaded machine that takes longer than a few
        // seconds. Until then a connection is refused (0), never served.
        let seen = attempts_until(&edge, Duration::from_secs(40), |seen| {
            seen.iter().filter(|s| **s == 503).count() >= 10
        });
        let log = edge.log();
        assert!(
            seen.iter().all(|s| *s == 503 || *s == 0),
            "{name}: every hook is refused: {seen:?}\n{}",
            edge.log_tail()
        );
        assert!(
            seen.contains(&503),
            "{name}: the listener serves, refusing: {seen:?}\n{}",
            edge.log_tail()
        );
        assert!(edge.proc.is_running(), "{name}: Envoy stays up");
        let admin_ready = ankusa_testkit::http::get(&edge.admin_url("/ready")).unwrap();
        assert_eq!(
            admin_ready.status, 200,
            "{name}: Envoy's own /ready says LIVE all the same"
        );
        let ready = ankusa_testkit::http::get(&edge.url("/ankusa/ready")).unwrap();
        assert_eq!(ready.status, 503, "{name}: the readiness path tells");
        assert_eq!(
            edge.stat("envoy_wasm_remote_load_fetch_failures"),
            1.0,
            "{name}"
        );
        assert!(
            intake.hooks().is_empty(),
            "{name}: a hook reached the upstream"
        );
        assert!(log.contains("Wasm") || log.contains("wasm"), "{log}");
    }
    assert!(
        server.requests.load(Ordering::Relaxed) >= 1,
        "the wrong-hash edge fetched the module"
    );

    // Control: the same wrong hash with FAIL_OPEN forwards hooks unchecked,
    // which is what the shipped FAIL_CLOSED prevents.
    let edge = spawn_remote(
        "edge-remote-open",
        &intake,
        server.port,
        &wrong,
        Some("FAIL_OPEN"),
    );
    // The same fetch retries come first (their back-off is jittered, up to
    // about 7 s in all): until Envoy gives up nothing listens (0).
    let seen = attempts_until(&edge, Duration::from_secs(40), |seen| seen.contains(&201));
    assert!(
        seen.contains(&201),
        "FAIL_OPEN forwards: {seen:?}\n{}",
        edge.log_tail()
    );
    assert!(
        !intake.hooks().is_empty(),
        "FAIL_OPEN lets hooks reach the upstream unchecked"
    );
}
