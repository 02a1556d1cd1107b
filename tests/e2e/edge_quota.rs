//! A bytes quota through real Envoy enforces the rate as written: with
//! `bytes_rate: 600000` the admitted bytes stay within
//! `burst + 600 000 × elapsed`, node scope and fleet scope alike. (Whole-µs
//! intervals used to enforce 1 000 000 B/s for this rate.)

use ankusa_testkit::envoy::Edge;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RATE: u64 = 600_000;
const BURST: u64 = 600_000;
const BODY: usize = 100_000;
/// How long the senders push; bounded in count too.
const SPAN: Duration = Duration::from_secs(3);
const MAX_REQUESTS: u64 = 3_000;

/// acme: hooks never the limit, bytes 600 000/s with a burst of 600 000.
fn with_bytes_quota(mut config: Value) -> Value {
    config["rate_limits"]["tenants"]["acme"] = json!({
        "rate": 100_000, "burst": 100_000, "bytes_rate": RATE, "bytes_burst": BURST
    });
    config["max_body_bytes"] = json!(BODY);
    config
}

/// Four greedy senders of 100 000-byte bodies for [`SPAN`]: (bytes admitted,
/// seconds from the first request sent to the last answer read).
fn push(edge: &Edge) -> (u64, f64) {
    let url = edge.url("/webhooks/gh");
    let admitted = Arc::new(AtomicU64::new(0));
    let sent = Arc::new(AtomicU64::new(0));
    let body = Arc::new(vec![b'x'; BODY]);
    let started = Instant::now();
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let (url, admitted, sent, body) =
                (url.clone(), admitted.clone(), sent.clone(), body.clone());
            std::thread::spawn(move || {
                while started.elapsed() < SPAN {
                    let i = sent.fetch_add(1, Ordering::SeqCst);
                    if i >= MAX_REQUESTS {
                        return;
                    }
                    let r = ankusa_testkit::http::request(
                        "POST",
                        &url,
                        &[("x-github-delivery", &format!("q-{i}"))],
                        &body,
                        Duration::from_secs(10),
                    )
                    .expect("edge answers");
                    assert!(
                        r.status == 201 || r.status == 429,
                        "{}: {}",
                        r.status,
                        r.text()
                    );
                    if r.status == 201 {
                        admitted.fetch_add(BODY as u64, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for s in senders {
        s.join().expect("a sender panicked");
    }
    let elapsed = started.elapsed().as_secs_f64();
    (admitted.load(Ordering::SeqCst), elapsed)
}

fn assert_rate_as_written(admitted: u64, elapsed: f64, edge: &Edge) {
    let bound = BURST as f64 + RATE as f64 * elapsed;
    eprintln!("{admitted} B admitted in {elapsed:.3} s (bound {bound:.0})");
    // 1 000 000 B/s (the old arithmetic) would admit 3 600 000 B in 3 s;
    // this bound is 2 400 000 B.
    assert!(
        admitted as f64 <= bound,
        "{admitted} B admitted in {elapsed:.3} s: above {bound} (burst + rate × elapsed)"
    );
    // Greedy senders get what refills: the quota is enforced, not starved.
    let floor = BURST as f64 + RATE as f64 * (elapsed - 1.0) - BODY as f64;
    assert!(
        admitted as f64 >= floor,
        "{admitted} B admitted in {elapsed:.3} s: below {floor}"
    );
    assert_eq!(
        edge.stat(r#"ankusa_admissions_total{outcome="admitted"}"#) as u64,
        admitted / BODY as u64,
        "admissions counter"
    );
}

#[test]
fn a_node_bytes_quota_of_600000_per_second_admits_600000_per_second() {
    let intake = Intake::start();
    let edge = edge(
        "edge-quota-node",
        intake.port,
        free_port(),
        with_bytes_quota(node_config(1)),
    );
    let (admitted, elapsed) = push(&edge);
    assert_rate_as_written(admitted, elapsed, &edge);
}

#[test]
fn a_fleet_bytes_quota_of_600000_per_second_admits_600000_per_second() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let edge = edge(
        "edge-quota-fleet",
        intake.port,
        store.port,
        with_bytes_quota(fleet_config(1, 5)),
    );
    let (admitted, elapsed) = push(&edge);
    assert_rate_as_written(admitted, elapsed, &edge);
    assert_eq!(edge.stat("ankusa_fleet_fallback_total"), 0.0);
}
