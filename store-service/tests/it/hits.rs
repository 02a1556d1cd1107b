//! `POST /v1/hits`: several hits in one call, each answered as `/v1/hit`
//! would answer it, in order; one malformed hit refuses only itself. Run
//! against one Redis and a 3-master Cluster (tenants spread over its nodes).

use crate::common::{charge, claim, hit, promote, release, Db, Http, Service};
use ankusa_testkit::redis::{Redis, RedisCluster};
use serde_json::{json, Value};
use std::time::Duration;

async fn post_hits(ctx: &(Service, Http), hits: Vec<Value>) -> (u16, Value) {
    ctx.1
        .post(&ctx.0.at("/v1/hits"), &json!({ "hits": hits }))
        .await
}

async fn run(db: Db) {
    let service = Service::ready(&db.url()).await;
    let ctx = (service, Http::new());
    answers_in_order_and_the_quota_exactly(&ctx, &db).await;
    a_malformed_hit_beside_good_ones_refuses_only_itself(&ctx).await;
    the_batch_runs_after_the_script_cache_was_flushed(&ctx, &db).await;
    the_batch_size_is_bounded(&ctx).await;
    settles_ride_on_a_batch(&ctx, &db).await;
    ctx.0.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hits_on_one_redis() {
    run(Db::Single(Redis::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hits_on_a_three_master_cluster() {
    run(Db::Cluster(RedisCluster::start())).await;
}

async fn answers_in_order_and_the_quota_exactly(ctx: &(Service, Http), db: &Db) {
    let calls_before = ctx.0.metric("ankusa_store_hits_per_call_count").await;
    let hits_before = ctx.0.metric("ankusa_store_hits_per_call_sum").await;
    // Six tenants (spread over a Cluster's masters), each: four hooks
    // against a burst of 3 and two hits on one event key.
    let mut hits = Vec::new();
    for t in 0..6 {
        let tenant = format!("batch-{t}");
        for _ in 0..4 {
            hits.push(hit(vec![charge("hooks", &tenant, 1, 1, 3)], None));
        }
        for n in 0..2 {
            let c = claim(&tenant, "evt-1", &format!("hook-{t}-{n}"), 60_000, 30_000);
            hits.push(hit(Vec::new(), Some(c)));
        }
    }
    let (status, answer) = post_hits(ctx, hits).await;
    assert_eq!(status, 200, "{answer}");
    let results = answer["results"].as_array().expect("results");
    assert_eq!(results.len(), 36, "{answer}");
    for t in 0..6 {
        let mine = &results[t * 6..t * 6 + 6];
        let tags: Vec<&str> = mine
            .iter()
            .map(|r| r["result"].as_str().unwrap_or("?"))
            .collect();
        assert_eq!(
            tags,
            ["ok", "ok", "ok", "rate_limited", "ok", "pending"],
            "tenant batch-{t}: {answer}"
        );
        assert!(
            mine[3]["retry_after_ms"].as_u64().unwrap_or(0) >= 1,
            "{answer}"
        );
        let key = format!("ankusa:{{batch-{t}}}:claim:gh:evt-1");
        assert_eq!(db.get(&key), format!("p:hook-{t}-0:edge-1"), "{key}");
    }
    // A single hit afterwards sees what the batch wrote.
    let (status, single) = ctx
        .1
        .post(
            &ctx.0.at("/v1/hit"),
            &hit(vec![charge("hooks", "batch-0", 1, 1, 3)], None),
        )
        .await;
    assert_eq!(
        (status, single["result"].as_str()),
        (200, Some("rate_limited"))
    );
    assert_eq!(
        ctx.0.metric("ankusa_store_hits_per_call_count").await - calls_before,
        2.0
    );
    assert_eq!(
        ctx.0.metric("ankusa_store_hits_per_call_sum").await - hits_before,
        37.0
    );
}

async fn a_malformed_hit_beside_good_ones_refuses_only_itself(ctx: &(Service, Http)) {
    let good = |t: &str| hit(vec![charge("hooks", t, 1, 10, 10)], None);
    let hits = vec![
        good("mixed-a"),
        hit(vec![charge("hooks", "mixed-b", 1, 0, 10)], None),
        json!("not a hit"),
        hit(Vec::new(), Some(claim("mixed-c", "", "h1", 60_000, 30_000))),
        good("mixed-d"),
    ];
    let (status, answer) = post_hits(ctx, hits).await;
    assert_eq!(status, 200, "{answer}");
    let r = &answer["results"];
    // One unit into an empty bucket: its level after the charge is exactly 1.
    let one = json!({"result": "ok", "levels": [1_000_000]});
    assert_eq!(r[0], one, "{answer}");
    assert_eq!(r[4], one, "{answer}");
    for (i, field) in [
        (1, "hits[1].charges[0].rate"),
        (2, "hits[2]"),
        (3, "hits[3].claim.key"),
    ] {
        assert_eq!(r[i]["error"], "bad_request", "{answer}");
        let message = r[i]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(field), "result {i}: {message}");
    }
    // Only refused hits in the batch: each is answered, nothing runs.
    let (status, answer) = post_hits(ctx, vec![json!({"charges": []})]).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"][0]["error"], "bad_request", "{answer}");
    // A hit naming a field twice is refused as `/v1/hit` refuses it, not
    // read as its last copy: here the second copy would charge another tenant.
    let charges = |t: &str| json!([charge("hooks", t, 1, 10, 10)]).to_string();
    let body = format!(
        r#"{{"hits":[{{"charges":{},"charges":{}}}]}}"#,
        charges("twice-a"),
        charges("twice-b")
    );
    let (status, text) = ctx
        .1
        .send("POST", &ctx.0.at("/v1/hits"), &[], body.into_bytes())
        .await;
    assert_eq!(status, 200, "{text}");
    let answer: Value = serde_json::from_str(&text).unwrap();
    let r = &answer["results"][0];
    assert_eq!(r["error"], "bad_request", "{answer}");
    let message = r["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("hits[0]") && message.contains("duplicate field `charges`"),
        "{message}"
    );
}

async fn the_batch_runs_after_the_script_cache_was_flushed(ctx: &(Service, Http), db: &Db) {
    match db {
        Db::Single(r) => assert_eq!(r.cli(&["SCRIPT", "FLUSH"]), "OK"),
        Db::Cluster(c) => {
            for node in c.masters() {
                assert_eq!(node.cli(&["SCRIPT", "FLUSH"]), "OK");
            }
        }
    }
    let hits: Vec<Value> = (0..6)
        .map(|t| {
            hit(
                vec![charge("hooks", &format!("flushed-{t}"), 1, 10, 10)],
                None,
            )
        })
        .collect();
    let (status, answer) = post_hits(ctx, hits).await;
    assert_eq!(status, 200, "{answer}");
    for r in answer["results"].as_array().expect("results") {
        assert_eq!(
            r,
            &json!({"result": "ok", "levels": [1_000_000]}),
            "{answer}"
        );
    }
    // Each ran exactly once: a second round finds one unit spent of 10.
    let probe = hit(vec![charge("hooks", "flushed-0", 10, 10, 10)], None);
    let (_, again) = post_hits(ctx, vec![probe]).await;
    assert_eq!(again["results"][0]["result"], "rate_limited", "{again}");
}

async fn the_batch_size_is_bounded(ctx: &(Service, Http)) {
    let max = ankusa_core::wire::batch::MAX_HITS_PER_CALL;
    let one = hit(vec![charge("hooks", "bounded", 1, 10, 10)], None);
    let (status, answer) = post_hits(ctx, vec![one.clone(); max + 1]).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"], "bad_request");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("hits: has 257 entries"), "{message}");
    let (status, answer) = post_hits(ctx, Vec::new()).await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (400, Some("bad_request"))
    );
    // Over the body limit: 413 before anything is parsed.
    let big = "x".repeat(ankusa_store::routes::MAX_BODY_BYTES + 1);
    let (status, _) = ctx
        .1
        .send("POST", &ctx.0.at("/v1/hits"), &[], big.into_bytes())
        .await;
    assert_eq!(status, 413);
}

async fn settles_ride_on_a_batch(ctx: &(Service, Http), db: &Db) {
    // Six tenants' claims (over a Cluster's masters), pending.
    let claims: Vec<Value> = (0..6)
        .map(|t| {
            claim(
                &format!("ride-{t}"),
                "evt",
                &format!("h{t}"),
                60_000,
                30_000,
            )
        })
        .collect();
    let hits: Vec<Value> = claims
        .iter()
        .map(|c| hit(Vec::new(), Some(c.clone())))
        .collect();
    let (status, answer) = post_hits(ctx, hits).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer.get("settled"), None, "nothing rode: {answer}");
    // Even tenants' claims are promoted, odd ones released, riding on two new hits.
    let ops: Vec<Value> = claims
        .iter()
        .enumerate()
        .map(|(t, c)| {
            if t % 2 == 0 {
                promote(c, &format!("h{t}"))
            } else {
                release(c)
            }
        })
        .collect();
    let body = json!({
        "hits": [hit(vec![charge("hooks", "ride-new", 1, 10, 10)], None),
                 hit(vec![charge("hooks", "ride-new", 1, 10, 10)], None)],
        "settle": ops,
    });
    let (status, answer) = ctx.1.post(&ctx.0.at("/v1/hits"), &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["settled"], 6, "{answer}");
    assert_eq!(answer["results"][1]["result"], "ok", "{answer}");
    for t in 0..6 {
        let key = format!("ankusa:{{ride-{t}}}:claim:gh:evt");
        if t % 2 == 0 {
            assert_eq!(db.committed(&key), format!("c:h{t}"), "{key}");
        } else {
            assert!(!db.exists(&key), "{key} was not released");
        }
    }
    // Riding settles follow the same rule: a promote of a key never held,
    // or of one another hook holds, commits nothing.
    let stranger = claim("ride-0", "fresh", "h-x", 60_000, 30_000);
    let holder = claim("ride-1", "held", "h-1", 60_000, 30_000);
    let thief = claim("ride-1", "held", "h-2", 60_000, 30_000);
    let body = json!({"hits": [hit(Vec::new(), Some(holder.clone()))],
                      "settle": [promote(&stranger, "h-x"), promote(&thief, "h-2")]});
    let (status, answer) = ctx.1.post(&ctx.0.at("/v1/hits"), &body).await;
    assert_eq!(
        (status, answer["settled"].as_u64()),
        (200, Some(2)),
        "{answer}"
    );
    assert!(
        !db.exists("ankusa:{ride-0}:claim:gh:fresh"),
        "a free key was committed"
    );
    assert_eq!(db.get("ankusa:{ride-1}:claim:gh:held"), "p:h-1:edge-1");
    // A malformed settle operation refuses the call, naming it.
    let mut bad = release(&claims[1]);
    bad["claim"]["ttl_ms"] = json!(0);
    let body =
        json!({"hits": [hit(vec![charge("hooks", "ride-new", 1, 10, 10)], None)], "settle": [bad]});
    let (status, answer) = ctx.1.post(&ctx.0.at("/v1/hits"), &body).await;
    assert_eq!(status, 400, "{answer}");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("settle[0].claim.ttl_ms"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_redis_down_is_a_quick_503() {
    let mut redis = Redis::start();
    let service = Service::ready(&redis.url()).await;
    redis.proc.kill();
    let http = Http::new();
    let body = json!({"hits": [hit(vec![charge("hooks", "down", 1, 10, 10)], None)]});
    let started = std::time::Instant::now();
    let (status, answer) = http
        .post_with(
            &service.at("/v1/hits"),
            &[("x-ankusa-budget-ms", "200")],
            &body,
        )
        .await;
    assert_eq!(status, 503, "{answer}");
    let code = answer["error"].as_str().unwrap_or_default();
    assert!(
        ["redis_unavailable", "timeout"].contains(&code),
        "error {code}: {answer}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}
