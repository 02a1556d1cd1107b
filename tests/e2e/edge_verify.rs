//! Provider signatures checked at the edge, through real Envoy: each scheme
//! admits a good signature and refuses a wrong secret, a missing header and a
//! stale timestamp with a 401; a forgery spends no quota and takes no claim,
//! even a flood of them reusing real event ids; a missing secret refuses the
//! configuration; a rotated-out secret is refused after a reload.

use ankusa_core::verify::{body_mac, standard, stripe, Encoding};
use ankusa_testkit::envoy::{Edge, EdgeSpec, Reload};
use ankusa_testkit::http::Response;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const GH: &str = "gh-secret-current";
const GH_OLD: &str = "gh-secret-previous";
const STRIPE: &str = "whsec_stripe_endpoint_secret";
const SHOP: &str = "shpss_shop_secret";
/// `whsec_` + base64 of 24 bytes, as Standard Webhooks and Svix issue them.
const SW: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const CUSTOM: &str = "custom-secret";

fn env() -> Vec<(String, String)> {
    [
        ("ANKUSA_T_GH", GH),
        ("ANKUSA_T_GH_OLD", GH_OLD),
        ("ANKUSA_T_STRIPE", STRIPE),
        ("ANKUSA_T_SHOP", SHOP),
        ("ANKUSA_T_SW", SW),
        ("ANKUSA_T_CUSTOM", CUSTOM),
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

/// Node scopes; every scheme on its own source of tenant `acme` (burst `burst`, 1/s).
fn every_scheme(burst: u64, gh_secrets: &[&str]) -> Value {
    json!({
        "sources": {
            "gh": {"tenant": "acme", "dedupe": "github",
                   "verify": {"scheme": "github", "secret_env": gh_secrets}},
            "stripe": {"tenant": "acme", "dedupe": {"json": "id"},
                       "verify": {"scheme": "stripe", "secret_env": ["ANKUSA_T_STRIPE"]}},
            "shop": {"tenant": "acme", "dedupe": "shopify",
                     "verify": {"scheme": "shopify", "secret_env": ["ANKUSA_T_SHOP"]}},
            "sw": {"tenant": "acme", "dedupe": "standard_webhooks",
                   "verify": {"scheme": "standard_webhooks", "secret_env": ["ANKUSA_T_SW"]}},
            "svix": {"tenant": "acme", "dedupe": "svix",
                     "verify": {"scheme": "svix", "secret_env": ["ANKUSA_T_SW"], "tolerance_s": 60}},
            "custom": {"tenant": "acme", "dedupe": {"header": "x-event-id"},
                       "verify": {"scheme": "hmac_sha256", "secret_env": ["ANKUSA_T_CUSTOM"],
                                  "header": "x-signature", "prefix": "hmac=", "encoding": "base64"}}
        },
        "rate_limits": {
            "default": {"rate": 1000, "burst": 1000},
            "tenants": {"acme": {"rate": 1, "burst": burst}}
        }
    })
}

/// How a delivery is signed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Sign {
    Good,
    WrongSecret,
    Missing,
    /// With the right secret, `s` seconds ago.
    Old(u64),
}

/// One delivery of source `source` with event id `id`: path, headers, body.
fn delivery(source: &str, id: &str, how: Sign) -> (String, Vec<(String, String)>, Vec<u8>) {
    let mut t = now_s();
    if let Sign::Old(s) = how {
        t -= s;
    }
    let secret = |good: &str| -> Vec<u8> {
        if how == Sign::WrongSecret {
            b"not-the-secret".to_vec()
        } else {
            good.as_bytes().to_vec()
        }
    };
    let sw_key = if how == Sign::WrongSecret {
        vec![7u8; 24]
    } else {
        ankusa_core::verify::Scheme::preset("standard_webhooks", 300)
            .unwrap()
            .key(SW)
            .unwrap()
    };
    let body = json!({"id": id, "type": "test.event"})
        .to_string()
        .into_bytes();
    let mut h: Vec<(String, String)> = vec![("content-type".into(), "application/json".into())];
    let mut push = |k: &str, v: String| h.push((k.to_string(), v));
    let sig = match source {
        "gh" => {
            push("x-github-delivery", id.to_string());
            (
                "x-hub-signature-256",
                body_mac::sign(&secret(GH), "sha256=", Encoding::Hex, &body),
            )
        }
        "stripe" => ("stripe-signature", stripe::sign(&secret(STRIPE), t, &body)),
        "shop" => {
            push("x-shopify-webhook-id", id.to_string());
            (
                "x-shopify-hmac-sha256",
                body_mac::sign(&secret(SHOP), "", Encoding::Base64, &body),
            )
        }
        "sw" | "svix" => {
            let p = if source == "sw" { "webhook" } else { "svix" };
            push(&format!("{p}-id"), id.to_string());
            push(&format!("{p}-timestamp"), t.to_string());
            let name: &'static str = if source == "sw" {
                "webhook-signature"
            } else {
                "svix-signature"
            };
            (name, standard::sign(&sw_key, id, t, &body))
        }
        "custom" => {
            push("x-event-id", id.to_string());
            (
                "x-signature",
                body_mac::sign(&secret(CUSTOM), "hmac=", Encoding::Base64, &body),
            )
        }
        other => panic!("no source {other}"),
    };
    if how != Sign::Missing {
        h.push((sig.0.to_string(), sig.1));
    }
    (format!("/webhooks/acme/{source}"), h, body)
}

fn send(edge: &Edge, source: &str, id: &str, how: Sign) -> Response {
    let (path, headers, body) = delivery(source, id, how);
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    edge.post(&path, &headers, &body)
        .unwrap_or_else(|e| panic!("POST {path}: {e}\n{}", edge.log_tail()))
}

fn unverified(edge: &Edge) -> f64 {
    edge.stat(r#"ankusa_admissions_total{outcome="unverified"}"#)
}

fn stored_keys(intake: &Intake) -> BTreeMap<String, usize> {
    let mut keys = BTreeMap::new();
    for hook in intake.hooks() {
        *keys
            .entry(hook["event_key"].as_str().unwrap_or_default().to_string())
            .or_default() += 1;
    }
    keys
}

fn start(intake: &Intake, store_port: u16, config: Value, lds: bool) -> Edge {
    let mut spec = EdgeSpec::new(
        &format!("edge-v{}", free_port()),
        intake.port,
        store_port,
        config,
    );
    spec.vm_env = env();
    if lds {
        Edge::start_lds(spec)
    } else {
        Edge::start(spec)
    }
}

#[test]
fn each_scheme_admits_its_signature_and_refuses_forgeries_with_401() {
    let intake = Intake::start();
    let edge = start(
        &intake,
        free_port(),
        every_scheme(1000, &["ANKUSA_T_GH"]),
        false,
    );
    let mut refused = 0.0;
    for source in ["gh", "stripe", "shop", "sw", "svix", "custom"] {
        let good = send(&edge, source, &format!("{source}-good"), Sign::Good);
        assert_eq!(
            good.status,
            201,
            "{source}: {}\n{}",
            good.text(),
            edge.log_tail()
        );
        for how in [Sign::WrongSecret, Sign::Missing] {
            let r = send(&edge, source, &format!("{source}-{how:?}"), how);
            assert_eq!(
                (r.status, r.json()),
                (401, json!({"error": "bad_signature"})),
                "{source} {how:?}"
            );
            refused += 1.0;
        }
        let old = send(&edge, source, &format!("{source}-old"), Sign::Old(400));
        let expected = if matches!(source, "stripe" | "sw" | "svix") {
            refused += 1.0;
            (401, json!({"error": "stale_timestamp"}))
        } else {
            // GitHub, Shopify and the generic rule sign no timestamp.
            (201, old.json())
        };
        assert_eq!((old.status, old.json()), expected, "{source} stale");
    }
    // Svix's tolerance is its own (60 s): 90 s old is stale there, not on sw (300 s).
    assert_eq!(send(&edge, "svix", "svix-90", Sign::Old(90)).status, 401);
    assert_eq!(send(&edge, "sw", "sw-90", Sign::Old(90)).status, 201);
    refused += 1.0;
    assert_eq!(unverified(&edge), refused);
    let stored = stored_keys(&intake);
    assert!(
        stored
            .keys()
            .all(|k| !k.contains("WrongSecret") && !k.contains("Missing")),
        "a forgery reached the intake: {stored:?}"
    );
    assert_eq!(stored.len(), 6 + 3 + 1, "{stored:?}");
}

fn fleet_config(rate: u64, burst: u64) -> Value {
    json!({
        "sources": {
            "gh": {"tenant": "acme", "dedupe": "github",
                   "verify": {"scheme": "github", "secret_env": ["ANKUSA_T_GH"]}}
        },
        "rate_limits": {
            "scope": "fleet",
            "default": {"rate": 1000, "burst": 1000},
            "tenants": {"acme": {"rate": rate, "burst": burst}}
        },
        "dedupe": {"scope": "fleet"},
        "fleet": {"cluster": "ankusa_store", "timeout_ms": 250}
    })
}

#[test]
fn a_forgery_spends_no_quota_and_takes_no_claim() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let burst = 3;
    let edge = start(&intake, store.port, fleet_config(1, burst), false);
    // Forgeries first, each reusing an event id the real provider is about to send.
    for i in 0..20 {
        let how = if i % 2 == 0 {
            Sign::WrongSecret
        } else {
            Sign::Missing
        };
        let r = send(&edge, "gh", &format!("real-{}", i % burst), how);
        assert_eq!(r.status, 401, "forgery {i}: {}", r.text());
    }
    // The real deliveries get the whole burst, none answered 409 or duplicate.
    for i in 0..burst {
        let r = send(&edge, "gh", &format!("real-{i}"), Sign::Good);
        assert_eq!(r.status, 201, "real {i}: {}\n{}", r.text(), edge.log_tail());
        assert_eq!(r.json().get("duplicate"), None, "real {i}: {}", r.text());
    }
    // ...and the quota still holds at its number.
    let over = send(&edge, "gh", "real-over", Sign::Good);
    assert_eq!(over.status, 429, "{}", over.text());
    assert_eq!(unverified(&edge), 20.0);
    // Hits the store ran, on /v1/hit or in a /v1/hits batch (a lone hook
    // carrying settles goes as a batch of one).
    let metrics = ankusa_testkit::http::get(&store.url_of("/metrics"))
        .map(|r| r.text())
        .unwrap_or_default();
    let hits = ankusa_testkit::metrics::metric_value(&metrics, "ankusa_store_hits_per_call_sum");
    assert_eq!(
        hits,
        f64::from(burst as u32 + 1),
        "a forgery reached the store"
    );
    let stored = stored_keys(&intake);
    assert_eq!(stored.len(), burst as usize, "{stored:?}");
    assert!(stored.values().all(|n| *n == 1), "{stored:?}");
}

/// Tenant acme's quota in the flood test: 50 hooks/s, burst 50.
const QUOTA: u64 = 50;
/// The real sender's rate: 80 % of the quota.
const REAL_RATE: u64 = 40;
const REAL_EVENTS: u64 = 120;

#[test]
fn a_flood_of_forgeries_leaves_the_real_sender_its_quota_through_two_edges() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let a = start(&intake, store.port, fleet_config(QUOTA, QUOTA), false);
    let b = start(&intake, store.port, fleet_config(QUOTA, QUOTA), false);
    let urls = Arc::new([a.url(""), b.url("")]);
    let done = Arc::new(AtomicBool::new(false));
    let (forged, forged_401) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    // Forgers: as fast as 6 threads go until the real sender is done (at most
    // 20 000), half with a wrong secret, half unsigned, each reusing a real event id.
    let forgers: Vec<_> = (0..6)
        .map(|t| {
            let (urls, done, forged, forged_401) = (
                urls.clone(),
                done.clone(),
                forged.clone(),
                forged_401.clone(),
            );
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !done.load(Ordering::SeqCst) && forged.load(Ordering::SeqCst) < 20_000 {
                    let how = if i.is_multiple_of(2) {
                        Sign::WrongSecret
                    } else {
                        Sign::Missing
                    };
                    let id = format!("flood-{}", (i * 7 + t) % REAL_EVENTS);
                    let (path, headers, body) = delivery("gh", &id, how);
                    let headers: Vec<(&str, &str)> = headers
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    let url = format!("{}{path}", urls[(i as usize + t as usize) % 2]);
                    let r = ankusa_testkit::http::request(
                        "POST",
                        &url,
                        &headers,
                        &body,
                        Duration::from_secs(10),
                    );
                    forged.fetch_add(1, Ordering::SeqCst);
                    if r.is_ok_and(|r| {
                        r.status == 401 && r.json() == json!({"error": "bad_signature"})
                    }) {
                        forged_401.fetch_add(1, Ordering::SeqCst);
                    }
                    i += 1;
                }
            })
        })
        .collect();
    // The real provider: REAL_EVENTS at REAL_RATE, alternating edges, paced from the start.
    let started = std::time::Instant::now();
    let mut answers = Vec::new();
    for i in 0..REAL_EVENTS {
        let due = started + Duration::from_secs_f64(i as f64 / REAL_RATE as f64);
        if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(wait);
        }
        let edge = if i % 2 == 0 { &a } else { &b };
        let r = send(edge, "gh", &format!("flood-{i}"), Sign::Good);
        answers.push((i, r.status, r.json().get("duplicate").cloned()));
    }
    let real_s = started.elapsed().as_secs_f64();
    done.store(true, Ordering::SeqCst);
    for f in forgers {
        f.join().expect("a forger panicked");
    }
    let (forged, forged_401) = (
        forged.load(Ordering::SeqCst),
        forged_401.load(Ordering::SeqCst),
    );
    let bad: Vec<_> = answers
        .iter()
        .filter(|(_, s, d)| *s != 201 || d.is_some())
        .collect();
    assert!(
        bad.is_empty(),
        "{} real deliveries not plainly admitted, first: {:?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
    assert_eq!(forged_401, forged, "every forgery is a 401 bad_signature");
    println!("{forged} forgeries in {real_s:.1} s beside {REAL_EVENTS} real deliveries");
    // The flood was faster than the quota: several times what it allows in the same time.
    let allowed = QUOTA as f64 * real_s + QUOTA as f64;
    assert!(
        forged as f64 > 4.0 * allowed,
        "only {forged} forgeries in {real_s:.1} s; the quota allows {allowed:.0}"
    );
    assert_eq!(unverified(&a) + unverified(&b), forged as f64);
    let stored = stored_keys(&intake);
    assert_eq!(stored.len() as u64, REAL_EVENTS, "lost: {stored:?}");
    assert!(stored.values().all(|n| *n == 1), "stored twice: {stored:?}");
}

#[test]
fn a_rotated_out_secret_is_refused_after_the_reload() {
    let intake = Intake::start();
    let both = every_scheme(1000, &["ANKUSA_T_GH", "ANKUSA_T_GH_OLD"]);
    let mut edge = start(&intake, free_port(), both, true);
    let signed = |edge: &Edge, secret: &str, id: &str| {
        let body = json!({"id": id}).to_string();
        let sig = body_mac::sign(secret.as_bytes(), "sha256=", Encoding::Hex, body.as_bytes());
        edge.post(
            "/webhooks/acme/gh",
            &[("x-github-delivery", id), ("x-hub-signature-256", &sig)],
            body.as_bytes(),
        )
        .unwrap()
        .status
    };
    assert_eq!(signed(&edge, GH, "rot-new-1"), 201);
    assert_eq!(signed(&edge, GH_OLD, "rot-old-1"), 201);
    assert_eq!(
        edge.reload(every_scheme(1000, &["ANKUSA_T_GH"])),
        Reload::Accepted
    );
    assert_eq!(signed(&edge, GH, "rot-new-2"), 201);
    assert_eq!(signed(&edge, GH_OLD, "rot-old-2"), 401);
    // A config naming a variable Envoy doesn't have is refused, naming it; the old one keeps serving.
    assert_eq!(
        edge.reload(every_scheme(1000, &["ANKUSA_T_GH", "ANKUSA_T_NOT_SET"])),
        Reload::Rejected
    );
    assert!(
        edge.log().contains(
            "configuration refused: sources.gh.verify.secret_env: environment variable ANKUSA_T_NOT_SET is not set"
        ),
        "{}",
        edge.log_tail()
    );
    assert_eq!(signed(&edge, GH, "rot-new-3"), 201);
    assert_eq!(signed(&edge, GH_OLD, "rot-old-3"), 401);
}

#[test]
fn no_secret_value_shows_in_config_dump() {
    let intake = Intake::start();
    let edge = start(
        &intake,
        free_port(),
        every_scheme(1000, &["ANKUSA_T_GH"]),
        false,
    );
    let dump = ankusa_testkit::http::get(&edge.admin_url("/config_dump"))
        .unwrap()
        .text();
    assert!(dump.contains("ANKUSA_T_GH"), "the names are there");
    for (_, value) in env() {
        assert!(!dump.contains(&value), "{value} is in config_dump");
    }
}
