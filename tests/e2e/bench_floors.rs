//! The floor filters bench-edge compares the Ankusa filter with, through real
//! Envoy: the no-op filter passes every hook and counts it (configured as the
//! host-call floor, it also makes a node hook's host calls, whose writes show:
//! four forwarded headers, two RateLimit headers, the decision in the access
//! log); the callout floor
//! makes exactly one call per hook (counted at the upstream it calls) and
//! passes the hook only after the answer; configured with `/v1/hit`, its
//! one call per hook is a real hit on a real store and Redis, counted as
//! answered only with a 200. The native host-call floor (the module's
//! floors' build) makes the same writes as the wasm one. Needs the release
//! wasm of both and the native floors' build (`scripts/test.sh` builds them).

use ankusa_testkit::access_log::{self, with_access_log};
use ankusa_testkit::envoy::{Edge, EdgeSpec, Shell};
use ankusa_testkit::http::Response;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::process::scratch_dir;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::EDGE_TOKENS_ENV;
use ankusa_tests::edge_support::claim_key;
use ankusa_tools::floors;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the upstream saw, in order: `path x-ankusa-…` for each of our
/// headers a request carries, `path` when its body has been read,
/// `answered path` just before its answer is written.
type Seen = Arc<Mutex<Vec<String>>>;

/// How long the upstream holds an answer to a path starting `/slow`.
const SLOW: Duration = Duration::from_millis(50);

/// A keep-alive HTTP/1.1 upstream that answers every request 200 `ok` (a
/// `/slow…` path after [`SLOW`]) and logs it in [`Seen`].
fn counting_upstream() -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let tally = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let tally = tally.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = request_line
                        .split_whitespace()
                        .nth(1)
                        .unwrap_or("")
                        .to_string();
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if let Some((name, _)) = lower.split_once(':') {
                            if name.starts_with("x-ankusa-") {
                                tally.lock().unwrap().push(format!("{path} {name}"));
                            }
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0u8; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    tally.lock().unwrap().push(path.clone());
                    if path.starts_with("/slow") {
                        std::thread::sleep(SLOW);
                    }
                    // Logged before the answer leaves: nothing it causes can come first.
                    tally.lock().unwrap().push(format!("answered {path}"));
                    if stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (port, seen)
}

fn count(seen: &Seen, path: &str) -> u64 {
    seen.lock().unwrap().iter().filter(|p| *p == path).count() as u64
}

const HOOKS: u64 = 25;

/// Sends [`HOOKS`] POSTs with a body through `edge`; every one must pass.
/// Their answers, in order.
fn send_hooks(edge: &Edge) -> Vec<Response> {
    let mut answers = Vec::new();
    for i in 0..HOOKS {
        let body = format!(r#"{{"n":{i}}}"#);
        let res = edge
            .post(
                "/webhooks/gh",
                &[("content-type", "application/json")],
                body.as_bytes(),
            )
            .unwrap_or_else(|e| panic!("hook {i}: {e}\n{}", edge.log_tail()));
        assert_eq!(
            res.status,
            200,
            "hook {i}: {}\n{}",
            res.text(),
            edge.log_tail()
        );
        assert_eq!(
            res.text(),
            "ok",
            "hook {i} was not answered by the upstream"
        );
        answers.push(res);
    }
    answers
}

/// Our headers a node hook forwards, and the RateLimit headers it answers with.
const FORWARDED: [&str; 4] = [
    "x-ankusa-hook-id",
    "x-ankusa-tenant",
    "x-ankusa-source",
    "x-ankusa-event-key",
];
const RATE_HEADERS: [&str; 2] = ["ratelimit-policy", "ratelimit"];

#[test]
fn the_noop_filter_passes_and_counts_every_hook() {
    let (upstream, seen) = counting_upstream();
    let spec = EdgeSpec::new("floor-noop", upstream, free_port(), serde_json::json!({}));
    let edge = floors::start(spec, floors::NOOP).unwrap();
    let answers = send_hooks(&edge);
    assert_eq!(count(&seen, "/webhooks/gh"), HOOKS);
    assert_eq!(
        edge.stat(floors::NOOP_REQUESTS),
        HOOKS as f64,
        "{}",
        edge.log_tail()
    );
    // Untouched: none of the host-call floor's writes.
    let log = seen.lock().unwrap().clone();
    assert!(!log.iter().any(|l| l.contains("x-ankusa-")), "{log:?}");
    for res in &answers {
        assert!(
            RATE_HEADERS.iter().all(|h| res.header(h).is_none()),
            "{res:?}"
        );
    }
}

#[test]
fn the_host_call_floor_makes_a_node_hooks_writes_on_every_hook() {
    let (upstream, seen) = counting_upstream();
    let config = serde_json::Value::String(floors::NODE_CALLS.to_string());
    let spec = EdgeSpec::new("floor-calls", upstream, free_port(), config);
    let access = scratch_dir("floor-calls-log").join("access.log");
    let swap = floors::floor(&spec, floors::NOOP).unwrap();
    let path = access.clone();
    let edge = Edge::start_with(spec, move |b| with_access_log(&swap(b), &path));
    node_writes_on_every_hook(&edge, &seen, &access, floors::NOOP_REQUESTS);
}

/// The native host-call floor, (K): the same writes, through Envoy's
/// dynamic modules filter (the floors' build of the module's crate).
#[test]
fn the_native_host_call_floor_makes_a_node_hooks_writes_on_every_hook() {
    floors::native_floor_so().unwrap();
    let (upstream, seen) = counting_upstream();
    let config = serde_json::Value::String(floors::NODE_CALLS.to_string());
    let mut spec = EdgeSpec::new("native-floor-calls", upstream, free_port(), config);
    spec.shell = Shell::Native;
    let access = scratch_dir("native-floor-calls-log").join("access.log");
    let path = access.clone();
    let edge = Edge::start_with(spec, move |b| {
        with_access_log(&floors::native_floor(b), &path)
    });
    // The native floors count under the wasm floors' names, in their namespace.
    let counter = format!("envoy_ankusa_{}", floors::NOOP_REQUESTS);
    node_writes_on_every_hook(&edge, &seen, &access, &counter);
}

/// [`HOOKS`] hooks through `edge` each got a node hook's writes: four
/// forwarded headers (at the upstream, `seen`), two RateLimit headers, the
/// decision in the access log (`access`); and `counter` counted every one.
fn node_writes_on_every_hook(edge: &Edge, seen: &Seen, access: &Path, counter: &str) {
    let answers = send_hooks(edge);
    assert_eq!(count(seen, "/webhooks/gh"), HOOKS);
    assert_eq!(edge.stat(counter), HOOKS as f64, "{}", edge.log_tail());
    for name in FORWARDED {
        let forwarded = format!("/webhooks/gh {name}");
        assert_eq!(
            count(seen, &forwarded),
            HOOKS,
            "{name}\n{}",
            edge.log_tail()
        );
    }
    for res in &answers {
        for name in RATE_HEADERS {
            assert!(res.header(name).is_some(), "{name} missing: {res:?}");
        }
    }
    // The decision set as filter state reaches the access log, line by line.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = access_log::lines(access);
    while (lines.len() as u64) < HOOKS && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        lines = access_log::lines(access);
    }
    assert_eq!(lines.len() as u64, HOOKS, "{lines:?}");
    for line in &lines {
        let decision = access_log::decision(line).unwrap_or_else(|| panic!("{line}"));
        assert_eq!(
            access_log::field(decision, "outcome"),
            Some("admitted"),
            "{line}"
        );
    }
}

#[test]
fn the_callout_floor_calls_once_per_hook_before_passing_it() {
    let (upstream, seen) = counting_upstream();
    // The `ankusa_store` cluster points at the same upstream, which holds
    // the callout's answer for SLOW: a hook passed before it would show.
    let config = serde_json::Value::String("ankusa_store /slow-ping".to_string());
    let spec = EdgeSpec::new("floor-callout", upstream, upstream, config);
    let edge = floors::start(spec, floors::CALLOUT).unwrap();
    send_hooks(&edge);
    let log = seen.lock().unwrap().clone();
    let expected: Vec<String> = (0..HOOKS)
        .flat_map(|_| {
            [
                "/slow-ping",
                "answered /slow-ping",
                "/webhooks/gh",
                "answered /webhooks/gh",
            ]
            .map(str::to_string)
        })
        .collect();
    assert_eq!(log, expected, "{}", edge.log_tail());
    assert_eq!(edge.stat(floors::CALLOUT_CALLS), HOOKS as f64);
    assert_eq!(edge.stat(floors::CALLOUT_ANSWERS), HOOKS as f64);
}

/// The hit floor's edge in front of `store`, its hooks passed to a counting upstream.
fn hit_floor(store: &Store) -> (Edge, Seen) {
    let (upstream, seen) = counting_upstream();
    let config = serde_json::Value::String(floors::HIT_TARGET.to_string());
    let spec = EdgeSpec::new("floor-hit", upstream, store.port, config);
    let edge = floors::start(spec, floors::CALLOUT).unwrap();
    (edge, seen)
}

#[test]
fn the_hit_floor_makes_one_real_hit_per_hook_each_claiming_its_own_delivery() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let (edge, seen) = hit_floor(&store);
    send_hooks(&edge);
    assert_eq!(count(&seen, "/webhooks/gh"), HOOKS);
    assert_eq!(edge.stat(floors::CALLOUT_CALLS), HOOKS as f64);
    assert_eq!(
        edge.stat(floors::CALLOUT_ANSWERS),
        HOOKS as f64,
        "every hit answered 200\n{}",
        store.proc.log_tail()
    );
    assert_eq!(edge.stat(floors::CALLOUT_NOT_OK), 0.0);
    assert_eq!(store.metric("ankusa_store_hits_per_call_sum"), HOOKS as f64);
    // One pending claim per hook: no two hooks claimed the same delivery.
    let claims = redis.cli(&["KEYS", &claim_key("floor-*")]);
    assert_eq!(claims.lines().count() as u64, HOOKS, "{claims}");
}

#[test]
fn a_hit_the_store_refuses_is_counted_apart_from_the_answers() {
    let redis = Redis::start();
    // The store accepts another edge token than the one the floor's VM holds.
    let store = Store::start_with_env(
        free_port(),
        &redis.url(),
        &[],
        &[(EDGE_TOKENS_ENV, "another-edge-token-0123456789abcdef")],
    );
    let (edge, seen) = hit_floor(&store);
    send_hooks(&edge);
    assert_eq!(
        count(&seen, "/webhooks/gh"),
        HOOKS,
        "the floor passes every hook"
    );
    assert_eq!(edge.stat(floors::CALLOUT_CALLS), HOOKS as f64);
    assert_eq!(edge.stat(floors::CALLOUT_ANSWERS), 0.0);
    assert_eq!(edge.stat(floors::CALLOUT_NOT_OK), HOOKS as f64);
    assert_eq!(redis.cli(&["DBSIZE"]), "0");
}

#[test]
fn the_floor_module_replaces_the_filter_and_nothing_else() {
    let spec = EdgeSpec::new("floor-t", 1, 2, serde_json::json!({}));
    let full = ankusa_testkit::envoy::render(&spec, &ankusa_testkit::paths::filter_wasm());
    let module = std::path::Path::new("/x/floor.wasm");
    let swapped = floors::swap_module(&full, module).unwrap();
    assert!(swapped.contains("filename: \"/x/floor.wasm\""), "{swapped}");
    assert!(!swapped.contains("ankusa_filter.wasm"), "{swapped}");
    assert_eq!(
        full.lines().count(),
        swapped.lines().count(),
        "only the module line changes"
    );
    assert!(floors::swap_module("static_resources: {}\n", module).is_err());
}
