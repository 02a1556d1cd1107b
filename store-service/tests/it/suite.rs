//! The behaviours of the hit and settle scripts, with their exact keys and
//! TTLs. The same suite runs against one Redis and a 3-master Cluster.

use crate::common::{charge, claim, hit, promote, release, Db, Http, Service};
use ankusa_testkit::redis::{Redis, RedisCluster};
use serde_json::{json, Value};
use std::time::Duration;

const SECOND: u64 = 1_000_000;

struct Ctx<'a> {
    service: &'a Service,
    db: &'a Db,
    http: Http,
}

impl Ctx<'_> {
    async fn hit(&self, body: &Value) -> Value {
        let (status, answer) = self.http.post(&self.service.at("/v1/hit"), body).await;
        assert_eq!(status, 200, "hit answered {status}: {answer}");
        answer
    }

    async fn settle(&self, ops: Vec<Value>) -> Value {
        let (status, answer) = self
            .http
            .post(&self.service.at("/v1/settle"), &json!({ "ops": ops }))
            .await;
        assert_eq!(status, 200, "settle answered {status}: {answer}");
        answer
    }
}

async fn run(db: Db) {
    let service = Service::ready(&db.url()).await;
    let ctx = Ctx {
        service: &service,
        db: &db,
        http: Http::new(),
    };
    ok_writes_both_buckets_and_a_pending_claim(&ctx).await;
    a_taken_claim_spends_no_charge(&ctx).await;
    denied_charge_writes_nothing(&ctx).await;
    a_bucket_from_before_a_clock_step_is_restamped_not_held(&ctx).await;
    a_bucket_is_kept_at_most_30_days_whatever_its_quota(&ctx).await;
    release_by_a_non_holder_is_a_no_op(&ctx).await;
    a_settle_moves_only_a_claim_its_hook_holds(&ctx).await;
    promote_after_pending_expiry_commits_nothing(&ctx).await;
    concurrent_hits_against_burst_50_admit_exactly_50(&ctx).await;
    reset_forgets_the_buckets(&ctx).await;
    concurrent_settles_share_pipelines(&ctx).await;
    // Last: it empties Redis's script cache, which costs the next pipeline
    // on each node a round trip (the load) that the counts above don't expect.
    settles_load_their_script_only_when_redis_lost_it(&ctx).await;
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn suite_on_one_redis() {
    run(Db::Single(Redis::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn suite_on_a_three_master_cluster() {
    run(Db::Cluster(RedisCluster::start())).await;
}

/// Asserts `ttl_ms` is `expected_ms` less at most `slack_ms` (time passes between write and read).
/// A committed claim's compact entry lasts `ttl_ms` (less at most
/// `slack_ms` gone by) and at most one partition (⌈ttl_ms / 2⌉) more.
fn assert_committed_ttl(got_ms: i64, ttl_ms: i64, slack_ms: i64) {
    let most = ttl_ms + (ttl_ms + 1) / 2;
    assert!(
        got_ms <= most && got_ms > ttl_ms - slack_ms,
        "committed claim: PTTL {got_ms} ms, expected in ({}, {most}]",
        ttl_ms - slack_ms
    );
}

fn assert_ttl(what: &str, ttl_ms: i64, expected_ms: i64, slack_ms: i64) {
    assert!(
        ttl_ms <= expected_ms && ttl_ms > expected_ms - slack_ms,
        "{what}: PTTL {ttl_ms} ms, expected {expected_ms} ms (less at most {slack_ms})"
    );
}

/// A charge of the largest burst at the slowest rate (2^32 units at 1 a
/// second) left its bucket key with a TTL of 2^32 s, about 136 years. It is
/// kept as long as the longest-lived claim now, 30 days.
async fn a_bucket_is_kept_at_most_30_days_whatever_its_quota(ctx: &Ctx<'_>) {
    let most = ankusa_core::limit::limits::TTL_MS.max as i64;
    let burst = 1u64 << 32;
    let answer = ctx
        .hit(&hit(vec![charge("hooks", "vast", burst, 1, burst)], None))
        .await;
    assert_eq!(answer["result"], "ok", "{answer}");
    assert_ttl(
        "a bucket draining in 136 years",
        ctx.db.pttl("ankusa:{vast}:rl:hooks"),
        most,
        5_000,
    );
    // The level itself is kept meanwhile: one unit more is refused.
    let answer = ctx
        .hit(&hit(vec![charge("hooks", "vast", 1, 1, burst)], None))
        .await;
    assert_eq!(answer["result"], "rate_limited", "{answer}");
}

async fn ok_writes_both_buckets_and_a_pending_claim(ctx: &Ctx<'_>) {
    let t = "okay";
    let before = ctx.db.now_us();
    let c = claim(t, "delivery-1", "hook-1", 3_600_000, 30_000);
    // 1 unit/s with charges of 200 and 300 units: the buckets take 200 s and
    // 300 s to drain, so the TTLs stay readable on a loaded machine.
    let body = hit(
        vec![
            charge("hooks", t, 200, 1, 1000),
            charge("bytes", t, 300, 1, 1000),
        ],
        Some(c),
    );
    // Each bucket's level after its charge, in charge order: empty buckets
    // charged 200 and 300 units hold exactly that.
    assert_eq!(
        ctx.hit(&body).await,
        json!({"wire": 2, "result": "ok", "levels": [200_000_000u64, 300_000_000u64]})
    );
    let after = ctx.db.now_us();

    assert_eq!(
        ctx.db.keys("ankusa:{okay}:*"),
        vec![
            "ankusa:{okay}:claim:gh:delivery-1",
            "ankusa:{okay}:rl:bytes",
            "ankusa:{okay}:rl:hooks"
        ]
    );
    // An idle bucket becomes "stamp:level": stamped now on Redis's clock,
    // holding the charge in micro-units; the key lives until it drains.
    let bucket = |key: &str| -> (u64, u64) {
        let value = ctx.db.get(key);
        let (stamp, level) = value.split_once(':').expect("stamp:level");
        (
            stamp.parse().expect("stamp is an integer"),
            level.parse().expect("level is an integer"),
        )
    };
    let (hooks_stamp, hooks_level) = bucket("ankusa:{okay}:rl:hooks");
    assert!(
        (before..=after).contains(&hooks_stamp),
        "hooks stamp {hooks_stamp}"
    );
    assert_eq!(hooks_level, 200 * SECOND, "200 units in micro-units");
    assert_eq!(
        bucket("ankusa:{okay}:rl:bytes"),
        (hooks_stamp, 300 * SECOND),
        "both buckets use the same script clock"
    );
    assert_ttl(
        "hooks bucket",
        ctx.db.pttl("ankusa:{okay}:rl:hooks"),
        200_000,
        5_000,
    );
    assert_ttl(
        "bytes bucket",
        ctx.db.pttl("ankusa:{okay}:rl:bytes"),
        300_000,
        5_000,
    );
    assert_eq!(
        ctx.db.get("ankusa:{okay}:claim:gh:delivery-1"),
        "p:hook-1:edge-1"
    );
    assert_ttl(
        "pending claim",
        ctx.db.pttl("ankusa:{okay}:claim:gh:delivery-1"),
        30_000,
        5_000,
    );
}

async fn a_taken_claim_spends_no_charge(ctx: &Ctx<'_>) {
    let t = "taken";
    let charges = || vec![charge("hooks", t, 1, 1, 100)];
    let first = claim(t, "d", "hook-a", 3_600_000, 30_000);
    assert_eq!(
        ctx.hit(&hit(charges(), Some(first.clone()))).await["result"],
        "ok"
    );
    let stored = ctx.db.get("ankusa:{taken}:rl:hooks");

    // In flight elsewhere: pending with the time left on the pending TTL.
    let answer = ctx
        .hit(&hit(
            charges(),
            Some(claim(t, "d", "hook-b", 3_600_000, 30_000)),
        ))
        .await;
    assert_eq!(answer["result"], "pending", "{answer}");
    let left = answer["retry_after_ms"].as_u64().expect("retry_after_ms");
    assert!((25_000..=30_000).contains(&left), "retry_after_ms {left}");
    assert_eq!(
        ctx.db.get("ankusa:{taken}:rl:hooks"),
        stored,
        "a pending answer spent a charge"
    );

    // Durable: duplicate, naming the hook that holds the key, for ttl_ms.
    assert_eq!(
        ctx.settle(vec![promote(&first, "hook-a")]).await,
        json!({"wire": 2, "applied": 1})
    );
    assert_eq!(ctx.db.committed("ankusa:{taken}:claim:gh:d"), "c:hook-a");
    assert_committed_ttl(
        ctx.db.committed_pttl("ankusa:{taken}:claim:gh:d"),
        3_600_000,
        5_000,
    );
    let answer = ctx
        .hit(&hit(
            charges(),
            Some(claim(t, "d", "hook-c", 3_600_000, 30_000)),
        ))
        .await;
    assert_eq!(
        answer,
        json!({"wire": 2, "result": "duplicate", "hook_id": "hook-a"})
    );
    assert_eq!(
        ctx.db.get("ankusa:{taken}:rl:hooks"),
        stored,
        "a duplicate spent a charge"
    );
}

async fn denied_charge_writes_nothing(ctx: &Ctx<'_>) {
    let t = "denied";
    // 10 units of a 20 burst at 1/s: two fill it, the third waits 10 s.
    let hooks = || charge("hooks", t, 10, 1, 20);
    for _ in 0..2 {
        assert_eq!(ctx.hit(&hit(vec![hooks()], None)).await["result"], "ok");
    }
    let stored = ctx.db.get("ankusa:{denied}:rl:hooks");
    let answer = ctx
        .hit(&hit(
            vec![hooks()],
            Some(claim(t, "d", "hook-x", 60_000, 30_000)),
        ))
        .await;
    assert_eq!(answer["result"], "rate_limited", "{answer}");
    let wait = answer["retry_after_ms"].as_u64().expect("retry_after_ms");
    assert!(
        (5_000..=10_000).contains(&wait),
        "retry_after_ms {wait}: one charge (10 s) less the time passed"
    );
    assert_eq!(
        ctx.db.get("ankusa:{denied}:rl:hooks"),
        stored,
        "a denied charge changed the bucket"
    );
    assert!(
        !ctx.db.exists("ankusa:{denied}:claim:gh:d"),
        "a denied hit took the claim"
    );

    // All or nothing: the bytes bucket admits, the hooks bucket denies, neither changes.
    let answer = ctx
        .hit(&hit(vec![hooks(), charge("bytes", t, 1, 1, 10)], None))
        .await;
    assert_eq!(answer["result"], "rate_limited", "{answer}");
    assert!(
        !ctx.db.exists("ankusa:{denied}:rl:bytes"),
        "the admitted charge of a denied hit was written"
    );
    assert_eq!(ctx.db.get("ankusa:{denied}:rl:hooks"), stored);
}

async fn a_bucket_from_before_a_clock_step_is_restamped_not_held(ctx: &Ctx<'_>) {
    let key = "ankusa:{stepped}:rl:hooks";
    let hooks = || hit(vec![charge("hooks", "stepped", 1, 1, 5)], None);
    // A full bucket (burst 5) stamped an hour ahead: Redis's clock stepped back.
    let ahead = ctx.db.now_us() + 3_600 * SECOND;
    ctx.db
        .cli(&["SET", key, &format!("{ahead}:{}", 5 * SECOND)]);
    let before = ctx.db.now_us();
    let answer = ctx.hit(&hooks()).await;
    let after = ctx.db.now_us();
    assert_eq!(answer["result"], "rate_limited", "{answer}");
    let wait = answer["retry_after_ms"].as_u64().expect("retry_after_ms");
    assert!(
        (1..=1_000).contains(&wait),
        "retry_after_ms {wait}: one unit at 1/s, not the hour of the step"
    );
    // The denial spent nothing but restamped the bucket at now, level kept.
    let value = ctx.db.get(key);
    let (stamp, level) = value.split_once(':').expect("stamp:level");
    let stamp: u64 = stamp.parse().expect("stamp");
    assert!((before..=after).contains(&stamp), "restamped at {stamp}");
    assert_eq!(level, (5 * SECOND).to_string());
    assert_ttl("restamped bucket", ctx.db.pttl(key), 5_000, 5_000);

    // A level far above the capacity (a lowered limit) counts as full, no more.
    let now = ctx.db.now_us();
    ctx.db.cli(&["SET", key, &format!("{now}:{}", 1u64 << 52)]);
    let answer = ctx.hit(&hooks()).await;
    assert_eq!(answer["result"], "rate_limited", "{answer}");
    let wait = answer["retry_after_ms"].as_u64().expect("retry_after_ms");
    assert!((1..=1_000).contains(&wait), "retry_after_ms {wait}");
}

async fn release_by_a_non_holder_is_a_no_op(ctx: &Ctx<'_>) {
    let t = "rel";
    let holder = claim(t, "d", "hook-1", 60_000, 30_000);
    assert_eq!(
        ctx.hit(&hit(vec![], Some(holder.clone()))).await["result"],
        "ok"
    );
    let other = claim(t, "d", "hook-2", 60_000, 30_000);
    assert_eq!(
        ctx.settle(vec![release(&other)]).await,
        json!({"wire": 2, "applied": 1})
    );
    assert_eq!(
        ctx.db.get("ankusa:{rel}:claim:gh:d"),
        "p:hook-1:edge-1",
        "a non-holder released the claim"
    );
    ctx.settle(vec![release(&holder)]).await;
    assert!(
        !ctx.db.exists("ankusa:{rel}:claim:gh:d"),
        "the holder's release left the claim"
    );

    // A committed key is never released: the hook is stored.
    assert_eq!(
        ctx.hit(&hit(vec![], Some(holder.clone()))).await["result"],
        "ok"
    );
    ctx.settle(vec![promote(&holder, "hook-1")]).await;
    ctx.settle(vec![release(&holder)]).await;
    assert_eq!(ctx.db.committed("ankusa:{rel}:claim:gh:d"), "c:hook-1");
}

/// Settles call their script by its hash: once Redis holds it, a batch
/// sends no `SCRIPT LOAD`; after Redis lost it (`SCRIPT FLUSH`, as a
/// restart would) the next settle loads it again and is still applied.
async fn settles_load_their_script_only_when_redis_lost_it(ctx: &Ctx<'_>) {
    let key = "ankusa:{loads}:claim:gh:d";
    let holder = claim("loads", "d", "hook-1", 120_000, 30_000);
    ctx.settle(vec![release(&holder)]).await;
    let loaded = ctx.db.script_commands();
    for _ in 0..3 {
        ctx.settle(vec![release(&holder), promote(&holder, "up-1")])
            .await;
    }
    assert_eq!(
        ctx.db.script_commands(),
        loaded,
        "settle batches sent SCRIPT commands though Redis held the script"
    );

    assert_eq!(
        ctx.hit(&hit(vec![], Some(holder.clone()))).await["result"],
        "ok"
    );
    ctx.db.flush_scripts();
    let flushed = ctx.db.script_commands();
    // Beside it, a promote of a key never claimed: its own outcome is read
    // from its own reply (not the load's) and counted as skipped.
    let free = claim("loads", "never", "hook-2", 120_000, 30_000);
    let skipped_free = skipped(ctx, "promote", "free").await;
    assert_eq!(
        ctx.settle(vec![promote(&holder, "up-9"), promote(&free, "up-2")])
            .await,
        json!({"wire": 2, "applied": 2})
    );
    assert_eq!(
        ctx.db.committed(key),
        "c:up-9",
        "the promote after the flush was lost"
    );
    assert_eq!(skipped(ctx, "promote", "free").await, skipped_free + 1.0);
    assert!(
        ctx.db.script_commands() > flushed,
        "the settle script was not loaded again"
    );
}

/// `ankusa_store_settle_skipped_total{op,why}` now.
async fn skipped(ctx: &Ctx<'_>, op: &str, why: &str) -> f64 {
    ctx.service
        .metric(&format!(
            "ankusa_store_settle_skipped_total{{op=\"{op}\",why=\"{why}\"}}"
        ))
        .await
}

/// A promote or release acts only on a key pending under the claim's hook;
/// on a key that is free, committed or held by another hook it changes
/// nothing (value and TTL exactly as before) and is counted with why.
async fn a_settle_moves_only_a_claim_its_hook_holds(ctx: &Ctx<'_>) {
    let t = "held";
    let key = "ankusa:{held}:claim:gh:d";
    let before = [
        skipped(ctx, "promote", "free").await,
        skipped(ctx, "promote", "other_hook").await,
        skipped(ctx, "promote", "committed").await,
        skipped(ctx, "release", "free").await,
        skipped(ctx, "release", "committed").await,
    ];
    let holder = claim(t, "d", "hook-1", 120_000, 30_000);
    let stranger = claim(t, "d", "hook-2", 120_000, 30_000);

    // Never claimed: a promote commits nothing.
    assert_eq!(
        ctx.settle(vec![promote(&holder, "hook-1")]).await,
        json!({"wire": 2, "applied": 1})
    );
    assert!(!ctx.db.exists(key), "a promote committed a free key");

    // Held by hook-1: hook-2's promote (under any id) leaves it pending.
    assert_eq!(
        ctx.hit(&hit(vec![], Some(holder.clone()))).await["result"],
        "ok"
    );
    let pending_ttl = ctx.db.pttl(key);
    ctx.settle(vec![
        promote(&stranger, "hook-2"),
        promote(&stranger, "hook-1"),
    ])
    .await;
    assert_eq!(ctx.db.get(key), "p:hook-1:edge-1", "another hook promoted");
    assert!(
        ctx.db.pttl(key) <= pending_ttl,
        "the pending TTL was renewed: {} > {pending_ttl}",
        ctx.db.pttl(key)
    );

    // The holder's promote commits under the id the upstream answered with.
    ctx.settle(vec![promote(&holder, "up-7")]).await;
    assert_eq!(ctx.db.committed(key), "c:up-7");
    assert_committed_ttl(ctx.db.committed_pttl(key), 120_000, 5_000);
    // Committed: a second promote (a retry, or another hook's) changes
    // nothing: no entry added, the partition's count as it was.
    let series = ctx.db.keys("ankusa:{held}:committed:*");
    let state = |k: &String| match ctx.db.cli(&["TYPE", k]).as_str() {
        "hash" => format!("hash of {}", ctx.db.cli(&["HLEN", k])),
        _ => ctx.db.get(k),
    };
    let before_state: Vec<_> = series.iter().map(state).collect();
    ctx.settle(vec![
        promote(&holder, "hook-1"),
        promote(&stranger, "hook-2"),
    ])
    .await;
    assert_eq!(ctx.db.committed(key), "c:up-7");
    assert_eq!(ctx.db.keys("ankusa:{held}:committed:*"), series);
    assert_eq!(series.iter().map(state).collect::<Vec<_>>(), before_state);
    // Nor does a release of it, by anyone.
    ctx.settle(vec![release(&holder), release(&stranger)]).await;
    assert_eq!(ctx.db.committed(key), "c:up-7");
    // A release of a free key writes nothing.
    let free = claim(t, "never", "hook-1", 120_000, 30_000);
    ctx.settle(vec![release(&free)]).await;
    assert!(!ctx.db.exists("ankusa:{held}:claim:gh:never"));

    let after = [
        skipped(ctx, "promote", "free").await,
        skipped(ctx, "promote", "other_hook").await,
        skipped(ctx, "promote", "committed").await,
        skipped(ctx, "release", "free").await,
        skipped(ctx, "release", "committed").await,
    ];
    let counted: Vec<f64> = after.iter().zip(before).map(|(a, b)| a - b).collect();
    assert_eq!(
        counted,
        [1.0, 2.0, 2.0, 1.0, 2.0],
        "skips counted by op and why"
    );
}

/// A promote that arrives after its pending key expired commits nothing:
/// the redelivery is admitted (and the upstream's own index catches the copy).
async fn promote_after_pending_expiry_commits_nothing(ctx: &Ctx<'_>) {
    let t = "late";
    let c = claim(t, "d", "hook-1", 120_000, 50);
    assert_eq!(ctx.hit(&hit(vec![], Some(c.clone()))).await["result"], "ok");
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(
        !ctx.db.exists("ankusa:{late}:claim:gh:d"),
        "the pending claim outlived pending_ttl_ms"
    );
    let free_before = skipped(ctx, "promote", "free").await;
    assert_eq!(
        ctx.settle(vec![promote(&c, "hook-1")]).await,
        json!({"wire": 2, "applied": 1})
    );
    assert!(!ctx.db.exists("ankusa:{late}:claim:gh:d"));
    assert_eq!(skipped(ctx, "promote", "free").await - free_before, 1.0);
    let redelivery = claim(t, "d", "hook-2", 120_000, 30_000);
    assert_eq!(
        ctx.hit(&hit(vec![], Some(redelivery))).await["result"],
        "ok",
        "the redelivery is admitted"
    );
    assert_eq!(ctx.db.get("ankusa:{late}:claim:gh:d"), "p:hook-2:edge-1");
}

async fn concurrent_hits_against_burst_50_admit_exactly_50(ctx: &Ctx<'_>) {
    // 10 units of a 500 burst at 1/s: 50 fit, and one more takes 10 s to
    // refill, longer than the 200 requests run.
    let body = hit(vec![charge("hooks", "crowd", 10, 1, 500)], None);
    let url = ctx.service.at("/v1/hit");
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let (http, url, body) = (ctx.http.clone(), url.clone(), body.clone());
        tasks.spawn(async move { http.post(&url, &body).await });
    }
    let mut results = std::collections::HashMap::<String, usize>::new();
    while let Some(joined) = tasks.join_next().await {
        let (status, answer) = joined.expect("task");
        assert_eq!(status, 200, "{answer}");
        *results
            .entry(answer["result"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
    }
    assert_eq!(results.get("ok"), Some(&50), "{results:?}");
    assert_eq!(results.get("rate_limited"), Some(&150), "{results:?}");
}

async fn reset_forgets_the_buckets(ctx: &Ctx<'_>) {
    let body = hit(vec![charge("hooks", "crowd", 10, 1, 500)], None);
    assert_eq!(ctx.hit(&body).await["result"], "rate_limited");
    let (status, answer) = ctx
        .http
        .post(&ctx.service.at("/v1/reset"), &json!({"tenant": "crowd"}))
        .await;
    assert_eq!(
        (status, answer["deleted"].as_u64()),
        (200, Some(1)),
        "{answer}"
    );
    assert!(ctx.db.keys("ankusa:{crowd}:*").is_empty());
    assert_eq!(ctx.hit(&body).await["result"], "ok");
}

async fn concurrent_settles_share_pipelines(ctx: &Ctx<'_>) {
    const REQUESTS: usize = 200;
    const OPS_EACH: usize = 10;
    let held = |r: usize, i: usize| {
        claim(
            &format!("batch{}", r % 20),
            &format!("k{r}-{i}"),
            &format!("h{r}-{i}"),
            60_000,
            30_000,
        )
    };
    // The claims the settles promote (a promote moves only a held claim),
    // taken first, ten hits a call.
    for r in 0..REQUESTS {
        let hits: Vec<Value> = (0..OPS_EACH)
            .map(|i| hit(vec![], Some(held(r, i))))
            .collect();
        let (status, answer) = ctx
            .http
            .post(&ctx.service.at("/v1/hits"), &json!({ "hits": hits }))
            .await;
        assert_eq!(status, 200, "{answer}");
    }
    let trips = "ankusa_store_pipeline_round_trips_total";
    let flushes = "ankusa_store_settle_batch_ops_count";
    let trips_before = ctx.service.metric(trips).await;
    let flushes_before = ctx.service.metric(flushes).await;
    let promoted_before = ctx
        .service
        .metric("ankusa_store_settle_ops_total{op=\"promote\"}")
        .await;
    let url = ctx.service.at("/v1/settle");
    let mut tasks = tokio::task::JoinSet::new();
    for r in 0..REQUESTS {
        // Twenty tenants: on a Cluster the ops spread over every master.
        let ops: Vec<Value> = (0..OPS_EACH)
            .map(|i| promote(&held(r, i), &format!("h{r}-{i}")))
            .collect();
        let (http, url) = (ctx.http.clone(), url.clone());
        tasks.spawn(async move { http.post(&url, &json!({ "ops": ops })).await });
    }
    while let Some(joined) = tasks.join_next().await {
        let (status, answer) = joined.expect("task");
        assert_eq!(
            (status, answer["applied"].as_u64()),
            (200, Some(OPS_EACH as u64)),
            "{answer}"
        );
    }
    let k = (REQUESTS * OPS_EACH) as f64;
    let promoted = ctx
        .service
        .metric("ankusa_store_settle_ops_total{op=\"promote\"}")
        .await
        - promoted_before;
    assert_eq!(promoted, k);
    let round_trips = ctx.service.metric(trips).await - trips_before;
    assert!(
        round_trips >= 1.0 && round_trips <= k / 10.0,
        "{round_trips} pipeline round trips for {k} ops"
    );
    // One pipeline per node per flush, never one per request or per op.
    let flushed = ctx.service.metric(flushes).await - flushes_before;
    let nodes = match ctx.db {
        Db::Single(_) => 1.0,
        Db::Cluster(c) => c.nodes.len() as f64,
    };
    assert!(
        round_trips <= flushed * nodes,
        "{round_trips} round trips in {flushed} flushes over {nodes} nodes"
    );
    eprintln!("settle: {k} ops, {flushed} flushes, {round_trips} pipeline round trips");
    // Every claim committed, none left pending.
    assert_eq!(ctx.db.keys("ankusa:{batch*}:claim:*").len(), 0);
    assert_eq!(ctx.db.committed("ankusa:{batch7}:claim:gh:k7-3"), "c:h7-3");
}
