//! Each edge token speaks only for its own node names: a call naming a node
//! outside its token's `nodes=` is refused 403 and counted, and a new name
//! past its allowance of live names too, checked in Redis so that two store
//! processes on one Redis hold one allowance. Made-up names then can't
//! shrink the fleet's live-edge count (every edge's share of a quota while
//! degraded) by more than the allowance.

use crate::common::{charge, list_all, ready, Db, Http, Service};
use ankusa_store::tokens::{RoleTokens, Tokens};
use ankusa_store::{edges, Config};
use ankusa_testkit::http::{request, Response};
use ankusa_testkit::ports::free_port;
use ankusa_testkit::process::scratch_dir;
use ankusa_testkit::redis::{Redis, RedisCluster};
use ankusa_testkit::store::Store;
use ankusa_testkit::token::fresh_token;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const TTL_MS: u64 = 1_500;

/// A store on `db` accepting `lines` (token lines: `<token> nodes=… live=…`)
/// as edge tokens, with a short live-edge TTL.
fn config(db: &Db, lines: &[String]) -> Config {
    let mut config = Config::for_redis(&db.url()).with_tokens(RoleTokens {
        edge: Tokens::new(lines).expect("token lines"),
        operator: Tokens::default(),
    });
    config.edges_ttl_ms = TTL_MS;
    config.edges_refresh_ms = 100;
    config
}

fn claim(node: &str, key: &str) -> Value {
    json!({"tenant": "acme", "source_id": "gh", "key": key, "hook_id": format!("h-{key}"),
           "node": node, "ttl_ms": 60_000, "pending_ttl_ms": 30_000})
}

fn hit(node: &str, claim: Option<Value>) -> Value {
    json!({"charges": [charge("hooks", "acme", 1, 1_000_000, 1_000_000)], "claim": claim,
           "node": node})
}

async fn post(http: &Http, store: &Service, token: &str, path: &str, body: &Value) -> (u16, Value) {
    let bearer = format!("Bearer {token}");
    http.post_with(&store.at(path), &[("authorization", bearer.as_str())], body)
        .await
}

fn members(db: &Db, key: &str) -> Vec<String> {
    let mut names: Vec<String> = db
        .cli(&["ZRANGE", key, "0", "-1"])
        .lines()
        .map(str::to_string)
        .collect();
    names.sort_unstable();
    names
}

fn message(answer: &Value) -> String {
    answer["message"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_naming_a_node_outside_its_token_is_refused_and_counted() {
    let db = Db::Single(Redis::start());
    let (a, b) = (fresh_token("edge-a"), fresh_token("edge-b"));
    let lines = [format!("{a} nodes=edge-a"), format!("{b} nodes=edge-b")];
    let store = Service::start(config(&db, &lines)).await;
    store.wait_ready(Duration::from_secs(20)).await;
    let http = Http::new();

    // Its own name: admitted, the claim written.
    let (status, answer) = post(
        &http,
        &store,
        &a,
        "/v1/hit",
        &hit("edge-a", Some(claim("edge-a", "k1"))),
    )
    .await;
    assert_eq!((status, &answer["result"]), (200, &json!("ok")), "{answer}");
    assert!(db.exists("ankusa:{acme}:claim:gh:k1"));

    // Another edge's name as the hit's node, or as its claim's: 403, named.
    let (status, answer) = post(&http, &store, &a, "/v1/hit", &hit("edge-b", None)).await;
    assert_eq!(
        (status, &answer["error"]),
        (403, &json!("forbidden")),
        "{answer}"
    );
    assert!(message(&answer).contains("node edge-b"), "{answer}");
    assert!(message(&answer).contains("nodes=edge-a"), "{answer}");
    let (status, answer) = post(
        &http,
        &store,
        &a,
        "/v1/hit",
        &hit("edge-a", Some(claim("edge-b", "k2"))),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        !db.exists("ankusa:{acme}:claim:gh:k2"),
        "a refused claim was written"
    );
    // A name the store shows escaped and cut, never as sent.
    let odd = "x".repeat(64);
    let (status, answer) = post(&http, &store, &a, "/v1/hit", &hit(&odd, None)).await;
    assert_eq!(status, 403, "{answer}");
    assert!(message(&answer).len() < 300, "{answer}");

    // A settle of another node's claim: refused whole, nothing moved.
    let ops = json!({"ops": [{"op": "release", "claim": claim("edge-a", "k1")},
                             {"op": "release", "claim": claim("edge-b", "k1")}]});
    let (status, answer) = post(&http, &store, &a, "/v1/settle", &ops).await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        db.exists("ankusa:{acme}:claim:gh:k1"),
        "a refused settle moved a claim"
    );

    // In a batch, the hit naming another node is refused on its own.
    let batch = json!({"hits": [hit("edge-a", None), hit("edge-b", None)]});
    let (status, answer) = post(&http, &store, &a, "/v1/hits", &batch).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"][0]["result"], "ok", "{answer}");
    assert_eq!(answer["results"][1]["error"], "forbidden", "{answer}");

    // The other token speaks for edge-b.
    let (status, _) = post(&http, &store, &b, "/v1/hit", &hit("edge-b", None)).await;
    assert_eq!(status, 200);

    let counted = |endpoint: &str| {
        format!(r#"ankusa_store_forbidden_total{{endpoint="{endpoint}",reason="node"}}"#)
    };
    assert_eq!(store.metric(&counted("hit")).await, 3.0);
    assert_eq!(store.metric(&counted("settle")).await, 1.0);
    assert_eq!(store.metric(&counted("hits")).await, 1.0);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(members(&db, edges::KEY), ["edge-a", "edge-b"]);
    store.stop().await;
}

/// Sends `names` as hits with `token`, through the stores in turn: how many
/// were answered 200 and how many refused for the allowance.
async fn spray(http: &Http, stores: &[&Service], token: &str, names: &[String]) -> (usize, usize) {
    let (mut ok, mut over) = (0, 0);
    for (i, name) in names.iter().enumerate() {
        let store = stores[i % stores.len()];
        let (status, answer) = post(http, store, token, "/v1/hit", &hit(name, None)).await;
        match status {
            200 => ok += 1,
            403 => {
                assert!(message(&answer).contains("live node name"), "{answer}");
                over += 1;
            }
            _ => panic!("{name}: {status} {answer}"),
        }
    }
    (ok, over)
}

async fn allowance_on(db: Db) {
    let (real, leaked) = (fresh_token("real"), fresh_token("leaked"));
    let lines = [
        format!("{real} nodes=edge-a"),
        format!("{leaked} nodes=edge-* live=3"),
    ];
    // Two store processes on one Redis: one allowance between them.
    let one = Service::start(config(&db, &lines)).await;
    let two = Service::start(config(&db, &lines)).await;
    one.wait_ready(Duration::from_secs(20)).await;
    two.wait_ready(Duration::from_secs(20)).await;
    let http = Http::new();
    let (status, _) = post(&http, &one, &real, "/v1/hit", &hit("edge-a", None)).await;
    assert_eq!(status, 200);

    // 200 made-up names, alternating between the two stores: 3 admitted.
    let names: Vec<String> = (0..200).map(|i| format!("edge-made-up-{i}")).collect();
    // Every admitted name was last seen after this instant, so none can free
    // its room sooner than the TTL after it, however slow the run.
    let sprayed = Instant::now();
    let (ok, over) = spray(&http, &[&one, &two], &leaked, &names).await;
    assert_eq!((ok, over), (3, 197));
    // A name already admitted keeps being admitted, through either store.
    for store in [&one, &two] {
        let (status, _) = post(
            &http,
            store,
            &leaked,
            "/v1/hit",
            &hit("edge-made-up-1", None),
        )
        .await;
        assert_eq!(status, 200);
    }
    // The fleet counts the real edge and 3 more, never 201, on both stores.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let live = members(&db, edges::KEY);
    assert_eq!(live.len(), 4, "{live:?}");
    assert!(live.contains(&"edge-a".to_string()), "{live:?}");
    for store in [&one, &two] {
        let (_, answer) = post(&http, store, &real, "/v1/hit", &hit("edge-a", None)).await;
        assert_eq!(answer["edges"], 4, "{answer}");
    }
    let refused = r#"ankusa_store_forbidden_total{endpoint="hit",reason="allowance"}"#;
    assert_eq!(one.metric(refused).await + two.metric(refused).await, 197.0);

    // Names that fall quiet free their room after the TTL: a new one is admitted.
    let started = Instant::now();
    loop {
        let (status, _) = post(&http, &two, &leaked, "/v1/hit", &hit("edge-later", None)).await;
        if status == 200 {
            break;
        }
        assert_eq!(status, 403);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "never admitted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // 200 ms for the store's clock against this process's.
    assert!(
        sprayed.elapsed() >= Duration::from_millis(TTL_MS - 200),
        "admitted {:?} after the names were first seen, before the quiet names' TTL",
        sprayed.elapsed()
    );
    one.stop().await;
    two.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tokens_allowance_of_live_names_holds_across_two_stores_on_one_redis() {
    allowance_on(Db::Single(Redis::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tokens_allowance_of_live_names_holds_on_a_cluster() {
    allowance_on(Db::Cluster(RedisCluster::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_past_the_allowance_refuses_only_the_new_names_hits() {
    let db = Db::Single(Redis::start());
    let leaked = fresh_token("leaked");
    let store = Service::start(config(&db, &[format!("{leaked} nodes=edge-* live=1")])).await;
    store.wait_ready(Duration::from_secs(20)).await;
    let http = Http::new();
    let batch = json!({"hits": [hit("edge-1", None), hit("edge-2", None), hit("edge-1", None)]});
    let (status, answer) = post(&http, &store, &leaked, "/v1/hits", &batch).await;
    assert_eq!(status, 200, "{answer}");
    let results: Vec<&str> = (0..3)
        .map(|i| {
            let r = &answer["results"][i];
            r["result"].as_str().or(r["error"].as_str()).unwrap_or("?")
        })
        .collect();
    assert_eq!(results, ["ok", "forbidden", "ok"], "{answer}");
    assert_eq!(
        store
            .metric(r#"ankusa_store_forbidden_total{endpoint="hits",reason="allowance"}"#)
            .await,
        1.0
    );
    store.stop().await;
}

fn post_bin(store: &Store, token: &str, body: &Value) -> Response {
    let bearer = format!("Bearer {token}");
    request(
        "POST",
        &store.url_of("/v1/hit"),
        &[
            ("content-type", "application/json"),
            ("authorization", &bearer),
        ],
        body.to_string().as_bytes(),
        Duration::from_secs(30),
    )
    .expect("an answer")
}

/// The store binary on a fresh Redis, reading its edge tokens from a file
/// holding `text` (no other token); the file, to write again.
fn store_with_edge_file(scratch: &str, text: &str) -> (Redis, Store, std::path::PathBuf) {
    let redis = Redis::start();
    let file = scratch_dir(scratch).join("edge.tokens");
    std::fs::write(&file, text).expect("write");
    let args = ["--edge-token-file", &file.display().to_string()];
    let store = ready(Store::start_with_env(free_port(), &redis.url(), &args, &[]));
    (redis, store, file)
}

/// Rotation without a gap, through the binary and SIGHUP: a second token
/// for the same name is accepted beside the first, then alone; a scope
/// error in the file keeps the tokens in force and names the line.
#[test]
fn sighup_rotates_a_nodes_token_and_a_bad_scope_keeps_the_tokens_in_force() {
    let (old, new) = (fresh_token("old"), fresh_token("new"));
    let (_redis, store, file) =
        store_with_edge_file("store-scopes", &format!("{old} nodes=edge-a\n"));
    let status = |token: &str, node: &str| post_bin(&store, token, &hit(node, None)).status;
    assert_eq!(
        (
            status(&old, "edge-a"),
            status(&old, "edge-b"),
            status(&new, "edge-a")
        ),
        (200, 403, 401)
    );
    let reread = |expected_log: &str| {
        let seen = store.proc.log_tail().matches(expected_log).count();
        store.proc.signal("HUP");
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.proc.log_tail().matches(expected_log).count() <= seen {
            assert!(Instant::now() < deadline, "{}", store.proc.log_tail());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    std::fs::write(&file, format!("{old} nodes=edge-a\n{new} nodes=edge-a\n")).expect("write");
    reread("--edge-token-file read again (2 edge accepted)");
    assert_eq!(
        (
            status(&old, "edge-a"),
            status(&new, "edge-a"),
            status(&new, "edge-b")
        ),
        (200, 200, 403)
    );
    std::fs::write(&file, format!("{new} nodes=edge-a live=2\n")).expect("write");
    reread("the edge tokens in force are kept");
    let log = store.proc.log_tail();
    assert!(
        log.contains("line 1") && log.contains("live=2 with the single name"),
        "{log}"
    );
    assert_eq!((status(&old, "edge-a"), status(&new, "edge-a")), (200, 200));
    std::fs::write(&file, format!("{new} nodes=edge-a\n")).expect("write");
    reread("--edge-token-file read again (1 edge accepted)");
    assert_eq!((status(&old, "edge-a"), status(&new, "edge-a")), (401, 200));
    let log = store.proc.log_tail();
    assert!(
        !log.contains(&old) && !log.contains(&new),
        "a token is in the log"
    );
}

/// A bare token line (the 0.2.0 format) still works, for any name, and the
/// store warns at start that it is unscoped; its allowance still bounds it.
#[test]
fn a_bare_token_line_works_for_any_name_with_a_warning_and_a_bounded_allowance() {
    let bare = fresh_token("bare");
    let (_redis, store, _) = store_with_edge_file("store-bare", &format!("{bare}\n"));
    assert!(
        store
            .proc
            .log_tail()
            .contains("1 edge token(s) name no node"),
        "{}",
        store.proc.log_tail()
    );
    let statuses: Vec<u16> = (0..70)
        .map(|i| post_bin(&store, &bare, &hit(&format!("any-{i}"), None)).status)
        .collect();
    let admitted = statuses.iter().filter(|s| **s == 200).count();
    assert_eq!(
        admitted,
        ankusa_store::scope::UNSCOPED_LIVE as usize,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 403),
        "{statuses:?}"
    );
}

/// A store with one leaked pattern token and an operator token.
pub fn operator_config(db: &Db, leaked: &str, operator: &str) -> Config {
    let mut config = Config::for_redis(&db.url()).with_tokens(RoleTokens {
        edge: Tokens::new(&[format!("{leaked} nodes=edge-* live=4")]).expect("edge token"),
        operator: Tokens::from_list(operator, ankusa_store::tokens::Role::Operator)
            .expect("operator token"),
    });
    config.edges_ttl_ms = TTL_MS;
    config
}

async fn claims_on(db: Db) {
    use ankusa_core::hook::hook_id::hook_id;
    let (leaked, operator) = (fresh_token("leaked"), fresh_token("operator"));
    let store = Service::start(operator_config(&db, &leaked, &operator)).await;
    store.wait_ready(Duration::from_secs(20)).await;
    let http = Http::new();
    let at = |ms: u64, n: u8| hook_id(ms, [n; 10]);
    let base = 1_800_000_000_000u64;
    // edge-x's claims at base+0..base+40 s, one with a made-up hook id, and
    // edge-y's; each its own tenant and key, so they spread over the slots.
    let mut made = Vec::new();
    for i in 0..40u64 {
        let hook = at(base + i * 1_000, i as u8);
        made.push((format!("t{}", i % 7), format!("evt-{i}"), hook, "edge-x"));
    }
    made.push(("t1".into(), "forged-1".into(), "forged".into(), "edge-x"));
    for i in 0..5u64 {
        made.push((
            format!("t{i}"),
            format!("other-{i}"),
            at(base + i, 99),
            "edge-y",
        ));
    }
    for (tenant, key, hook, node) in &made {
        let claim = json!({"tenant": tenant, "source_id": "gh", "key": key, "hook_id": hook,
                           "node": node, "ttl_ms": 600_000, "pending_ttl_ms": 600_000});
        let body = json!({"charges": [charge("hooks", tenant, 1, 1_000_000, 1_000_000)],
                          "claim": claim, "node": node});
        let (status, answer) = post(&http, &store, &leaked, "/v1/hit", &body).await;
        assert_eq!((status, &answer["result"]), (200, &json!("ok")), "{answer}");
    }

    // The edge token may not list: an operator's call.
    let (status, _) = http
        .send(
            "GET",
            &store.at("/v1/claims?node=edge-x"),
            &[("authorization", &format!("Bearer {leaked}"))],
            vec![],
        )
        .await;
    assert_eq!(status, 403);

    // From base+10 s to base+19 s: 10 claims, and the one with no time.
    let query = format!("node=edge-x&from={}&to={}", base + 10_000, base + 19_000);
    let listed = list_all(&http, &store, &operator, "claims", &query).await;
    let mut keys: Vec<String> = listed
        .iter()
        .map(|c| c["key"].as_str().unwrap_or("?").to_string())
        .collect();
    keys.sort();
    let mut want: Vec<String> = (10..20).map(|i| format!("evt-{i}")).collect();
    want.push("forged-1".into());
    want.sort();
    assert_eq!(keys, want);
    assert!(listed.iter().all(|c| c["node"] == "edge-x"));
    // One tenant only.
    let t3 = list_all(&http, &store, &operator, "claims", "node=edge-x&tenant=t3").await;
    assert!(
        !t3.is_empty() && t3.iter().all(|c| c["tenant"] == "t3"),
        "{t3:?}"
    );

    // One of them is claimed again by another hook before the release: kept.
    let again = listed
        .iter()
        .find(|c| c["key"] == "evt-12")
        .expect("evt-12")
        .clone();
    let again_key = format!(
        "ankusa:{{{}}}:claim:gh:evt-12",
        again["tenant"].as_str().unwrap_or("")
    );
    db.cli(&["SET", &again_key, "p:someone-else:edge-x", "PX", "600000"]);
    let bearer = format!("Bearer {operator}");
    let (status, answer) = http
        .post_with(
            &store.at("/v1/claims/release"),
            &[("authorization", bearer.as_str())],
            &json!({"claims": listed}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["released"].as_u64(), answer["kept"].as_u64()),
        (Some(10), Some(1))
    );
    assert_eq!(db.get(&again_key), "p:someone-else:edge-x");
    let left = list_all(&http, &store, &operator, "claims", "node=edge-x").await;
    assert_eq!(left.len(), 41 - 10, "{left:?}");
    assert_eq!(
        list_all(&http, &store, &operator, "claims", "node=edge-y")
            .await
            .len(),
        5
    );
    // A released key is free: the sender's retry claims it.
    let freed = listed
        .iter()
        .find(|c| c["key"] == "evt-15")
        .expect("evt-15");
    let claim = json!({"tenant": freed["tenant"], "source_id": "gh", "key": "evt-15",
                       "hook_id": at(base + 99_000, 7), "node": "edge-x", "ttl_ms": 600_000,
                       "pending_ttl_ms": 600_000});
    let body = json!({"charges": [], "claim": claim, "node": "edge-x"});
    let (status, answer) = post(&http, &store, &leaked, "/v1/hit", &body).await;
    assert_eq!((status, &answer["result"]), (200, &json!("ok")), "{answer}");
    // A release naming a bad field is refused naming it; nothing moves.
    let (status, answer) = http
        .post_with(
            &store.at("/v1/claims/release"),
            &[("authorization", bearer.as_str())],
            &json!({"claims": [{"tenant": "t1", "source_id": "gh", "key": "k", "hook_id": "h",
                                "node": "edge x"}]}),
        )
        .await;
    assert_eq!(status, 400, "{answer}");
    assert!(message(&answer).contains("claims[0].node"), "{answer}");
    store.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_lists_and_releases_the_pending_claims_a_node_made() {
    claims_on(Db::Single(Redis::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_lists_and_releases_a_nodes_claims_on_a_cluster() {
    claims_on(Db::Cluster(RedisCluster::start())).await;
}
