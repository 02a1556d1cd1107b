//! `store-bench --print-hit-script`: prints the hit script exactly as the
//! store loads it, so scripts/bench-store.sh can run the same script straight
//! on Redis with redis-benchmark. The HTTP load itself comes from `load`
//! (tools/harness/src/bin/load.rs), the client every benchmark script shares.
//!
//! `store-bench claims-memory --redis-url URL --events N`: Redis memory per
//! committed claim, the old layout (a string per event, as 0.2.0 commits
//! it) against the compact one (written by the store's own settle script,
//! each event claimed pending first), on an otherwise empty Redis (it is
//! flushed before each layout: give it a Redis of its own). Prints one line
//! per layout: events, `used_memory` before and after, bytes per event.

use ankusa_core::wire::{Claim, SettleOp};
use ankusa_store::backend::Backend;
use ankusa_store::batcher::settle_calls;
use ankusa_store::committed::Layout;
use ankusa_store::config::RedisTarget;
use ankusa_store::keys;
use ankusa_store::metrics::Metrics;
use ankusa_store::scripts::{hit_source, settle_source};
use clap::{Parser, Subcommand};
use sha2::{Digest, Sha256};
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "store-bench")]
struct Args {
    /// Print the hit script as the store runs it, and exit (for redis-benchmark).
    #[arg(long)]
    print_hit_script: bool,
    #[command(subcommand)]
    mode: Option<Mode>,
}

#[derive(Subcommand)]
enum Mode {
    /// Redis memory per committed claim, old layout against compact.
    ClaimsMemory {
        /// A Redis of the benchmark's own: it is flushed.
        #[arg(long)]
        redis_url: String,
        /// Committed events per layout.
        #[arg(long, default_value_t = 1_000_000)]
        events: u64,
        /// Tenants the events spread over (one series each).
        #[arg(long, default_value_t = 1)]
        tenants: u64,
        /// The claims' ttl_ms (the default window: 72 hours).
        #[arg(long, default_value_t = 259_200_000)]
        ttl_ms: u64,
        /// `old`, `compact` or `both`.
        #[arg(long, default_value = "both")]
        layouts: String,
    },
}

fn main() {
    let args = Args::parse();
    if args.print_hit_script {
        print!("{}", hit_source());
        return;
    }
    match args.mode {
        Some(Mode::ClaimsMemory {
            redis_url,
            events,
            tenants,
            ttl_ms,
            layouts,
        }) => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap_or_else(|e| fail(&format!("tokio: {e}")));
            runtime.block_on(claims_memory(
                &redis_url,
                events,
                tenants.max(1),
                ttl_ms,
                &layouts,
            ));
        }
        None => {
            eprintln!(
                "store-bench: nothing to do: pass --print-hit-script or a mode (claims-memory); \
                 drive the store with `load`"
            );
            std::process::exit(2);
        }
    }
}

fn fail(why: &str) -> ! {
    eprintln!("store-bench: {why}");
    std::process::exit(1)
}

/// A UUID-shaped text from `n` (event ids and hook ids of the benchmark).
fn uuid_of(seed: &str, n: u64) -> String {
    let d = Sha256::digest(format!("{seed}{n}"));
    let h: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn claim_of(n: u64, tenants: u64, ttl_ms: u64) -> Claim {
    Claim {
        tenant: format!("tenant{}", n % tenants),
        source_id: "gh".into(),
        key: uuid_of("event", n),
        hook_id: uuid_of("pending", n),
        node: "edge-1".into(),
        ttl_ms,
        pending_ttl_ms: 30_000,
    }
}

async fn used_memory(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .unwrap_or_else(|e| fail(&format!("INFO memory: {e}")));
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| fail("INFO memory has no used_memory"))
}

async fn claims_memory(url: &str, events: u64, tenants: u64, ttl_ms: u64, layouts: &str) {
    let client = redis::Client::open(url).unwrap_or_else(|e| fail(&format!("{url}: {e}")));
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| fail(&format!("{url}: {e}")));
    let backend = Backend::new(
        RedisTarget::Single(url.into()),
        Arc::new(Metrics::new()),
        Layout::Compact,
    );
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(settle_source())
        .query_async(&mut conn)
        .await
        .unwrap_or_else(|e| fail(&format!("SCRIPT LOAD: {e}")));
    let wanted: Vec<&str> = match layouts {
        "both" => vec!["old", "compact"],
        "old" => vec!["old"],
        "compact" => vec!["compact"],
        other => fail(&format!("--layouts {other}: expected old, compact or both")),
    };
    const BATCH: u64 = 512;
    for layout in wanted {
        let _: () = redis::cmd("FLUSHALL")
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|e| fail(&format!("FLUSHALL: {e}")));
        let before = used_memory(&mut conn).await;
        let started = std::time::Instant::now();
        let mut n = 0;
        while n < events {
            let end = (n + BATCH).min(events);
            let claims: Vec<Claim> = (n..end).map(|i| claim_of(i, tenants, ttl_ms)).collect();
            let mut pipe = redis::pipe();
            for (i, claim) in (n..end).zip(&claims) {
                let hook_id = uuid_of("hook", i);
                if layout == "old" {
                    pipe.cmd("SET")
                        .arg(keys::claim(claim))
                        .arg(keys::committed_value(&hook_id))
                        .arg("PX")
                        .arg(ttl_ms)
                        .ignore();
                } else {
                    pipe.cmd("SET")
                        .arg(keys::claim(claim))
                        .arg(keys::pending_value(claim))
                        .arg("PX")
                        .arg(claim.pending_ttl_ms)
                        .ignore();
                }
            }
            if layout == "compact" {
                let ops: Vec<SettleOp> = (n..end)
                    .zip(&claims)
                    .map(|(i, claim)| SettleOp::Promote {
                        claim: claim.clone(),
                        hook_id: uuid_of("hook", i),
                        receipt: None,
                    })
                    .collect();
                for (cmd, _) in settle_calls(&backend, &ops) {
                    pipe.add_command(cmd).ignore();
                }
            }
            let _: () = pipe
                .query_async(&mut conn)
                .await
                .unwrap_or_else(|e| fail(&format!("{layout}: {e}")));
            n = end;
        }
        let took = started.elapsed();
        let after = used_memory(&mut conn).await;
        let keys: u64 = redis::cmd("DBSIZE")
            .query_async(&mut conn)
            .await
            .unwrap_or_default();
        println!(
            "layout={layout} events={events} tenants={tenants} ttl_ms={ttl_ms} keys={keys} \
             used_memory_before={before} used_memory_after={after} bytes_per_event={:.1} \
             write_s={:.1}",
            (after.saturating_sub(before)) as f64 / events as f64,
            took.as_secs_f64()
        );
    }
}
