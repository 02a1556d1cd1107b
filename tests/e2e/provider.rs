//! The mock provider against a stand-in edge (a few lines of HTTP that add the
//! `x-ankusa-*` headers and forward to a real intake), so its retries,
//! redeliveries and audit are checked without Envoy. `fleet.rs` runs it
//! against real edges.

use ankusa_testkit::http;
use ankusa_testkit::intake::Intake;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How the stand-in edge misbehaves.
#[derive(Clone, Copy)]
struct Faults {
    /// Every n-th request is refused with 429 and `Retry-After: 1`.
    rate_limit_every: u64,
    /// Every n-th request gets a 503 with no `Retry-After`.
    fail_every: u64,
    /// Every n-th request is answered 201 without being forwarded (a lost hook).
    lose_every: u64,
}

/// Starts the stand-in edge on a free port; it lives as long as the test process.
fn stand_in_edge(intake: String, faults: Faults) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let count = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (intake, count) = (intake.clone(), count.clone());
            std::thread::spawn(move || serve(stream, &intake, &count, faults));
        }
    });
    url
}

fn serve(mut stream: TcpStream, intake: &str, count: &AtomicU64, faults: Faults) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let n = count.fetch_add(1, Ordering::Relaxed) + 1;
    let (status, extra, text) = if n.is_multiple_of(faults.rate_limit_every) {
        (
            429,
            "retry-after: 1\r\n".to_string(),
            r#"{"error":"rate_limited"}"#.to_string(),
        )
    } else if n.is_multiple_of(faults.fail_every) {
        (503, String::new(), r#"{"error":"unavailable"}"#.to_string())
    } else if n.is_multiple_of(faults.lose_every) {
        (
            201,
            String::new(),
            r#"{"status":"accepted","id":"never-stored"}"#.to_string(),
        )
    } else {
        // /webhooks/{tenant}/{source}
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string();
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let key = header("x-github-delivery").unwrap_or_default();
        let forwarded = [
            ("x-ankusa-tenant", parts.get(1).copied().unwrap_or_default()),
            ("x-ankusa-source", parts.get(2).copied().unwrap_or_default()),
            ("x-ankusa-event-key", key.as_str()),
        ];
        match http::request(
            "POST",
            &format!("{intake}/"),
            &forwarded,
            &body,
            Duration::from_secs(10),
        ) {
            Ok(a) => (a.status, String::new(), a.text()),
            Err(e) => (502, String::new(), format!(r#"{{"error":"{e}"}}"#)),
        }
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n{text}",
        text.len()
    );
}

fn mock_provider(edges: &[String], intake: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let out = Command::new(ankusa_testkit::paths::workspace_bin("mock-provider"))
        .args([
            "--edges",
            &edges.join(","),
            "--intake",
            intake,
            "--json",
            "--quiet",
        ])
        .args(["--profile", "github", "--tenant", "acme", "--source", "gh"])
        .args(extra)
        .output()
        .expect("run mock-provider");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), summary)
}

#[test]
fn retries_until_every_event_is_stored_once() {
    let intake = Intake::start();
    let faults = Faults {
        rate_limit_every: 7,
        fail_every: 11,
        lose_every: u64::MAX,
    };
    let edges = vec![
        stand_in_edge(intake.url(), faults),
        stand_in_edge(intake.url(), faults),
    ];
    let (code, s) = mock_provider(
        &edges,
        &intake.url(),
        &[
            "--events",
            "300",
            "--rate",
            "300",
            "--redeliver",
            "0.2",
            "--deadline-s",
            "30",
            "--seed",
            "7",
        ],
    );
    assert_eq!(code, 0, "{s}");
    assert_eq!(s["events"], 300);
    let redeliveries = s["redeliveries"].as_u64().expect("redeliveries");
    assert!(
        redeliveries > 20 && redeliveries < 100,
        "about 20% redelivered: {s}"
    );
    assert_eq!(s["sent"].as_u64(), Some(300 + redeliveries));
    assert_eq!(
        s["acknowledged"], s["sent"],
        "every delivery acknowledged in the end: {s}"
    );
    assert!(
        s["rate_limited"].as_u64() > Some(0) && s["retried"].as_u64() >= s["rate_limited"].as_u64(),
        "{s}"
    );
    assert!(s["answers"]["503"].as_u64() > Some(0), "{s}");
    assert_eq!(
        s["duplicate_answers"].as_u64(),
        Some(redeliveries),
        "each redelivery answered as a duplicate: {s}"
    );
    assert_eq!(
        (
            s["lost"].as_u64(),
            s["stored_duplicates"].as_u64(),
            s["stored"].as_u64()
        ),
        (Some(0), Some(0), Some(300))
    );
    assert_eq!(intake.hooks().len(), 300);
}

#[test]
fn an_acknowledged_hook_that_was_not_stored_counts_as_lost() {
    let intake = Intake::start();
    let faults = Faults {
        rate_limit_every: u64::MAX,
        fail_every: u64::MAX,
        lose_every: 10,
    };
    let edges = vec![stand_in_edge(intake.url(), faults)];
    let (code, s) = mock_provider(
        &edges,
        &intake.url(),
        &["--events", "100", "--rate", "500", "--redeliver", "0"],
    );
    assert_eq!(code, 1, "a loss makes the exit status non-zero: {s}");
    assert_eq!(s["lost"], 10, "{s}");
    assert_eq!(s["lost_keys"].as_array().map(Vec::len), Some(10));
}

#[test]
fn bad_arguments_are_refused_naming_the_flag() {
    let out = Command::new(ankusa_testkit::paths::workspace_bin("mock-provider"))
        .args(["--edges", "http://127.0.0.1:1", "--redeliver", "1.5"])
        .output()
        .expect("run mock-provider");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--redeliver") && err.contains("1.5"), "{err}");
}
