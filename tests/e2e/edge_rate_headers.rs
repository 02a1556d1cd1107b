//! RateLimit headers through Envoy: a node-scope answer carries the standing
//! of the bucket its charge left (a forwarded hook on the upstream's answer,
//! a 429 beside `Retry-After`); a fleet admit carries the standing of the
//! levels the store reports, a fleet 429 the store's wait, a duplicate and a
//! pending answer the policy.

use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::*;
use serde_json::json;

const BURST: u64 = 3;

#[test]
fn node_answers_carry_the_exact_standing_and_a_429_has_none_left() {
    let intake = Intake::start();
    let mut config = node_config(BURST);
    config["rate_limits"]["headers"] = json!("both");
    let edge = edge("edge-rlh", intake.port, free_port(), config);

    let first = deliver(&edge, "/webhooks/gh", &format!("h-0-{}", free_port()));
    assert_eq!(first.status, 201, "{}", edge.log_tail());
    assert_eq!(
        first.header("ratelimit-policy"),
        Some("\"hooks\";q=3;w=3"),
        "{:?}",
        first.headers
    );
    // An empty bucket charged once: level 1 of 3, full again in 1 s.
    assert_eq!(first.header("ratelimit"), Some("\"hooks\";r=2;t=1"));
    assert_eq!(first.header("x-ratelimit-limit"), Some("3"));
    assert_eq!(first.header("x-ratelimit-remaining"), Some("2"));
    assert_eq!(first.header("x-ratelimit-reset"), Some("1"));

    let mut remaining = vec![2];
    let refused = loop {
        let r = deliver(&edge, "/webhooks/gh", &format!("h-{}", free_port()));
        if r.status == 429 {
            break r;
        }
        assert_eq!(r.status, 201, "{}", r.text());
        let left = r
            .header("x-ratelimit-remaining")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{:?}", r.headers));
        remaining.push(left);
        assert!(remaining.len() < 20, "no 429: {remaining:?}");
    };
    assert_eq!(
        remaining.last(),
        Some(&0),
        "admitted down to 0: {remaining:?}"
    );
    assert!(refused.header("retry-after").is_some());
    assert_eq!(refused.header("x-ratelimit-remaining"), Some("0"));
    let state = refused.header("ratelimit").unwrap_or_default().to_string();
    assert!(state.starts_with("\"hooks\";r=0;t="), "{state}");
}

#[test]
fn a_fleet_admit_carries_the_standing_the_store_reports_and_a_429_its_wait() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start();
    let mut config = fleet_config(2, 200);
    config["rate_limits"]["headers"] = json!("both");
    let edge = edge("edge-rlf", intake.port, store.port, config);

    let first = deliver(&edge, "/webhooks/gh", &format!("f-0-{}", free_port()));
    assert_eq!(first.status, 201, "{}", edge.log_tail());
    assert_eq!(first.header("ratelimit-policy"), Some("\"hooks\";q=2;w=2"));
    // The store's bucket after one charge of a rate-1, burst-2 quota: 1 of 2
    // held, empty again in 1 s.
    assert_eq!(
        first.header("ratelimit"),
        Some("\"hooks\";r=1;t=1"),
        "{:?}",
        first.headers
    );
    assert_eq!(first.header("x-ratelimit-remaining"), Some("1"));
    let second = deliver(&edge, "/webhooks/gh", &format!("f-1-{}", free_port()));
    assert_eq!(second.status, 201, "{}", second.text());
    // Just under 2 units held (a few ms drained since the first): none whole left.
    assert_eq!(
        second.header("ratelimit"),
        Some("\"hooks\";r=0;t=2"),
        "{:?}",
        second.headers
    );

    let refused = deliver(&edge, "/webhooks/gh", &format!("f-2-{}", free_port()));
    assert_eq!(refused.status, 429, "{}", refused.text());
    let retry: u64 = refused
        .header("retry-after")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{:?}", refused.headers));
    assert_eq!(
        refused.header("ratelimit"),
        Some(format!("\"hooks\";r=0;t={retry}").as_str())
    );
}

#[test]
fn duplicate_and_pending_answers_carry_the_policy() {
    let redis = Redis::start();
    let store = Store::start(&redis.url());
    let intake = Intake::start_obeying();
    let mut config = fleet_config(5, 5);
    config["rate_limits"]["headers"] = json!("both");
    let edge = edge("edge-rld", intake.port, store.port, config);
    let policy = |r: &ankusa_testkit::http::Response, what: &str| {
        assert_eq!(
            r.header("ratelimit-policy"),
            Some("\"hooks\";q=5;w=5"),
            "{what}: {:?}",
            r.headers
        );
        assert_eq!(r.header("x-ratelimit-limit"), Some("5"), "{what}");
        assert_eq!(r.header("ratelimit"), None, "{what}: nothing was charged");
        assert_eq!(r.header("x-ratelimit-remaining"), None, "{what}");
    };

    let delivery = format!("dup-{}", free_port());
    assert_eq!(deliver(&edge, "/webhooks/gh", &delivery).status, 201);
    let mut duplicate = None;
    assert!(
        eventually(std::time::Duration::from_secs(5), || {
            let r = deliver(&edge, "/webhooks/gh", &delivery);
            let done = r.status == 201 && r.json()["duplicate"] == json!(true);
            duplicate = Some(r);
            done
        }),
        "never answered as a duplicate"
    );
    policy(&duplicate.expect("answered"), "duplicate");

    // The first copy is slow upstream, so its claim stays pending meanwhile.
    let pending_key = format!("pend-{}", free_port());
    let (url, key) = (edge.url("/webhooks/gh"), pending_key.clone());
    let slow = std::thread::spawn(move || {
        ankusa_testkit::http::request(
            "POST",
            &url,
            &[
                ("x-github-delivery", key.as_str()),
                ("x-intake-delay-ms", "3000"),
            ],
            b"{}",
            std::time::Duration::from_secs(20),
        )
    });
    assert!(eventually(std::time::Duration::from_secs(10), || {
        claim_value(&redis, &pending_key).starts_with("p:")
    }));
    let pending = deliver(&edge, "/webhooks/gh", &pending_key);
    assert_eq!(pending.status, 409, "{}", pending.text());
    policy(&pending, "pending");
    assert_eq!(slow.join().expect("joined").expect("answered").status, 201);
}
