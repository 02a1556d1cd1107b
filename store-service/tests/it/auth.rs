//! Every `/v1/*` call needs a bearer token the store accepts; the start is
//! refused without one. The attacks an unauthenticated caller on loopback
//! could make before (a forged promote, a 24 h lock-out of a tenant, a
//! reset of any tenant) are tried here as such a caller would, over plain
//! HTTP, and must now be answered 401 with Redis untouched.

use crate::common::ready;
use ankusa_testkit::http::{get, request, Response};
use ankusa_testkit::paths::workspace_bin;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::process::scratch_dir;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::{
    fresh_token, operator_token, run_token, EDGE_TOKENS_ENV, OLD_STORE_TOKENS_ENV,
    OPERATOR_TOKENS_ENV, STORE_TOKEN_VARS,
};
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

fn post(store: &Store, path: &str, token: Option<&str>, body: &Value) -> Response {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(b) = &bearer {
        headers.push(("authorization", b.as_str()));
    }
    request(
        "POST",
        &store.url_of(path),
        &headers,
        body.to_string().as_bytes(),
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

fn claim(key: &str) -> Value {
    json!({"tenant": "acme", "source_id": "gh", "key": key, "hook_id": "forged", "node": "edge-1",
           "ttl_ms": 86_400_000u64, "pending_ttl_ms": 30_000})
}

fn hit(key: &str) -> Value {
    json!({"charges": [{"kind": "hooks", "tenant": "acme", "units": 1, "rate": 10, "burst": 100}],
           "claim": claim(key)})
}

fn assert_unauthorized(res: &Response, secret: Option<&str>) {
    assert_eq!(res.status, 401, "{}", res.text());
    assert_eq!(res.json()["error"], "unauthorized", "{}", res.text());
    assert_eq!(res.header("www-authenticate"), Some("Bearer"));
    if let Some(secret) = secret {
        assert!(!res.text().contains(secret), "{}", res.text());
    }
}

#[test]
fn no_token_or_a_wrong_one_is_refused_and_counted() {
    let redis = Redis::start();
    let store = ready(Store::start(&redis.url()));
    for path in ["/v1/hit", "/v1/hits", "/v1/settle", "/v1/reset", "/v1/nope"] {
        assert_unauthorized(&post(&store, path, None, &json!({})), None);
    }
    // Overrides: every method, with no token, changes and reveals nothing.
    for (method, path) in [
        ("PUT", "/v1/overrides/acme"),
        ("GET", "/v1/overrides/acme"),
        ("DELETE", "/v1/overrides/acme"),
        ("GET", "/v1/overrides"),
    ] {
        let res = request(
            method,
            &store.url_of(path),
            &[("content-type", "application/json")],
            br#"{"rate": 1, "burst": 1}"#,
            Duration::from_secs(30),
        )
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        assert_unauthorized(&res, None);
    }
    let wrong = fresh_token("wrong");
    assert_unauthorized(
        &post(&store, "/v1/hit", Some(&wrong), &hit("w")),
        Some(&wrong),
    );
    // The Basic scheme, or the token alone, is no bearer token.
    let basic = request(
        "POST",
        &store.url_of("/v1/hit"),
        &[("authorization", &format!("Basic {}", run_token()))],
        hit("b").to_string().as_bytes(),
        Duration::from_secs(30),
    )
    .expect("answer");
    assert_unauthorized(&basic, None);
    assert_eq!(
        store.metric("ankusa_store_unauthorized_total{reason=\"missing\"}"),
        10.0
    );
    assert_eq!(
        store.metric("ankusa_store_unauthorized_total{reason=\"invalid\"}"),
        1.0
    );
    assert_eq!(
        store.metric("ankusa_store_errors_total{cause=\"unauthorized\"}"),
        11.0
    );
    assert_eq!(
        store.metric("ankusa_store_requests_total{endpoint=\"hit\",result=\"unauthorized\"}"),
        3.0
    );
    assert!(
        redis.cli(&["KEYS", "*"]).is_empty(),
        "a refused call reached Redis"
    );
    // The probes stay open: a load balancer or Prometheus has no token.
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(
            get(&store.url_of(path)).expect("answer").status,
            200,
            "{path}"
        );
    }
    let bearer = format!("Bearer {}", operator_token());
    let set = request(
        "PUT",
        &store.url_of("/v1/overrides/acme"),
        &[("authorization", bearer.as_str())],
        br#"{"rate": 10, "burst": 100, "ttl_ms": 60000}"#,
        Duration::from_secs(30),
    )
    .expect("answer");
    assert_eq!(set.status, 200, "{}", set.text());
    let ok = post(&store, "/v1/hit", Some(run_token()), &hit("ok"));
    assert_eq!(
        (ok.status, ok.json()["result"].clone()),
        (200, json!("ok")),
        "{}",
        ok.text()
    );
}

#[test]
fn every_token_of_the_file_and_the_environment_is_accepted() {
    let redis = Redis::start();
    let (old, new, from_env) = (fresh_token("old"), fresh_token("new"), fresh_token("env"));
    let file = scratch_dir("store-tokens").join("tokens");
    std::fs::write(
        &file,
        format!("# rotation: new first, old until the edges moved\n{new}\n{old}\n"),
    )
    .expect("write the token file");
    let store = ready(Store::start_with_env(
        free_port(),
        &redis.url(),
        &["--edge-token-file", &file.display().to_string()],
        &[(EDGE_TOKENS_ENV, &from_env)],
    ));
    for (i, token) in [&old, &new, &from_env].into_iter().enumerate() {
        let res = post(&store, "/v1/hit", Some(token), &hit(&format!("k{i}")));
        assert_eq!(res.status, 200, "token {i}: {}", res.text());
    }
    assert_unauthorized(&post(&store, "/v1/hit", Some(run_token()), &hit("x")), None);
    let log = store.proc.log_tail();
    assert!(log.contains("(3 edge, 0 operator accepted)"), "{log}");
    for token in [&old, &new, &from_env] {
        assert!(
            !log.contains(token.as_str()),
            "a token is in the log:\n{log}"
        );
    }
}

#[test]
fn the_token_is_not_on_the_store_command_line() {
    let redis = Redis::start();
    let store = ready(Store::start(&redis.url()));
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", store.proc.pid()))
        .expect("read the store's /proc cmdline");
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(cmdline.contains("ankusa-store"), "{cmdline}");
    assert!(
        !cmdline.contains(run_token()),
        "the token is visible to ps: {cmdline}"
    );
}

fn start_refused(args: &[&str], env: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(workspace_bin("ankusa-store"));
    cmd.args(args).env_remove(OLD_STORE_TOKENS_ENV);
    for var in STORE_TOKEN_VARS {
        cmd.env_remove(var);
    }
    let out = cmd
        .envs(env.iter().copied())
        .output()
        .expect("run ankusa-store");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    err
}

#[test]
fn a_start_without_a_usable_token_is_refused_naming_the_flag() {
    let listen = format!("127.0.0.1:{}", free_port());
    let err = start_refused(&["--listen", &listen], &[]);
    assert!(
        err.contains("no store token")
            && err.contains("--edge-token-file")
            && err.contains("--operator-token-file")
            && err.contains("--insecure-no-auth"),
        "{err}"
    );
    // Not even for a moment on every interface.
    let err = start_refused(&["--listen", &format!("0.0.0.0:{}", free_port())], &[]);
    assert!(err.contains("no store token"), "{err}");

    let empty = scratch_dir("store-empty-tokens").join("tokens");
    std::fs::write(&empty, "# no token yet\n\n").expect("write");
    for flag in ["--edge-token-file", "--operator-token-file"] {
        let err = start_refused(
            &["--listen", &listen, flag, &empty.display().to_string()],
            &[],
        );
        assert!(
            err.contains(flag) && err.contains("holds no token"),
            "{err}"
        );
    }

    for var in [EDGE_TOKENS_ENV, OPERATOR_TOKENS_ENV] {
        let err = start_refused(&["--listen", &listen], &[(var, "short")]);
        assert!(
            err.contains(&format!("{var} item 1"))
                && err.contains("at least 16")
                && !err.contains("short,"),
            "{err}"
        );
    }
    let err = start_refused(
        &["--listen", &listen, "--insecure-no-auth"],
        &[(EDGE_TOKENS_ENV, run_token())],
    );
    assert!(err.contains("--insecure-no-auth"), "{err}");
}

/// The single-role token file and variable of earlier versions gave one
/// token every right; the store refuses them rather than guess a role,
/// naming the two that replace them.
#[test]
fn the_single_role_token_file_and_variable_are_refused_naming_the_new_ones() {
    let listen = format!("127.0.0.1:{}", free_port());
    let file = scratch_dir("store-old-tokens").join("tokens");
    std::fs::write(&file, format!("{}\n", run_token())).expect("write");
    let err = start_refused(
        &[
            "--listen",
            &listen,
            "--token-file",
            &file.display().to_string(),
        ],
        &[(OPERATOR_TOKENS_ENV, operator_token())],
    );
    assert!(
        err.contains("--token-file")
            && err.contains("--edge-token-file")
            && err.contains("--operator-token-file")
            && !err.contains(run_token()),
        "{err}"
    );
    let err = start_refused(
        &["--listen", &listen],
        &[(OLD_STORE_TOKENS_ENV, run_token())],
    );
    assert!(
        err.contains("ANKUSA_STORE_TOKENS")
            && err.contains("ANKUSA_STORE_EDGE_TOKENS")
            && err.contains("ANKUSA_STORE_OPERATOR_TOKENS")
            && !err.contains(run_token()),
        "{err}"
    );
}

#[test]
fn the_opt_out_accepts_bare_calls_with_a_warning() {
    let redis = Redis::start();
    let store = Store::start_with_env(free_port(), &redis.url(), &["--insecure-no-auth"], &[]);
    assert!(store.wait_ready(Duration::from_secs(10)));
    assert_eq!(post(&store, "/v1/hit", None, &hit("bare")).status, 200);
    assert!(
        store.proc.log_tail().contains("NOT authenticated"),
        "{}",
        store.proc.log_tail()
    );
}

#[test]
fn the_redis_password_never_reaches_the_log() {
    let redis = Redis::start();
    let url = format!("redis://:hunter2-secret@127.0.0.1:{}/0", redis.port);
    let mut cmd_env = vec![(EDGE_TOKENS_ENV, run_token())];
    // Every line there is, through the old variable's name.
    cmd_env.push(("ANKUSA_LOG", "trace"));
    let store = Store::start_with_env(free_port(), &url, &[], &cmd_env);
    // This Redis has no password: AUTH fails and the store logs its retries.
    std::thread::sleep(Duration::from_millis(1500));
    let log = std::fs::read_to_string(&store.proc.log).unwrap_or_default();
    assert!(log.contains("redis://:***@127.0.0.1"), "{log}");
    assert!(
        !log.contains("hunter2"),
        "the password is in the log:\n{log}"
    );
}

/// Attack 1: a `promote` for an event key never delivered. Before, it was
/// applied, and the real delivery was then answered as a duplicate of a hook
/// nobody stored. The end-to-end half is `forged_promote_…` in
/// `tests/e2e/edge_auth.rs`.
#[test]
fn attack_a_forged_promote_is_refused_and_writes_nothing() {
    let redis = Redis::start();
    let store = ready(Store::start(&redis.url()));
    let forged =
        json!({"ops": [{"op": "promote", "hook_id": "forged", "claim": claim("never-delivered")}]});
    assert_unauthorized(&post(&store, "/v1/settle", None, &forged), None);
    assert_eq!(
        redis.cli(&["EXISTS", "ankusa:{acme}:claim:gh:never-delivered"]),
        "0"
    );
    // Every edge holds an edge token, which may settle: the promote carries
    // no receipt of the intake's, so the store leaves it out (200, nothing
    // applied) and counts it.
    let res = post(&store, "/v1/settle", Some(run_token()), &forged);
    assert_eq!(
        (res.status, res.json()["applied"].as_u64()),
        (200, Some(0)),
        "{}",
        res.text()
    );
    assert_eq!(
        redis.cli(&["EXISTS", "ankusa:{acme}:claim:gh:never-delivered"]),
        "0",
        "an edge token committed a key no hook held"
    );
    assert_eq!(
        store.metric(r#"ankusa_store_receipts_total{applied="false",result="missing"}"#),
        1.0
    );
}

/// Attack 2: one hit charging a day's worth of the tenant's bucket locked
/// every hook of the tenant out (429) until the bucket key's 24 h TTL.
#[test]
fn attack_an_oversized_charge_is_refused_and_the_tenant_stays_open() {
    let redis = Redis::start();
    let store = ready(Store::start(&redis.url()));
    // The largest charge the wire allows: 2³² units at 1 per second.
    let lockout = json!({"charges": [{"kind": "hooks", "tenant": "acme",
        "units": 4_294_967_296u64, "rate": 1, "burst": 4_294_967_296u64}], "claim": null});
    assert_unauthorized(&post(&store, "/v1/hit", None, &lockout), None);
    assert!(redis.cli(&["KEYS", "ankusa:{acme}:*"]).is_empty());
    let res = post(&store, "/v1/hit", Some(run_token()), &hit("after"));
    assert_eq!(res.json()["result"], "ok", "{}", res.text());
}

/// Attack 3: `/v1/reset` of any tenant forgot its fleet buckets (a fresh
/// burst for the taking).
#[test]
fn attack_a_reset_of_another_tenant_is_refused() {
    let redis = Redis::start();
    let store = ready(Store::start(&redis.url()));
    // 50 units at 1/s: the bucket stays 50 s, whatever the machine's load.
    let slow = json!({"charges": [{"kind": "hooks", "tenant": "acme", "units": 50, "rate": 1,
                                    "burst": 100}], "claim": null});
    let res = post(&store, "/v1/hit", Some(run_token()), &slow);
    assert_eq!(res.status, 200, "{}", res.text());
    let before = redis.cli(&["KEYS", "ankusa:{acme}:rl:*"]);
    assert!(!before.is_empty());
    assert_unauthorized(
        &post(&store, "/v1/reset", None, &json!({"tenant": "acme"})),
        None,
    );
    // Nor may an edge's token, which every edge holds: resets are an operator's.
    let res = post(
        &store,
        "/v1/reset",
        Some(run_token()),
        &json!({"tenant": "acme"}),
    );
    assert_eq!(res.status, 403, "{}", res.text());
    assert_eq!(res.json()["error"], "forbidden", "{}", res.text());
    assert_eq!(redis.cli(&["KEYS", "ankusa:{acme}:rl:*"]), before);
}

#[test]
fn sighup_reads_each_roles_file_again_and_a_bad_file_keeps_that_roles_tokens() {
    let redis = Redis::start();
    let (old, new) = (fresh_token("old"), fresh_token("new"));
    let (op_old, op_new) = (fresh_token("op-old"), fresh_token("op-new"));
    let dir = scratch_dir("store-rotate");
    let (edge_file, op_file) = (dir.join("edge.tokens"), dir.join("operator.tokens"));
    std::fs::write(&edge_file, format!("{old}\n")).expect("write");
    std::fs::write(&op_file, format!("{op_old}\n")).expect("write");
    let store = ready(Store::start_with_env(
        free_port(),
        &redis.url(),
        &[
            "--edge-token-file",
            &edge_file.display().to_string(),
            "--operator-token-file",
            &op_file.display().to_string(),
        ],
        &[],
    ));
    let status = |token: &str, key: &str| post(&store, "/v1/hit", Some(token), &hit(key)).status;
    let reset =
        |token: &str| post(&store, "/v1/reset", Some(token), &json!({"tenant": "acme"})).status;
    assert_eq!((status(&old, "a"), status(&new, "b")), (200, 401));
    assert_eq!(
        (reset(&op_old), reset(&op_new), reset(&old)),
        (200, 401, 403)
    );

    // Signals the store and waits for one more `expected_log` line.
    let reread = |expected_log: &str| {
        let seen = store.proc.log_tail().matches(expected_log).count();
        store.proc.signal("HUP");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let log = store.proc.log_tail();
            if log.matches(expected_log).count() > seen {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Rotation of the edge token: both, then only the new one.
    std::fs::write(&edge_file, format!("{new}\n{old}\n")).expect("write");
    reread("--operator-token-file read again (1 operator accepted)");
    assert!(store
        .proc
        .log_tail()
        .contains("--edge-token-file read again (2 edge accepted)"));
    assert_eq!((status(&old, "c"), status(&new, "d")), (200, 200));
    std::fs::write(&edge_file, format!("{new}\n")).expect("write");
    // And of the operator token, in the same signal.
    std::fs::write(&op_file, format!("{op_new}\n")).expect("write");
    reread("--operator-token-file read again (1 operator accepted)");
    assert_eq!((status(&old, "e"), status(&new, "f")), (401, 200));
    assert_eq!((reset(&op_old), reset(&op_new)), (401, 200));
    // An emptied operator file locks no operator out, and the edge file is
    // still read: its role's tokens in force stay, the other role moves on.
    std::fs::write(&op_file, "# emptied by mistake\n").expect("write");
    std::fs::write(&edge_file, format!("{old}\n")).expect("write");
    reread("the operator tokens in force are kept");
    assert_eq!(reset(&op_new), 200);
    assert_eq!((status(&old, "g"), status(&new, "h")), (200, 401));
    let log = store.proc.log_tail();
    for token in [&old, &new, &op_old, &op_new] {
        assert!(!log.contains(token.as_str()), "a token is in the log");
    }
}
