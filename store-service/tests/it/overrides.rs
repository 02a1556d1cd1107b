//! `/v1/overrides`: set, read, list and delete a tenant's fleet override;
//! it persists in Redis across a store restart, expires on its own, changes
//! what a hit charges at once, and rides on every hit answer. The list
//! answers the changes since a version, a page at a time, and a gap when it
//! can't; with 100 000 stored it answers within a 10 ms budget. The same
//! suite runs against one Redis and a 3-master Cluster.

use crate::common::{charge, hit, Db, Http, Service};
use ankusa_core::fleet::overrides::page::PAGE_MAX;
use ankusa_core::wire::BUDGET_HEADER;
use ankusa_store::keys::OVERRIDE_LOG;
use ankusa_store::override_log::GONE_MAX;
use ankusa_testkit::redis::{Redis, RedisCluster};
use serde_json::{json, Value};
use std::time::Duration;

struct Ctx<'a> {
    service: &'a Service,
    db: &'a Db,
    http: Http,
}

impl Ctx<'_> {
    async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let (status, text) = self
            .http
            .send(method, &self.service.at(path), &[], bytes)
            .await;
        let json = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {path}: {status}, not JSON ({e}): {text}"));
        (status, json)
    }

    async fn put(&self, tenant: &str, body: Value) -> Value {
        let (status, answer) = self
            .call("PUT", &format!("/v1/overrides/{tenant}"), Some(&body))
            .await;
        assert_eq!(status, 200, "PUT {tenant}: {answer}");
        answer
    }

    /// `units` against the quota an edge's configuration gives (`rate`, `burst`).
    async fn hit(&self, tenant: &str, units: u64, rate: u64, burst: u64) -> Value {
        let body = hit(vec![charge("hooks", tenant, units, rate, burst)], None);
        let (status, answer) = self.http.post(&self.service.at("/v1/hit"), &body).await;
        assert_eq!(status, 200, "hit answered {status}: {answer}");
        answer
    }

    /// `GET /v1/overrides?<query>`, with a budget header when given.
    async fn page(&self, query: &str, budget_ms: Option<u64>) -> (u16, Value) {
        let budget = budget_ms.map(|ms| ms.to_string());
        let headers: Vec<(&str, &str)> =
            budget.iter().map(|b| (BUDGET_HEADER, b.as_str())).collect();
        let url = self.service.at(&format!("/v1/overrides?{query}"));
        let (status, text) = self.http.send("GET", &url, &headers, Vec::new()).await;
        let json = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("GET {url}: {status}, not JSON ({e}): {text}"));
        (status, json)
    }

    /// The changes since `version` of `epoch`: a page that must be a 200.
    async fn since(&self, version: u64, epoch: &str) -> Value {
        let (status, page) = self
            .page(&format!("since={version}&epoch={epoch}"), None)
            .await;
        assert_eq!(status, 200, "{page}");
        page
    }

    /// The store's version and epoch now.
    async fn head(&self) -> (u64, String) {
        let (status, page) = self.page("limit=1", None).await;
        assert_eq!(status, 200, "{page}");
        let v = page["version"].as_u64().unwrap_or_default();
        let v = if page["more"] == json!(true) {
            // The first page stops early: ask from it to the end.
            let mut v = v;
            loop {
                let p = self.since(v, page["epoch"].as_str().unwrap_or("")).await;
                v = p["version"].as_u64().unwrap_or_default();
                if p["more"] != json!(true) {
                    break v;
                }
            }
        } else {
            v
        };
        (v, page["epoch"].as_str().unwrap_or_default().to_string())
    }

    async fn listed(&self) -> Vec<String> {
        let (status, all) = self.call("GET", "/v1/overrides", None).await;
        assert_eq!(status, 200, "{all}");
        let mut tenants: Vec<String> = all["overrides"]
            .as_array()
            .unwrap_or_else(|| panic!("no overrides list: {all}"))
            .iter()
            .map(|o| o["tenant"].as_str().unwrap_or_default().to_string())
            .collect();
        tenants.sort();
        tenants
    }
}

async fn run(db: Db) {
    let service = Service::ready(&db.url()).await;
    let ctx = Ctx {
        service: &service,
        db: &db,
        http: Http::new(),
    };
    set_get_list_and_delete(&ctx).await;
    bad_input_names_the_field_and_the_value(&ctx).await;
    an_override_expires_on_its_own(&ctx).await;
    a_hit_charges_the_override_and_carries_it(&ctx).await;
    changes_since_a_version(&ctx).await;
    pages_chain_until_there_are_no_more(&ctx).await;
    an_expiry_is_a_deletion_among_the_changes(&ctx).await;
    a_version_the_store_cannot_answer_from_is_a_gap(&ctx).await;
    service.stop().await;
    // A new store on the same Redis finds what the old one set.
    let service = Service::ready(&db.url()).await;
    let ctx = Ctx {
        service: &service,
        db: &db,
        http: Http::new(),
    };
    an_override_survives_a_store_restart(&ctx).await;
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overrides_on_one_redis() {
    run(Db::Single(Redis::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overrides_on_a_three_master_cluster() {
    run(Db::Cluster(RedisCluster::start())).await;
}

async fn set_get_list_and_delete(ctx: &Ctx<'_>) {
    let before_ms = ctx.db.now_us() / 1000;
    let set = ctx
        .put(
            "ov-a",
            json!({"rate": 5, "burst": 10, "bytes_rate": 100, "bytes_burst": 1000,
                   "shadow": true, "ttl_ms": 600_000}),
        )
        .await;
    let version = set["version"].as_u64().expect("version");
    assert!(
        version >= before_ms && version <= ctx.db.now_us() / 1000,
        "{set}"
    );
    assert_eq!(
        set["expires_at_ms"].as_u64(),
        Some(version + 600_000),
        "{set}"
    );
    assert_eq!(set["shadow"], json!({"rate_limit": true, "dedupe": false}));
    let ttl = ctx.db.pttl("ankusa:{ov-a}:override");
    assert!(ttl > 590_000 && ttl <= 600_000, "PTTL {ttl}");
    ctx.put("ov-b", json!({"shadow": {"dedupe": true}})).await;
    assert_eq!(ctx.db.pttl("ankusa:{ov-b}:override"), -1, "no expiry set");

    let (status, got) = ctx.call("GET", "/v1/overrides/ov-a", None).await;
    assert_eq!((status, &got), (200, &set));
    assert_eq!(ctx.listed().await, ["ov-a", "ov-b"]);

    let (status, gone) = ctx.call("DELETE", "/v1/overrides/ov-a", None).await;
    assert_eq!(
        (status, gone),
        (200, json!({"tenant": "ov-a", "deleted": 1}))
    );
    let (status, missing) = ctx.call("GET", "/v1/overrides/ov-a", None).await;
    assert_eq!(status, 404, "{missing}");
    assert_eq!(missing["error"], "no_override");
    assert!(!ctx.db.exists("ankusa:{ov-a}:override"));
    assert_eq!(ctx.listed().await, ["ov-b"]);
    let (status, again) = ctx.call("DELETE", "/v1/overrides/ov-a", None).await;
    assert_eq!((status, again["deleted"].clone()), (200, json!(0)));
    ctx.call("DELETE", "/v1/overrides/ov-b", None).await;
}

async fn bad_input_names_the_field_and_the_value(ctx: &Ctx<'_>) {
    let refused = |body: Value| async move {
        let (status, answer) = ctx.call("PUT", "/v1/overrides/bad", Some(&body)).await;
        assert_eq!(status, 400, "{body}: {answer}");
        assert_eq!(answer["error"], "bad_request");
        answer["message"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(
        refused(json!({"rate": 0, "burst": 10})).await,
        "rate: must be between 1 and 1000000000, got 0"
    );
    assert_eq!(
        refused(json!({"bytes_rate": 10})).await,
        "bytes_burst: is missing: bytes_rate and bytes_burst are set together"
    );
    assert_eq!(
        refused(json!({"shadow": true, "ttl_ms": 0})).await,
        "ttl_ms: must be between 1 and 2592000000, got 0"
    );
    assert!(refused(json!({"expires_at_ms": 5, "shadow": true}))
        .await
        .starts_with("expires_at_ms: 5 is not after now"));
    assert!(refused(json!({"rates": 1})).await.contains("rates"));
    assert!(refused(json!({"shadow": "yes"})).await.contains("shadow"));
    let (status, answer) = ctx
        .call(
            "PUT",
            "/v1/overrides/no*star",
            Some(&json!({"shadow": true})),
        )
        .await;
    assert_eq!(status, 400, "{answer}");
    assert!(answer["message"]
        .as_str()
        .unwrap_or_default()
        .starts_with("tenant: \"no*star\""));
    let (status, _) = ctx
        .call("POST", "/v1/overrides/bad", Some(&json!({})))
        .await;
    assert_eq!(status, 405);
    let (status, _) = ctx.call("PUT", "/v1/overrides", Some(&json!({}))).await;
    assert_eq!(status, 405);
    assert!(
        ctx.db.keys("ankusa:{bad}*").is_empty(),
        "a refused PUT wrote"
    );
}

async fn an_override_expires_on_its_own(ctx: &Ctx<'_>) {
    ctx.put("ov-exp", json!({"rate": 1, "burst": 1, "ttl_ms": 300}))
        .await;
    assert_eq!(ctx.call("GET", "/v1/overrides/ov-exp", None).await.0, 200);
    assert_eq!(ctx.listed().await, ["ov-exp"]);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(ctx.call("GET", "/v1/overrides/ov-exp", None).await.0, 404);
    assert!(ctx.listed().await.is_empty());
    // Gone from the hit as well: the configuration's quota applies again.
    let answer = ctx.hit("ov-exp", 5, 1, 5).await;
    assert_eq!(
        answer,
        json!({"wire": 2, "result": "ok", "levels": [5_000_000]})
    );
}

async fn a_hit_charges_the_override_and_carries_it(ctx: &Ctx<'_>) {
    let t = "ov-hit";
    // The edge still sends its configuration's quota (burst 1000); the
    // store charges the override's (burst 300) at once. At 1 unit/s, a
    // charge of 200 takes 200 s to drain: no timing slack is needed.
    let set = ctx.put(t, json!({"rate": 1, "burst": 300})).await;
    let first = ctx.hit(t, 200, 1, 1000).await;
    assert_eq!(first["result"], "ok", "{first}");
    assert_eq!(first["override"], set, "{first}");
    let denied = ctx.hit(t, 200, 1, 1000).await;
    assert_eq!(denied["result"], "rate_limited", "{denied}");
    assert_eq!(denied["override"], set, "{denied}");
    // Deleted: the configuration's burst of 1000 admits it, with no override.
    ctx.call("DELETE", &format!("/v1/overrides/{t}"), None)
        .await;
    let third = ctx.hit(t, 200, 1, 1000).await;
    assert_eq!(
        (&third["result"], third.get("override")),
        (&json!("ok"), None),
        "{third}"
    );
    // 400 units held, less what drained at 1/s since the first charge.
    let level = third["levels"][0].as_u64().unwrap_or_default();
    assert!((390_000_000..=400_000_000).contains(&level), "{third}");
    // A raised limit takes the bucket as it is (no reset): about 400 of
    // 700 are spent, so one more 200 fits and a second does not.
    ctx.put(t, json!({"rate": 1, "burst": 700})).await;
    assert_eq!(ctx.hit(t, 200, 1, 1000).await["result"], "ok");
    assert_eq!(ctx.hit(t, 200, 1, 1000).await["result"], "rate_limited");
    ctx.put(
        "ov-persist",
        json!({"rate": 1, "burst": 300, "ttl_ms": 600_000}),
    )
    .await;
}

async fn an_override_survives_a_store_restart(ctx: &Ctx<'_>) {
    let (status, got) = ctx.call("GET", "/v1/overrides/ov-persist", None).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(
        (got["rate"].clone(), got["burst"].clone()),
        (json!(1), json!(300))
    );
    assert!(ctx.listed().await.contains(&"ov-persist".to_string()));
    assert_eq!(ctx.hit("ov-persist", 200, 1, 1000).await["result"], "ok");
    assert_eq!(
        ctx.hit("ov-persist", 200, 1, 1000).await["result"],
        "rate_limited"
    );
}

fn tenants(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|o| {
            o["tenant"]
                .as_str()
                .unwrap_or(o.as_str().unwrap_or(""))
                .to_string()
        })
        .collect()
}

async fn changes_since_a_version(ctx: &Ctx<'_>) {
    let (v0, epoch) = ctx.head().await;
    let empty = ctx.since(v0, &epoch).await;
    assert_eq!(
        (&empty["version"], &empty["overrides"], &empty["deleted"]),
        (&json!(v0), &json!([]), &json!([])),
        "nothing changed: {empty}"
    );
    ctx.put("lg-a", json!({"rate": 1, "burst": 2})).await;
    ctx.put("lg-b", json!({"shadow": true})).await;
    let first = ctx.since(v0, &epoch).await;
    assert_eq!(tenants(&first["overrides"]), ["lg-a", "lg-b"], "{first}");
    assert_eq!(first["version"], json!(v0 + 2), "one version a change");
    assert_eq!(first.get("more"), None);
    assert_eq!(first.get("gap"), None);
    let v1 = v0 + 2;
    ctx.put("lg-a", json!({"rate": 1, "burst": 3})).await;
    let (status, _) = ctx.call("DELETE", "/v1/overrides/lg-b", None).await;
    assert_eq!(status, 200);
    let second = ctx.since(v1, &epoch).await;
    assert_eq!(tenants(&second["overrides"]), ["lg-a"], "{second}");
    assert_eq!(second["overrides"][0]["burst"], json!(3));
    assert_eq!(second["deleted"], json!(["lg-b"]));
    assert_eq!(second["version"], json!(v1 + 2));
    // Deleting what is not there changes nothing.
    ctx.call("DELETE", "/v1/overrides/lg-b", None).await;
    assert_eq!(ctx.since(v1 + 2, &epoch).await["version"], json!(v1 + 2));
    let total = second["total"].as_u64().unwrap_or_default();
    assert_eq!(total as usize, ctx.listed().await.len(), "{second}");
    assert!(
        ctx.service
            .metric(r#"ankusa_store_requests_total{endpoint="overrides",result="delta"}"#)
            .await
            >= 4.0
    );
    assert!(
        ctx.service
            .metric(r#"ankusa_store_requests_total{endpoint="overrides",result="full"}"#)
            .await
            >= 1.0
    );
    ctx.call("DELETE", "/v1/overrides/lg-a", None).await;
}

async fn pages_chain_until_there_are_no_more(ctx: &Ctx<'_>) {
    for i in 0..5 {
        ctx.put(&format!("lg-p{i}"), json!({"shadow": true})).await;
    }
    let (head, _) = ctx.head().await;
    let mut seen = Vec::new();
    let (status, mut page) = ctx.page("limit=2", None).await;
    assert_eq!(status, 200, "{page}");
    let epoch = page["epoch"].as_str().unwrap_or_default().to_string();
    let mut pages = 1;
    loop {
        let changes = page["overrides"].as_array().map_or(0, Vec::len)
            + page["deleted"].as_array().map_or(0, Vec::len);
        assert!(changes <= 2, "{page}");
        seen.extend(tenants(&page["overrides"]));
        if page["more"] != json!(true) {
            break;
        }
        assert_eq!(changes, 2, "a page that is not the last is full: {page}");
        let v = page["version"].as_u64().unwrap_or_default();
        let (status, next) = ctx
            .page(&format!("since={v}&epoch={epoch}&limit=2"), None)
            .await;
        assert_eq!(status, 200, "{next}");
        page = next;
        pages += 1;
    }
    assert_eq!(
        page["version"],
        json!(head),
        "the last page gives the version now"
    );
    assert!(pages >= 3, "{pages} pages");
    seen.sort();
    assert_eq!(seen, ctx.listed().await, "the pages hold the whole list");
    for i in 0..5 {
        ctx.call("DELETE", &format!("/v1/overrides/lg-p{i}"), None)
            .await;
    }
}

async fn an_expiry_is_a_deletion_among_the_changes(ctx: &Ctx<'_>) {
    let (v, epoch) = ctx.head().await;
    ctx.put("lg-exp", json!({"shadow": true, "ttl_ms": 300}))
        .await;
    assert_eq!(
        tenants(&ctx.since(v, &epoch).await["overrides"]),
        ["lg-exp"]
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let after = ctx.since(v, &epoch).await;
    assert_eq!(after["overrides"], json!([]), "{after}");
    assert_eq!(after["deleted"], json!(["lg-exp"]), "{after}");
    assert_eq!(after["version"], json!(v + 2), "the set, then the expiry");
}

async fn a_version_the_store_cannot_answer_from_is_a_gap(ctx: &Ctx<'_>) {
    let (v, epoch) = ctx.head().await;
    let gap = |page: &Value| page["gap"] == json!(true) && page["overrides"] == json!([]);
    assert!(
        gap(&ctx.since(v + 5, &epoch).await),
        "a version never given"
    );
    assert!(gap(&ctx.since(v, "other1").await), "another epoch");
    assert!(!gap(&ctx.since(v, &epoch).await));
    // The log remembers GONE_MAX deletions; one more forgets the oldest,
    // and a caller from before it has a gap.
    let [meta, _, log, gone, _] = OVERRIDE_LOG;
    let fill = "for i = 1, tonumber(ARGV[1]) do \
                  local v = redis.call('HINCRBY', KEYS[1], 'version', 1) \
                  redis.call('ZADD', KEYS[2], v, 'ghost-' .. i) \
                  redis.call('ZADD', KEYS[3], v, 'ghost-' .. i) end";
    ctx.db
        .cli(&["EVAL", fill, "3", meta, log, gone, &GONE_MAX.to_string()]);
    ctx.put("lg-gone", json!({"shadow": true})).await;
    let before_delete = v + GONE_MAX as u64 + 1;
    ctx.call("DELETE", "/v1/overrides/lg-gone", None).await;
    let floor: u64 = ctx.db.cli(&["HGET", meta, "floor"]).parse().unwrap_or(0);
    assert_eq!(floor, v + 1, "the first ghost was forgotten");
    assert!(gap(&ctx.since(v, &epoch).await), "from before the floor");
    let from_floor = ctx.since(floor, &epoch).await;
    assert!(!gap(&from_floor), "{from_floor}");
    let last = ctx.since(before_delete, &epoch).await;
    assert_eq!(last["deleted"], json!(["lg-gone"]), "{last}");
    // Bad queries name the parameter and the value.
    for (query, message) in [
        ("since=x", "since: \"x\" is not a whole version number"),
        ("limit=0", "limit: must be between 1 and 250, got \"0\""),
        (
            "epoch=a*b",
            "epoch: \"a*b\" is not 1 to 64 letters and digits",
        ),
        (
            "after=3",
            "after: is not a parameter of /v1/overrides (since, epoch, limit)",
        ),
    ] {
        let (status, answer) = ctx.page(query, None).await;
        assert_eq!(
            (status, answer["message"].as_str()),
            (400, Some(message)),
            "{query}"
        );
    }
}

/// Writes `n` overrides into the change log as PUTs would (their tenant keys
/// aside: the list reads the log alone), in one script.
fn store_many(db: &Db, n: usize) {
    let [meta, data, log, _, _] = OVERRIDE_LOG;
    let fill = "for i = 1, tonumber(ARGV[1]) do \
                  local t = string.format('bulk-%06d', i) \
                  local v = redis.call('HINCRBY', KEYS[1], 'version', 1) \
                  redis.call('HSET', KEYS[2], t, string.format( \
                    '{\"tenant\":\"%s\",\"rate\":5,\"burst\":10,\"version\":%d}', t, 1796000000000 + i)) \
                  redis.call('ZADD', KEYS[3], v, t) end";
    db.cli(&["EVAL", fill, "3", meta, data, log, &n.to_string()]);
}

/// Asks within `budget_ms`, again on a `timeout` (a busy machine, not the
/// store: the benchmark below measures it), at most five times.
async fn within_budget(ctx: &Ctx<'_>, query: &str, budget_ms: u64) -> Value {
    let mut last = Value::Null;
    for _ in 0..5 {
        let (status, page) = ctx.page(query, Some(budget_ms)).await;
        if status == 200 {
            return page;
        }
        assert_eq!(page["error"], "timeout", "{status}: {page}");
        last = page;
    }
    panic!("{query}: no answer within {budget_ms} ms in five tries: {last}");
}

const MANY: usize = 100_000;

async fn with_many_stored(db: Db) -> (Service, Db) {
    let service = Service::ready(&db.url()).await;
    let ctx = Ctx {
        service: &service,
        db: &db,
        http: Http::new(),
    };
    ctx.head().await; // the log's epoch
    store_many(&db, MANY);
    (service, db)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_thousand_stored_are_paged_and_their_changes_answered_within_10_ms() {
    let (service, db) = with_many_stored(Db::Single(Redis::start())).await;
    let ctx = Ctx {
        service: &service,
        db: &db,
        http: Http::new(),
    };
    let first = within_budget(&ctx, "since=0", 10).await;
    assert_eq!(first["overrides"].as_array().map(Vec::len), Some(PAGE_MAX));
    assert_eq!(
        (first["more"].clone(), first["total"].clone()),
        (json!(true), json!(MANY))
    );
    let epoch = first["epoch"].as_str().unwrap_or_default().to_string();
    let mut version = first["version"].as_u64().unwrap_or_default();
    let mut seen = PAGE_MAX;
    loop {
        let page = within_budget(&ctx, &format!("since={version}&epoch={epoch}"), 10).await;
        seen += page["overrides"].as_array().map_or(0, Vec::len);
        version = page["version"].as_u64().unwrap_or_default();
        if page["more"] != json!(true) {
            break;
        }
    }
    assert_eq!(seen, MANY);
    let quiet = within_budget(&ctx, &format!("since={version}&epoch={epoch}"), 10).await;
    assert_eq!(
        (quiet["overrides"].clone(), quiet["version"].clone()),
        (json!([]), json!(version))
    );
    ctx.put("acme", json!({"rate": 1, "burst": 2})).await;
    let change = within_budget(&ctx, &format!("since={version}&epoch={epoch}"), 10).await;
    assert_eq!(tenants(&change["overrides"]), ["acme"]);
    assert_eq!(change["total"], json!(MANY + 1));
    service.stop().await;
}

/// The figures in BENCHMARKS.md ("Override list"): `cargo test -p
/// ankusa-store --release --test it -- --ignored --nocapture
/// override_list_latency`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a benchmark: prints the list's latencies with 100 000 stored"]
async fn override_list_latency() {
    let (service, db) = with_many_stored(Db::Single(Redis::start())).await;
    let ctx = Ctx {
        service: &service,
        db: &db,
        http: Http::new(),
    };
    let (head, epoch) = ctx.head().await;
    let rounds = 300;
    let mut cases: Vec<(&str, Vec<f64>, usize)> = Vec::new();
    for (name, query) in [
        (
            "nothing changed since the version held",
            format!("since={head}&epoch={epoch}"),
        ),
        (
            "a full page of 250 (the whole list's first)",
            "since=0".to_string(),
        ),
        (
            "a full page of 250 from the middle",
            format!("since={}&epoch={epoch}", head / 2),
        ),
    ] {
        let mut ms = Vec::with_capacity(rounds);
        let mut late = 0;
        for _ in 0..rounds {
            let started = std::time::Instant::now();
            let (status, _) = ctx.page(&query, Some(10)).await;
            ms.push(started.elapsed().as_secs_f64() * 1e3);
            late += usize::from(status != 200);
        }
        ms.sort_by(f64::total_cmp);
        cases.push((name, ms, late));
    }
    let at = |ms: &[f64], q: f64| ms[((ms.len() as f64 * q) as usize).min(ms.len() - 1)];
    println!("GET /v1/overrides with {MANY} stored, {rounds} calls each, 10 ms budget, ms:");
    for (name, ms, late) in &cases {
        println!(
            "  {name}: p50 {:.2}, p99 {:.2}, max {:.2}; not answered within the budget: {late}",
            at(ms, 0.5),
            at(ms, 0.99),
            ms[ms.len() - 1]
        );
    }
    service.stop().await;
}
