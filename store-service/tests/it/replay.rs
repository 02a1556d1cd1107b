//! The replay guard's body claim, beside the event key's claim in one hit:
//! checked before any charge, written pending with it, settled like it, and
//! answered the same on `/v1/hit` and `/v1/hits`. Run against one Redis and
//! a 3-master Cluster (the body claim shares the tenant's hash tag).

use crate::common::{charge, claim, promote, release, Db, Http, Service};
use ankusa_testkit::redis::{Redis, RedisCluster};
use serde_json::{json, Value};

const WINDOW_MS: u64 = 86_400_000;
const BODY: &str = "gh:sha256:5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";

/// The body claim of `tenant`'s delivery with `body_key`, held by `hook_id`.
fn body_claim(tenant: &str, body_key: &str, hook_id: &str) -> Value {
    json!({"tenant": tenant, "source_id": "replay.body", "key": body_key, "hook_id": hook_id,
           "node": "edge-1", "ttl_ms": WINDOW_MS, "pending_ttl_ms": 30_000})
}

/// One hook of `tenant`: a charge, its event key's claim and its body claim.
fn guarded(tenant: &str, event: &str, body_key: &str, hook_id: &str) -> (Value, Value, Value) {
    let event = claim(tenant, event, hook_id, 3_600_000, 30_000);
    let body = body_claim(tenant, body_key, hook_id);
    let hit = json!({"charges": [charge("hooks", tenant, 1, 1, 100)],
                     "claim": event, "replay": body});
    (hit, event, body)
}

async fn run(db: Db) {
    let service = Service::ready(&db.url()).await;
    let http = Http::new();
    let hit = |body: Value| {
        let (http, url) = (&http, service.at("/v1/hit"));
        async move { http.post(&url, &body).await }
    };
    let settle = |ops: Vec<Value>| {
        let (http, url) = (&http, service.at("/v1/settle"));
        async move { http.post(&url, &json!({ "ops": ops })).await }
    };
    let t = "replayed";
    let body_key = format!("ankusa:{{{t}}}:claim:replay.body:{BODY}");

    // The first delivery: both claims written pending, one charge spent.
    let (first, first_event, first_body) = guarded(t, "d-1", BODY, "hook-a");
    let (status, answer) = hit(first).await;
    assert_eq!((status, &answer["result"]), (200, &json!("ok")), "{answer}");
    assert_eq!(db.get(&body_key), "p:hook-a:edge-1");
    assert_eq!(
        db.get(&format!("ankusa:{{{t}}}:claim:gh:d-1")),
        "p:hook-a:edge-1"
    );
    let bucket = db.get(&format!("ankusa:{{{t}}}:rl:hooks"));

    // The same body under a fresh id while the first is in flight: pending,
    // nothing spent and the fresh id not claimed.
    let (replay, ..) = guarded(t, "d-2", BODY, "hook-b");
    let (status, answer) = hit(replay.clone()).await;
    assert_eq!(
        (status, &answer["result"]),
        (200, &json!("pending")),
        "{answer}"
    );
    assert!(
        answer["retry_after_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 20_000),
        "{answer}"
    );
    assert_eq!(db.get(&format!("ankusa:{{{t}}}:rl:hooks")), bucket);
    assert!(!db.exists(&format!("ankusa:{{{t}}}:claim:gh:d-2")));

    // Stored: both claims promoted; the body stays committed for the window.
    let (status, answer) = settle(vec![
        promote(&first_event, "hook-a"),
        promote(&first_body, "hook-a"),
    ])
    .await;
    assert_eq!((status, answer), (200, json!({"wire": 2, "applied": 2})));
    assert_eq!(db.committed(&body_key), "c:hook-a");
    // Its compact entry lasts the window, and at most half a window more.
    let ttl = db.committed_pttl(&body_key);
    assert!(
        ttl > (WINDOW_MS - 60_000) as i64 && ttl <= (WINDOW_MS + WINDOW_MS / 2) as i64,
        "{ttl}"
    );

    // The replay now: a duplicate of the first hook, on both endpoints.
    let (status, answer) = hit(replay.clone()).await;
    assert_eq!(
        (status, answer),
        (
            200,
            json!({"wire": 2, "result": "duplicate", "hook_id": "hook-a"})
        )
    );
    let (status, answer) = http
        .post(&service.at("/v1/hits"), &json!({"hits": [replay]}))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["results"][0],
        json!({"result": "duplicate", "hook_id": "hook-a"})
    );
    assert_eq!(db.get(&format!("ankusa:{{{t}}}:rl:hooks")), bucket);
    assert!(!db.exists(&format!("ankusa:{{{t}}}:claim:gh:d-2")));

    // A delivery the upstream refused releases both: its replay is admitted.
    let other = "gh:sha256:00";
    let (refused, refused_event, refused_body) = guarded(t, "d-3", other, "hook-c");
    assert_eq!(hit(refused).await.1["result"], "ok");
    let (status, answer) = settle(vec![release(&refused_event), release(&refused_body)]).await;
    assert_eq!((status, answer), (200, json!({"wire": 2, "applied": 2})));
    let (again, ..) = guarded(t, "d-4", other, "hook-d");
    assert_eq!(hit(again).await.1["result"], "ok");

    // Without the event key (a source without dedupe) the body claim alone.
    let alone = json!({"charges": [], "claim": null,
                       "replay": body_claim(t, BODY, "hook-e")});
    assert_eq!(
        hit(alone).await.1,
        json!({"wire": 2, "result": "duplicate", "hook_id": "hook-a"})
    );

    // The store refuses a body claim outside its namespace or tenant.
    for (field, patch) in [
        ("replay.source_id", json!({"source_id": "gh"})),
        ("replay.tenant", json!({"tenant": "other"})),
    ] {
        let (mut bad, ..) = guarded(t, "d-5", BODY, "hook-f");
        for (k, v) in patch.as_object().unwrap() {
            bad["replay"][k] = v.clone();
        }
        let (status, answer) = hit(bad).await;
        assert_eq!(status, 400, "{answer}");
        assert!(
            answer["message"]
                .as_str()
                .unwrap_or_default()
                .starts_with(field),
            "{answer}"
        );
    }
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replay_on_one_redis() {
    run(Db::Single(Redis::start())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replay_on_a_three_master_cluster() {
    run(Db::Cluster(RedisCluster::start())).await;
}
