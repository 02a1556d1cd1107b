//! One row of the fault suite: start the fleet, deliver, break, heal, audit.

use super::metered::{self, Attempts};
use super::scenario::Fault;
use super::stalls::{self, Series};
use super::table::{resume_bound_ms, Row, Transitions};
use crate::provider::audit;
use crate::provider::profile::{Profile, DEFAULT_SECRET};
use crate::provider::run::{self, Attempt, Options};
use ankusa_testkit::access_log::{self, Held};
use ankusa_testkit::envoy::{find_metric, fleet_filter_config, Edge, EdgeSpec};
use ankusa_testkit::fault::{FaultProxy, Mode};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::process::scratch_dir;
use ankusa_testkit::redis::{cli, Redis, RedisCluster};
use ankusa_testkit::store::Store;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The plugin's `fleet.timeout_ms` in every row.
pub const TIMEOUT_MS: u64 = 250;
/// The plugin's `fleet.breaker_open_ms` in every row: short, so resumption
/// shows within a row.
pub const BREAKER_OPEN_MS: u64 = 1000;
/// Edges in every row.
pub const EDGES: usize = 2;
/// The store's flags in every row: the live edge count refreshed every
/// 200 ms, so the edges know it well before the fault.
const STORE_ARGS: [&str; 2] = ["--edges-refresh-ms", "200"];
/// Attempts started this early are left out of the baseline p99: the first
/// calls pay for connections and the store's first script load.
const WARM_UP: Duration = Duration::from_millis(500);
/// How often the edges' gauges are read.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// When deliveries start, break and heal, from the start of the run.
#[derive(Clone, Debug)]
pub struct Plan {
    pub events: usize,
    /// First deliveries per second.
    pub rate: f64,
    pub fault_at: Duration,
    pub heal_at: Duration,
    /// No delivery attempt starts after this.
    pub deadline: Duration,
}

impl Plan {
    /// Fast: 8 s of traffic, the fault from 2 s to 4.5 s. Full: 16 s, 4 s to 9 s.
    pub fn default_for(fast: bool) -> Plan {
        if fast {
            Plan {
                events: 320,
                rate: 40.0,
                fault_at: Duration::from_secs(2),
                heal_at: Duration::from_millis(4500),
                deadline: Duration::from_secs(60),
            }
        } else {
            Plan {
                events: 960,
                rate: 60.0,
                fault_at: Duration::from_secs(4),
                heal_at: Duration::from_secs(9),
                deadline: Duration::from_secs(60),
            }
        }
    }
}

/// The plugin configuration of every row: the fleet one, a short pending time
/// so racing redeliveries come back within the run, and a breaker that probes
/// again after 1 s so resumption shows within the run.
pub fn row_config(fault: Fault) -> serde_json::Value {
    let mut config = fleet_filter_config();
    config["fleet"]["timeout_ms"] = TIMEOUT_MS.into();
    config["fleet"]["pending_ttl_ms"] = 5000.into();
    config["fleet"]["breaker_open_ms"] = BREAKER_OPEN_MS.into();
    if fault == Fault::SettleOverflow {
        config["fleet"]["settle_queue_max"] = 8.into();
    }
    metered::configure(&mut config);
    config
}

/// Redis, the store, the intake and the edges, with a fault proxy between
/// the edges and the store and one between the edges and the intake.
pub struct FaultFleet {
    /// The single Redis (rows not on a Cluster).
    pub redis: Option<Redis>,
    /// The Redis Cluster with replicas (Cluster rows).
    pub cluster: Option<RedisCluster>,
    /// A slot being migrated: (slot, source port, target port).
    migration: Option<(u16, u16, u16)>,
    /// What the fault and the heal did, in words, for the table.
    pub notes: Vec<String>,
    pub store: Store,
    pub store_proxy: FaultProxy,
    pub intake: Intake,
    /// Shared with the thread that flaps it.
    pub intake_proxy: Arc<FaultProxy>,
    pub edges: Vec<Edge>,
    /// Access logs of edges since replaced (a killed edge's), with their pid.
    pub old_access_logs: Vec<(PathBuf, u32)>,
    pub dir: PathBuf,
}

impl FaultFleet {
    pub fn start(config: &serde_json::Value, on_cluster: bool) -> FaultFleet {
        let dir = scratch_dir("faults");
        let redis_dir = dir.join("redis");
        let _ = std::fs::create_dir_all(&redis_dir);
        let (redis, cluster) = if on_cluster {
            (None, Some(RedisCluster::start_replicated()))
        } else {
            (Some(Redis::start_on(free_port(), &redis_dir)), None)
        };
        let redis_url = match (&redis, &cluster) {
            (Some(r), _) => r.url(),
            (_, Some(c)) => c.url(),
            _ => unreachable!("one of the two was started"),
        };
        let store = Store::start_on(free_port(), &redis_url, &STORE_ARGS);
        assert!(
            store.wait_ready(Duration::from_secs(10)),
            "ankusa-store never reached Redis:\n{}",
            store.proc.log_tail()
        );
        let store_proxy = FaultProxy::start(store.port);
        let intake = Intake::start_on(free_port(), &dir.join("intake"), &[]);
        let intake_proxy = Arc::new(FaultProxy::start(intake.port));
        let mut edges: Vec<Edge> = (1..=EDGES)
            .map(|i| {
                // File-based listeners, so a row can reload the plugin configuration;
                // access logs, so a row can tell the edge's time from the intake's.
                Edge::start_lds_logged(EdgeSpec {
                    node: format!("edge-{i}"),
                    listen_port: free_port(),
                    admin_port: free_port(),
                    upstream_port: intake_proxy.port,
                    store_port: store_proxy.port,
                    concurrency: 1,
                    filter_config: config.clone(),
                    vm_env: Vec::new(),
                })
            })
            .collect();
        for edge in &mut edges {
            edge.wait_ready(Duration::from_secs(60));
        }
        FaultFleet {
            redis,
            cluster,
            migration: None,
            notes: Vec::new(),
            store,
            store_proxy,
            intake,
            intake_proxy,
            edges,
            old_access_logs: Vec::new(),
            dir,
        }
    }

    pub fn edge_urls(&self) -> Vec<String> {
        self.edges.iter().map(|e| e.url("")).collect()
    }

    fn redis(&mut self) -> &mut Redis {
        self.redis.as_mut().expect("a row on a single Redis")
    }

    fn cluster(&self) -> &RedisCluster {
        self.cluster.as_ref().expect("a row on a Redis Cluster")
    }

    /// The store's URL for Redis, single or Cluster.
    fn redis_url(&self) -> String {
        match (&self.redis, &self.cluster) {
            (Some(r), _) => r.url(),
            (_, Some(c)) => c.url(),
            _ => String::new(),
        }
    }

    fn admin_urls(&self) -> Vec<String> {
        self.edges
            .iter()
            .map(|e| e.admin_url("/stats/prometheus"))
            .collect()
    }
}

/// A bare HTTP answer the store's place gives instead of the store.
fn http_answer(status: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// Breaks what `fault` breaks.
fn inject(fault: Fault, fleet: &mut FaultFleet, intake_flap: &AtomicBool) {
    let store_mode = |mode: Mode| fleet.store_proxy.set_mode(mode);
    match fault {
        Fault::StoreKilled => fleet.store.proc.signal("KILL"),
        Fault::StoreFrozen => fleet.store.proc.signal("STOP"),
        Fault::StoreBlackholed | Fault::SettleOverflow => store_mode(Mode::Blackhole),
        Fault::StoreSlowBelow => store_mode(Mode::DelayResponse(Duration::from_millis(
            TIMEOUT_MS * 4 / 5,
        ))),
        Fault::StoreSlowAbove => {
            store_mode(Mode::DelayResponse(Duration::from_millis(TIMEOUT_MS + 100)))
        }
        Fault::StoreGarbage => store_mode(Mode::Garbage(http_answer(
            "200 OK",
            b"{\"decision\":\x00\xff[[[",
        ))),
        Fault::Store401 => store_mode(Mode::Garbage(http_answer(
            "401 Unauthorized",
            b"{\"error\":\"unauthorized\"}",
        ))),
        Fault::Store503 => store_mode(Mode::Garbage(http_answer(
            "503 Service Unavailable",
            b"{\"error\":\"redis_unavailable\"}",
        ))),
        Fault::RedisKilled => fleet.redis().proc.signal("KILL"),
        Fault::RedisFrozen => fleet.redis().proc.signal("STOP"),
        Fault::RedisFlushall => {
            let _ = fleet.redis().cli(&["FLUSHALL"]);
            let _ = fleet.redis().cli(&["SCRIPT", "FLUSH"]);
        }
        Fault::ClusterFailover => {
            let port = busiest_master(fleet.cluster());
            let keys = cli(port, &["DBSIZE"]);
            if let Some(node) = fleet.cluster().nodes.iter().find(|n| n.port == port) {
                node.proc.signal("KILL");
            }
            fleet
                .notes
                .push(format!("master :{port} ({keys} keys) killed"));
        }
        Fault::ClusterSlotMigration => {
            let src = busiest_master(fleet.cluster());
            let slot = busiest_slot(src);
            let dst = fleet
                .cluster()
                .masters()
                .iter()
                .map(|n| n.port)
                .find(|p| *p != src)
                .unwrap_or(src);
            let (src_id, dst_id) = (
                cli(src, &["CLUSTER", "MYID"]),
                cli(dst, &["CLUSTER", "MYID"]),
            );
            let slot_text = slot.to_string();
            cli(
                dst,
                &["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &src_id],
            );
            cli(
                src,
                &["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &dst_id],
            );
            // Half the keys now: the store finds some here, is sent to the target for the rest (ASK).
            let moved = migrate_keys(slot, src, dst, Some(0.5));
            fleet.notes.push(format!(
                "slot {slot} set migrating :{src}→:{dst}, {moved} keys moved"
            ));
            fleet.migration = Some((slot, src, dst));
        }
        Fault::EdgeKilled => fleet.edges[0].proc.signal("KILL"),
        Fault::IntakeFailing => intake_flap.store(true, Ordering::SeqCst),
        Fault::IntakeTimeout => fleet
            .intake_proxy
            .set_mode(Mode::DelayResponse(Duration::from_secs(12))),
        Fault::ConfigReload => {
            let mut config = row_config(fault);
            config["rate_limits"]["tenants"]["acme"] =
                serde_json::json!({"rate": 400, "burst": 800});
            for edge in &mut fleet.edges {
                let _ = edge.reload(config.clone());
            }
        }
    }
}

/// The master (port) holding the most keys.
fn busiest_master(cluster: &RedisCluster) -> u16 {
    cluster
        .masters()
        .iter()
        .max_by_key(|n| n.cli(&["DBSIZE"]).parse::<u64>().unwrap_or(0))
        .map_or(0, |n| n.port)
}

/// The slot most of `port`'s keys (a sample of up to 1000) hash to.
fn busiest_slot(port: u16) -> u16 {
    let keys = cli(port, &["--scan"]);
    let mut counts = std::collections::HashMap::new();
    for key in keys.lines().take(1000) {
        if let Ok(slot) = cli(port, &["CLUSTER", "KEYSLOT", key]).parse::<u16>() {
            *counts.entry(slot).or_insert(0u32) += 1;
        }
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map_or(0, |(slot, _)| slot)
}

/// Moves `share` of `slot`'s keys (all when `None`) from `src` to `dst` with
/// `MIGRATE`; how many it moved.
fn migrate_keys(slot: u16, src: u16, dst: u16, share: Option<f64>) -> u64 {
    let mut moved = 0;
    let slot_text = slot.to_string();
    let count = cli(src, &["CLUSTER", "COUNTKEYSINSLOT", &slot_text])
        .parse::<u64>()
        .unwrap_or(0);
    let mut left = share.map_or(u64::MAX, |s| (count as f64 * s).ceil() as u64);
    while left > 0 {
        let batch = left.min(100).to_string();
        let keys = cli(src, &["CLUSTER", "GETKEYSINSLOT", &slot_text, &batch]);
        let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
        if keys.is_empty() {
            return moved;
        }
        let dst_text = dst.to_string();
        let mut args = vec![
            "MIGRATE",
            "127.0.0.1",
            &dst_text,
            "",
            "0",
            "5000",
            "REPLACE",
            "KEYS",
        ];
        args.extend(keys.iter().copied());
        let reply = cli(src, &args);
        if reply != "OK" {
            // Refused (the keys stay where they are): stop rather than retry forever.
            eprintln!("MIGRATE of slot {slot} :{src}→:{dst} answered {reply:?}");
            return moved;
        }
        moved += keys.len() as u64;
        left = left.saturating_sub(keys.len() as u64);
    }
    moved
}

/// Waits up to 20 s until every answering node says `cluster_state:ok`.
fn wait_cluster_ok(cluster: &RedisCluster) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let ok = cluster.nodes.iter().all(|n| {
            let info = n.cli(&["CLUSTER", "INFO"]);
            info.is_empty() || info.contains("cluster_state:ok")
        });
        if ok {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Heals what [`inject`] broke.
fn heal(fault: Fault, fleet: &mut FaultFleet, intake_flap: &AtomicBool) {
    match fault {
        Fault::StoreKilled => {
            let port = fleet.store.port;
            let _ = fleet.store.proc.stop(Duration::from_secs(1));
            fleet.store = Store::start_on(port, &fleet.redis_url(), &STORE_ARGS);
        }
        Fault::StoreFrozen => fleet.store.proc.signal("CONT"),
        Fault::RedisKilled => {
            let (port, dir) = (fleet.redis().port, fleet.redis().dir.clone());
            let _ = fleet.redis().proc.stop(Duration::from_secs(1));
            fleet.redis = Some(Redis::start_on(port, &dir));
        }
        Fault::RedisFrozen => fleet.redis().proc.signal("CONT"),
        Fault::ClusterFailover => {
            // The replica of the dead master: a node whose ROLE says slave and
            // whose master is not answering.
            let nodes = fleet.cluster.as_ref().map_or(&[][..], |c| &c.nodes[..]);
            for node in nodes {
                let role = node.cli(&["ROLE"]);
                let mut lines = role.lines();
                if lines.next() != Some("slave") {
                    continue;
                }
                let master_port: u16 = lines
                    .nth(1)
                    .and_then(|p| p.trim().parse().ok())
                    .unwrap_or(0);
                if cli(master_port, &["PING"]) != "PONG" {
                    node.cli(&["CLUSTER", "FAILOVER", "TAKEOVER"]);
                    fleet.notes.push(format!(
                        "at heal its replica :{} took over (CLUSTER FAILOVER TAKEOVER)",
                        node.port
                    ));
                }
            }
            if fleet.notes.len() < 2 {
                fleet.notes.push(
                    "its replica had already been promoted by the cluster (node timeout 2 s)"
                        .into(),
                );
            }
            wait_cluster_ok(fleet.cluster());
        }
        Fault::ClusterSlotMigration => {
            if let Some((slot, src, dst)) = fleet.migration.take() {
                let moved = migrate_keys(slot, src, dst, None);
                fleet.notes.push(format!(
                    "at heal the other {moved} keys moved and the slot given to :{dst}"
                ));
                let dst_id = cli(dst, &["CLUSTER", "MYID"]);
                let slot_text = slot.to_string();
                for node in fleet.cluster().masters() {
                    node.cli(&["CLUSTER", "SETSLOT", &slot_text, "NODE", &dst_id]);
                }
            }
        }
        Fault::RedisFlushall | Fault::ConfigReload => {}
        Fault::EdgeKilled => {
            let spec = fleet.edges[0].spec.clone();
            let _ = fleet.edges[0].proc.stop(Duration::from_secs(1));
            if let Some(log) = fleet.edges[0].access_log.clone() {
                let pid = fleet.edges[0].proc.pid();
                fleet.old_access_logs.push((log, pid));
            }
            fleet.edges[0] = Edge::start_lds_logged(spec);
        }
        Fault::IntakeFailing => intake_flap.store(false, Ordering::SeqCst),
        Fault::IntakeTimeout => fleet.intake_proxy.set_mode(Mode::Pass),
        _ => fleet.store_proxy.set_mode(Mode::Pass),
    }
}

/// The edges' gauges and counters at one moment (summed or maxed over edges
/// that answered).
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    at: Duration,
    breaker_max: f64,
    degraded_max: f64,
    fallback_sum: f64,
    settle_dropped_sum: f64,
    /// The fewest live edges any answering edge last heard (0: none yet).
    live_edges_min: f64,
}

fn sample(urls: &[String], at: Duration) -> Sample {
    let mut s = Sample {
        at,
        ..Sample::default()
    };
    for url in urls {
        let Ok(r) = ankusa_testkit::http::get(url) else {
            continue;
        };
        let text = r.text();
        let get = |name: &str| find_metric(&text, name).unwrap_or(0.0);
        s.breaker_max = s.breaker_max.max(get("ankusa_fleet_breaker_state"));
        s.degraded_max = s
            .degraded_max
            .max(get(r#"ankusa_fleet_limiter_degraded{kind="rate_limit"}"#))
            .max(get(r#"ankusa_fleet_limiter_degraded{kind="dedupe"}"#));
        s.fallback_sum += get("ankusa_fleet_fallback_total");
        s.settle_dropped_sum += get("ankusa_fleet_settle_dropped_total");
        let live = get("ankusa_fleet_live_edges");
        if s.live_edges_min == 0.0 || (live > 0.0 && live < s.live_edges_min) {
            s.live_edges_min = live;
        }
    }
    s
}

/// The 99th percentile of `took` over `attempts` (ms), 0 when none.
pub fn p99_ms(attempts: &[&Attempt]) -> f64 {
    p99_of(attempts.iter().map(|a| a.took))
}

/// The requests the edges answered (with the pid of the edge) that started
/// within `[from, to)` and, when `ended_by` is given, were over by then (ms
/// from the run's start).
fn held_within(
    held: &[(Held, u32)],
    run_start_unix_ms: u64,
    from: Duration,
    to: Duration,
    ended_by: Option<Duration>,
) -> Vec<(Held, u32)> {
    let ms = |d: Duration| run_start_unix_ms + d.as_millis() as u64;
    held.iter()
        // Status 0: the sender left before any answer (the provider's
        // own timeout), so nothing was held for it.
        .filter(|(h, _)| h.status != 0)
        .filter(|(h, _)| h.start_unix_ms >= ms(from) && h.start_unix_ms < ms(to))
        .filter(|(h, _)| ended_by.is_none_or(|end| h.start_unix_ms + h.total_ms < ms(end)))
        .copied()
        .collect()
}

/// The p99 of the time at the edge of `held` (ms), and the same with the
/// time each request's worker waited for a CPU meanwhile taken out.
fn p99_at_edge_ms(held: &[(Held, u32)], waits: &HashMap<u32, Series>) -> (f64, f64) {
    let all = p99_of(
        held.iter()
            .map(|(h, _)| Duration::from_millis(h.at_edge_ms())),
    );
    let running = p99_of(held.iter().map(|(h, pid)| {
        let waited = waits.get(pid).map_or(0, |s| {
            s.waited_ms(h.start_unix_ms, h.start_unix_ms + h.total_ms)
        });
        Duration::from_millis(h.at_edge_ms().saturating_sub(waited))
    }));
    (all, running)
}

fn p99_of(durations: impl Iterator<Item = Duration>) -> f64 {
    let mut ms: Vec<f64> = durations.map(|d| d.as_secs_f64() * 1000.0).collect();
    if ms.is_empty() {
        return 0.0;
    }
    ms.sort_by(f64::total_cmp);
    let i = ((ms.len() as f64 * 0.99).ceil() as usize).clamp(1, ms.len()) - 1;
    (ms[i] * 10.0).round() / 10.0
}

/// Hits the store itself failed (Redis over the budget or unreachable), so far.
fn store_hit_errors(store: &Store) -> u64 {
    ["timeout", "redis_unavailable"]
        .iter()
        .map(|r| {
            store.metric(&format!(
                "ankusa_store_requests_total{{endpoint=\"hit\",result=\"{r}\"}}"
            ))
        })
        .sum::<f64>() as u64
}

/// The intake's count of copies its own index caught (`GET /stats`).
fn intake_duplicates_caught(intake: &str) -> u64 {
    let url = format!("{}/stats", intake.trim_end_matches('/'));
    ankusa_testkit::http::get(&url)
        .ok()
        .filter(|r| r.status == 200)
        .and_then(|r| r.json()["duplicates_caught"].as_u64())
        .unwrap_or_else(|| panic!("GET {url} gave no duplicates_caught"))
}

/// Runs `fault` as one row and returns its figures. Panics only when the
/// fleet can't start or the audit can't read the intake.
pub fn run_row(fault: Fault, plan: &Plan, seed: u64) -> Row {
    run_row_with(fault, plan, seed, |_| {})
}

/// [`run_row`], with `tweak` applied to the fleet before traffic starts
/// (the suite's own check that the audit catches a loss uses it).
pub fn run_row_with(
    fault: Fault,
    plan: &Plan,
    seed: u64,
    tweak: impl FnOnce(&mut FaultFleet),
) -> Row {
    let mut fleet = FaultFleet::start(&row_config(fault), fault.on_cluster());
    tweak(&mut fleet);
    let options = Options {
        edges: fleet.edge_urls(),
        events: plan.events,
        rate: plan.rate,
        profile: Profile::Github,
        tenant: "acme".into(),
        source: "gh".into(),
        redeliver: 0.2,
        concurrent: 0.5,
        deadline: plan.deadline,
        concurrency: 32,
        seed,
        progress: false,
        secret: DEFAULT_SECRET.into(),
        forge: 0.0,
    };
    let admin = fleet.admin_urls();
    let samples = Mutex::new(Vec::new());
    let (done, flap) = (AtomicBool::new(false), AtomicBool::new(false));
    let mut heal_at = plan.heal_at;
    let mut errors_at_heal = 0;
    let start = Instant::now();
    let start_unix_ms = stalls::unix_ms();
    let pids: Vec<u32> = fleet.edges.iter().map(|e| e.proc.pid()).collect();
    let metered_attempts = Attempts::default();
    let edge_urls = fleet.edge_urls();
    let (outcome, stalls) = std::thread::scope(|s| {
        for url in &edge_urls {
            for _ in 0..metered::SENDERS {
                let (done, into) = (&done, &metered_attempts);
                s.spawn(move || metered::send(url, start, done, into));
            }
        }
        let provider = s.spawn(|| {
            let outcome = run::run(&options);
            done.store(true, Ordering::SeqCst);
            outcome
        });
        let watcher = s.spawn(|| stalls::watch(&pids, &done));
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                let at = start.elapsed();
                let got = sample(&admin, at);
                samples.lock().unwrap_or_else(|p| p.into_inner()).push(got);
                std::thread::sleep(SAMPLE_EVERY);
            }
        });
        // Half the intake's answers replaced by 503 while `flap` is set.
        let proxy = fleet.intake_proxy.clone();
        let (done, flap) = (&done, &flap);
        s.spawn(move || {
            let (mut failing, mut touched) = (false, false);
            while !done.load(Ordering::SeqCst) {
                if flap.load(Ordering::SeqCst) {
                    failing = !failing;
                    proxy.set_mode(if failing {
                        Mode::Garbage(http_answer("503 Service Unavailable", b"{}"))
                    } else {
                        Mode::Pass
                    });
                    touched = true;
                } else if touched {
                    proxy.set_mode(Mode::Pass);
                    (failing, touched) = (false, false);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        std::thread::sleep(plan.fault_at.saturating_sub(start.elapsed()));
        inject(fault, &mut fleet, flap);
        std::thread::sleep(plan.heal_at.saturating_sub(start.elapsed()));
        heal(fault, &mut fleet, flap);
        heal_at = heal_at.max(start.elapsed());
        errors_at_heal = store_hit_errors(&fleet.store);
        let outcome = provider
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (outcome, watcher.join().unwrap_or_default())
    });
    let samples = samples.into_inner().unwrap_or_else(|p| p.into_inner());
    let audit = audit::audit(
        &fleet.intake.url(),
        &options.tenant,
        &options.source,
        &outcome.events,
        &outcome.acknowledged,
    )
    .unwrap_or_else(|e| panic!("{}: audit failed: {e}", fault.name()));

    // The baseline: attempts over before the fault began (one still running
    // when it began would carry the fault into the baseline).
    let before: Vec<&Attempt> = outcome
        .attempts
        .iter()
        .filter(|a| a.started >= WARM_UP && a.started + a.took < plan.fault_at)
        .collect();
    let during: Vec<&Attempt> = outcome
        .attempts
        .iter()
        .filter(|a| a.started >= plan.fault_at && a.started < heal_at)
        .collect();
    let (p99_before, p99_during) = (p99_ms(&before), p99_ms(&during));
    let held: Vec<(Held, u32)> = fleet
        .old_access_logs
        .iter()
        .cloned()
        .chain(
            fleet
                .edges
                .iter()
                .filter_map(|e| Some((e.access_log.clone()?, e.proc.pid()))),
        )
        .flat_map(|(path, pid)| access_log::read(&path).into_iter().map(move |h| (h, pid)))
        .collect();
    let (edge_before, _) = p99_at_edge_ms(
        &held_within(
            &held,
            start_unix_ms,
            WARM_UP,
            plan.fault_at,
            Some(plan.fault_at),
        ),
        &stalls,
    );
    let (edge_during, edge_during_running) = p99_at_edge_ms(
        &held_within(&held, start_unix_ms, plan.fault_at, heal_at, None),
        &stalls,
    );
    let (fault_from, fault_to) = (
        start_unix_ms + plan.fault_at.as_millis() as u64,
        start_unix_ms + heal_at.as_millis() as u64,
    );
    // The most any one edge's worker waited for a CPU during the fault.
    let stalled_during = stalls
        .values()
        .map(|s| s.waited_ms(fault_from, fault_to))
        .max()
        .unwrap_or(0);
    let caught = intake_duplicates_caught(&fleet.intake.url());
    let store_errors_after_heal = store_hit_errors(&fleet.store).saturating_sub(errors_at_heal);
    // Fleet answers resume when fall-backs stop: the last sample after the
    // heal in which the edges' fall-back count still grew.
    let last_growth = samples
        .windows(2)
        .filter(|w| w[1].at >= heal_at && w[1].fallback_sum > w[0].fallback_sum)
        .map(|w| w[1].at)
        .next_back();
    let resume_ms = last_growth.map_or(0, |at| (at - heal_at).as_millis() as u64);
    // The breaker closed for good: the sample after the last one in which
    // some edge's breaker was not closed.
    let closed = samples
        .iter()
        .rposition(|s| s.breaker_max != 0.0)
        .and_then(|i| samples.get(i + 1));
    let breaker_closed_ms = closed.map_or(0, |s| s.at.saturating_sub(heal_at).as_millis() as u64);
    let fallbacks_at_close = closed
        .filter(|s| s.at >= heal_at)
        .or_else(|| samples.iter().find(|s| s.at >= heal_at))
        .map_or(0.0, |s| s.fallback_sum);
    let fallbacks_after_close = samples
        .last()
        .map_or(0.0, |s| s.fallback_sum - fallbacks_at_close)
        .max(0.0) as u64;
    let acked_events = outcome.acknowledged.iter().filter(|a| **a).count() as u64;
    let window = heal_at.saturating_sub(plan.fault_at);
    let row = Row {
        fault: fault.name().into(),
        notes: std::mem::take(&mut fleet.notes),
        events: plan.events as u64,
        deliveries: outcome.tally.sent,
        acknowledged_events: acked_events,
        lost: audit.lost,
        lost_keys: audit.lost_keys,
        stored: audit.stored,
        stored_duplicates: audit.stored_duplicates,
        intake_duplicates_caught: caught,
        duplicates_reason: (audit.stored_duplicates > 0 || caught > 0)
            .then(|| fault.duplicates_reason().to_string()),
        answers: outcome.tally.answers.clone(),
        transport_errors: outcome.tally.transport_errors,
        p99_before_ms: p99_before,
        p99_during_ms: p99_during,
        added_p99_ms: ((p99_during - p99_before) * 10.0).round() / 10.0,
        p99_edge_before_ms: edge_before,
        p99_edge_during_ms: edge_during,
        added_edge_p99_ms: ((edge_during - edge_before) * 10.0).round() / 10.0,
        p99_edge_during_running_ms: edge_during_running,
        stalled_during_ms: stalled_during,
        timeout_ms: TIMEOUT_MS,
        breaker_open_ms: BREAKER_OPEN_MS,
        breaker: Transitions::of(samples.iter().map(|s| s.breaker_max)),
        degraded: Transitions::of(samples.iter().map(|s| s.degraded_max)),
        fallbacks: samples.last().map_or(0.0, |s| s.fallback_sum) as u64,
        settle_dropped: samples.last().map_or(0.0, |s| s.settle_dropped_sum) as u64,
        resume_after_heal_ms: resume_ms,
        breaker_closed_after_heal_ms: breaker_closed_ms,
        fallbacks_after_close,
        resume_bound_ms: fault
            .heals_at_once()
            .then(|| resume_bound_ms(BREAKER_OPEN_MS, TIMEOUT_MS, SAMPLE_EVERY.as_millis() as u64)),
        store_proxy_refused: fleet.store_proxy.refused(),
        store_errors_after_heal,
        fault_s: [plan.fault_at.as_secs_f64(), heal_at.as_secs_f64()],
        metered_admitted: metered_attempts.admitted_within(plan.fault_at, heal_at),
        metered_quota: metered::quota(window),
        live_edges: Transitions::of(
            samples
                .iter()
                .map(|s| s.live_edges_min)
                .filter(|v| *v > 0.0),
        ),
    };
    for edge in &mut fleet.edges {
        let _ = edge.proc.stop(Duration::from_secs(5));
    }
    row
}
