//! Load generator for `POST /v1/hit` (used by scripts/bench-store.sh): N
//! keep-alive clients, each sending one hit after another for a fixed time;
//! prints the rate and the latency percentiles as seen by the clients.

use ankusa_store::scripts::hit_source;
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(name = "store-bench")]
struct Args {
    /// The store, `http://127.0.0.1:PORT`.
    #[arg(long, default_value = "http://127.0.0.1:7070")]
    url: String,
    /// Concurrent clients, each with its own keep-alive connection.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// How long to send, in seconds.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Speak cleartext HTTP/2 (one multiplexed connection) instead of HTTP/1.1.
    #[arg(long)]
    h2: bool,
    /// Print the hit script as the store runs it, and exit (for redis-benchmark).
    #[arg(long)]
    print_hit_script: bool,
}

/// What one client saw: latencies (µs) of 200 answers, and the other answers.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    admitted: u64,
    other: u64,
}

fn main() {
    let args = Args::parse();
    if args.print_hit_script {
        print!("{}", hit_source());
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(args));
}

async fn run(args: Args) {
    let mut builder = Client::builder(TokioExecutor::new());
    builder
        .pool_max_idle_per_host(args.concurrency)
        .http2_only(args.h2);
    let client = builder.build_http::<Full<Bytes>>();
    let url = format!("{}/v1/hit", args.url.trim_end_matches('/'));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..args.concurrency {
        let (client, url) = (client.clone(), url.clone());
        tasks.spawn(async move {
            let mut tally = Tally::default();
            let mut i = 0u64;
            while Instant::now() < deadline {
                i += 1;
                // The same work as the redis-benchmark run: one bucket that
                // always admits, and a fresh claim key per hook.
                let body = format!(
                    r#"{{"charges":[{{"kind":"hooks","tenant":"bench","increment_us":1,"capacity_us":1000000000000000}}],"claim":{{"tenant":"bench","source_id":"gh","key":"k{worker}-{i}","hook_id":"h{worker}-{i}","node":"bench","ttl_ms":60000,"pending_ttl_ms":30000}}}}"#
                );
                let req = hyper::Request::post(&url)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body)))
                    .expect("request");
                let sent = Instant::now();
                let answer = match client.request(req).await {
                    Ok(res) => {
                        let status = res.status();
                        let body = res.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                        status.is_success() && body.starts_with(br#"{"result":"ok"#)
                    }
                    Err(_) => false,
                };
                if answer {
                    tally.admitted += 1;
                    tally.latencies_us.push(sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32);
                } else {
                    tally.other += 1;
                }
            }
            tally
        });
    }
    let mut all = Tally::default();
    while let Some(Ok(t)) = tasks.join_next().await {
        all.latencies_us.extend(t.latencies_us);
        all.admitted += t.admitted;
        all.other += t.other;
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.latencies_us.sort_unstable();
    let pct = |p: f64| -> f64 {
        if all.latencies_us.is_empty() {
            return 0.0;
        }
        let i = ((all.latencies_us.len() as f64 * p).ceil() as usize)
            .clamp(1, all.latencies_us.len())
            - 1;
        f64::from(all.latencies_us[i]) / 1000.0
    };
    println!(
        "rps={:.0} p50_ms={:.3} p99_ms={:.3} ok={} failed={} clients={} seconds={:.1} protocol={}",
        all.admitted as f64 / elapsed,
        pct(0.50),
        pct(0.99),
        all.admitted,
        all.other,
        args.concurrency,
        elapsed,
        if args.h2 { "h2c" } else { "http/1.1" }
    );
}
