//! Every client mistake is a 4xx naming the problem, never a 5xx.

use crate::common::{charge, claim, hit, Http, Service};
use ankusa_testkit::redis::Redis;
use serde_json::{json, Value};

struct Case {
    name: &'static str,
    path: &'static str,
    body: Vec<u8>,
    headers: Vec<(&'static str, &'static str)>,
    status: u16,
    message: &'static str,
}

fn case(
    name: &'static str,
    path: &'static str,
    body: Value,
    status: u16,
    message: &'static str,
) -> Case {
    Case {
        name,
        path,
        body: body.to_string().into_bytes(),
        headers: vec![],
        status,
        message,
    }
}

fn hit_with(f: impl FnOnce(&mut Value)) -> Value {
    let mut body = hit(
        vec![charge("hooks", "acme", 1, 500, 100)],
        Some(claim("acme", "d", "h1", 60_000, 30_000)),
    );
    f(&mut body);
    body
}

fn cases() -> Vec<Case> {
    let mut cases = vec![
        Case {
            name: "malformed JSON",
            path: "/v1/hit",
            body: b"{\"charges\": [".to_vec(),
            headers: vec![],
            status: 400,
            message: "body is not a valid hit request: EOF while parsing",
        },
        case(
            "wrong type",
            "/v1/hit",
            hit_with(|b| b["charges"][0]["units"] = json!("x")),
            400,
            "invalid type: string \"x\", expected u64",
        ),
        case(
            "negative units",
            "/v1/hit",
            hit_with(|b| b["charges"][0]["units"] = json!(-5)),
            400,
            "invalid value: integer `-5`, expected u64",
        ),
        case(
            "zero units",
            "/v1/hit",
            hit_with(|b| b["charges"][0]["units"] = json!(0)),
            400,
            "charges[0].units: must be between 1 and 100, got 0",
        ),
        case(
            "units above the burst",
            "/v1/hit",
            hit_with(|b| b["charges"][0]["units"] = json!(101)),
            400,
            "charges[0].units: must be between 1 and 100, got 101",
        ),
        case(
            "zero rate",
            "/v1/hit",
            hit_with(|b| b["charges"][0]["rate"] = json!(0)),
            400,
            "charges[0].rate: must be between 1 and 1000000000, got 0",
        ),
        case(
            "rate above the core's limit",
            "/v1/hit",
            hit_with(|b| b["charges"][0]["rate"] = json!(1_000_000_001u64)),
            400,
            "charges[0].rate: must be between 1 and 1000000000, got 1000000001",
        ),
        case(
            "zero burst",
            "/v1/hit",
            hit_with(|b| b["charges"][0]["burst"] = json!(0)),
            400,
            "charges[0].burst: must be between 1 and 4294967296, got 0",
        ),
        case(
            "oversized charge: burst and units above the core's limit",
            "/v1/hit",
            hit_with(|b| {
                b["charges"][0]["units"] = json!(1u64 << 60);
                b["charges"][0]["burst"] = json!(1u64 << 60);
            }),
            400,
            "charges[0].burst: must be between 1 and 4294967296, got 1152921504606846976",
        ),
        case(
            "the old charge shape",
            "/v1/hit",
            json!({"charges": [{"kind": "hooks", "tenant": "acme", "increment_us": 2000, "capacity_us": 200000}], "claim": null}),
            400,
            // Its unknown fields are skipped (wire 2); the known one it lacks refuses it.
            "missing field `units`",
        ),
        case(
            "empty tenant",
            "/v1/hit",
            hit_with(|b| b["charges"][0]["tenant"] = json!("")),
            400,
            "charges[0].tenant: \"\" is not 1 to 64",
        ),
        case(
            "empty key",
            "/v1/hit",
            hit_with(|b| b["claim"]["key"] = json!("")),
            400,
            "claim.key: must be 1 to 200 bytes, got 0",
        ),
        case(
            "nothing to do",
            "/v1/hit",
            json!({"charges": [], "claim": null}),
            400,
            "charges: is empty and there is no claim",
        ),
        case(
            "claim ttl of 2^53 - 1 ms",
            "/v1/hit",
            hit_with(|b| b["claim"]["ttl_ms"] = json!((1u64 << 53) - 1)),
            400,
            "claim.ttl_ms: must be between 1 and 2592000000, got 9007199254740991",
        ),
        case(
            "ttl beyond what Redis keeps",
            "/v1/hit",
            hit_with(|b| b["claim"]["ttl_ms"] = json!(u64::MAX)),
            400,
            "claim.ttl_ms: must be between 1 and 2592000000, got 18446744073709551615",
        ),
        case(
            "pending ttl above a day",
            "/v1/hit",
            hit_with(|b| b["claim"]["pending_ttl_ms"] = json!(86_400_001u64)),
            400,
            "claim.pending_ttl_ms: must be between 1 and 86400000, got 86400001",
        ),
        case(
            "settle: claim ttl of 2^53 - 1 ms",
            "/v1/settle",
            json!({"ops": [{"op": "promote", "hook_id": "h1", "claim": hit_with(|c| c["claim"]["ttl_ms"] = json!((1u64 << 53) - 1))["claim"]}]}),
            400,
            "ops[0].claim.ttl_ms: must be between 1 and 2592000000, got 9007199254740991",
        ),
        case(
            "settle: ttl beyond what Redis keeps",
            "/v1/settle",
            json!({"ops": [{"op": "release", "claim": hit_with(|c| c["claim"]["pending_ttl_ms"] = json!(1u64 << 60))["claim"]}]}),
            400,
            "ops[0].claim.pending_ttl_ms: must be between 1 and 86400000, got 1152921504606846976",
        ),
        case(
            "settle: unknown op",
            "/v1/settle",
            json!({"ops": [{"op": "explode"}]}),
            400,
            "unknown `op` \"explode\"; expected promote or release",
        ),
        case(
            "settle: bad node",
            "/v1/settle",
            json!({"ops": [{"op": "release", "claim": hit_with(|c| c["claim"]["node"] = json!("edge 1"))["claim"]}]}),
            400,
            "ops[0].claim.node: \"edge 1\" is not 1 to 64",
        ),
        case(
            "reset: empty tenant",
            "/v1/reset",
            json!({"tenant": ""}),
            400,
            "tenant: \"\" is not 1 to 64",
        ),
        case(
            "reset: missing tenant",
            "/v1/reset",
            json!({}),
            400,
            "missing field `tenant`",
        ),
        // One name rule with the config (`limits::is_valid_id`): no edge can
        // route a tenant or source with a dot, so the store holds none.
        case(
            "charge: tenant with a dot",
            "/v1/hit",
            hit_with(|b| b["charges"][0]["tenant"] = json!("a.b")),
            400,
            "charges[0].tenant: \"a.b\" is not 1 to 64 characters of [A-Za-z0-9_-]",
        ),
        case(
            "claim: tenant with a dot",
            "/v1/hit",
            hit_with(|b| b["claim"]["tenant"] = json!("a.b")),
            400,
            "claim.tenant: \"a.b\" is not 1 to 64 characters of [A-Za-z0-9_-]",
        ),
        case(
            "claim: source with a dot",
            "/v1/hit",
            hit_with(|b| b["claim"]["source_id"] = json!("..")),
            400,
            "claim.source_id: \"..\" is not 1 to 64 characters of [A-Za-z0-9_-]",
        ),
        case(
            "settle: tenant with a dot",
            "/v1/settle",
            json!({"ops": [{"op": "release", "claim": hit_with(|c| c["claim"]["tenant"] = json!("x.y"))["claim"]}]}),
            400,
            "ops[0].claim.tenant: \"x.y\" is not 1 to 64 characters of [A-Za-z0-9_-]",
        ),
        case(
            "reset: tenant with a dot",
            "/v1/reset",
            json!({"tenant": "a.b"}),
            400,
            "tenant: \"a.b\" is not 1 to 64 characters of [A-Za-z0-9_-]",
        ),
    ];
    for (value, message) in [
        (
            "abc",
            "x-ankusa-budget-ms: \"abc\" is not a whole number of ms",
        ),
        ("0", "x-ankusa-budget-ms: must be greater than 0"),
    ] {
        let mut c = case("bad budget", "/v1/hit", hit_with(|_| {}), 400, message);
        c.headers = vec![("x-ankusa-budget-ms", value)];
        cases.push(c);
    }
    cases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_mistake_is_a_4xx_naming_the_problem() {
    let redis = Redis::start();
    let service = Service::ready(&redis.url()).await;
    let http = Http::new();
    for c in cases() {
        let (status, text) = http
            .send("POST", &service.at(c.path), &c.headers, c.body)
            .await;
        let body: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("{}: not JSON: {text}", c.name));
        assert_eq!(status, c.status, "{}: {text}", c.name);
        assert_eq!(body["error"], "bad_request", "{}: {text}", c.name);
        let message = body["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(c.message),
            "{}: message {message:?} lacks {:?}",
            c.name,
            c.message
        );
    }
    assert_eq!(
        service
            .metric("ankusa_store_errors_total{cause=\"bad_request\"}")
            .await,
        cases().len() as f64
    );

    // Refused from the declared length, before a byte of the body is read.
    let (status, text) = declare_only(&service.at("/v1/hit"), 1024 * 1024 + 1).await;
    assert_eq!(status, 413, "{text}");
    assert!(
        text.contains(r#"{"error":"bad_request","message":"body is over 1048576 bytes"}"#),
        "{text}"
    );

    let (status, text) = http.get(&service.at("/v2/nothing")).await;
    assert_eq!(
        (status, text.as_str()),
        (
            404,
            r#"{"error":"not_found","message":"no route /v2/nothing"}"#
        )
    );
    let (status, text) = http.get(&service.at("/v1/hit")).await;
    assert_eq!(
        (status, text.as_str()),
        (
            405,
            r#"{"error":"method_not_allowed","message":"GET is not allowed on /v1/hit"}"#
        )
    );
    let (status, _) = http
        .send("POST", &service.at("/metrics"), &[], vec![])
        .await;
    assert_eq!(status, 405);
    // An override for a tenant no edge can route is refused the same way.
    let (status, text) = http
        .send(
            "PUT",
            &service.at("/v1/overrides/a.b"),
            &[],
            br#"{"rate": 1, "burst": 1}"#.to_vec(),
        )
        .await;
    assert_eq!(
        (status, text.as_str()),
        (
            400,
            r#"{"error":"bad_request","message":"tenant: \"a.b\" is not 1 to 64 characters of [A-Za-z0-9_-]"}"#
        )
    );
    assert!(redis.cli(&["KEYS", "ankusa:{a.b}*"]).is_empty());
    service.stop().await;
}

/// What a caller sent came back whole in the message: a path, a header
/// value, a field name serde did not expect, a tenant a validation refused.
/// Each answer is now at most `MAX_MESSAGE` bytes, its value cut and marked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_long_values_come_back_cut() {
    use ankusa_store::errors::MAX_MESSAGE;
    let redis = Redis::start();
    let service = Service::ready(&redis.url()).await;
    let http = Http::new();
    let long = "x".repeat(8 * 1024);
    let mut field_of_override = json!({"rate": 5});
    field_of_override[long.as_str()] = json!(1);
    let answers = [
        (
            "a long path",
            http.get(&service.at(&format!("/v1/{long}"))).await,
        ),
        (
            "a long budget header",
            http.send(
                "POST",
                &service.at("/v1/hit"),
                &[("x-ankusa-budget-ms", long.as_str())],
                hit_with(|_| {}).to_string().into_bytes(),
            )
            .await,
        ),
        (
            // The edge's wire skips an unknown field (wire 2); the operators'
            // API still refuses one, naming it.
            "a long unknown field",
            http.send(
                "PUT",
                &service.at("/v1/overrides/acme"),
                &[],
                field_of_override.to_string().into_bytes(),
            )
            .await,
        ),
        (
            "a long tenant",
            http.send(
                "POST",
                &service.at("/v1/reset"),
                &[],
                json!({"tenant": long}).to_string().into_bytes(),
            )
            .await,
        ),
    ];
    for (what, (status, text)) in answers {
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let message = body["message"].as_str().unwrap_or_default();
        assert!(
            (400..500).contains(&status) && !message.is_empty(),
            "{what}: {status} {text:.200}"
        );
        assert!(
            message.len() <= MAX_MESSAGE && message.contains('…'),
            "{what}: a message of {} bytes: {message:.200}",
            message.len()
        );
        assert!(message.contains("xxxx"), "{what}: {message}");
    }
    service.stop().await;
}

/// The body limit of a settle fits the largest settle the wire allows:
/// `MAX_SETTLE_OPS` operations with every name at its longest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_legal_settle_fits_and_one_op_more_is_refused() {
    use ankusa_core::limit::limits::{PENDING_TTL_MS, TTL_MS};
    use ankusa_core::wire::{MAX_HOOK_ID_LEN, MAX_KEY_LEN, MAX_NAME_LEN, MAX_SETTLE_OPS};
    let redis = Redis::start();
    // What is tested is the body limit, not the time 10 000 settle scripts
    // take on a loaded machine: a budget they fit in whatever the load.
    let mut config = ankusa_store::Config::for_redis(&redis.url());
    config.max_budget_ms = 20_000;
    let service = Service::start(config).await;
    service.wait_ready(std::time::Duration::from_secs(20)).await;
    let http = Http::new();
    let long = |n: usize, tag: usize| format!("{tag:0>n$}");
    let op = |i: usize| {
        json!({"op": "promote", "hook_id": long(MAX_HOOK_ID_LEN, i), "claim": {
            "tenant": long(MAX_NAME_LEN, 0), "source_id": long(MAX_NAME_LEN, 0), "key": long(MAX_KEY_LEN, i),
            "hook_id": long(MAX_HOOK_ID_LEN, i), "node": long(MAX_NAME_LEN, 0),
            "ttl_ms": TTL_MS.max, "pending_ttl_ms": PENDING_TTL_MS.max}})
    };
    let ops: Vec<Value> = (0..MAX_SETTLE_OPS).map(op).collect();
    let body = json!({ "ops": ops });
    assert!(
        body.to_string().len() > 1024 * 1024,
        "the case must exceed the hit limit"
    );
    let (status, answer) = http.post(&service.at("/v1/settle"), &body).await;
    assert_eq!(
        (status, answer["applied"].as_u64()),
        (200, Some(MAX_SETTLE_OPS as u64)),
        "{answer}"
    );

    let ops: Vec<Value> = (0..=MAX_SETTLE_OPS).map(op).collect();
    let (status, answer) = http
        .post(&service.at("/v1/settle"), &json!({ "ops": ops }))
        .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer["message"],
        format!(
            "ops: has {} entries; at most {MAX_SETTLE_OPS}",
            MAX_SETTLE_OPS + 1
        )
    );

    // Refused from the declared length, before a byte of the body is read.
    let (status, text) = declare_only(&service.at("/v1/settle"), 8 * 1024 * 1024 + 1).await;
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("body is over 8388608 bytes"), "{text}");
    service.stop().await;
}

/// Sends headers declaring `length` body bytes, then only reads the answer.
async fn declare_only(url: &str, length: usize) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.trim_start_matches("http://");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let mut stream = tokio::net::TcpStream::connect(authority)
        .await
        .expect("connect");
    let head =
        format!("POST {path} HTTP/1.1\r\nhost: {authority}\r\ncontent-length: {length}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        stream.read_to_end(&mut raw),
    )
    .await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}
