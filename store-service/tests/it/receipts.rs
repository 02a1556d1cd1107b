//! Receipts (issue 35, item 1): with a receipt key, a promote commits its
//! claim only with the upstream's proof that it stored the hook, in
//! `/v1/settle` and in the settles riding `/v1/hits`. Without one, the
//! two-call attack (claim a key under a made-up hook id, promote it) made a
//! real delivery look like a duplicate; each test below that makes it is
//! answered `duplicate` by a store without receipts.

use crate::common::{charge, claim, promote, ready, release, Db, Http, Service};
use ankusa_core::wire::receipt;
use ankusa_store::receipts::{Keys, Mode};
use ankusa_store::Config;
use ankusa_testkit::http::{request, Response};
use ankusa_testkit::ports::free_port;
use ankusa_testkit::process::scratch_dir;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::auth_header;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const KEY: &str = "receipts-test-key-0123456789abcdef0123";
const TENANT: &str = "acme";

/// A store on a fresh Redis checking receipts under [`KEY`] in `mode`
/// (None: the default for a key); `keyless`: receipts off.
async fn store(mode: Option<Mode>, keyless: bool) -> (Redis, Service) {
    let redis = Redis::start();
    let mut config = Config::for_redis(&redis.url());
    if !keyless {
        config = config.with_receipts(Keys::new(&[KEY]).expect("a key"), mode);
    }
    let service = Service::start(config).await;
    service.wait_ready(Duration::from_secs(20)).await;
    (redis, service)
}

fn receipt_of(hook_id: &str) -> String {
    receipt::receipt(KEY.as_bytes(), TENANT, hook_id)
}

/// A promote of `claim` under `hook_id` carrying `receipt`.
fn proven(claim: &Value, hook_id: &str, receipt: Option<&str>) -> Value {
    let mut op = promote(claim, hook_id);
    if let Some(r) = receipt {
        op["receipt"] = r.into();
    }
    op
}

/// `key`'s claim under `hook_id`, pending for `pending_ttl_ms`.
fn claim_of(key: &str, hook_id: &str, pending_ttl_ms: u64) -> Value {
    claim(TENANT, key, hook_id, 3_600_000, pending_ttl_ms)
}

struct Calls<'a> {
    http: Http,
    service: &'a Service,
}

impl Calls<'_> {
    /// The answer to a hit claiming `claim` (no charge).
    async fn hit(&self, claim: &Value) -> Value {
        let body = json!({"charges": [], "claim": claim});
        let (status, answer) = self.http.post(&self.service.at("/v1/hit"), &body).await;
        assert_eq!(status, 200, "{answer}");
        answer
    }

    async fn settle(&self, ops: Vec<Value>) -> Value {
        let (status, answer) = self
            .http
            .post(&self.service.at("/v1/settle"), &json!({ "ops": ops }))
            .await;
        assert_eq!(status, 200, "a skipped promote is no failure: {answer}");
        answer
    }

    async fn receipts(&self, result: &str, applied: bool) -> f64 {
        let name =
            format!("ankusa_store_receipts_total{{applied=\"{applied}\",result=\"{result}\"}}");
        self.service.metric(&name).await
    }
}

/// The attack: claim `key` under a made-up hook id, then promote that claim
/// with `receipt`. What a later hit on `key` is answered, and the settle's `applied`.
async fn attack(calls: &Calls<'_>, key: &str, receipt: Option<&str>) -> (Value, Value) {
    let made_up = claim_of(key, "made-up-hook", 30_000);
    assert_eq!(calls.hit(&made_up).await["result"], "ok");
    let answer = calls
        .settle(vec![proven(&made_up, "made-up-hook", receipt)])
        .await;
    let real = claim_of(key, "real-hook", 30_000);
    (calls.hit(&real).await, answer["applied"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_a_promote_without_a_receipt_commits_nothing_when_they_are_required() {
    let (_redis, service) = store(None, false).await;
    let calls = Calls {
        http: Http::new(),
        service: &service,
    };
    let (real, applied) = attack(&calls, "d-1", None).await;
    // Still pending under the made-up hook: the real delivery is told to
    // come back, never that it is a duplicate.
    assert_eq!(real["result"], "pending", "{real}");
    assert_eq!(applied, 0);
    assert_eq!(calls.receipts("missing", false).await, 1.0);
    assert_eq!(calls.receipts("valid", true).await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_an_invalid_receipt_commits_nothing_even_when_missing_ones_are_accepted() {
    let (_redis, service) = store(Some(Mode::AcceptMissing), false).await;
    let calls = Calls {
        http: Http::new(),
        service: &service,
    };
    // A real receipt of another hook, or a forged one, proves nothing here.
    for (key, forged) in [
        ("d-1", receipt_of("another-hook")),
        ("d-2", "ab".repeat(32)),
        (
            "d-3",
            receipt::receipt(b"a-key-the-upstream-never-held!!!", TENANT, "made-up-hook"),
        ),
    ] {
        let (real, applied) = attack(&calls, key, Some(&forged)).await;
        assert_eq!(real["result"], "pending", "{key}: {real}");
        assert_eq!(applied, 0, "{key}");
    }
    assert_eq!(calls.receipts("invalid", false).await, 3.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_left_pending_expires_and_the_real_delivery_is_admitted() {
    let (_redis, service) = store(None, false).await;
    let calls = Calls {
        http: Http::new(),
        service: &service,
    };
    let made_up = claim_of("d-1", "made-up-hook", 300);
    assert_eq!(calls.hit(&made_up).await["result"], "ok");
    calls
        .settle(vec![proven(&made_up, "made-up-hook", None)])
        .await;
    // Pending until its own 300 ms run out, then free: the sender's retry
    // is admitted and stored. Polled, never timed.
    let real = claim_of("d-1", "real-hook", 30_000);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = calls.hit(&real).await;
        match answer["result"].as_str() {
            Some("pending") => assert!(Instant::now() < deadline, "never expired"),
            Some("ok") => break,
            _ => panic!("the real delivery was answered {answer}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Its own promote, with its receipt, commits it.
    let answer = calls
        .settle(vec![proven(
            &real,
            "real-hook",
            Some(&receipt_of("real-hook")),
        )])
        .await;
    assert_eq!(answer["applied"], 1, "{answer}");
    let again = calls.hit(&claim_of("d-1", "redelivery", 30_000)).await;
    assert_eq!(
        (&again["result"], &again["hook_id"]),
        (&json!("duplicate"), &json!("real-hook")),
        "{again}"
    );
    assert_eq!(calls.receipts("valid", true).await, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_receipt_commits_under_the_upstreams_id_both_claims_of_the_hook() {
    let (_redis, service) = store(None, false).await;
    let calls = Calls {
        http: Http::new(),
        service: &service,
    };
    let event = claim_of("d-1", "edge-hook", 30_000);
    let body = json!({"tenant": TENANT, "source_id": "replay.body", "key": "gh:sha256:ab",
                      "hook_id": "edge-hook", "node": "edge-1", "ttl_ms": 3_600_000,
                      "pending_ttl_ms": 30_000});
    let hit = json!({"charges": [], "claim": event, "replay": body});
    let (status, answer) = calls.http.post(&service.at("/v1/hit"), &hit).await;
    assert_eq!((status, &answer["result"]), (200, &json!("ok")), "{answer}");
    // The upstream held an older copy: it answers with that id, and the
    // receipt is for it. One receipt proves both claims of the hook.
    let older = receipt_of("older-copy");
    let answer = calls
        .settle(vec![
            proven(&event, "older-copy", Some(&older)),
            proven(&body, "older-copy", Some(&older)),
        ])
        .await;
    assert_eq!(answer["applied"], 2, "{answer}");
    let replayed = json!({"charges": [], "claim": claim_of("d-9", "replay-hook", 30_000),
                          "replay": {"tenant": TENANT, "source_id": "replay.body",
                                     "key": "gh:sha256:ab", "hook_id": "replay-hook",
                                     "node": "edge-1", "ttl_ms": 3_600_000, "pending_ttl_ms": 30_000}});
    let (_, answer) = calls.http.post(&service.at("/v1/hit"), &replayed).await;
    assert_eq!(answer["hook_id"], "older-copy", "{answer}");
    assert_eq!(calls.receipts("valid", true).await, 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_missing_applies_a_promote_without_one_for_the_upgrade_window() {
    let (_redis, service) = store(Some(Mode::AcceptMissing), false).await;
    let calls = Calls {
        http: Http::new(),
        service: &service,
    };
    let event = claim_of("d-1", "old-edge-hook", 30_000);
    calls.hit(&event).await;
    // A v0.1.0 edge's promote: no receipt.
    let answer = calls
        .settle(vec![
            promote(&event, "old-edge-hook"),
            release(&claim_of("d-2", "h", 1)),
        ])
        .await;
    assert_eq!(answer["applied"], 2, "{answer}");
    let again = calls.hit(&claim_of("d-1", "redelivery", 30_000)).await;
    assert_eq!(again["result"], "duplicate", "{again}");
    assert_eq!(calls.receipts("missing", true).await, 1.0);
    assert_eq!(calls.receipts("missing", false).await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_every_promote_is_applied_as_before() {
    let (_redis, service) = store(None, true).await;
    let calls = Calls {
        http: Http::new(),
        service: &service,
    };
    let (real, applied) = attack(&calls, "d-1", None).await;
    assert_eq!(real["result"], "duplicate", "{real}");
    assert_eq!(applied, 1);
    // And a receipt it can't check is carried and ignored.
    let (real, _) = attack(&calls, "d-2", Some("ab12")).await;
    assert_eq!(real["result"], "duplicate", "{real}");
    for result in ["valid", "missing", "invalid"] {
        for applied in [true, false] {
            assert_eq!(calls.receipts(result, applied).await, 0.0, "{result}");
        }
    }
}

/// The settles riding a batch of hits are checked as `/v1/settle`'s are,
/// and one left out is still reported settled (the edge would only send it
/// again to the same end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn riding_settles_are_checked_and_one_left_out_is_still_settled() {
    let redis = Redis::start();
    let db = Db::Single(redis);
    let service = Service::start(
        Config::for_redis(&db.url()).with_receipts(Keys::new(&[KEY]).expect("a key"), None),
    )
    .await;
    service.wait_ready(Duration::from_secs(20)).await;
    let calls = Calls {
        http: Http::new(),
        service: &service,
    };
    let (made_up, real) = (
        claim_of("d-1", "made-up-hook", 30_000),
        claim_of("d-2", "real-hook", 30_000),
    );
    calls.hit(&made_up).await;
    calls.hit(&real).await;
    let batch = json!({
        "hits": [{"charges": [charge("hooks", TENANT, 1, 100, 100)]}],
        "settle": [
            proven(&made_up, "made-up-hook", None),
            proven(&real, "real-hook", Some(&receipt_of("real-hook"))),
        ],
    });
    let (status, answer) = calls.http.post(&service.at("/v1/hits"), &batch).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"][0]["result"], "ok", "{answer}");
    assert_eq!(answer["settled"], 2, "{answer}");
    assert_eq!(
        db.get("ankusa:{acme}:claim:gh:d-1"),
        "p:made-up-hook:edge-1",
        "still pending"
    );
    assert_eq!(db.committed("ankusa:{acme}:claim:gh:d-2"), "c:real-hook");
    // A batch whose only riding promote is left out touches no Redis for it.
    let batch = json!({
        "hits": [{"charges": [charge("hooks", TENANT, 1, 100, 100)]}],
        "settle": [proven(&made_up, "made-up-hook", Some("00ff"))],
    });
    let (_, answer) = calls.http.post(&service.at("/v1/hits"), &batch).await;
    assert_eq!(answer["settled"], 1, "{answer}");
    assert_eq!(calls.receipts("missing", false).await, 1.0);
    assert_eq!(calls.receipts("invalid", false).await, 1.0);
    assert_eq!(calls.receipts("valid", true).await, 1.0);
}

/// The binary: the key from a file only, re-read on SIGHUP (a rotation
/// without a gap), never in the log; a mode without a key refused at start.
#[test]
fn the_key_file_is_read_again_on_sighup_and_no_key_is_ever_logged() {
    let redis = Redis::start();
    let dir = scratch_dir("store-receipts");
    let file = dir.join("receipt.key");
    let (old, new) = (KEY, "receipts-rotated-key-0123456789abcdef012");
    std::fs::write(&file, format!("# the intake's key\n{old}\n")).expect("write");
    let store = ready(Store::start_with_env(
        free_port(),
        &redis.url(),
        &["--receipt-key-file", &file.display().to_string()],
        &[(
            "ANKUSA_STORE_EDGE_TOKENS",
            ankusa_testkit::token::run_token(),
        )],
    ));
    let (name, value) = auth_header();
    let post = |path: &str, body: &Value| -> Response {
        let res = request(
            "POST",
            &store.url_of(path),
            &[(name, &value)],
            body.to_string().as_bytes(),
            Duration::from_secs(10),
        )
        .expect("an answer");
        assert_eq!(res.status, 200, "{path}: {}", res.text());
        res
    };
    let settled = |n: usize, key: &str| {
        let hook = format!("h-{n}");
        let claim = claim_of(&format!("d-{n}"), &hook, 30_000);
        post("/v1/hit", &json!({"charges": [], "claim": claim}));
        let op = proven(
            &claim,
            &hook,
            Some(&receipt::receipt(key.as_bytes(), TENANT, &hook)),
        );
        post("/v1/settle", &json!({"ops": [op]})).json()["applied"]
            .as_u64()
            .expect("applied")
    };
    assert!(store
        .proc
        .log_tail()
        .contains("promotes need the upstream's receipt (1 key(s); --receipts required)"));
    assert_eq!((settled(1, old), settled(2, new)), (1, 0));
    let reread = || {
        let seen = store.proc.log_tail().matches("read again").count();
        store.proc.signal("HUP");
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.proc.log_tail().matches("read again").count() == seen {
            assert!(Instant::now() < deadline, "{}", store.proc.log_tail());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Both keys while the upstream moves to the new one, then the new alone.
    std::fs::write(&file, format!("{old}\n{new}\n")).expect("write");
    reread();
    assert_eq!((settled(3, old), settled(4, new)), (1, 1));
    std::fs::write(&file, format!("{new}\n")).expect("write");
    reread();
    assert_eq!((settled(5, old), settled(6, new)), (0, 1));
    let log = store.proc.log_tail();
    assert!(
        !log.contains(old) && !log.contains(new),
        "a key is in the log"
    );

    let out = std::process::Command::new(ankusa_testkit::paths::workspace_bin("ankusa-store"))
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--insecure-no-auth", "--receipts", "required"])
        .output()
        .expect("run ankusa-store");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--receipts required needs a receipt key: give --receipt-key-file PATH"),
        "{err}"
    );
    std::fs::write(&file, "short-key\n").expect("write");
    let out = std::process::Command::new(ankusa_testkit::paths::workspace_bin("ankusa-store"))
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--insecure-no-auth", "--receipt-key-file"])
        .arg(&file)
        .output()
        .expect("run ankusa-store");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("receipt.key line 1: the key is 9 bytes; 32 to 512 are accepted")
            && !err.contains("short-key"),
        "{err}"
    );
}

/// A store without a key says at start that its commits are unproven.
#[test]
fn a_store_without_a_key_warns_that_commits_are_unproven() {
    let redis = Redis::start();
    let store = Store::start_with_env(
        free_port(),
        &redis.url(),
        &[],
        &[(
            "ANKUSA_STORE_EDGE_TOKENS",
            ankusa_testkit::token::run_token(),
        )],
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !store
        .proc
        .log_tail()
        .contains("promotes are committed without the upstream's receipt")
    {
        assert!(Instant::now() < deadline, "{}", store.proc.log_tail());
        std::thread::sleep(Duration::from_millis(20));
    }
}
