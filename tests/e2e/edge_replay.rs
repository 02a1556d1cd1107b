//! Signatures that bind what they should, through real Envoy, store and
//! Redis: a path tenant's deliveries are checked against that tenant's own
//! secret (acme's signature on victim's path is a 401); a GitHub body
//! replayed under a fresh delivery id is a duplicate of the first hook with
//! the replay guard and stored twice without it; and the schemes that sign
//! their id and time refuse a replay under a fresh id or an old timestamp.

use ankusa_core::verify::{body_mac, standard, stripe, Encoding, Scheme};
use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::http::Response;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use serde_json::{json, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const ACME: &str = "acme-gh-secret";
const VICTIM: &str = "victim-gh-secret";
const SHARED: &str = "one-secret-for-all";
const STRIPE: &str = "whsec_stripe_endpoint_secret";
/// `whsec_` + base64 of 24 bytes.
const SW: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const SETTLED_WITHIN: Duration = Duration::from_secs(10);

fn env() -> Vec<(String, String)> {
    [
        ("ANKUSA_T_ACME", ACME),
        ("ANKUSA_T_VICTIM", VICTIM),
        ("ANKUSA_T_SHARED", SHARED),
        ("ANKUSA_T_STRIPE", STRIPE),
        ("ANKUSA_T_SW", SW),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Fleet scopes; `gh` takes its tenant from the path with a secret per
/// tenant, `shared` from the path with one secret said to be shared,
/// `guarded`/`open` are acme's GitHub sources with and without the replay
/// guard, and `stripe`, `sw`, `svix` sign their id and time.
fn config() -> Value {
    json!({
        "sources": {
            "gh": {"dedupe": "github",
                   "verify": {"scheme": "github",
                              "secret_env": {"acme": "ANKUSA_T_ACME", "victim": ["ANKUSA_T_VICTIM"]}}},
            "shared": {"dedupe": "github",
                       "verify": {"scheme": "github", "secret_env": "ANKUSA_T_SHARED",
                                  "shared_across_tenants": true}},
            "guarded": {"tenant": "acme", "dedupe": "github",
                        "verify": {"scheme": "github", "secret_env": "ANKUSA_T_ACME",
                                   "replay_guard": {}}},
            "open": {"tenant": "acme", "dedupe": "github",
                     "verify": {"scheme": "github", "secret_env": "ANKUSA_T_ACME"}},
            "stripe": {"tenant": "acme", "dedupe": "stripe",
                       "verify": {"scheme": "stripe", "secret_env": "ANKUSA_T_STRIPE"}},
            "sw": {"tenant": "acme", "dedupe": "standard_webhooks",
                   "verify": {"scheme": "standard_webhooks", "secret_env": "ANKUSA_T_SW"}},
            "svix": {"tenant": "acme", "dedupe": "svix",
                     "verify": {"scheme": "svix", "secret_env": "ANKUSA_T_SW"}}
        },
        "rate_limits": {"scope": "fleet", "default": {"rate": 1000, "burst": 1000}},
        "dedupe": {"scope": "fleet"},
        "fleet": {"cluster": "ankusa_store", "timeout_ms": 1000, "settle_interval_ms": 5}
    })
}

struct Fleet {
    _redis: Redis,
    _store: Store,
    intake: Intake,
    a: Edge,
    b: Edge,
}

fn fleet() -> Fleet {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start_obeying();
    let edge = |name: &str| {
        let mut spec = EdgeSpec::new(
            &format!("{name}-{}", free_port()),
            intake.port,
            store.port,
            config(),
        );
        spec.vm_env = env();
        Edge::start(spec)
    };
    let (a, b) = (edge("edge-a"), edge("edge-b"));
    Fleet {
        _redis: redis,
        _store: store,
        intake,
        a,
        b,
    }
}

/// POSTs `body` to `path` with `headers` (plus a JSON content type).
fn post(edge: &Edge, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    edge.post(path, &all, body)
        .unwrap_or_else(|e| panic!("POST {path}: {e}\n{}", edge.log_tail()))
}

/// A GitHub delivery of `body` signed with `secret` under `delivery`.
fn github(edge: &Edge, path: &str, secret: &str, delivery: &str, body: &[u8]) -> Response {
    github_with(edge, path, secret, delivery, body, &[])
}

fn github_with(
    edge: &Edge,
    path: &str,
    secret: &str,
    delivery: &str,
    body: &[u8],
    extra: &[(&str, &str)],
) -> Response {
    let sig = body_mac::sign(secret.as_bytes(), "sha256=", Encoding::Hex, body);
    let mut headers = vec![
        ("x-github-delivery", delivery),
        ("x-hub-signature-256", sig.as_str()),
    ];
    headers.extend_from_slice(extra);
    post(edge, path, &headers, body)
}

/// What the intake stored, as (tenant, source, event key), sorted.
fn stored(intake: &Intake) -> Vec<(String, String, String)> {
    let mut all: Vec<_> = intake
        .hooks()
        .iter()
        .map(|h| {
            let field = |k: &str| h[k].as_str().unwrap_or_default().to_string();
            (field("tenant"), field("source"), field("event_key"))
        })
        .collect();
    all.sort();
    all
}

fn triple(tenant: &str, source: &str, key: &str) -> (String, String, String) {
    (tenant.into(), source.into(), key.into())
}

/// Sends until the answer is not 409 (a first copy's promote is queued
/// after its 201, so a copy right after it may find it still pending).
fn settled(mut send: impl FnMut() -> Response) -> Response {
    let started = std::time::Instant::now();
    loop {
        let r = send();
        if r.status != 409 || started.elapsed() > SETTLED_WITHIN {
            return r;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn duplicate_of(id: &Value) -> Value {
    json!({"status": "accepted", "id": id, "duplicate": true})
}

#[test]
fn a_path_tenant_is_admitted_only_with_its_own_secret() {
    let f = fleet();
    let body = br#"{"action":"opened","number":1}"#;
    // acme's signature on victim's path: refused, nothing stored as victim.
    let r = github(&f.a, "/webhooks/victim/gh", ACME, "t-1", body);
    assert_eq!(
        (r.status, r.json()),
        (401, json!({"error": "bad_signature"}))
    );
    // A tenant with no secret of its own: refused whatever signs it.
    for secret in [ACME, VICTIM] {
        let r = github(&f.b, "/webhooks/globex/gh", secret, "t-2", body);
        assert_eq!(r.status, 401, "{}", r.text());
    }
    // Each tenant's own secret on its own path.
    let r = github(&f.a, "/webhooks/acme/gh", ACME, "t-3", body);
    assert_eq!(r.status, 201, "{}\n{}", r.text(), f.a.log_tail());
    let r = github(&f.b, "/webhooks/victim/gh", VICTIM, "t-4", body);
    assert_eq!(r.status, 201, "{}", r.text());
    // The explicit shared form: one secret for every path tenant, as asked.
    for tenant in ["acme", "victim"] {
        let path = format!("/webhooks/{tenant}/shared");
        let r = github(&f.a, &path, SHARED, &format!("s-{tenant}"), body);
        assert_eq!(r.status, 201, "{tenant}: {}", r.text());
    }
    assert_eq!(
        f.a.stat(r#"ankusa_admissions_total{outcome="unverified"}"#)
            + f.b.stat(r#"ankusa_admissions_total{outcome="unverified"}"#),
        3.0
    );
    assert_eq!(
        stored(&f.intake),
        [
            triple("acme", "gh", "t-3"),
            triple("acme", "shared", "s-acme"),
            triple("victim", "gh", "t-4"),
            triple("victim", "shared", "s-victim"),
        ]
    );
}

#[test]
fn a_body_replayed_under_a_fresh_id_is_a_duplicate_only_with_the_guard() {
    let f = fleet();
    let body = br#"{"action":"opened","pull_request":{"id":1}}"#;
    // Guarded: the first delivery is stored; the same body under fresh ids,
    // to either edge, is a duplicate of it.
    let first = github(&f.a, "/webhooks/guarded", ACME, "g-1", body);
    assert_eq!(first.status, 201, "{}\n{}", first.text(), f.a.log_tail());
    let id = first.json()["id"].clone();
    let replay = settled(|| github(&f.b, "/webhooks/guarded", ACME, "g-2", body));
    assert_eq!((replay.status, replay.json()), (201, duplicate_of(&id)));
    let again = github(&f.a, "/webhooks/guarded", ACME, "g-3", body);
    assert_eq!((again.status, again.json()), (201, duplicate_of(&id)));
    // Another body is another hook.
    let other = github(&f.a, "/webhooks/guarded", ACME, "g-4", br#"{"other":1}"#);
    assert_eq!((other.status, other.json().get("duplicate")), (201, None));
    // Open (today's default): the same replays are stored each time.
    for delivery in ["o-1", "o-2", "o-3"] {
        let r = github(&f.b, "/webhooks/open", ACME, delivery, body);
        assert_eq!(
            (r.status, r.json().get("duplicate")),
            (201, None),
            "{delivery}"
        );
    }
    assert_eq!(
        stored(&f.intake),
        [
            triple("acme", "guarded", "g-1"),
            triple("acme", "guarded", "g-4"),
            triple("acme", "open", "o-1"),
            triple("acme", "open", "o-2"),
            triple("acme", "open", "o-3"),
        ]
    );
}

#[test]
fn the_body_claim_is_pending_while_the_first_is_stored_and_released_when_it_is_not() {
    let f = fleet();
    let body = br#"{"action":"closed","issue":{"id":7}}"#;
    // The first is slow to store: a replay meanwhile is told to retry.
    let slow = {
        let (url, sig) = (
            f.a.url("/webhooks/guarded"),
            body_mac::sign(ACME.as_bytes(), "sha256=", Encoding::Hex, body),
        );
        std::thread::spawn(move || {
            ankusa_testkit::http::request(
                "POST",
                &url,
                &[
                    ("x-github-delivery", "p-1"),
                    ("x-hub-signature-256", sig.as_str()),
                    ("x-intake-delay-ms", "2000"),
                ],
                body,
                Duration::from_secs(10),
            )
            .expect("the slow first delivery")
        })
    };
    // Once the first's hit has written its claims (it holds them for 2 s).
    std::thread::sleep(Duration::from_millis(500));
    let replay = github(&f.b, "/webhooks/guarded", ACME, "p-2", body);
    assert_eq!(
        (replay.status, replay.json()),
        (409, json!({"error": "dedupe_pending"}))
    );
    let first = slow.join().unwrap();
    assert_eq!(first.status, 201, "{}", first.text());
    let late = settled(|| github(&f.b, "/webhooks/guarded", ACME, "p-3", body));
    assert_eq!(
        (late.status, late.json()),
        (201, duplicate_of(&first.json()["id"]))
    );

    // The upstream refuses the first: its body claim is released, and the
    // provider's retry under a fresh id is admitted and stored.
    let refused_body = br#"{"action":"closed","issue":{"id":8}}"#;
    let refused = github_with(
        &f.a,
        "/webhooks/guarded",
        ACME,
        "r-1",
        refused_body,
        &[("x-intake-status", "500")],
    );
    assert_eq!(refused.status, 500, "{}", refused.text());
    let retry = settled(|| github(&f.b, "/webhooks/guarded", ACME, "r-2", refused_body));
    assert_eq!(
        (retry.status, retry.json().get("duplicate")),
        (201, None),
        "{}",
        retry.text()
    );
    assert_eq!(
        stored(&f.intake),
        [
            triple("acme", "guarded", "p-1"),
            triple("acme", "guarded", "r-2"),
        ]
    );
}

#[test]
fn concurrent_replays_are_all_duplicates_of_the_stored_one() {
    let f = fleet();
    let body = br#"{"action":"created","comment":{"id":9}}"#;
    let first = github(&f.a, "/webhooks/guarded", ACME, "c-0", body);
    assert_eq!(first.status, 201, "{}", first.text());
    let id = first.json()["id"].clone();
    let probe = settled(|| github(&f.a, "/webhooks/guarded", ACME, "c-probe", body));
    assert_eq!((probe.status, probe.json()), (201, duplicate_of(&id)));
    // Replays at once over both edges (several share a store call).
    let urls = [f.a.url("/webhooks/guarded"), f.b.url("/webhooks/guarded")];
    let sig = body_mac::sign(ACME.as_bytes(), "sha256=", Encoding::Hex, body);
    let answers = ankusa_tests::edge_support::concurrently(16, 64, move |i| {
        let delivery = format!("c-{}", i + 1);
        let r = ankusa_testkit::http::request(
            "POST",
            &urls[i % 2],
            &[
                ("x-github-delivery", delivery.as_str()),
                ("x-hub-signature-256", sig.as_str()),
            ],
            body,
            Duration::from_secs(10),
        )
        .expect("a replay");
        (r.status, r.json())
    });
    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(answer, &(201, duplicate_of(&id)), "replay {i}");
    }
    assert_eq!(stored(&f.intake), [triple("acme", "guarded", "c-0")]);
}

/// A Standard Webhooks (`p` = "webhook") or Svix (`p` = "svix") delivery:
/// id and timestamp headers and the signature over both and the body.
fn standard_headers(p: &str, id: &str, t: u64, body: &[u8]) -> Vec<(String, String)> {
    let key = Scheme::preset("standard_webhooks", 300)
        .unwrap()
        .key(SW)
        .unwrap();
    vec![
        (format!("{p}-id"), id.to_string()),
        (format!("{p}-timestamp"), t.to_string()),
        (format!("{p}-signature"), standard::sign(&key, id, t, body)),
    ]
}

fn post_owned(edge: &Edge, path: &str, headers: &[(String, String)], body: &[u8]) -> Response {
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    post(edge, path, &headers, body)
}

#[test]
fn a_signed_id_and_time_refuse_a_replay_under_a_fresh_id_or_an_old_timestamp() {
    let f = fleet();
    let t = now_s();
    // Stripe: the event id is in the signed body.
    let body = br#"{"id":"evt_1","type":"invoice.paid"}"#;
    let sig = stripe::sign(STRIPE.as_bytes(), t, body);
    let first = post(
        &f.a,
        "/webhooks/stripe",
        &[("stripe-signature", &sig)],
        body,
    );
    assert_eq!(first.status, 201, "{}\n{}", first.text(), f.a.log_tail());
    let fresh = br#"{"id":"evt_2","type":"invoice.paid"}"#;
    let r = post(
        &f.b,
        "/webhooks/stripe",
        &[("stripe-signature", &sig)],
        fresh,
    );
    assert_eq!(
        (r.status, r.json()),
        (401, json!({"error": "bad_signature"})),
        "a fresh event id under the captured signature"
    );
    let old = stripe::sign(STRIPE.as_bytes(), t - 400, fresh);
    let r = post(
        &f.b,
        "/webhooks/stripe",
        &[("stripe-signature", &old)],
        fresh,
    );
    assert_eq!(
        (r.status, r.json()),
        (401, json!({"error": "stale_timestamp"}))
    );
    // The captured delivery as it was: a duplicate of the first.
    let again = settled(|| {
        post(
            &f.b,
            "/webhooks/stripe",
            &[("stripe-signature", &sig)],
            body,
        )
    });
    assert_eq!(
        (again.status, again.json()),
        (201, duplicate_of(&first.json()["id"]))
    );
    // Standard Webhooks and Svix: the id header is signed.
    for (source, p) in [("sw", "webhook"), ("svix", "svix")] {
        let path = format!("/webhooks/{source}");
        let body = br#"{"type":"user.created"}"#;
        let captured = standard_headers(p, "msg_1", t, body);
        let first = post_owned(&f.a, &path, &captured, body);
        assert_eq!(first.status, 201, "{source}: {}", first.text());
        let mut fresh = captured.clone();
        fresh[0].1 = "msg_2".into();
        let r = post_owned(&f.b, &path, &fresh, body);
        assert_eq!(
            (r.status, r.json()),
            (401, json!({"error": "bad_signature"})),
            "{source}: a fresh id under the captured signature"
        );
        let old = standard_headers(p, "msg_3", t - 400, body);
        let r = post_owned(&f.b, &path, &old, body);
        assert_eq!(
            (r.status, r.json()),
            (401, json!({"error": "stale_timestamp"})),
            "{source}"
        );
        let again = settled(|| post_owned(&f.b, &path, &captured, body));
        assert_eq!(
            (again.status, again.json()),
            (201, duplicate_of(&first.json()["id"])),
            "{source}"
        );
    }
    assert_eq!(
        stored(&f.intake),
        [
            triple("acme", "stripe", "evt_1"),
            triple("acme", "svix", "msg_1"),
            triple("acme", "sw", "msg_1"),
        ]
    );
}
