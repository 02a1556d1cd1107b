//! What keeps a slow or hostile caller from wearing the store down: the
//! header-read timeout (idle half-requests), the settle queue's bound, and
//! the margin inside a caller's budget (late work is counted).

use crate::common::{charge, claim, hit, promote, Http, Service};
use ankusa_store::Config;
use ankusa_testkit::redis::Redis;
use serde_json::json;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Whether the server closed `socket` (EOF or reset) within `wait`.
fn closed_within(socket: &mut TcpStream, wait: Duration) -> bool {
    socket.set_read_timeout(Some(wait)).expect("read timeout");
    let mut buf = [0u8; 512];
    loop {
        match socket.read(&mut buf) {
            Ok(0) => return true,
            // hyper may answer 408 before closing: read on to the end.
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

/// A slowloris: 200 requests whose headers never end, plus 10 connections
/// stuck inside the HTTP/2 preface. `/healthz` answers while they are held
/// open, and after the header-read timeout every one of them is closed.
/// Before the timeout was set they stayed open for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_half_requests_are_cut_off_and_healthz_still_answers() {
    let redis = Redis::start();
    let mut config = Config::for_redis(&redis.url());
    config.header_read_timeout_ms = 1500;
    let service = Service::start(config).await;
    let addr = service.url.trim_start_matches("http://").to_string();
    let held = tokio::task::spawn_blocking(move || {
        let mut held = Vec::new();
        for i in 0..210 {
            let mut s = TcpStream::connect(&addr).expect("connect");
            let partial: &[u8] = if i < 200 {
                b"POST /v1/hit HTTP/1.1\r\nhost: store\r\nx-slow: "
            } else {
                b"PRI * HTTP/2.0\r\n"
            };
            s.write_all(partial).expect("write a partial request");
            held.push(s);
        }
        held
    })
    .await
    .expect("connect thread");
    let started = Instant::now();
    let (status, body) = Http::new().get(&service.at("/healthz")).await;
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ok"}"#));
    let answered_in = started.elapsed();

    let open = tokio::task::spawn_blocking(move || {
        let mut held = held;
        // One deadline for them all: the timeout (1.5 s) and ample slack.
        let deadline = Instant::now() + Duration::from_secs(10);
        held.iter_mut()
            .map(|s| {
                let left = deadline.saturating_duration_since(Instant::now());
                !closed_within(s, left.max(Duration::from_millis(1)))
            })
            .filter(|still_open| *still_open)
            .count()
    })
    .await
    .expect("read thread");
    assert_eq!(
        open, 0,
        "idle half-requests still open after the header timeout"
    );
    assert!(
        answered_in < Duration::from_millis(1500),
        "/healthz waited {answered_in:?}, as long as the idle requests were held"
    );
    service.stop().await;
}

fn promotes(prefix: &str, n: usize) -> serde_json::Value {
    let ops: Vec<_> = (0..n)
        .map(|i| {
            let c = claim("acme", &format!("{prefix}-{i}"), "h1", 60_000, 30_000);
            promote(&c, "h1")
        })
        .collect();
    json!({ "ops": ops })
}

/// With Redis stalled, settles wait in the queue; once it holds its bound
/// in operations, one more settle is answered 503 `overloaded` at once and
/// counted, and the queue takes settles again once Redis answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_settle_queue_answers_overloaded_and_counts_it() {
    let redis = Redis::start();
    let mut config = Config::for_redis(&redis.url());
    config.settle_queue_max = 10;
    let service = Service::start(config).await;
    service.wait_ready(Duration::from_secs(20)).await;
    let http = Http::new();
    let budget = [("x-ankusa-budget-ms", "300")];
    // The claims the first settle promotes: a promote moves only a held one.
    for i in 0..8 {
        let c = claim("acme", &format!("a-{i}"), "h1", 60_000, 30_000);
        let (status, answer) = http
            .post(&service.at("/v1/hit"), &hit(Vec::new(), Some(c)))
            .await;
        assert_eq!((status, answer["result"].as_str()), (200, Some("ok")));
    }

    redis.proc.signal("STOP");
    let (status, answer) = http
        .post_with(&service.at("/v1/settle"), &budget, &promotes("a", 8))
        .await;
    assert_eq!(
        (status, answer["error"].as_str()),
        (503, Some("timeout")),
        "{answer}"
    );
    assert_eq!(service.metric("ankusa_store_settle_queued_ops").await, 8.0);
    let (status, answer) = http
        .post_with(&service.at("/v1/settle"), &budget, &promotes("b", 3))
        .await;
    redis.proc.signal("CONT");
    assert_eq!(
        (status, answer["error"].as_str()),
        (503, Some("overloaded")),
        "{answer}"
    );
    assert_eq!(
        service
            .metric("ankusa_store_errors_total{cause=\"overloaded\"}")
            .await,
        1.0
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, answer) = http
            .post_with(&service.at("/v1/settle"), &budget, &promotes("c", 3))
            .await;
        if status == 200 {
            assert_eq!(answer["applied"], 3);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the queue never took settles again: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        crate::common::committed_at(|a| redis.cli(a), "ankusa:{acme}:claim:gh:a-0"),
        "c:h1"
    );
    service.stop().await;
}

/// A hit whose script runs only after the caller's deadline (Redis stalled
/// for longer than the budget) is answered 503 `timeout` within the budget,
/// and counted in `ankusa_store_late_total` once the script completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_finishing_after_the_deadline_is_counted_late() {
    let redis = Redis::start();
    let service = Service::ready(&redis.url()).await;
    let http = Http::new();
    let body = hit(vec![charge("hooks", "acme", 1, 1000, 1000)], None);
    let (status, _) = http
        .post_with(
            &service.at("/v1/hit"),
            &[("x-ankusa-budget-ms", "100")],
            &body,
        )
        .await;
    assert_eq!(status, 200);
    let late = "ankusa_store_late_total{endpoint=\"hit\"}";
    assert_eq!(service.metric(late).await, 0.0);

    redis.proc.signal("STOP");
    let (status, answer) = http
        .post_with(
            &service.at("/v1/hit"),
            &[("x-ankusa-budget-ms", "100")],
            &body,
        )
        .await;
    std::thread::sleep(Duration::from_millis(200));
    redis.proc.signal("CONT");
    assert_eq!(
        (status, answer["error"].as_str()),
        (503, Some("timeout")),
        "{answer}"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while service.metric(late).await < 1.0 {
        assert!(
            Instant::now() < deadline,
            "the late script was never counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(service.metric(late).await, 1.0);
    service.stop().await;
}

/// A connection that never sends a byte does not hold up a stop: it was
/// waited for until the header-read timeout (30 s by default), past the
/// drain grace, so the stop took over 20 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_does_not_delay_the_stop() {
    let redis = Redis::start();
    let service = Service::start(Config::for_redis(&redis.url())).await;
    let addr = service.url.trim_start_matches("http://").to_string();
    let silent = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let (status, _) = Http::new().get(&service.at("/healthz")).await;
    assert_eq!(status, 200);
    let started = Instant::now();
    service.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the stop waited {:?} for a silent connection",
        started.elapsed()
    );
    drop(silent);
}

/// A settle window longer than a caller's budget: the caller's settle is
/// flushed within its budget and answered, not held for the whole window
/// (which answered 503 `timeout` before the window was cut by the budget);
/// a second caller with a longer budget arriving meanwhile shares its flush.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_settle_window_is_cut_short_by_the_callers_budget() {
    let redis = Redis::start();
    let mut config = Config::for_redis(&redis.url());
    config.settle_window_ms = 10_000;
    let service = Service::start(config).await;
    service.wait_ready(Duration::from_secs(20)).await;
    let (http, url) = (Http::new(), service.at("/v1/settle"));
    // Redis's script cache gets the settle script first (a fresh Redis
    // answers the first settle NOSCRIPT: a round trip more for its load).
    let (status, _) = http
        .post_with(&url, &[("x-ankusa-budget-ms", "100")], &promotes("warm", 1))
        .await;
    assert_eq!(status, 200);
    let trips = "ankusa_store_pipeline_round_trips_total";
    let trips_before = service.metric(trips).await;
    let long = {
        let (http, url) = (http.clone(), url.clone());
        tokio::spawn(async move {
            http.post_with(
                &url,
                &[("x-ankusa-budget-ms", "5000")],
                &promotes("long", 3),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (status, answer) = http
        .post_with(
            &url,
            &[("x-ankusa-budget-ms", "300")],
            &promotes("short", 2),
        )
        .await;
    assert_eq!(
        (status, answer["applied"].as_u64()),
        (200, Some(2)),
        "{answer}"
    );
    let (status, answer) = long.await.expect("the long caller");
    assert_eq!(
        (status, answer["applied"].as_u64()),
        (200, Some(3)),
        "{answer}"
    );
    assert_eq!(service.metric(trips).await - trips_before, 1.0);
}
