//! The compact layout of committed claims (`store-service/src/committed.rs`):
//! a committed event answers `duplicate` with its hook id through its
//! window and is free after, from hashes that stay listpack-encoded, on one
//! Redis and a 3-master Cluster; claims the old layout wrote are still
//! found; `--committed-layout dual` writes both layouts; and `ttl_ms` holds
//! at both edges of its bound.

use crate::common::{charge, claim, hit, promote, release, Db, Http, Service};
use ankusa_core::wire::{HitAnswer, HitRequest};
use ankusa_store::committed::{self, Layout};
use ankusa_store::Config;
use ankusa_testkit::redis::{Redis, RedisCluster};
use serde_json::{json, Value};
use std::time::Duration;

const UUID: &str = "01a22a58-b525-7a36-ac16-fe50dd6137bd";

/// A store writing the compact layout, on a Redis of its own.
async fn compact_store() -> (Db, Service) {
    let db = Db::Single(Redis::start());
    let service = start(&db, Layout::Compact).await;
    (db, service)
}

async fn start(db: &Db, layout: Layout) -> Service {
    let mut config = Config::for_redis(&db.url());
    config.committed_layout = layout;
    // Settles flush at once: the ttl tests time the commit.
    config.settle_window_ms = 1;
    let service = Service::start(config).await;
    service.wait_ready(Duration::from_secs(20)).await;
    service
}

struct Client<'a> {
    http: Http,
    service: &'a Service,
}

impl<'a> Client<'a> {
    fn of(service: &'a Service) -> Client<'a> {
        Client {
            http: Http::new(),
            service,
        }
    }

    /// `hits` in one `/v1/hits` call: each one's answer, in order.
    async fn hits(&self, hits: Vec<Value>) -> Vec<Value> {
        let (status, answer) = self
            .http
            .post(&self.service.at("/v1/hits"), &json!({ "hits": hits }))
            .await;
        assert_eq!(status, 200, "{answer}");
        answer["results"].as_array().expect("results").clone()
    }

    async fn hit(&self, claim: &Value) -> Value {
        let body = hit(
            vec![charge("hooks", "t", 1, 1_000_000, 1_000_000)],
            Some(claim.clone()),
        );
        let (status, answer) = self.http.post(&self.service.at("/v1/hit"), &body).await;
        assert_eq!(status, 200, "{answer}");
        answer
    }

    async fn promote(&self, claim: &Value, hook_id: &str) {
        let (status, answer) = self
            .http
            .post(
                &self.service.at("/v1/settle"),
                &json!({"ops": [promote(claim, hook_id)]}),
            )
            .await;
        assert_eq!((status, &answer["applied"]), (200, &json!(1)), "{answer}");
    }

    /// Claims `claim` under its hook and commits it under `hook_id`.
    async fn store(&self, claim: &Value, hook_id: &str) {
        assert_eq!(self.hit(claim).await["result"], "ok");
        self.promote(claim, hook_id).await;
    }
}

fn duplicate_of(answer: &Value) -> Option<&str> {
    (answer["result"] == "duplicate").then(|| answer["hook_id"].as_str().unwrap_or("?"))
}

fn old_key(tenant: &str, key: &str) -> String {
    format!("ankusa:{{{tenant}}}:claim:gh:{key}")
}

async fn layout_round_trip(db: Db) {
    // Redis's own default listpack limits (a packaged build may raise them):
    // the layout must hold without raised ones.
    for port in db.ports() {
        for (name, value) in [
            ("hash-max-listpack-entries", "128"),
            ("hash-max-listpack-value", "64"),
        ] {
            assert_eq!(
                ankusa_testkit::redis::cli(port, &["CONFIG", "SET", name, value]),
                "OK"
            );
        }
    }
    let service = start(&db, Layout::Compact).await;
    let c = Client::of(&service);
    let events = 300;
    // Event i's claim under `hook`, and the id it is stored under: the
    // first a UUID (kept as 16 bytes), the others text.
    let event = |i: u64, hook: &str| claim("t", &format!("evt-{i}"), hook, 3_600_000, 30_000);
    let stored_as = |i: u64| match i {
        0 => UUID.to_string(),
        _ => format!("hook-{i}"),
    };
    for i in 0..events {
        c.store(&event(i, &format!("h{i}")), &stored_as(i)).await;
    }
    // Every event answers duplicate with its own hook id; no old-layout key is left.
    for i in 0..events {
        let claim = event(i, &format!("x{i}"));
        let want = stored_as(i);
        let answer = c.hit(&claim).await;
        assert_eq!(
            duplicate_of(&answer),
            Some(want.as_str()),
            "evt-{i}: {answer}"
        );
        assert!(!db.exists(&old_key("t", &format!("evt-{i}"))));
    }
    // A key never stored is free (and is now pending).
    let fresh = claim("t", "evt-new", "h-new", 3_600_000, 30_000);
    assert_eq!(c.hit(&fresh).await["result"], "ok");
    // One partition: its counter, its events (":n") and 300 / 40 → 8
    // buckets, each a listpack with an expiry no later than its partition's
    // end plus the ttl.
    let buckets: Vec<String> = db
        .keys("ankusa:{t}:committed:*")
        .into_iter()
        .filter(|k| k.matches(':').count() == 5 && !k.ends_with(":n"))
        .collect();
    assert_eq!(buckets.len(), 8, "{buckets:?}");
    for bucket in &buckets {
        assert_eq!(
            db.cli(&["OBJECT", "ENCODING", bucket]),
            "listpack",
            "{bucket}"
        );
        let left = db.pttl(bucket);
        assert!(
            left > 3_600_000 && left <= 3_600_000 + 1_800_000,
            "{bucket}: {left}"
        );
    }
    let entries: u64 = buckets
        .iter()
        .map(|b| db.cli(&["HLEN", b]).parse::<u64>().expect("HLEN") - 1)
        .sum();
    assert_eq!(
        entries, events,
        "every entry once, beside one placeholder per bucket"
    );
    service.stop().await;
}

#[tokio::test]
async fn committed_events_answer_duplicate_from_listpack_buckets_on_one_redis() {
    layout_round_trip(Db::Single(Redis::start())).await;
}

#[tokio::test]
async fn committed_events_answer_duplicate_from_listpack_buckets_on_a_cluster() {
    layout_round_trip(Db::Cluster(RedisCluster::start())).await;
}

/// The upgrade: a Redis holding claims the old layout wrote (as a 0.2.0 store
/// commits them) when the new store starts. They answer duplicate until they
/// expire; a pending one of the old store still answers pending.
#[tokio::test]
async fn claims_the_old_layout_wrote_are_found_until_they_expire() {
    let db = Db::Single(Redis::start());
    db.cli(&[
        "SET",
        &old_key("t", "old-1"),
        "c:hook-old-1",
        "PX",
        "3600000",
    ]);
    db.cli(&[
        "SET",
        &old_key("t", "old-short"),
        "c:hook-old-2",
        "PX",
        "1500",
    ]);
    db.cli(&[
        "SET",
        &old_key("t", "old-p"),
        "p:hook-old-3:edge-9",
        "PX",
        "60000",
    ]);
    let service = start(&db, Layout::Compact).await;
    let c = Client::of(&service);
    let probe = |key: &str| claim("t", key, "h-new", 3_600_000, 30_000);
    assert_eq!(
        duplicate_of(&c.hit(&probe("old-1")).await),
        Some("hook-old-1")
    );
    assert_eq!(
        duplicate_of(&c.hit(&probe("old-short")).await),
        Some("hook-old-2")
    );
    assert_eq!(c.hit(&probe("old-p")).await["result"], "pending");
    tokio::time::sleep(Duration::from_millis(1700)).await;
    assert_eq!(c.hit(&probe("old-short")).await["result"], "ok");
    service.stop().await;
}

/// `dual` leaves the old layout's `c:<hook id>` with the claim's ttl beside
/// the compact entry (what a 0.2.0 store reads); `compact` leaves none.
#[tokio::test]
async fn dual_writes_both_layouts_and_compact_only_the_compact_one() {
    let db = Db::Single(Redis::start());
    let dual = start(&db, Layout::Dual).await;
    let c = Client::of(&dual);
    let event = claim("t", "evt-dual", "h1", 600_000, 30_000);
    c.store(&event, UUID).await;
    assert_eq!(db.get(&old_key("t", "evt-dual")), format!("c:{UUID}"));
    let left = db.pttl(&old_key("t", "evt-dual"));
    assert!(left > 590_000 && left <= 600_000, "{left}");
    // The compact entry alone answers too: the old key gone, still a duplicate.
    db.cli(&["DEL", &old_key("t", "evt-dual")]);
    assert_eq!(
        duplicate_of(&c.hit(&claim("t", "evt-dual", "h2", 600_000, 30_000)).await),
        Some(UUID)
    );
    dual.stop().await;

    let compact = start(&db, Layout::Compact).await;
    let c = Client::of(&compact);
    let event = claim("t", "evt-compact", "h3", 600_000, 30_000);
    c.store(&event, "hook-3").await;
    assert!(!db.exists(&old_key("t", "evt-compact")));
    assert_eq!(
        duplicate_of(
            &c.hit(&claim("t", "evt-compact", "h4", 600_000, 30_000))
                .await
        ),
        Some("hook-3")
    );
    compact.stop().await;
}

/// The settle script reads a batch's claim keys at once and deletes in one
/// go at its end: a key settled twice in one batch answers the second op
/// from what the first left (under `dual`, a release after the promote
/// finds it committed and leaves the old layout's entry), and a release
/// beside them still frees its own claim.
#[tokio::test]
async fn a_claim_settled_twice_in_one_batch_keeps_what_the_first_settle_did() {
    let db = Db::Single(Redis::start());
    let dual = start(&db, Layout::Dual).await;
    let c = Client::of(&dual);
    let kept = claim("t", "evt-twice", "h1", 600_000, 30_000);
    let freed = claim("t", "evt-freed", "h2", 600_000, 30_000);
    for event in [&kept, &freed] {
        assert_eq!(c.hit(event).await["result"], "ok");
    }
    let ops = json!({"ops": [promote(&kept, UUID), release(&kept), release(&freed), promote(&kept, UUID)]});
    let (status, answer) = c.http.post(&dual.at("/v1/settle"), &ops).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(db.get(&old_key("t", "evt-twice")), format!("c:{UUID}"));
    assert!(!db.exists(&old_key("t", "evt-freed")));
    assert_eq!(
        duplicate_of(&c.hit(&claim("t", "evt-twice", "h3", 600_000, 30_000)).await),
        Some(UUID)
    );
    assert_eq!(
        c.hit(&claim("t", "evt-freed", "h4", 600_000, 30_000)).await["result"],
        "ok"
    );
    dual.stop().await;
}

/// Redis's clock in ms.
fn now_ms(db: &Db) -> u64 {
    db.now_us() / 1000
}

/// Sleeps until Redis's clock reads at least `at_ms`.
async fn until(db: &Db, at_ms: u64) {
    loop {
        let now = now_ms(db);
        if now >= at_ms {
            return;
        }
        tokio::time::sleep(Duration::from_millis((at_ms - now).min(200))).await;
    }
}

/// docs/admission.md: an event committed at c is a duplicate through
/// c + ttl_ms (and past it, up to its partition's end plus ttl_ms), and free
/// once c + ttl_ms + ⌈ttl_ms / 2⌉ has passed. Both edges, on Redis's clock.
#[tokio::test]
async fn ttl_ms_holds_at_both_edges_of_its_bound() {
    const TTL: u64 = 4_000;
    let part = committed::partition_ms(TTL);
    let (db, service) = compact_store().await;
    let c = Client::of(&service);
    // Commit early in a partition, so the entry outlives c + ttl_ms by most of one.
    let now = now_ms(&db);
    until(&db, (now / part + 1) * part + 20).await;
    let event = claim("t", "evt-ttl", "h1", TTL, 30_000);
    assert_eq!(c.hit(&event).await["result"], "ok");
    let committed_from = now_ms(&db);
    c.promote(&event, "hook-ttl").await;
    let committed_by = now_ms(&db);
    // The entry's expiry is within the documented bound of its commit.
    let series: Vec<String> = db
        .keys("ankusa:{t}:committed:4000:*")
        .into_iter()
        .filter(|k| k.matches(':').count() == 4)
        .collect();
    assert_eq!(series.len(), 1, "{series:?}");
    let expires: u64 = db.cli(&["PEXPIRETIME", &series[0]]).parse().expect("ms");
    assert!(
        expires > committed_from + TTL && expires <= committed_by + TTL + part,
        "expires {expires}, committed in [{committed_from}, {committed_by}]"
    );
    assert_eq!(expires, committed::expiry_ms(committed_by, TTL));
    // Lower edge: ttl_ms after the commit, still a duplicate.
    until(&db, committed_by + TTL + 1).await;
    let probe = claim("t", "evt-ttl", "h2", TTL, 30_000);
    let answer = c.hit(&probe).await;
    assert!(now_ms(&db) <= expires, "the probe came too late to tell");
    assert_eq!(duplicate_of(&answer), Some("hook-ttl"), "{answer}");
    // Upper edge: one partition past ttl_ms, free.
    until(&db, committed_by + TTL + part + 1).await;
    assert_eq!(c.hit(&probe).await["result"], "ok");
    service.stop().await;
}

/// Events whose digests share their leading 32 bits (so one bucket) are kept
/// apart by the rest of the digest: 112 bits in all.
#[tokio::test]
async fn events_sharing_a_bucket_are_never_taken_for_each_other() {
    let first = |key: &str| {
        let c: ankusa_core::wire::Claim =
            serde_json::from_value(claim("t", key, "h", 3_600_000, 30_000)).expect("claim");
        committed::digest(&c)
    };
    // Two keys whose digests share the first 2 bytes: the bucket of any partition under 2^16 buckets.
    let base = first("k-0");
    let twin = (1..200_000)
        .map(|i| format!("k-{i}"))
        .find(|k| first(k)[..2] == base[..2])
        .expect("a key sharing 16 leading bits");
    let (_db, service) = compact_store().await;
    let c = Client::of(&service);
    c.store(&claim("t", "k-0", "h0", 3_600_000, 30_000), "hook-0")
        .await;
    assert_eq!(
        c.hit(&claim("t", &twin, "h1", 3_600_000, 30_000)).await["result"],
        "ok"
    );
    assert_eq!(
        duplicate_of(&c.hit(&claim("t", "k-0", "h2", 3_600_000, 30_000)).await),
        Some("hook-0")
    );
    service.stop().await;
}

/// Commits `keys` (claimed, then promoted under `hook-<key>`) in one call of
/// each: hits, then settles.
async fn store_all(c: &Client<'_>, keys: &[String], ttl: u64) {
    let claims: Vec<Value> = keys
        .iter()
        .map(|k| claim("t", k, &format!("h-{k}"), ttl, 30_000))
        .collect();
    c.hits(
        claims
            .iter()
            .map(|cl| hit(Vec::new(), Some(cl.clone())))
            .collect(),
    )
    .await;
    let ops: Vec<Value> = claims
        .iter()
        .zip(keys)
        .map(|(cl, k)| promote(cl, &format!("hook-{k}")))
        .collect();
    let (status, answer) = c
        .http
        .post(&c.service.at("/v1/settle"), &json!({ "ops": ops }))
        .await;
    assert_eq!(
        (status, &answer["applied"]),
        (200, &json!(keys.len())),
        "{answer}"
    );
}

/// Each of `keys` (as [`store_all`] stored them) answers `duplicate` with its hook id.
async fn assert_stored(c: &Client<'_>, keys: impl Iterator<Item = &String>, ttl: u64) {
    let keys: Vec<&String> = keys.collect();
    let probes = keys
        .iter()
        .map(|k| hit(Vec::new(), Some(claim("t", k, "h-probe", ttl, 30_000))))
        .collect();
    for (k, r) in keys.iter().zip(c.hits(probes).await) {
        assert_eq!(
            duplicate_of(&r),
            Some(format!("hook-{k}").as_str()),
            "{k}: {r}"
        );
    }
}

/// `INFO commandstats` calls of `HGETALL`: one per bucket split.
fn splits(db: &Db) -> u64 {
    db.cli(&["INFO", "commandstats"])
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_hgetall:calls="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// A partition's first commit sizes it for as many events as the one before
/// it holds: a steady flow fills it without a bucket split (each of which
/// reads a bucket whole), in as many buckets, each expiring with the
/// partition, and every event of both answers `duplicate`.
#[tokio::test]
async fn a_partition_is_sized_from_the_one_before_it() {
    const TTL: u64 = 8_000;
    const EVENTS: usize = 120;
    let part = committed::partition_ms(TTL);
    let (db, service) = compact_store().await;
    let c = Client::of(&service);
    let first = now_ms(&db) / part + 1;
    until(&db, first * part + 20).await;
    let before: Vec<String> = (0..EVENTS).map(|i| format!("before-{i}")).collect();
    store_all(&c, &before, TTL).await;
    until(&db, (first + 1) * part + 20).await;
    let split_before = splits(&db);
    let after: Vec<String> = (0..EVENTS).map(|i| format!("after-{i}")).collect();
    store_all(&c, &after, TTL).await;
    assert_eq!(
        splits(&db),
        split_before,
        "the second partition split a bucket"
    );
    for p in [first, first + 1] {
        let base = format!("ankusa:{{t}}:committed:{TTL}:{p}");
        assert_eq!(db.get(&format!("{base}:n")), EVENTS.to_string(), "{base}");
        assert_eq!(db.get(&base), EVENTS.to_string(), "{base}");
        let buckets: Vec<String> = db
            .keys(&format!("{base}:*"))
            .into_iter()
            .filter(|k| !k.ends_with(":n"))
            .collect();
        assert_eq!(
            buckets.len(),
            EVENTS.div_ceil(committed::BUCKET_FILL as usize),
            "{buckets:?}"
        );
        let expires = ((p + 1) * part + TTL).to_string();
        for key in buckets.iter().chain([&base, &format!("{base}:n")]) {
            assert_eq!(db.cli(&["PEXPIRETIME", key]), expires, "{key}");
        }
    }
    assert_stored(&c, before.iter().chain(&after), TTL).await;
    service.stop().await;
}

/// The store names the partitions a hit's lookup reads on its own clock
/// (`committed::partitions_sent`); Redis's clock decides which it reads: a
/// store whose clock is partitions off, or unset, still finds a committed
/// event, and still admits a new one.
#[tokio::test]
async fn a_committed_event_is_found_whatever_the_store_s_clock_reads() {
    const TTL: u64 = 3_600_000;
    let part = committed::partition_ms(TTL);
    let (db, service) = compact_store().await;
    let c = Client::of(&service);
    c.store(&claim("t", "evt-clock", "h1", TTL, 30_000), "hook-clock")
        .await;
    let mut conn = redis::Client::open(db.url())
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let script = redis::Script::new(&ankusa_store::scripts::hit_source());
    let now = now_ms(&db);
    for store_ms in [now, now + 3 * part, now - 3 * part, 0] {
        for (key, expected) in [("evt-clock", "duplicate"), ("evt-new", "ok")] {
            let request: HitRequest = serde_json::from_value(hit(
                Vec::new(),
                Some(claim("t", key, &format!("h-{store_ms}"), TTL, 30_000)),
            ))
            .expect("a hit");
            let (keys, args) = ankusa_store::routes::hit::keys_and_args_at(&request, store_ms);
            let mut call = script.prepare_invoke();
            for k in &keys {
                call.key(k);
            }
            for a in &args {
                call.arg(a);
            }
            let reply: Vec<redis::Value> = call.invoke_async(&mut conn).await.expect("hit");
            let answer = ankusa_store::routes::hit::parse_reply(&reply)
                .expect("an answer")
                .answer;
            match (expected, &answer) {
                ("duplicate", HitAnswer::Duplicate { hook_id }) => {
                    assert_eq!(hook_id, "hook-clock")
                }
                ("ok", HitAnswer::Ok) => {
                    db.cli(&["DEL", &keys[keys.len() - 1]]);
                }
                _ => panic!("store clock {store_ms}, {key}: {answer:?}"),
            }
        }
    }
    service.stop().await;
}

/// A partition the previous release wrote (its count is its events, with no
/// ":n") is read and written on: its events answer `duplicate`, and commits
/// added to it count from its count and grow it as before.
#[tokio::test]
async fn a_partition_of_the_previous_release_is_read_and_grown() {
    const TTL: u64 = 3_600_000;
    let (db, service) = compact_store().await;
    let c = Client::of(&service);
    // The first partition of a series is addressed as the previous release
    // addressed it (no partition before it); without ":n" it is one of its.
    let first: Vec<String> = (0..41).map(|i| format!("prev-{i}")).collect();
    store_all(&c, &first, TTL).await;
    let events = db.keys(&format!("ankusa:{{t}}:committed:{TTL}:*:n"));
    assert_eq!(events.len(), 1, "{events:?}");
    let base = events[0].trim_end_matches(":n").to_string();
    db.cli(&["DEL", &events[0]]);
    let more: Vec<String> = (0..40).map(|i| format!("more-{i}")).collect();
    store_all(&c, &more, TTL).await;
    assert_eq!(db.get(&format!("{base}:n")), "81");
    assert_eq!(db.get(&base), "81");
    let buckets = db
        .keys(&format!("{base}:*"))
        .into_iter()
        .filter(|k| !k.ends_with(":n"))
        .count();
    assert_eq!(buckets, 3);
    assert_stored(&c, first.iter().chain(&more), TTL).await;
    service.stop().await;
}
