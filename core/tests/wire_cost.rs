//! What the wire's JSON costs a fleet hook: one hit request built, one
//! settle operation riding on a call, the answer of a batch of one read
//! back, and a single hit's answer read back. A figure, not a test: run
//! natively with
//! `cargo test --release -p ankusa-core --test wire_cost -- --ignored --nocapture`,
//! and compiled to wasm32-wasip1 under V8 (Node's WASI), as the filter runs
//! it in Envoy, with `scripts/core-cost.sh`, which prints both.
#![cfg(any(not(target_arch = "wasm32"), target_os = "wasi"))]

use ankusa_core::wire::batch::HitsAnswer;
use ankusa_core::wire::{Charge, ChargeKind, Claim, HitReply, HitRequest, SettleOp};
use std::time::Instant;

const ROUNDS: u32 = 200_000;

/// µs per round of `f` over [`ROUNDS`] rounds, and what it returned last.
fn per_round<T>(mut f: impl FnMut() -> T) -> (f64, T) {
    let start = Instant::now();
    let mut last = f();
    for _ in 1..ROUNDS {
        last = std::hint::black_box(f());
    }
    (
        start.elapsed().as_secs_f64() * 1e6 / f64::from(ROUNDS),
        last,
    )
}

#[test]
#[ignore = "a benchmark: prints figures"]
fn what_the_wires_json_costs_per_hook() {
    let claim = Claim {
        tenant: "acme".into(),
        source_id: "gh".into(),
        key: "con4-c-123456".into(),
        hook_id: "018bcfe5-6800-7707-8707-070707070707".into(),
        node: "bench-c".into(),
        ttl_ms: 259_200_000,
        pending_ttl_ms: 30_000,
    };
    let charge = |kind, units, rate, burst| Charge {
        kind,
        tenant: "acme".into(),
        units,
        rate,
        burst,
    };
    let request = HitRequest {
        charges: vec![
            charge(ChargeKind::Hooks, 1, 1_000_000, 1_000_000),
            charge(ChargeKind::Bytes, 39, 1_048_576, 4_194_304),
        ],
        claim: Some(claim.clone()),
        replay: None,
        node: Some("bench-c".into()),
        traceparent: None,
    };
    let promote = SettleOp::Promote {
        hook_id: claim.hook_id.clone(),
        claim,
        // An HMAC-SHA256 in hex, as the intake sends it.
        receipt: Some("39e292d3768189161203b8976590e7dbe34c66613080c8eed8064b7b911042e8".into()),
    };
    let batch = br#"{"results":[{"result":"ok","levels":[999999000000,4194265000000],"edges":1}],"settled":1}"#;
    let single = br#"{"result":"ok","levels":[999999000000,4194265000000],"edges":1}"#;
    let (hit, body) = per_round(|| serde_json::to_vec(&request).unwrap_or_default());
    let (settle, op) = per_round(|| serde_json::to_vec(&[&promote]).unwrap_or_default());
    let (answer, _) = per_round(|| serde_json::from_slice::<HitsAnswer>(batch).ok());
    let (alone, _) = per_round(|| serde_json::from_slice::<HitReply>(single).ok());
    println!(
        "hit request built:         {hit:.2} µs ({} bytes)",
        body.len()
    );
    println!(
        "settle operation built:    {settle:.2} µs ({} bytes)",
        op.len()
    );
    println!("batch-of-one answer read:  {answer:.2} µs");
    println!("single answer read:        {alone:.2} µs");
    println!(
        "a lone hook carrying one settle: {:.2} µs",
        hit + settle + answer
    );
}
