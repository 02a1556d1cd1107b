//! The live edge count: every hit names its edge, the store writes the names
//! it heard to one sorted set (scored by Redis's clock, trimmed to the TTL)
//! about once a refresh, and every answer carries the count. Replicas agree
//! through Redis; an edge that stops calling drops out after the TTL.

use crate::common::{charge, Db, Http, Service};
use ankusa_store::{edges, Config};
use ankusa_testkit::redis::{Redis, RedisCluster};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const TTL_MS: u64 = 1_500;

fn config(db: &Db) -> Config {
    let mut config = Config::for_redis(&db.url());
    config.edges_ttl_ms = TTL_MS;
    config.edges_refresh_ms = 100;
    config
}

fn hit_from(node: &str) -> Value {
    json!({"charges": [charge("hooks", "acme", 1, 1_000_000, 1_000_000)], "claim": null, "node": node})
}

async fn edges_seen(http: &Http, store: &Service, node: &str) -> Option<u64> {
    let (status, answer) = http.post(&store.at("/v1/hit"), &hit_from(node)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"], "ok", "{answer}");
    answer["edges"].as_u64()
}

/// Hits from `nodes` through `store` every 50 ms until its answer says `want`.
async fn until_count(http: &Http, store: &Service, nodes: &[&str], want: u64) -> Duration {
    let started = Instant::now();
    loop {
        let mut last = None;
        for node in nodes {
            last = edges_seen(http, store, node).await;
        }
        if last == Some(want) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the count never became {want} (last {last:?})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn run(db: Db) {
    let http = Http::new();
    let (one, two) = (
        Service::start(config(&db)).await,
        Service::start(config(&db)).await,
    );
    one.wait_ready(Duration::from_secs(20)).await;
    two.wait_ready(Duration::from_secs(20)).await;
    // Two edges, each calling its own replica: both replicas count both.
    until_count(&http, &one, &["edge-a"], 1).await;
    edges_seen(&http, &two, "edge-b").await;
    until_count(&http, &two, &["edge-b"], 2).await;
    until_count(&http, &one, &["edge-a"], 2).await;
    // Scored by when each replica last wrote it: either may come first.
    let members = db.cli(&["ZRANGE", edges::KEY, "0", "-1"]);
    let mut members: Vec<&str> = members.lines().collect();
    members.sort_unstable();
    assert_eq!(members, ["edge-a", "edge-b"]);
    let pttl = db.pttl(edges::KEY);
    assert!(pttl > 0 && pttl <= TTL_MS as i64, "PTTL {pttl}");
    // A score is Redis's clock in ms.
    let score: u64 = db
        .cli(&["ZSCORE", edges::KEY, "edge-a"])
        .parse()
        .expect("score");
    assert!(score.abs_diff(db.now_us() / 1_000) < 5_000, "score {score}");
    // Batched hits carry the count too.
    let (status, answer) = http
        .post(
            &one.at("/v1/hits"),
            &json!({"hits": [hit_from("edge-a"), hit_from("edge-a")]}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"][1]["edges"], 2, "{answer}");
    // edge-b stops calling: after the TTL (and a refresh) it is gone.
    let dropped = until_count(&http, &one, &["edge-a"], 1).await;
    assert!(
        dropped >= Duration::from_millis(TTL_MS - 600),
        "edge-b dropped out after {dropped:?}, before its TTL"
    );
    assert_eq!(one.metric("ankusa_store_live_edges").await, 1.0);
    assert_eq!(db.cli(&["ZCARD", edges::KEY]), "1");
    one.stop().await;
    two.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn live_edges_on_one_redis() {
    run(Db::Single(Redis::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn live_edges_on_a_three_master_cluster() {
    run(Db::Cluster(RedisCluster::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hit_without_a_node_counts_nothing_and_a_bad_node_is_refused() {
    let db = Db::Single(Redis::start());
    let store = Service::start(config(&db)).await;
    store.wait_ready(Duration::from_secs(20)).await;
    let http = Http::new();
    let plain = json!({"charges": [charge("hooks", "acme", 1, 100, 100)], "claim": null});
    for _ in 0..3 {
        let (status, answer) = http.post(&store.at("/v1/hit"), &plain).await;
        assert_eq!((status, answer.get("edges")), (200, None), "{answer}");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let (status, answer) = http.post(&store.at("/v1/hit"), &hit_from("edge 1")).await;
    assert_eq!(status, 400);
    assert!(
        answer["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("node: \"edge 1\""),
        "{answer}"
    );
    store.stop().await;
}
