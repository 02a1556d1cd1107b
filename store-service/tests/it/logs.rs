//! The store's logs: `RUST_LOG` filtering (`ANKUSA_LOG` as its alias), text
//! or JSON lines, a request span carrying the endpoint, tenant, result and
//! time in Redis; and no token at any level, however it was sent.

use ankusa_testkit::http::request;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::process::scratch_dir;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::{fresh_token, EDGE_TOKENS_ENV, OPERATOR_TOKENS_ENV};
use serde_json::{json, Value};
use std::time::Duration;

/// The tokens one store accepts (and one it refuses), fresh for the run so
/// that finding one in a log can only mean the store wrote it there.
struct Tokens {
    edge: String,
    operator: String,
    in_file: String,
    refused: String,
}

impl Tokens {
    fn new() -> Tokens {
        Tokens {
            edge: fresh_token("edge-env"),
            operator: fresh_token("operator-env"),
            in_file: fresh_token("edge-file"),
            refused: fresh_token("refused"),
        }
    }

    fn all(&self) -> [&str; 4] {
        [&self.edge, &self.operator, &self.in_file, &self.refused]
    }
}

/// The store with every token source in use, logging at `filter` as `format`.
fn start(redis: &Redis, tokens: &Tokens, format: &str, filter: (&str, &str)) -> Store {
    let file = scratch_dir("store-logs").join(format!("edge-{format}.tokens"));
    std::fs::write(&file, format!("# edges\n{}\n", tokens.in_file)).expect("token file");
    let file = file.display().to_string();
    Store::start_with_env(
        free_port(),
        &redis.url(),
        &["--edge-token-file", &file, "--log-format", format],
        &[
            (EDGE_TOKENS_ENV, &tokens.edge),
            (OPERATOR_TOKENS_ENV, &tokens.operator),
            filter,
        ],
    )
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn hit(tenant: &str, key: &str) -> Vec<u8> {
    json!({"charges": [{"kind": "hooks", "tenant": tenant, "units": 1, "rate": 100, "burst": 100}],
           "claim": {"tenant": tenant, "source_id": "gh", "key": key, "hook_id": format!("h-{key}"),
                     "node": "edge-1", "ttl_ms": 60_000, "pending_ttl_ms": 30_000},
           "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
    .to_string()
    .into_bytes()
}

/// Every way a token reaches the store: accepted from the environment and
/// from a file, over HTTP/1.1 and HTTP/2; refused, doubled, outside its
/// role; and a reload of the token file (SIGHUP). Then a graceful stop.
fn exercise(store: &Store, tokens: &Tokens) {
    let post = |path: &str, headers: &[(&str, &str)], body: &[u8]| {
        let url = store.url_of(path);
        let mut all = vec![("content-type", "application/json")];
        all.extend_from_slice(headers);
        request("POST", &url, &all, body, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("POST {path}: {e}"))
            .status
    };
    let edge = bearer(&tokens.edge);
    let operator = bearer(&tokens.operator);
    assert_eq!(
        post("/v1/hit", &[("authorization", &edge)], &hit("logs", "k1")),
        200
    );
    let in_file = bearer(&tokens.in_file);
    assert_eq!(
        post(
            "/v1/hit",
            &[("authorization", &in_file)],
            &hit("logs", "k2")
        ),
        200
    );
    let batch = format!(
        r#"{{"hits":[{},{}]}}"#,
        String::from_utf8_lossy(&hit("logs", "k3")),
        String::from_utf8_lossy(&hit("other", "k4"))
    );
    assert_eq!(
        post("/v1/hits", &[("authorization", &edge)], batch.as_bytes()),
        200
    );
    let refused = bearer(&tokens.refused);
    assert_eq!(
        post(
            "/v1/hit",
            &[("authorization", &refused)],
            &hit("logs", "k5")
        ),
        401
    );
    let doubled = [
        ("authorization", edge.as_str()),
        ("authorization", &refused),
    ];
    assert_eq!(post("/v1/hit", &doubled, &hit("logs", "k6")), 400);
    let reset = br#"{"tenant":"logs"}"#;
    assert_eq!(post("/v1/reset", &[("authorization", &edge)], reset), 403);
    assert_eq!(
        post("/v1/reset", &[("authorization", &operator)], reset),
        200
    );
    assert_eq!(h2_hit(store.port, &edge), 200);
    store.proc.signal("HUP");
    let mut reloaded = false;
    for _ in 0..250 {
        let log = std::fs::read_to_string(&store.proc.log).unwrap_or_default();
        if log.contains("SIGHUP") {
            reloaded = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        reloaded,
        "the token file was not read again:\n{}",
        store.proc.log_tail()
    );
}

/// One hit over cleartext HTTP/2; its status.
fn h2_hit(port: u16, authorization: &str) -> u16 {
    use http_body_util::Full;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let client = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build_http::<Full<bytes::Bytes>>();
        let req = hyper::Request::post(format!("http://127.0.0.1:{port}/v1/hit"))
            .header("authorization", authorization)
            .body(Full::new(bytes::Bytes::from(hit("logs", "k7"))))
            .expect("request");
        client
            .request(req)
            .await
            .expect("h2c answer")
            .status()
            .as_u16()
    })
}

/// Stops the store (gracefully) and reads everything it logged.
fn stop_and_read(mut store: Store) -> String {
    assert_eq!(
        store.proc.stop(Duration::from_secs(20)),
        Some(0),
        "{}",
        store.proc.log_tail()
    );
    std::fs::read_to_string(&store.proc.log).expect("the store's log")
}

fn assert_no_token(log: &str, tokens: &Tokens) {
    for token in tokens.all() {
        // Any 12 characters of its random part are enough to give it away.
        let tail = &token[token.len() - 12..];
        assert!(
            !log.contains(tail),
            "a token is in the log ({} lines, at trace level)",
            log.lines().count()
        );
    }
}

#[test]
fn no_token_is_logged_at_any_level_in_text_or_json() {
    let redis = Redis::start();
    for format in ["text", "json"] {
        let tokens = Tokens::new();
        let store = start(&redis, &tokens, format, ("RUST_LOG", "trace"));
        assert!(store.wait_ready(Duration::from_secs(20)));
        exercise(&store, &tokens);
        let log = stop_and_read(store);
        assert_no_token(&log, &tokens);
        // The filter really let everything through: hyper's and h2's own
        // trace lines are there, and a line per request.
        assert!(
            log.contains("TRACE") && log.contains("h2"),
            "{format}: not at trace level"
        );
        assert!(log.contains("answered"), "{format}: no request line");
    }
}

/// The `answered` events of a JSON log, as the span of each request printed them.
fn answered(log: &str) -> Vec<Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["fields"]["message"] == "answered")
        .map(|v| v["span"].clone())
        .collect()
}

#[test]
fn json_lines_carry_each_requests_endpoint_tenant_result_and_redis_time() {
    let redis = Redis::start();
    let tokens = Tokens::new();
    let store = start(
        &redis,
        &tokens,
        "json",
        ("RUST_LOG", "info,ankusa_store=debug"),
    );
    assert!(store.wait_ready(Duration::from_secs(20)));
    exercise(&store, &tokens);
    let log = stop_and_read(store);
    for line in log.lines() {
        let parsed: Result<Value, _> = serde_json::from_str(line);
        assert!(parsed.is_ok(), "not a JSON line: {line}");
    }
    let spans = answered(&log);
    let hit = spans
        .iter()
        .find(|s| s["endpoint"] == "hit" && s["result"] == "ok")
        .unwrap_or_else(|| panic!("no answered hit: {spans:?}"));
    assert_eq!(hit["name"], "request");
    assert_eq!(hit["tenant"], "logs");
    assert!(hit["redis_us"].as_u64().is_some(), "{hit}");
    let batch = spans.iter().find(|s| s["endpoint"] == "hits");
    assert!(
        batch.is_some_and(|s| s["result"] == "ok" && s["redis_us"].as_u64().is_some()),
        "{spans:?}"
    );
    let refused = spans.iter().find(|s| s["result"] == "unauthorized");
    assert!(refused.is_some_and(|s| s["endpoint"] == "hit"), "{spans:?}");
    assert!(
        spans.iter().any(|s| s["result"] == "forbidden"),
        "{spans:?}"
    );
    // At debug for the store alone, the dependencies' lines stay out.
    assert!(!log.contains("\"level\":\"TRACE\""), "trace lines at info");
}

#[test]
fn the_default_is_text_at_info_and_ankusa_log_still_filters() {
    let redis = Redis::start();
    let tokens = Tokens::new();
    let store = start(&redis, &tokens, "text", ("ANKUSA_LOG", "warn"));
    assert!(store.wait_ready(Duration::from_secs(20)));
    let log = stop_and_read(store);
    assert!(
        !log.contains(" INFO "),
        "ANKUSA_LOG=warn let info through:\n{log}"
    );
    let store = Store::start_on(free_port(), &redis.url(), &[]);
    assert!(store.wait_ready(Duration::from_secs(20)));
    let log = stop_and_read(store);
    let listening = log.lines().find(|l| l.contains("listening on"));
    assert!(
        listening.is_some_and(|l| l.contains(" INFO ") && !l.starts_with('{')),
        "{log}"
    );
    assert!(!log.contains("DEBUG"), "{log}");
}

#[test]
fn a_filter_that_is_not_one_stops_the_start_naming_the_variable() {
    let out = std::process::Command::new(ankusa_testkit::paths::workspace_bin("ankusa-store"))
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .env("RUST_LOG", "ankusa_store=loud")
        .output()
        .expect("run ankusa-store");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("RUST_LOG: \"ankusa_store=loud\" is not a log filter"),
        "{err}"
    );
    let out = std::process::Command::new(ankusa_testkit::paths::workspace_bin("ankusa-store"))
        .args([
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
            "--log-format",
            "xml",
        ])
        .output()
        .expect("run ankusa-store");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--log-format") && err.contains("xml"), "{err}");
}
