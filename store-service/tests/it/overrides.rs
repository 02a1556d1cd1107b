//! `/v1/overrides`: set, read, list and delete a tenant's fleet override;
//! it persists in Redis across a store restart, expires on its own, changes
//! what a hit charges at once, and rides on every hit answer. The same
//! suite runs against one Redis and a 3-master Cluster.

use crate::common::{charge, hit, Db, Http, Service};
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
    assert_eq!(answer, json!({"result": "ok", "levels": [5_000_000]}));
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
