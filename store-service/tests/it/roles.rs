//! Two roles through the real store binary: an edge token may hit, settle
//! and read overrides; an operator token may also change overrides and
//! reset. Every endpoint is called with no token, a wrong one, an edge
//! token, an operator token and two `authorization` headers; the answers
//! form the role table of RELIABILITY.md ("Hostile input"), which this test
//! checks is the table the store gives now.

use crate::common::ready;
use ankusa_testkit::http::{request, Response};
use ankusa_testkit::paths::workspace_root;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::{fresh_token, operator_token, run_token};
use serde_json::json;
use std::time::Duration;

/// Who calls: the column heading and the `authorization` values sent.
struct Caller {
    heading: &'static str,
    authorization: Vec<String>,
}

fn callers() -> Vec<Caller> {
    let bearer = |t: &str| format!("Bearer {t}");
    vec![
        Caller {
            heading: "no token",
            authorization: vec![],
        },
        Caller {
            heading: "a wrong token",
            authorization: vec![bearer(&fresh_token("wrong"))],
        },
        Caller {
            heading: "edge token",
            authorization: vec![bearer(run_token())],
        },
        Caller {
            heading: "operator token",
            authorization: vec![bearer(operator_token())],
        },
        Caller {
            heading: "edge and operator token (two headers)",
            authorization: vec![bearer(run_token()), bearer(operator_token())],
        },
    ]
}

/// Every `/v1/*` call: method, path, body.
fn calls() -> Vec<(&'static str, &'static str, String)> {
    let claim = json!({"tenant": "acme", "source_id": "gh", "key": "role-key", "hook_id": "h1",
                       "node": "edge-1", "ttl_ms": 60_000, "pending_ttl_ms": 30_000});
    let hit = json!({"charges": [{"kind": "hooks", "tenant": "acme", "units": 1, "rate": 1000,
                                   "burst": 1000}], "claim": null});
    vec![
        ("POST", "/v1/hit", hit.to_string()),
        ("POST", "/v1/hits", json!({"hits": [hit]}).to_string()),
        (
            "POST",
            "/v1/settle",
            json!({"ops": [{"op": "promote", "hook_id": "h1", "claim": claim}]}).to_string(),
        ),
        (
            "PUT",
            "/v1/overrides/acme",
            json!({"rate": 5, "burst": 10, "ttl_ms": 60_000}).to_string(),
        ),
        ("GET", "/v1/overrides", String::new()),
        ("GET", "/v1/overrides/acme", String::new()),
        ("DELETE", "/v1/overrides/acme", String::new()),
        ("POST", "/v1/reset", json!({"tenant": "acme"}).to_string()),
        ("GET", "/v1/claims?node=edge-1", String::new()),
        (
            "POST",
            "/v1/claims/release",
            json!({"claims": []}).to_string(),
        ),
        ("GET", "/v1/commits?node=edge-1", String::new()),
        (
            "POST",
            "/v1/commits/release",
            json!({"commits": []}).to_string(),
        ),
    ]
}

fn send(store: &Store, method: &str, path: &str, body: &str, caller: &Caller) -> Response {
    let mut headers = vec![("content-type", "application/json")];
    for value in &caller.authorization {
        headers.push(("authorization", value.as_str()));
    }
    request(
        method,
        &store.url_of(path),
        &headers,
        body.as_bytes(),
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// `201`, or `403 forbidden`: the status and, for a refusal, its code.
fn cell(res: &Response) -> String {
    if res.status < 300 {
        return res.status.to_string();
    }
    let code = res.json()["error"].as_str().unwrap_or("?").to_string();
    format!("{} {code}", res.status)
}

/// What each caller must get: the rule, independent of the table.
fn expected(method: &str, path: &str, heading: &str) -> &'static str {
    let operators_only = method == "PUT"
        || method == "DELETE"
        || path == "/v1/reset"
        || path.starts_with("/v1/claims")
        || path.starts_with("/v1/commits");
    match heading {
        "no token" | "a wrong token" => "401",
        "edge and operator token (two headers)" => "400",
        "edge token" if operators_only => "403",
        _ => "2xx",
    }
}

#[test]
fn each_role_gets_its_endpoints_and_the_table_is_the_documented_one() {
    let redis = Redis::start();
    let store = ready(Store::start(&redis.url()));
    let callers = callers();
    let mut table = String::from("| call |");
    for c in &callers {
        table.push_str(&format!(" {} |", c.heading));
    }
    table.push_str("\n|---|");
    table.push_str(&"---|".repeat(callers.len()));
    table.push('\n');
    for (method, path, body) in calls() {
        table.push_str(&format!("| `{method} {path}` |"));
        for caller in &callers {
            let res = send(&store, method, path, &body, caller);
            let want = expected(method, path, caller.heading);
            let got = res.status.to_string();
            assert!(
                want == got || (want == "2xx" && res.status < 300),
                "{method} {path} with {}: {got}, not {want}: {}",
                caller.heading,
                res.text()
            );
            for token in [run_token(), operator_token()] {
                assert!(
                    !res.text().contains(token),
                    "a token echoed: {}",
                    res.text()
                );
            }
            table.push_str(&format!(" {} |", cell(&res)));
        }
        table.push('\n');
    }
    // What the refusals left: no override, and the promote committed nothing.
    assert_eq!(redis.cli(&["EXISTS", "ankusa:{acme}:override"]), "0");
    assert_eq!(
        redis.cli(&["EXISTS", "ankusa:{acme}:claim:gh:role-key"]),
        "0"
    );
    assert_eq!(
        store.metric(r#"ankusa_store_forbidden_total{endpoint="override",reason="role"}"#),
        2.0
    );
    assert_eq!(
        store.metric(r#"ankusa_store_forbidden_total{endpoint="reset",reason="role"}"#),
        1.0
    );
    assert_eq!(
        store.metric(r#"ankusa_store_forbidden_total{endpoint="claims",reason="role"}"#)
            + store
                .metric(r#"ankusa_store_forbidden_total{endpoint="claims_release",reason="role"}"#),
        2.0
    );
    assert_eq!(
        store.metric(r#"ankusa_store_forbidden_total{endpoint="commits",reason="role"}"#)
            + store.metric(
                r#"ankusa_store_forbidden_total{endpoint="commits_release",reason="role"}"#
            ),
        2.0
    );
    assert_eq!(
        store.metric(r#"ankusa_store_errors_total{cause="forbidden"}"#),
        7.0
    );

    let doc = std::fs::read_to_string(workspace_root().join("RELIABILITY.md"))
        .expect("read RELIABILITY.md");
    let documented = doc
        .split_once("<!-- roles:begin -->\n")
        .and_then(|(_, rest)| rest.split_once("<!-- roles:end -->"))
        .map(|(table, _)| table.to_string())
        .unwrap_or_default();
    assert_eq!(
        documented, table,
        "RELIABILITY.md's role table (between <!-- roles:begin --> and <!-- roles:end -->) \
         is not what the store answers now; the table is:\n{table}"
    );
}

/// Two `authorization` headers: which one counts would depend on who reads
/// the request, so the store refuses it, whatever the two hold.
#[test]
fn two_authorization_headers_are_a_bad_request() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let edge = format!("Bearer {}", run_token());
    let wrong = format!("Bearer {}", fresh_token("wrong"));
    for pair in [[&edge, &edge], [&wrong, &edge], [&edge, &wrong]] {
        let res = request(
            "POST",
            &store.url_of("/v1/hit"),
            &[("authorization", pair[0]), ("authorization", pair[1])],
            b"{}",
            Duration::from_secs(30),
        )
        .expect("answer");
        assert_eq!(res.status, 400, "{}", res.text());
        let message = res.json()["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            message.starts_with("authorization: sent 2 times"),
            "{message}"
        );
        assert!(!message.contains(run_token()), "{message}");
    }
    assert!(
        redis.cli(&["KEYS", "*"]).is_empty(),
        "a refused call reached Redis"
    );
}
