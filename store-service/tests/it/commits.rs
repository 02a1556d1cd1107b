//! The commits a node made without a verified receipt (issue 35, item 2):
//! under `--receipts accept-missing`, or with no receipt key, a leaked edge
//! token can commit made-up claims (claim a key under a made-up hook id,
//! promote it), and the real delivery is then answered as their duplicate.
//! The store indexes each such commit by node, in the same script call; an
//! operator lists them (`GET /v1/commits`) and removes them (`POST
//! /v1/commits/release`), after which the real delivery is admitted and
//! committed. A receipt-verified commit is not indexed, and can't be removed
//! this way.

use crate::common::{charge, list_all, Db, Http, Service};
use crate::scopes::operator_config;
use ankusa_core::wire::{receipt, BODY_CLAIM_SOURCE};
use ankusa_store::committed::Layout;
use ankusa_store::receipts::{Keys, Mode};
use ankusa_store::Config;
use ankusa_testkit::redis::{Redis, RedisCluster};
use ankusa_testkit::token::fresh_token;
use serde_json::{json, Value};
use std::time::Duration;

const KEY: &str = "commits-test-receipt-key-0123456789abcdef";
/// The made-up commits, spread over tenants (so over a Cluster's slots).
const MADE_UP: usize = 30;

/// How the store under test treats a promote without a receipt.
#[derive(Clone, Copy, PartialEq)]
enum Receipts {
    /// A key and `--receipts accept-missing`.
    AcceptMissing,
    /// No key: nothing is checked.
    Off,
}

fn tenant(i: usize) -> String {
    format!("t{}", i % 7)
}

fn claim(tenant: &str, key: &str, hook: &str, node: &str) -> Value {
    json!({"tenant": tenant, "source_id": "gh", "key": key, "hook_id": hook, "node": node,
           "ttl_ms": 600_000, "pending_ttl_ms": 600_000})
}

struct Calls<'a> {
    http: Http,
    store: &'a Service,
    edge: String,
    operator: String,
}

impl Calls<'_> {
    async fn post(&self, token: &str, path: &str, body: &Value) -> (u16, Value) {
        let bearer = format!("Bearer {token}");
        self.http
            .post_with(
                &self.store.at(path),
                &[("authorization", bearer.as_str())],
                body,
            )
            .await
    }

    /// A hit claiming `claim` as its node: the answer's result and id.
    async fn hit(&self, claim: &Value) -> (String, Value) {
        self.hit_in("claim", claim).await
    }

    /// [`Calls::hit`] with the claim as `field`: `claim`, or the replay
    /// guard's `replay` (a body claim).
    async fn hit_in(&self, field: &str, claim: &Value) -> (String, Value) {
        let mut body = json!({"charges": [charge("hooks", claim["tenant"].as_str().unwrap_or(""),
                                                 1, 1_000_000, 1_000_000)],
                              "claim": null, "node": claim["node"]});
        body[field] = claim.clone();
        let (status, answer) = self.post(&self.edge, "/v1/hit", &body).await;
        assert_eq!(status, 200, "{answer}");
        let result = answer["result"].as_str().unwrap_or_default().to_string();
        (result, answer["hook_id"].clone())
    }

    /// Claims and promotes `claim` under its own hook id with `receipt`:
    /// what the store applied.
    async fn commit(&self, claim: &Value, receipt: Option<String>) -> u64 {
        self.commit_in("claim", claim, receipt).await
    }

    /// [`Calls::commit`] of a claim made as `field` (see [`Calls::hit_in`]).
    async fn commit_in(&self, field: &str, claim: &Value, receipt: Option<String>) -> u64 {
        assert_eq!(self.hit_in(field, claim).await.0, "ok");
        let mut op = json!({"op": "promote", "claim": claim, "hook_id": claim["hook_id"]});
        if let Some(r) = receipt {
            op["receipt"] = r.into();
        }
        let (status, answer) = self
            .post(&self.edge, "/v1/settle", &json!({ "ops": [op] }))
            .await;
        assert_eq!(status, 200, "{answer}");
        answer["applied"].as_u64().unwrap_or(99)
    }

    async fn release(&self, token: &str, commits: &[Value]) -> (u16, Value) {
        self.post(token, "/v1/commits/release", &json!({ "commits": commits }))
            .await
    }

    async fn list(&self, query: &str) -> Vec<Value> {
        list_all(&self.http, self.store, &self.operator, "commits", query).await
    }
}

/// A store on `db` with a leaked edge token (`edge-*`) and an operator
/// token, its configuration changed by `change`, once ready; the tokens.
async fn start(db: &Db, change: impl FnOnce(Config) -> Config) -> (Service, [String; 2]) {
    let (edge, operator) = (fresh_token("leaked"), fresh_token("operator"));
    let store = Service::start(change(operator_config(db, &edge, &operator))).await;
    store.wait_ready(Duration::from_secs(20)).await;
    (store, [edge, operator])
}

impl<'a> Calls<'a> {
    fn new(store: &'a Service, [edge, operator]: [String; 2]) -> Calls<'a> {
        Calls {
            http: Http::new(),
            store,
            edge,
            operator,
        }
    }
}

fn keys_of(listed: &[Value]) -> Vec<String> {
    let mut keys: Vec<String> = listed
        .iter()
        .map(|c| c["key"].as_str().unwrap_or("?").to_string())
        .collect();
    keys.sort();
    keys
}

async fn commits_on(db: Db, receipts: Receipts, layout: Layout) {
    let (store, tokens) = start(&db, |mut config| {
        if receipts == Receipts::AcceptMissing {
            let key = Keys::new(&[KEY]).expect("a key");
            config = config.with_receipts(key, Some(Mode::AcceptMissing));
        }
        config.committed_layout = layout;
        config
    })
    .await;
    let calls = Calls::new(&store, tokens);

    // The leaked token commits made-up claims as edge-x, and one as edge-y.
    let before = calls
        .store
        .metric("ankusa_store_settle_ops_total{op=\"promote\"}")
        .await;
    for i in 0..MADE_UP {
        let made_up = claim(
            &tenant(i),
            &format!("evt-{i}"),
            &format!("made-up-{i}"),
            "edge-x",
        );
        assert_eq!(calls.commit(&made_up, None).await, 1, "applied unproven");
    }
    // And the replay guard's claim on a signed body.
    let mut body = claim("t4", "gh:sha256:00ff", "made-up-body", "edge-x");
    body["source_id"] = BODY_CLAIM_SOURCE.into();
    assert_eq!(calls.commit_in("replay", &body, None).await, 1);
    let other = claim("t1", "other", "made-up-y", "edge-y");
    assert_eq!(calls.commit(&other, None).await, 1);
    // A delivery of edge-x committed with a valid receipt: not indexed
    // when the store checks receipts.
    let proven = claim("t2", "proven", "real-proven", "edge-x");
    let proof = receipt::receipt(KEY.as_bytes(), "t2", "real-proven");
    assert_eq!(calls.commit(&proven, Some(proof)).await, 1);
    assert_eq!(
        calls
            .store
            .metric("ankusa_store_settle_ops_total{op=\"promote\"}")
            .await
            - before,
        (MADE_UP + 3) as f64
    );
    // The real delivery of evt-3 is a duplicate of the made-up commit.
    let real = claim(&tenant(3), "evt-3", "real-3", "edge-x");
    let (result, id) = calls.hit(&real).await;
    assert_eq!((result.as_str(), &id), ("duplicate", &json!("made-up-3")));

    // The edge token may neither list nor release: an operator's calls, counted.
    let bearer = format!("Bearer {}", calls.edge);
    let (status, _) = calls
        .http
        .send(
            "GET",
            &store.at("/v1/commits?node=edge-x"),
            &[("authorization", bearer.as_str())],
            vec![],
        )
        .await;
    assert_eq!(status, 403);
    assert_eq!(calls.release(&calls.edge, &[]).await.0, 403);
    for endpoint in ["commits", "commits_release"] {
        let name =
            format!("ankusa_store_forbidden_total{{endpoint=\"{endpoint}\",reason=\"role\"}}");
        assert_eq!(store.metric(&name).await, 1.0, "{name}");
    }

    // Every made-up commit of edge-x is listed, with its hook id and time.
    let listed = calls.list("node=edge-x").await;
    let mut want: Vec<String> = (0..MADE_UP).map(|i| format!("evt-{i}")).collect();
    want.push("gh:sha256:00ff".into());
    if receipts == Receipts::Off {
        // No key: a receipt sent is not checked, so that commit is unproven too.
        want.push("proven".into());
    }
    want.sort();
    assert_eq!(keys_of(&listed), want);
    for c in &listed {
        assert_eq!(c["node"], "edge-x", "{c}");
        assert_eq!(c["ttl_ms"], 600_000, "{c}");
        let key = c["key"].as_str().unwrap_or("");
        if let Some(i) = key.strip_prefix("evt-") {
            assert_eq!(
                (&c["source_id"], &c["hook_id"]),
                (&json!("gh"), &json!(format!("made-up-{i}"))),
                "{c}"
            );
        }
        if key == "gh:sha256:00ff" {
            assert_eq!(
                (&c["source_id"], &c["hook_id"]),
                (&json!(BODY_CLAIM_SOURCE), &json!("made-up-body")),
                "{c}"
            );
        }
    }
    let at = listed[0]["at_ms"].as_u64().expect("at_ms");
    assert!(at > 1_700_000_000_000, "{at}: unix ms");
    // By time and by tenant.
    let later = calls
        .list(&format!("node=edge-x&from={}", at + 3_600_000))
        .await;
    assert!(later.is_empty(), "{later:?}");
    let t3 = calls.list("node=edge-x&tenant=t3").await;
    assert!(
        !t3.is_empty() && t3.iter().all(|c| c["tenant"] == "t3"),
        "{t3:?}"
    );
    assert_eq!(keys_of(&calls.list("node=edge-y").await), ["other"]);

    // Bad calls are refused naming the field and value; nothing moves.
    let (status, answer) = calls
        .http
        .send(
            "GET",
            &store.at("/v1/commits?node=edge-x&from=soon"),
            &[(
                "authorization",
                format!("Bearer {}", calls.operator).as_str(),
            )],
            vec![],
        )
        .await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("from=\\\"soon\\\""), "{answer}");
    let mut bad = listed[0].clone();
    bad["node"] = "edge x".into();
    let (status, answer) = calls
        .release(&calls.operator, &[listed[1].clone(), bad])
        .await;
    assert_eq!(status, 400, "{answer}");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("commits[1].node") && message.contains("edge x"),
        "{answer}"
    );
    assert_eq!(calls.list("node=edge-x").await.len(), want.len());

    // Naming a commit the index doesn't list under that hook removes
    // nothing: edge-x's evt-4 under another hook id, and edge-y's commit
    // as if it were edge-x's.
    let mut wrong_hook = listed
        .iter()
        .find(|c| c["key"] == "evt-4")
        .expect("evt-4")
        .clone();
    wrong_hook["hook_id"] = "real-4".into();
    let y = calls.list("node=edge-y").await;
    let mut wrong_node = y[0].clone();
    wrong_node["node"] = "edge-x".into();
    let (status, answer) = calls
        .release(&calls.operator, &[wrong_hook, wrong_node])
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["released"].as_u64(), answer["kept"].as_u64()),
        (Some(0), Some(2))
    );
    let (result, _) = calls.hit(&claim("t1", "other", "real-y", "edge-y")).await;
    assert_eq!(result, "duplicate", "edge-y's commit stays");

    // The operator releases what was listed: each removed once.
    let (status, answer) = calls.release(&calls.operator, &listed).await;
    assert_eq!(status, 200, "{answer}");
    let n = listed.len() as u64;
    assert_eq!(
        (answer["released"].as_u64(), answer["kept"].as_u64()),
        (Some(n), Some(0))
    );
    let (_, again) = calls.release(&calls.operator, &listed).await;
    assert_eq!(
        (again["released"].as_u64(), again["kept"].as_u64()),
        (Some(0), Some(n))
    );
    assert!(calls.list("node=edge-x").await.is_empty());
    assert_eq!(calls.list("node=edge-y").await.len(), 1);

    // The real delivery's retry is admitted, and its own proven promote
    // commits it: a redelivery is its duplicate.
    let proof = receipt::receipt(KEY.as_bytes(), &tenant(3), "real-3");
    assert_eq!(calls.commit(&real, Some(proof)).await, 1);
    let (result, id) = calls
        .hit(&claim(&tenant(3), "evt-3", "real-3b", "edge-x"))
        .await;
    assert_eq!((result.as_str(), &id), ("duplicate", &json!("real-3")));
    let mut real_body = claim("t4", "gh:sha256:00ff", "real-body", "edge-x");
    real_body["source_id"] = BODY_CLAIM_SOURCE.into();
    assert_eq!(
        calls.hit_in("replay", &real_body).await.0,
        "ok",
        "the body is free again"
    );
    if layout == Layout::Dual {
        assert_eq!(
            db.get(&format!("ankusa:{{{}}}:claim:gh:evt-3", tenant(3))),
            "c:real-3"
        );
        assert_eq!(
            db.get("ankusa:{t5}:claim:gh:evt-5"),
            "",
            "released in both layouts"
        );
    }
    store.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_lists_and_releases_the_unproven_commits_a_node_made() {
    let db = Db::Single(Redis::start());
    commits_on(db, Receipts::AcceptMissing, Layout::Compact).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_lists_and_releases_a_nodes_unproven_commits_on_a_cluster() {
    let db = Db::Cluster(RedisCluster::start());
    commits_on(db, Receipts::AcceptMissing, Layout::Compact).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_a_receipt_key_every_commit_is_listed_and_released_in_both_layouts() {
    let db = Db::Single(Redis::start());
    commits_on(db, Receipts::Off, Layout::Dual).await;
}

/// The default, receipts required: a proven commit writes no index, and a
/// promote without a receipt commits nothing to index.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_receipts_required_nothing_is_indexed() {
    let db = Db::Single(Redis::start());
    let (store, tokens) = start(&db, |config| {
        config.with_receipts(Keys::new(&[KEY]).expect("a key"), None)
    })
    .await;
    let calls = Calls::new(&store, tokens);
    let proof = receipt::receipt(KEY.as_bytes(), "t1", "real-1");
    assert_eq!(
        calls
            .commit(&claim("t1", "k1", "real-1", "edge-x"), Some(proof))
            .await,
        1
    );
    assert_eq!(
        calls
            .commit(&claim("t1", "k2", "made-up", "edge-x"), None)
            .await,
        0
    );
    assert!(db.keys("ankusa:*:unproven:*").is_empty());
    assert!(calls.list("node=edge-x").await.is_empty());
    store.stop().await;
}

/// A page reads a bounded part of a large minute's index hash (about 1 000
/// entries of it), not the whole hash in one reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_page_reads_a_bounded_part_of_a_large_index_hash() {
    let db = Db::Single(Redis::start());
    let (store, tokens) = start(&db, |config| config).await;
    let fill = "for i = 1, 2500 do redis.call('HSET', KEYS[1], 'd' .. i, \
                '1800000000000:h-' .. i .. ':gh:k-' .. i) end return 1";
    let key = "ankusa:{t1}:unproven:edge-big:600000:30000000";
    assert_eq!(db.cli(&["EVAL", fill, "1", key]), "1");
    let calls = Calls::new(&store, tokens);
    let listed = calls.list("node=edge-big").await;
    assert!(
        !listed.is_empty() && listed.len() < 2_500,
        "{} of 2 500 entries in one listing",
        listed.len()
    );
    store.stop().await;
}
