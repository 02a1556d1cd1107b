//! What a node-scope hook's decision costs with no host around it: the
//! whole life of one bench hook (request headers, body, the upstream's
//! headers, the stream's end) through the core's state machine over an
//! in-memory node store, its decision rendered for the access log as the
//! filter renders it. The part of (b) − (k) in `scripts/bench-edge.sh` that
//! is the filter's own code. A figure, not a test: run natively with
//! `cargo test --release -p ankusa-core --test hook_cost -- --ignored --nocapture`,
//! and under V8 with `scripts/core-cost.sh`, which prints both.
#![cfg(any(not(target_arch = "wasm32"), target_os = "wasi"))]

use ankusa_core::hook::headers::RequestHeaders;
use ankusa_core::hook::machine::{Effect, Hook, Step};
use ankusa_core::hook::worker::Worker;
use ankusa_core::node::cas::MapStore;
use std::time::Instant;

/// bench-edge's (b) as far as a `gh` hook reads it: node scopes, GitHub
/// dedupe, a quota nothing in the run can exhaust.
const CONFIG: &str = r#"{
  "sources": {"gh": {"tenant": "acme", "dedupe": "github"}},
  "rate_limits": {"scope": "node", "default": {"rate": 1000000, "burst": 1000000}},
  "dedupe": {"scope": "node"}
}"#;

const BODY: &[u8] = br#"{"zen":"Design for failure.","n":100000}"#;

/// The request headers Envoy hands the filter for a bench hook (HTTP/1.1,
/// after the connection manager added its own).
fn headers(i: u64) -> RequestHeaders {
    let pairs = [
        (":authority", "127.0.0.1:10000".to_string()),
        (":path", "/webhooks/gh".to_string()),
        (":method", "POST".to_string()),
        (":scheme", "http".to_string()),
        ("content-type", "application/json".to_string()),
        ("x-github-delivery", format!("con4-b-{i}")),
        ("x-intake-status", "201".to_string()),
        ("content-length", BODY.len().to_string()),
        ("x-forwarded-proto", "http".to_string()),
        (
            "x-request-id",
            "6f2d3a1c-7b9e-4c1a-9d2e-3f4a5b6c7d8e".to_string(),
        ),
    ];
    RequestHeaders::from_pairs(
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.into_bytes()))
            .collect(),
    )
}

/// What the host would do with a step's effects that costs VM work: the
/// decision rendered (kept from the optimiser). How many there were.
fn perform(step: Step) -> usize {
    let n = step.effects.len();
    for effect in step.effects {
        if let Effect::Decision(d) = effect {
            std::hint::black_box(d.render());
        }
    }
    n
}

/// One hook's whole life; how many effects it had.
fn one_hook(worker: &Worker, store: &MapStore, i: u64) -> usize {
    let env = worker.env("bench-b", store);
    let now = 1_700_000_000_000_000 + i * 300;
    let mut hook = Hook::new();
    let mut n = perform(hook.on_headers(&env, headers(i), false, || now, |_| [7; 10]));
    n += perform(hook.on_body(&env, BODY.len() as u64, true, || BODY.to_vec(), || now));
    if hook.reads_upstream() {
        let step = if hook.holds_claim() {
            hook.on_upstream_headers(Some("201"), None, None)
        } else {
            hook.on_upstream_headers(None, None, None)
        };
        n += perform(step);
    }
    n + perform(hook.on_stream_end())
}

#[test]
#[ignore = "a benchmark: prints figures"]
fn what_a_node_hooks_decision_costs() {
    let rounds: u64 = std::env::var("HOOK_COST_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(200_000);
    let store = MapStore::new();
    let worker = Worker::configure_with_env(CONFIG.as_bytes(), &[], &store).unwrap();
    // Every hook is admitted and forwarded: the path bench-edge measures.
    assert!(one_hook(&worker, &store, 0) > 0);
    let start = Instant::now();
    let mut total = 0;
    for i in 1..=rounds {
        total += std::hint::black_box(one_hook(&worker, &store, i));
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    println!(
        "a node hook's decision:    {us:.2} µs ({:.1} effects a hook)",
        total as f64 / rounds as f64
    );
}
