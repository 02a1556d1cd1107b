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
use ankusa_store::committed::{self, Layout};
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
        /// This build's scripts from a directory (`gcra.lua`, `claims.lua`,
        /// `hit.lua`, `settle_batch.lua`) instead of those compiled in: to
        /// try a script change (same KEYS and ARGV) without a rebuild.
        #[arg(long)]
        scripts: Option<std::path::PathBuf>,
        /// Compact layout in its steady state: the two partitions before the
        /// current one hold entries (`--aged-events` each), as once the first
        /// window has passed, so a hit's lookup reads three partitions, not one.
        #[arg(long)]
        aged: bool,
        /// Events in each of the two aged partitions (buckets of 40). The
        /// current partition is sized from its predecessor's: as many as the
        /// run's hooks is a steady flow (no bucket split in the run).
        #[arg(long, default_value_t = 1000)]
        aged_events: u64,
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
            scripts,
            aged,
            aged_events,
        }) => {
            let runtime = runtime();
            runtime.block_on(claims_cpu(
                &redis_url,
                hooks,
                &old_scripts,
                scripts.as_deref(),
                aged.then_some(aged_events),
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

/// Where Redis's CPU time is read: its main thread's `schedstat` (ns, and
/// no work for Redis) when it runs on this machine, else `INFO` (whose own
/// cost then falls in every reading, alike for both layouts).
enum CpuClock {
    Proc(std::path::PathBuf),
    Info,
}

impl CpuClock {
    async fn of(conn: &mut redis::aio::MultiplexedConnection) -> CpuClock {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(conn)
            .await
            .unwrap_or_else(|e| fail(&format!("INFO server: {e}")));
        let pid = info
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .map(|p| p.trim().to_string());
        match pid {
            Some(pid) => {
                let path = std::path::PathBuf::from(format!("/proc/{pid}/schedstat"));
                let local = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|cmd| cmd.contains("redis-server"));
                if local {
                    CpuClock::Proc(path)
                } else {
                    CpuClock::Info
                }
            }
            None => CpuClock::Info,
        }
    }

    fn source(&self) -> String {
        match self {
            CpuClock::Proc(path) => path.display().to_string(),
            CpuClock::Info => "INFO (used_cpu_user + used_cpu_sys)".into(),
        }
    }

    /// Redis's CPU seconds so far.
    async fn read(&self, conn: &mut redis::aio::MultiplexedConnection) -> f64 {
        match self {
            CpuClock::Proc(path) => std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
                .map(|ns| ns / 1e9)
                .unwrap_or_else(|| fail(&format!("{}: unreadable", path.display()))),
            CpuClock::Info => redis_cost(conn).await.cpu,
        }
    }
}

/// What Redis has spent so far, from one `INFO everything`.
struct Cost {
    /// Its own CPU seconds (user + system).
    cpu: f64,
    /// Commands run (a script's own commands included).
    calls: u64,
    /// Per command: calls and µs inside it (`INFO commandstats`; a script's
    /// µs include those of the commands it calls).
    by_command: std::collections::BTreeMap<String, (u64, u64)>,
}

async fn redis_cost(conn: &mut redis::aio::MultiplexedConnection) -> Cost {
    let info: String = redis::cmd("INFO")
        .arg("everything")
        .query_async(conn)
        .await
        .unwrap_or_else(|e| fail(&format!("INFO: {e}")));
    let mut cost = Cost {
        cpu: 0.0,
        calls: 0,
        by_command: Default::default(),
    };
    for line in info.lines() {
        if let Some(v) = line
            .strip_prefix("used_cpu_user:")
            .or_else(|| line.strip_prefix("used_cpu_sys:"))
        {
            cost.cpu += v.trim().parse::<f64>().unwrap_or(0.0);
        }
        if let Some((name, stats)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        {
            let field = |key: &str| {
                stats
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(key))
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let (calls, usec) = (field("calls="), field("usec="));
            cost.calls += calls;
            cost.by_command.insert(name.to_string(), (calls, usec));
        }
    }
    cost
}

/// Per command between two readings, per hook: `name=calls/usec` (µs inside the command).
fn breakdown(before: &Cost, after: &Cost, hooks: u64) -> String {
    let mut out = Vec::new();
    for (name, (calls, usec)) in &after.by_command {
        let (c0, u0) = before.by_command.get(name).copied().unwrap_or((0, 0));
        let calls = calls.saturating_sub(c0);
        if name == "info" || calls == 0 {
            continue;
        }
        out.push(format!(
            "{name}={:.2}/{:.2}µs",
            calls as f64 / hooks as f64,
            usec.saturating_sub(u0) as f64 / hooks as f64
        ));
    }
    out.join(" ")
}

/// The claims' `ttl_ms` in `claims-cpu`: the default window, 72 hours.
const TTL_MS: u64 = 259_200_000;

/// Fills the two partitions of the `claims-cpu` tenant's series before the
/// current one (Redis's clock) with `events` entries each, in buckets of 40,
/// and their counters, as the compact layout holds them once a window has passed.
async fn age(conn: &mut redis::aio::MultiplexedConnection, ttl_ms: u64, events: u64) {
    let (secs, micros): (u64, u64) = redis::cmd("TIME")
        .query_async(conn)
        .await
        .unwrap_or_else(|e| fail(&format!("TIME: {e}")));
    let now_ms = secs * 1000 + micros / 1000;
    let part = committed::partition_ms(ttl_ms);
    let series = format!("ankusa:{{bench}}:committed:{ttl_ms}");
    let mut pipe = redis::pipe();
    for back in 1..=2u64 {
        let p = now_ms / part - back;
        let expires = (p + 1) * part + ttl_ms;
        let base = format!("{series}:{p}");
        pipe.cmd("SET")
            .arg(&base)
            .arg(events)
            .arg("PXAT")
            .arg(expires)
            .ignore();
        for b in 0..events.div_ceil(committed::BUCKET_FILL) {
            let bucket = format!("{base}:{b}");
            let mut hset = redis::cmd("HSET");
            hset.arg(&bucket).arg("").arg("");
            let first = b * committed::BUCKET_FILL;
            for i in 0..committed::BUCKET_FILL.min(events - first) {
                let field = Sha256::digest(format!("aged{p}:{b}:{i}"));
                hset.arg(&field[..committed::DIGEST_LEN])
                    .arg(&field[16..32]);
            }
            pipe.add_command(hset).ignore();
            pipe.cmd("PEXPIREAT").arg(&bucket).arg(expires).ignore();
        }
    }
    let _: () = pipe
        .query_async(conn)
        .await
        .unwrap_or_else(|e| fail(&format!("aging the series: {e}")));
}

/// `cmd` (an `EVALSHA`) calling the script `sha` instead.
fn with_sha(cmd: &redis::Cmd, sha: &str) -> redis::Cmd {
    let mut out = redis::cmd("EVALSHA");
    out.arg(sha);
    for arg in cmd.args_iter().skip(2) {
        if let redis::Arg::Simple(bytes) = arg {
            out.arg(bytes);
        }
    }
    out
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

async fn claims_cpu(
    url: &str,
    hooks: u64,
    old: &std::path::Path,
    new: Option<&std::path::Path>,
    aged: Option<u64>,
    depth: u64,
    rounds: u64,
) {
    let read = |dir: &std::path::Path, name: &str| {
        std::fs::read_to_string(dir.join(name))
            .unwrap_or_else(|e| fail(&format!("{}: {e}", dir.join(name).display())))
    };
    let old_hit = format!("{}\n{}", read(old, "gcra.lua"), read(old, "hit.lua"));
    let old_settle = read(old, "settle.lua");
    let (new_hit, new_settle) = match new {
        Some(dir) => (
            format!(
                "{}\n{}\n{}",
                read(dir, "gcra.lua"),
                read(dir, "claims.lua"),
                read(dir, "hit.lua")
            ),
            format!(
                "{}\n{}",
                read(dir, "claims.lua"),
                read(dir, "settle_batch.lua")
            ),
        ),
        None => (hit_source(), settle_source()),
    };
    let (mut conn, backend) = connect(url).await;
    let clock = CpuClock::of(&mut conn).await;
    println!("Redis CPU read from {}", clock.source());
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
            let new_hit_sha = load(&mut conn, &new_hit).await;
            let new_settle_sha = load(&mut conn, &new_settle).await;
            if let (Some(events), "compact") = (aged, layout) {
                age(&mut conn, TTL_MS, events).await;
            }
            let start = redis_cost(&mut conn).await;
            let cpu0 = clock.read(&mut conn).await;
            let started = std::time::Instant::now();
            let mut done = 0;
            // Redis's CPU in the hits' pipelines alone.
            let mut hits_cpu = 0.0;
            while done < hooks {
                let n = depth.min(hooks - done);
                let claims: Vec<Claim> = (0..n)
                    .map(|_| {
                        seq += 1;
                        let mut c = claim_of(seq, 1, TTL_MS);
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
                        hits.add_command(with_sha(
                            &ankusa_store::routes::hit::hit_cmd(&backend, &bench_hit(claim)),
                            &new_hit_sha,
                        ));
                    }
                }
                let before = clock.read(&mut conn).await;
                let _: Vec<redis::Value> = hits
                    .query_async(&mut conn)
                    .await
                    .unwrap_or_else(|e| fail(&format!("{layout} hits: {e}")));
                hits_cpu += clock.read(&mut conn).await - before;
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
                        settles.add_command(with_sha(&cmd, &new_settle_sha));
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
            let cpu1 = clock.read(&mut conn).await;
            let end = redis_cost(&mut conn).await;
            let rounds_of_info = match clock {
                CpuClock::Proc(_) => 0,
                CpuClock::Info => 2 * hooks.div_ceil(depth),
            };
            println!(
                "round={round} layout={layout} hooks={hooks} depth={depth} \
                 redis_cpu_us_per_hook={:.2} (hit {:.2}) redis_commands_per_hook={:.2} hooks_per_s={:.0}",
                (cpu1 - cpu0) * 1e6 / hooks as f64,
                hits_cpu * 1e6 / hooks as f64,
                // Less the INFO calls that read the figures.
                (end.calls - start.calls).saturating_sub(1 + rounds_of_info) as f64 / hooks as f64,
                hooks as f64 / took
            );
            println!(
                "  per hook, calls/µs in each: {}",
                breakdown(&start, &end, hooks)
            );
        }
    }
}
