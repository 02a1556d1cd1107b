//! The fleet of every row: Redis (single or a Cluster), the store, the
//! intake and two edges (N for the soak), with a fault proxy in front of the
//! store and one in front of the intake; and the plugin configuration the
//! edges run.

use super::metered;
use super::scenario::Fault;
use super::target::{hit_errors, Account, Budget, Target};
use ankusa_testkit::access_log::{self, Held};
use ankusa_testkit::envoy::{fleet_filter_config, Edge, EdgeSpec, Shell};
use ankusa_testkit::fault::FaultProxy;
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::process::scratch_dir;
use ankusa_testkit::redis::{Redis, RedisCluster};
use ankusa_testkit::store::Store;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The plugin's `fleet.timeout_ms` in every row.
pub const TIMEOUT_MS: u64 = 250;
/// The plugin's `fleet.breaker_open_ms` in every row: short, so resumption
/// shows within a row.
pub const BREAKER_OPEN_MS: u64 = 1000;
/// Edges in every row.
pub const EDGES: usize = 2;
/// The store's flags in every row: the live edge count refreshed every
/// 200 ms, so the edges know it well before the fault.
pub(super) const STORE_ARGS: [&str; 2] = ["--edges-refresh-ms", "200"];

/// The plugin configuration of every row: the fleet one, a short pending time
/// so racing redeliveries come back within the run, and a breaker that probes
/// again after 1 s so resumption shows within the run.
pub fn row_config(fault: Fault) -> serde_json::Value {
    let mut config = fault_fleet_config();
    if fault == Fault::SettleOverflow {
        config["fleet"]["settle_queue_max"] = 8.into();
    }
    config
}

/// [`row_config`] before any row's own change: what the soak runs too.
pub fn fault_fleet_config() -> serde_json::Value {
    let mut config = fleet_filter_config();
    config["fleet"]["timeout_ms"] = TIMEOUT_MS.into();
    row_settings(&mut config);
    config
}

/// What every row's plugin configuration sets, on loopback or across hosts,
/// whatever its budget: a 5 s pending time, so a racing redelivery told to
/// come back does so within the row; a breaker open for
/// [`BREAKER_OPEN_MS`]; the metered tenant.
pub fn row_settings(config: &mut serde_json::Value) {
    config["fleet"]["pending_ttl_ms"] = 5000.into();
    config["fleet"]["breaker_open_ms"] = BREAKER_OPEN_MS.into();
    metered::configure(config);
}

/// What Redis a fleet runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    Single,
    /// One Redis keeping an append-only file.
    SingleAof,
    /// A three-master Redis Cluster, each master with a replica.
    Cluster,
}

impl Backing {
    /// The Redis `fault`'s row runs on.
    pub fn of(fault: Fault) -> Backing {
        if fault.on_cluster() {
            Backing::Cluster
        } else if fault.redis_aof() {
            Backing::SingleAof
        } else {
            Backing::Single
        }
    }
}

/// A fleet's make-up beyond its plugin configuration.
#[derive(Clone, Debug)]
pub struct Shape {
    pub backing: Backing,
    pub edges: usize,
    /// Extra flags of the intake (`--dedupe-ttl-ms N`).
    pub intake_args: Vec<String>,
    /// Environment of the edges' plugin VM (a verifying source's secret).
    pub vm_env: Vec<(String, String)>,
}

/// Redis, the store, the intake and the edges, with a fault proxy between
/// the edges and the store and one between the edges and the intake.
pub struct FaultFleet {
    /// The single Redis (rows not on a Cluster).
    pub redis: Option<Redis>,
    /// The Redis Cluster with replicas (Cluster rows).
    pub cluster: Option<RedisCluster>,
    /// A slot being migrated: (slot, source port, target port).
    pub(super) migration: Option<(u16, u16, u16)>,
    /// How long after a master was killed its replica answered as master.
    pub(super) promoted_after: Option<std::time::Duration>,
    /// What the fault and the heal did, in words, for the table.
    pub notes: Vec<String>,
    /// Keys a restarted Redis held when it answered again.
    pub redis_keys_after_restart: Option<u64>,
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
    /// The fleet of `fault`'s row: [`EDGES`] edges on a Redis Cluster with
    /// replicas, or on one Redis (keeping an append-only file when the row
    /// needs one).
    pub fn start(config: &serde_json::Value, fault: Fault) -> FaultFleet {
        let shape = Shape {
            backing: Backing::of(fault),
            edges: EDGES,
            intake_args: Vec::new(),
            vm_env: Vec::new(),
        };
        FaultFleet::start_shaped(config, &shape)
    }

    /// The fleet of `shape`, its edges running `config`.
    pub fn start_shaped(config: &serde_json::Value, shape: &Shape) -> FaultFleet {
        let dir = scratch_dir("faults");
        let redis_dir = dir.join("redis");
        let _ = std::fs::create_dir_all(&redis_dir);
        let (redis, cluster) = match shape.backing {
            Backing::Cluster => (None, Some(RedisCluster::start_replicated())),
            Backing::SingleAof => (Some(Redis::start_aof_on(free_port(), &redis_dir)), None),
            Backing::Single => (Some(Redis::start_on(free_port(), &redis_dir)), None),
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
        let intake_args: Vec<&str> = shape.intake_args.iter().map(String::as_str).collect();
        let intake = Intake::start_on(free_port(), &dir.join("intake"), &intake_args);
        let intake_proxy = Arc::new(FaultProxy::start(intake.port));
        let mut edges: Vec<Edge> = (1..=shape.edges)
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
                    vm_env: shape.vm_env.clone(),
                    shell: Shell::from_env(),
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
            promoted_after: None,
            notes: Vec::new(),
            redis_keys_after_restart: None,
            store,
            store_proxy,
            intake,
            intake_proxy,
            edges,
            old_access_logs: Vec::new(),
            dir,
        }
    }

    pub(super) fn redis(&mut self) -> &mut Redis {
        self.redis.as_mut().expect("a row on a single Redis")
    }

    pub(super) fn cluster(&self) -> &RedisCluster {
        self.cluster.as_ref().expect("a row on a Redis Cluster")
    }

    /// The store's URL for Redis, single or Cluster.
    pub(super) fn redis_url(&self) -> String {
        match (&self.redis, &self.cluster) {
            (Some(r), _) => r.url(),
            (_, Some(c)) => c.url(),
            _ => String::new(),
        }
    }
}

impl Target for FaultFleet {
    fn edge_urls(&self) -> Vec<String> {
        self.edges.iter().map(|e| e.url("")).collect()
    }

    fn admin_urls(&self) -> Vec<String> {
        self.edges
            .iter()
            .map(|e| e.admin_url("/stats/prometheus"))
            .collect()
    }

    fn intake_url(&self) -> String {
        self.intake.url()
    }

    fn edge_pids(&self) -> Vec<u32> {
        self.edges.iter().map(|e| e.proc.pid()).collect()
    }

    /// From the edges' access logs, a replaced edge's included.
    fn held(&self) -> Vec<(Held, u32)> {
        self.old_access_logs
            .iter()
            .cloned()
            .chain(
                self.edges
                    .iter()
                    .filter_map(|e| Some((e.access_log.clone()?, e.proc.pid()))),
            )
            .flat_map(|(path, pid)| access_log::read(&path).into_iter().map(move |h| (h, pid)))
            .collect()
    }

    fn store_hit_errors(&self) -> u64 {
        let text = ankusa_testkit::http::get(&self.store.url_of("/metrics"))
            .map(|r| r.text())
            .unwrap_or_default();
        hit_errors(&text)
    }

    fn budget(&self) -> Budget {
        Budget {
            timeout_ms: TIMEOUT_MS,
            breaker_open_ms: BREAKER_OPEN_MS,
        }
    }

    fn account(&mut self) -> Account {
        Account {
            notes: std::mem::take(&mut self.notes),
            redis_keys_after_restart: self.redis_keys_after_restart,
            promoted_after: self.promoted_after,
            store_proxy_refused: self.store_proxy.refused(),
            frozen: Vec::new(),
        }
    }
}
