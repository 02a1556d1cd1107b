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
//!
//! `store-bench claims-cpu --redis-url URL --hooks N --old-scripts DIR`:
//! Redis CPU and commands per fleet hook (its hit, then its promote), the
//! previous release's scripts (`gcra.lua`, `hit.lua`, `settle.lua` from DIR:
//! one settle call per promote) against this build's (settles batched per
//! tenant), in the same run on a Redis of its own (flushed). Hooks go
//! `--depth` at a time in one pipeline, their settles in the next, as a
//! store under load sends them. Redis CPU is its process's (`INFO cpu`),
//! commands are `INFO commandstats` calls (a script's own commands included).

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
    /// Redis CPU and commands per hook, the previous release's scripts against this build's.
    ClaimsCpu {
        /// A Redis of the benchmark's own: it is flushed.
        #[arg(long)]
        redis_url: String,
        /// Hooks per run.
        #[arg(long, default_value_t = 200_000)]
        hooks: u64,
        /// The previous release's `gcra.lua`, `hit.lua` and `settle.lua`.
        #[arg(long)]
        old_scripts: std::path::PathBuf,
        /// Hooks in one pipeline (and their promotes in the next).
        #[arg(long, default_value_t = 32)]
        depth: u64,
        /// Runs of each, alternating.
        #[arg(long, default_value_t = 3)]
        rounds: u64,
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
            let runtime = runtime();
            runtime.block_on(claims_memory(
                &redis_url,
                events,
                tenants.max(1),
                ttl_ms,
                &layouts,
            ));
        }
        Some(Mode::ClaimsCpu {
            redis_url,
            hooks,
            old_scripts,
            depth,
            rounds,
        }) => {
            let runtime = runtime();
            runtime.block_on(claims_cpu(
                &redis_url,
                hooks,
                &old_scripts,
                depth.max(1),
                rounds.max(1),
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

/// The benchmark's runtime: one thread, as it drives one connection.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("tokio: {e}")))
}

fn fail(why: &str) -> ! {
    eprintln!("store-bench: {why}");
    std::process::exit(1)
}

/// A verified receipt, as `receipts::screen` leaves it on a promote under
/// the default `--receipts required`: such a commit is not indexed by node.
const PROVEN: &str = "verified";

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

/// A connection to the benchmark's Redis, and a backend (never connected)
/// that builds the store's script calls for it.
async fn connect(url: &str) -> (redis::aio::MultiplexedConnection, Arc<Backend>) {
    let client = redis::Client::open(url).unwrap_or_else(|e| fail(&format!("{url}: {e}")));
    let conn = client
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| fail(&format!("{url}: {e}")));
    let backend = Backend::new(
        RedisTarget::Single(url.into()),
        Arc::new(Metrics::new()),
        Layout::Compact,
    );
    (conn, backend)
}

async fn claims_memory(url: &str, events: u64, tenants: u64, ttl_ms: u64, layouts: &str) {
    let (mut conn, backend) = connect(url).await;
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
                        receipt: Some(PROVEN.into()),
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

/// Redis's own CPU seconds (user + system) and the commands it has run.
async fn redis_cost(conn: &mut redis::aio::MultiplexedConnection) -> (f64, u64) {
    let info: String = redis::cmd("INFO")
        .arg("everything")
        .query_async(conn)
        .await
        .unwrap_or_else(|e| fail(&format!("INFO: {e}")));
    let mut cpu = 0.0;
    let mut calls = 0;
    for line in info.lines() {
        if let Some(v) = line
            .strip_prefix("used_cpu_user:")
            .or_else(|| line.strip_prefix("used_cpu_sys:"))
        {
            cpu += v.trim().parse::<f64>().unwrap_or(0.0);
        }
        if line.starts_with("cmdstat_") {
            if let Some(n) = line
                .split_once("calls=")
                .and_then(|(_, r)| r.split(',').next())
                .and_then(|n| n.parse::<u64>().ok())
            {
                calls += n;
            }
        }
    }
    (cpu, calls)
}

async fn load(conn: &mut redis::aio::MultiplexedConnection, text: &str) -> String {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(text)
        .query_async(conn)
        .await
        .unwrap_or_else(|e| fail(&format!("SCRIPT LOAD: {e}")))
}

fn bench_hit(claim: &Claim) -> ankusa_core::wire::HitRequest {
    ankusa_core::wire::HitRequest {
        charges: vec![ankusa_core::wire::Charge {
            kind: ankusa_core::wire::ChargeKind::Hooks,
            tenant: claim.tenant.clone(),
            units: 1,
            rate: 1_000_000_000,
            burst: 4_294_967_296,
        }],
        claim: Some(claim.clone()),
        replay: None,
        node: None,
        traceparent: None,
    }
}

async fn claims_cpu(url: &str, hooks: u64, old: &std::path::Path, depth: u64, rounds: u64) {
    let read = |name: &str| {
        std::fs::read_to_string(old.join(name))
            .unwrap_or_else(|e| fail(&format!("{}: {e}", old.join(name).display())))
    };
    let old_hit = format!("{}\n{}", read("gcra.lua"), read("hit.lua"));
    let old_settle = read("settle.lua");
    let (mut conn, backend) = connect(url).await;
    let mut seq = 0u64;
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            ["old", "compact"]
        } else {
            ["compact", "old"]
        };
        for layout in order {
            let _: () = redis::cmd("FLUSHALL")
                .query_async(&mut conn)
                .await
                .unwrap_or_else(|e| fail(&format!("FLUSHALL: {e}")));
            let (old_hit_sha, old_settle_sha) = (
                load(&mut conn, &old_hit).await,
                load(&mut conn, &old_settle).await,
            );
            load(&mut conn, &hit_source()).await;
            load(&mut conn, &settle_source()).await;
            let (cpu0, calls0) = redis_cost(&mut conn).await;
            let started = std::time::Instant::now();
            let mut done = 0;
            // Redis's CPU in the hits' pipelines alone.
            let mut hits_cpu = 0.0;
            while done < hooks {
                let n = depth.min(hooks - done);
                let claims: Vec<Claim> = (0..n)
                    .map(|_| {
                        seq += 1;
                        let mut c = claim_of(seq, 1, 259_200_000);
                        c.tenant = "bench".into();
                        c
                    })
                    .collect();
                let mut hits = redis::pipe();
                for claim in &claims {
                    if layout == "old" {
                        hits.cmd("EVALSHA")
                            .arg(&old_hit_sha)
                            .arg(3)
                            .arg(keys::bucket(
                                &claim.tenant,
                                ankusa_core::wire::ChargeKind::Hooks,
                            ))
                            .arg(keys::override_of(&claim.tenant))
                            .arg(keys::claim(claim))
                            .arg(&["1", "1", "1000000000", "4294967296"][..])
                            .arg(&claim.hook_id)
                            .arg(&claim.node)
                            .arg(claim.pending_ttl_ms);
                    } else {
                        hits.add_command(ankusa_store::routes::hit::hit_cmd(
                            &backend,
                            &bench_hit(claim),
                        ));
                    }
                }
                let before = redis_cost(&mut conn).await.0;
                let _: Vec<redis::Value> = hits
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_else(|e| fail(&format!("{layout} hits: {e}")));
                hits_cpu += redis_cost(&mut conn).await.0 - before;
                let mut settles = redis::pipe();
                let ops: Vec<SettleOp> = claims
                    .iter()
                    .map(|claim| SettleOp::Promote {
                        claim: claim.clone(),
                        hook_id: uuid_of("hook", seq),
                        receipt: Some(PROVEN.into()),
                    })
                    .collect();
                if layout == "old" {
                    for op in &ops {
                        let SettleOp::Promote { claim, hook_id, .. } = op else {
                            continue;
                        };
                        settles
                            .cmd("EVALSHA")
                            .arg(&old_settle_sha)
                            .arg(1)
                            .arg(keys::claim(claim))
                            .arg(keys::pending_prefix(&claim.hook_id))
                            .arg("promote")
                            .arg(keys::committed_value(hook_id))
                            .arg(claim.ttl_ms);
                    }
                } else {
                    for (cmd, _) in settle_calls(&backend, &ops) {
                        settles.add_command(cmd);
                    }
                }
                let replies: Vec<redis::Value> = settles
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_else(|e| fail(&format!("{layout} settles: {e}")));
                if replies
                    .iter()
                    .any(|v| matches!(v, redis::Value::ServerError(_)))
                {
                    fail(&format!("{layout} settles: {replies:?}"));
                }
                done += n;
            }
            let took = started.elapsed().as_secs_f64();
            let (cpu1, calls1) = redis_cost(&mut conn).await;
            let rounds_of_info = 2 * hooks.div_ceil(depth);
            println!(
                "round={round} layout={layout} hooks={hooks} depth={depth} \
                 redis_cpu_us_per_hook={:.2} (hit {:.2}) redis_commands_per_hook={:.2} hooks_per_s={:.0}",
                (cpu1 - cpu0) * 1e6 / hooks as f64,
                hits_cpu * 1e6 / hooks as f64,
                // Less the INFO calls that read the figures.
                (calls1 - calls0).saturating_sub(1 + rounds_of_info) as f64 / hooks as f64,
                hooks as f64 / took
            );
        }
    }
}
