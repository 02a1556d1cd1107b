//! The wire's compatibility rule on the store's side (ankusa_core::wire::version):
//! every request of every release in the corpus (core/tests/wire-corpus) is
//! answered by today's store as that release expects, and a field a newer
//! edge adds is skipped and counted, never refused, alone or in a batch.

use crate::common::{Http, Service};
use ankusa_store::receipts::{Keys, Mode};
use ankusa_store::Config;
use ankusa_testkit::redis::Redis;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The key the corpus's receipts are made with (core/tests/wire_corpus.rs,
/// `CORPUS_RECEIPT_KEY`).
const CORPUS_RECEIPT_KEY: &str = "ankusa-wire-corpus-receipt-key-0123456789";

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/tests/wire-corpus")
}

fn releases() -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(corpus())
        .expect("read core/tests/wire-corpus")
        .map(|e| e.expect("corpus entry").path())
        .filter(|p| p.is_dir())
        .collect();
    all.sort();
    all
}

async fn post(http: &Http, url: &str, body: Vec<u8>) -> (u16, Value) {
    let (status, text) = http
        .send("POST", url, &[("content-type", "application/json")], body)
        .await;
    let json = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("status {status}, not JSON ({e}): {text}"));
    (status, json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn todays_store_answers_every_releases_requests() {
    let releases = releases();
    assert!(releases.len() >= 2, "{releases:?}");
    let http = Http::new();
    for release in releases {
        // A fresh Redis per release: each release's samples claim the same keys.
        let redis = Redis::start();
        // Receipts checked under the corpus's key, missing ones accepted:
        // a store in the upgrade window, taking every release's promotes.
        let config = Config::for_redis(&redis.url()).with_receipts(
            Keys::new(&[CORPUS_RECEIPT_KEY]).expect("the corpus's key"),
            Some(Mode::AcceptMissing),
        );
        let store = Service::start(config).await;
        store.wait_ready(std::time::Duration::from_secs(20)).await;
        let sample = |name: &str| {
            let path = release.join(name);
            std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let name = release.display();

        let (status, answer) =
            post(&http, &store.at("/v1/hit"), sample("edge-hit-full.json")).await;
        assert_eq!(
            (status, &answer["result"]),
            (200, &"ok".into()),
            "{name}: {answer}"
        );
        assert_eq!(
            answer["wire"], 2,
            "{name}: the store names its wire version"
        );
        let (status, answer) = post(
            &http,
            &store.at("/v1/hit"),
            sample("edge-hit-quota-only.json"),
        )
        .await;
        assert_eq!(
            (status, &answer["result"]),
            (200, &"ok".into()),
            "{name}: {answer}"
        );

        // The same event again, in a batch: a duplicate once promoted.
        let (status, answer) =
            post(&http, &store.at("/v1/settle"), sample("edge-settle.json")).await;
        assert_eq!(status, 200, "{name}: {answer}");
        assert_eq!(answer["applied"], 2, "{name}: {answer}");
        for file in ["edge-hits.json", "edge-hits-with-settle.json"] {
            let (status, answer) = post(&http, &store.at("/v1/hits"), sample(file)).await;
            assert_eq!(status, 200, "{name}/{file}: {answer}");
            let results = answer["results"].as_array().expect("results");
            assert_eq!(results.len(), 2, "{name}/{file}: {answer}");
            assert_eq!(results[0]["result"], "duplicate", "{name}/{file}: {answer}");
            assert_eq!(results[1]["result"], "ok", "{name}/{file}: {answer}");
            assert_eq!(answer["wire"], 2, "{name}/{file}");
        }
        assert_eq!(
            store.metric("ankusa_store_wire_unknown_total").await,
            0.0,
            "{name}: a release's own fields are all known"
        );
        // Each release's two promotes (alone and riding): with the receipt
        // of its hook since wire 2, none before.
        let receipts = |result: &str, applied: bool| {
            let name =
                format!("ankusa_store_receipts_total{{applied=\"{applied}\",result=\"{result}\"}}");
            let store = &store;
            async move { store.metric(&name).await }
        };
        let counted = (
            receipts("valid", true).await,
            receipts("missing", true).await,
            receipts("invalid", false).await,
        );
        let expected = if release.ends_with("v0.1.0") {
            (0.0, 2.0, 0.0)
        } else {
            (2.0, 0.0, 0.0)
        };
        assert_eq!(counted, expected, "{name}: (valid, missing, invalid)");
        store.stop().await;
    }
}

/// What a newer edge would send: every message with fields today's store
/// doesn't know. Each is answered as without them, the batch's other hit
/// too, and each field is counted by its path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_edges_fields_are_skipped_and_counted_never_refused() {
    let redis = Redis::start();
    let store = Service::ready(&redis.url()).await;
    let http = Http::new();
    let claim = |key: &str, hook: &str| {
        serde_json::json!({"tenant": "acme", "source_id": "gh", "key": key, "hook_id": hook,
            "node": "edge-1", "ttl_ms": 60_000, "pending_ttl_ms": 30_000, "receipt": "ab12"})
    };
    let hit = serde_json::json!({"charges": [], "claim": claim("k1", "h1"), "priority": 3});
    let (status, answer) = post(&http, &store.at("/v1/hit"), hit.to_string().into_bytes()).await;
    assert_eq!((status, &answer["result"]), (200, &"ok".into()), "{answer}");

    let batch = serde_json::json!({
        "hits": [{"charges": [], "claim": claim("k2", "h2")}, {"charges": [], "claim": claim("k3", "h3")}],
        "settle": [{"op": "promote", "claim": claim("k1", "h1"), "hook_id": "h1", "proof": "cd34"}],
        "batch_id": 7
    });
    let (status, answer) = post(&http, &store.at("/v1/hits"), batch.to_string().into_bytes()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"][0]["result"], "ok", "{answer}");
    assert_eq!(answer["results"][1]["result"], "ok", "{answer}");
    assert_eq!(answer["settled"], 1, "{answer}");

    let settle = serde_json::json!({"ops": [{"op": "release", "claim": claim("k2", "h2"), "why": "502"}], "v": 3});
    let (status, answer) = post(
        &http,
        &store.at("/v1/settle"),
        settle.to_string().into_bytes(),
    )
    .await;
    assert_eq!((status, &answer["applied"]), (200, &1.into()), "{answer}");

    for (field, times) in [
        ("claim.receipt", 1.0),
        ("priority", 1.0),
        ("hits.claim.receipt", 2.0),
        ("settle.claim.receipt", 1.0),
        ("settle.proof", 1.0),
        ("batch_id", 1.0),
        ("ops.claim.receipt", 1.0),
        ("ops.why", 1.0),
        ("v", 1.0),
    ] {
        let name = format!("ankusa_store_wire_unknown_total{{field=\"{field}\"}}");
        assert_eq!(store.metric(&name).await, times, "{name}");
    }
    // Refusals stay where they protect something: a known field out of bounds.
    let bad = serde_json::json!({"charges": [], "claim": {"tenant": "acme", "source_id": "gh", "key": "",
        "hook_id": "h4", "node": "edge-1", "ttl_ms": 60_000, "pending_ttl_ms": 30_000}, "extra": 1});
    let (status, answer) = post(&http, &store.at("/v1/hit"), bad.to_string().into_bytes()).await;
    assert_eq!(status, 400, "{answer}");
    store.stop().await;
}
