//! A whole local fleet as real processes: Redis, the store, the sample intake
//! and N Envoy edges, each edge its own node (`edge-1` … `edge-N`).
//!
//! Ports, from a base port P (`fleet --base-port P`):
//!
//! | what              | port          |
//! |-------------------|---------------|
//! | Redis             | P             |
//! | ankusa-store      | P + 1         |
//! | intake            | P + 2         |
//! | edge-i listener   | P + 10·i      |
//! | edge-i admin      | P + 10·i + 1  |
//!
//! so `--base-port 20000 --edges 2` gives edges on 20010 and 20020, admins on
//! 20011 and 20021. Without a base port every part gets a free port.
//!
//! The store gets fresh tokens: one edge token per edge, each speaking only
//! for its own node name (`<token> nodes=edge-i`: hits, settles, reading
//! overrides), and the operator token, which no edge holds and which is
//! written to `operator.token` in the fleet's folder (named in `READY` as
//! `operator_token_file`) for changing overrides by hand. The run's own edge
//! token ([`ankusa_testkit::token::run_token`], for tools calling the store
//! as an edge would) is accepted for the fleet's names too
//! (`nodes=edge-* live=N`).
//! The store and the intake share a fresh receipt key (`receipt_key_file`),
//! no edge holds it: the intake answers each hook it stores with a receipt,
//! and the store commits a claim only with one.

mod ports;

pub use ports::Ports;

use ankusa_testkit::envoy::{Edge, EdgeSpec, Shell};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::process::scratch_dir;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::{fresh_token, operator_token, run_token};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct FleetSpec {
    pub edges: usize,
    /// `None`: free ports everywhere.
    pub base_port: Option<u16>,
    /// The plugin configuration every edge gets.
    pub filter_config: serde_json::Value,
    /// Envoy worker threads per edge.
    pub concurrency: u32,
    /// Environment variables of every edge's filter VM (signing secrets), see [`EdgeSpec::vm_env`].
    pub vm_env: Vec<(String, String)>,
    /// The intake obeys its test headers (benchmarks: `x-intake-status`);
    /// never for a fleet a sender reaches.
    pub obey_test_headers: bool,
    /// Each edge writes an access log in the shipped format (the `fleet`
    /// command's edges do; benchmarks' don't pay for one).
    pub access_log: bool,
}

impl FleetSpec {
    pub fn new(edges: usize, filter_config: serde_json::Value) -> FleetSpec {
        FleetSpec {
            edges,
            base_port: None,
            filter_config,
            concurrency: 2,
            vm_env: Vec::new(),
            obey_test_headers: false,
            access_log: false,
        }
    }
}

/// A running fleet. Dropping it stops every process it started (edges
/// first, so none of them is left talking to a store that is gone).
pub struct Fleet {
    pub edges: Vec<Edge>,
    pub intake: Intake,
    pub store: Store,
    pub redis: Redis,
    pub ports: Ports,
    /// Redis's and the intake's files, and the operator token's.
    pub dir: PathBuf,
    /// The file holding the store's operator token (mode 0600), for calling
    /// the overrides API by hand; each edge holds only its own edge token.
    pub operator_token_file: PathBuf,
    /// Edge i's store token, scoped to its node (`nodes=edge-i`).
    pub edge_tokens: Vec<String>,
}

impl Fleet {
    /// Starts every part and returns once each answers; panics (stopping what
    /// already started) when one doesn't.
    pub fn start(spec: &FleetSpec) -> Fleet {
        let ports = match spec.base_port {
            Some(base) => Ports::from_base(base, spec.edges).unwrap_or_else(|e| panic!("{e}")),
            None => Ports::free(spec.edges),
        };
        Self::start_on(spec, ports)
    }

    pub fn start_on(spec: &FleetSpec, ports: Ports) -> Fleet {
        ports.check_free().unwrap_or_else(|e| panic!("{e}"));
        let dir = scratch_dir("fleet");
        let redis_dir = dir.join("redis");
        std::fs::create_dir_all(&redis_dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", redis_dir.display()));
        let redis = Redis::start_on(ports.redis, &redis_dir);
        let tokens = edge_tokens(ports.edges.len());
        let store = Store::start_with_edge_tokens(ports.store, &redis.url(), &[], &tokens.list);
        assert!(
            store.wait_ready(Duration::from_secs(10)),
            "ankusa-store never reached Redis:\n{}",
            store.proc.log_tail()
        );
        let obey: &[&str] = if spec.obey_test_headers {
            &[ankusa_testkit::intake::OBEY_TEST_HEADERS]
        } else {
            &[]
        };
        let intake = Intake::start_on(ports.intake, &dir.join("intake"), obey);
        let operator_token_file = dir.join("operator.token");
        write_secret(&operator_token_file, operator_token());
        let mut fleet = Fleet {
            edges: Vec::new(),
            intake,
            store,
            redis,
            ports: ports.clone(),
            dir,
            operator_token_file,
            edge_tokens: tokens.each.clone(),
        };
        // Spawn every Envoy first, then wait: their start-ups (V8 compiling the
        // filter) overlap instead of adding up.
        for (i, ((listen, admin), token)) in ports.edges.iter().zip(&tokens.each).enumerate() {
            let edge = EdgeSpec {
                node: format!("edge-{}", i + 1),
                listen_port: *listen,
                admin_port: *admin,
                upstream_port: ports.intake,
                store_port: ports.store,
                concurrency: spec.concurrency,
                filter_config: spec.filter_config.clone(),
                vm_env: spec.vm_env.clone(),
                shell: Shell::from_env(),
            };
            fleet
                .edges
                .push(Edge::spawn_as(edge, token, spec.access_log));
        }
        for edge in &mut fleet.edges {
            edge.wait_ready(Duration::from_secs(60));
        }
        fleet
    }

    pub fn edge_urls(&self) -> Vec<String> {
        self.edges.iter().map(|e| e.url("")).collect()
    }

    /// The JSON of the `READY` line: every URL a user or a test needs.
    pub fn ready_json(&self) -> serde_json::Value {
        serde_json::json!({
            "edges": self.edge_urls(),
            "admins": self.edges.iter().map(|e| e.admin_url("")).collect::<Vec<_>>(),
            "store": self.store.url(),
            "redis": self.redis.url(),
            "intake": self.intake.url(),
            "nodes": self.edges.iter().map(|e| e.spec.node.clone()).collect::<Vec<_>>(),
            "pids": self.pids(),
            "dir": self.dir.display().to_string(),
            "operator_token_file": self.operator_token_file.display().to_string(),
            "receipt_key_file": ankusa_testkit::token::receipt_key_file(),
            "access_logs": self
                .edges
                .iter()
                .filter_map(|e| e.access_log.as_ref().map(|p| p.display().to_string()))
                .collect::<Vec<_>>(),
        })
    }

    /// PIDs of every process this fleet started.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = vec![
            self.redis.proc.pid(),
            self.store.proc.pid(),
            self.intake.proc.pid(),
        ];
        pids.extend(self.edges.iter().map(|e| e.proc.pid()));
        pids
    }

    /// Err naming the first part that is no longer running, with its log tail.
    pub fn check_running(&mut self) -> Result<(), String> {
        let dead = |name: &str, tail: String| Err(format!("{name} exited:\n{tail}"));
        if !self.redis.proc.is_running() {
            return dead("redis", self.redis.proc.log_tail());
        }
        if !self.store.proc.is_running() {
            return dead("ankusa-store", self.store.proc.log_tail());
        }
        if !self.intake.proc.is_running() {
            return dead("intake", self.intake.proc.log_tail());
        }
        for edge in &mut self.edges {
            if !edge.proc.is_running() {
                return dead(&edge.spec.node, edge.log_tail());
            }
        }
        Ok(())
    }

    /// Stops everything: the edges together, then intake, store and Redis.
    pub fn stop(mut self) {
        std::thread::scope(|s| {
            for edge in &mut self.edges {
                s.spawn(move || edge.proc.stop(Duration::from_secs(5)));
            }
        });
        self.intake.proc.stop(Duration::from_secs(5));
        self.store.proc.stop(Duration::from_secs(5));
        self.redis.proc.stop(Duration::from_secs(5));
    }
}

/// Writes `secret` to a new file only its owner may read.
fn write_secret(path: &std::path::Path, secret: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{secret}\n").as_bytes()))
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// The fleet's edge tokens: one per edge, scoped to its node.
struct EdgeTokens {
    /// What the store reads (`ANKUSA_STORE_EDGE_TOKENS`).
    list: String,
    /// Edge i's token, for its Envoy's `ANKUSA_STORE_TOKEN`.
    each: Vec<String>,
}

/// A fresh token per edge, `<token> nodes=edge-i`, and the run's token for
/// the fleet's names (`nodes=edge-* live=N`).
fn edge_tokens(edges: usize) -> EdgeTokens {
    let each: Vec<String> = (1..=edges)
        .map(|i| fresh_token(&format!("edge-{i}")))
        .collect();
    let mut items: Vec<String> = each
        .iter()
        .enumerate()
        .map(|(i, token)| format!("{token} nodes=edge-{}", i + 1))
        .collect();
    items.push(format!(
        "{} nodes=edge-* live={}",
        run_token(),
        edges.max(1)
    ));
    EdgeTokens {
        list: items.join(","),
        each,
    }
}
