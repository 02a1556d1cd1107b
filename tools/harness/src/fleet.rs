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
//! The store gets two fresh tokens: the edge token, which every edge holds
//! (hits, settles, reading overrides), and the operator token, which no edge
//! holds and which is written to `operator.token` in the fleet's folder
//! (named in `READY` as `operator_token_file`) for changing overrides by hand.

use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::{free_port, is_listening};
use ankusa_testkit::process::scratch_dir;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_testkit::token::operator_token;
use std::path::PathBuf;
use std::time::Duration;

/// Most edges one fleet starts (ports P+10 … P+10·N+1 must fit).
pub const MAX_EDGES: usize = 64;

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

/// Where each part listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ports {
    pub redis: u16,
    pub store: u16,
    pub intake: u16,
    /// (listener, admin) per edge, edge-1 first.
    pub edges: Vec<(u16, u16)>,
}

impl Ports {
    /// The documented layout from `base` (see the module docs).
    pub fn from_base(base: u16, edges: usize) -> Result<Ports, String> {
        if edges == 0 || edges > MAX_EDGES {
            return Err(format!("--edges must be in 1..={MAX_EDGES}, got {edges}"));
        }
        let top = u32::from(base) + 10 * edges as u32 + 1;
        if base < 1024 || top > 65_535 {
            return Err(format!(
                "--base-port {base} with {edges} edges needs ports {base}..={top}: keep them in 1024..=65535"
            ));
        }
        Ok(Ports {
            redis: base,
            store: base + 1,
            intake: base + 2,
            edges: (1..=edges as u16)
                .map(|i| (base + 10 * i, base + 10 * i + 1))
                .collect(),
        })
    }

    pub fn free(edges: usize) -> Ports {
        Ports {
            redis: free_port(),
            store: free_port(),
            intake: free_port(),
            edges: (0..edges).map(|_| (free_port(), free_port())).collect(),
        }
    }

    /// Every port with what it is for, in start order.
    pub fn named(&self) -> Vec<(String, u16)> {
        let mut all = vec![
            ("redis".to_string(), self.redis),
            ("store".into(), self.store),
            ("intake".into(), self.intake),
        ];
        for (i, (listen, admin)) in self.edges.iter().enumerate() {
            all.push((format!("edge-{} listener", i + 1), *listen));
            all.push((format!("edge-{} admin", i + 1), *admin));
        }
        all
    }

    /// Err naming the first port something already listens on.
    pub fn check_free(&self) -> Result<(), String> {
        match self
            .named()
            .into_iter()
            .find(|(_, port)| is_listening(*port))
        {
            Some((what, port)) => Err(format!("port {port} ({what}) is already in use")),
            None => Ok(()),
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
    /// the overrides API by hand; the edges hold only the edge token.
    pub operator_token_file: PathBuf,
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
        let store = Store::start_on(ports.store, &redis.url(), &[]);
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
        };
        // Spawn every Envoy first, then wait: their start-ups (V8 compiling the
        // filter) overlap instead of adding up.
        let spawn = if spec.access_log {
            Edge::spawn_logged
        } else {
            Edge::spawn
        };
        for (i, (listen, admin)) in ports.edges.iter().enumerate() {
            fleet.edges.push(spawn(EdgeSpec {
                node: format!("edge-{}", i + 1),
                listen_port: *listen,
                admin_port: *admin,
                upstream_port: ports.intake,
                store_port: ports.store,
                concurrency: spec.concurrency,
                filter_config: spec.filter_config.clone(),
                vm_env: spec.vm_env.clone(),
            }));
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

/// For a command that starts children and may end without running
/// destructors: on a panic (a release build aborts without unwinding), and on
/// SIGTERM or SIGINT (a timeout, a ^C, then exit 130), stops every child.
/// Installed before any child starts; `name` prefixes the message.
pub fn stop_children_on_exit(name: &'static str) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        stop_children(Duration::from_secs(5));
    }));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the signal runtime: {e}"))?;
    let (mut term, mut int) = runtime
        .block_on(async {
            Ok::<_, std::io::Error>((
                signal(SignalKind::terminate())?,
                signal(SignalKind::interrupt())?,
            ))
        })
        .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    std::thread::spawn(move || {
        runtime.block_on(async {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        });
        eprintln!("{name}: stopping (signal)");
        stop_children(Duration::from_secs(5));
        std::process::exit(130);
    });
    Ok(())
}

/// Stops every direct child of this process (by PID, read from `/proc`):
/// SIGTERM, up to `grace`, then SIGKILL. For the moments no destructor will
/// run — a panic in a release build aborts without unwinding.
pub fn stop_children(grace: Duration) {
    let children = child_pids(std::process::id());
    if children.is_empty() {
        return;
    }
    let signal = |sig: &str, pids: &[u32]| {
        let _ = std::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .args(pids.iter().map(u32::to_string))
            .stderr(std::process::Stdio::null())
            .status();
    };
    signal("TERM", &children);
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if children.iter().all(|pid| !is_alive(*pid)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = children.into_iter().filter(|pid| is_alive(*pid)).collect();
    signal("KILL", &left);
}

/// PIDs whose parent is `parent`, from `/proc/*/stat`.
pub fn child_pids(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| stat_of(*pid).is_some_and(|(ppid, state)| ppid == parent && state != 'Z'))
        .collect()
}

/// A process that exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    stat_of(pid).is_some_and(|(_, state)| state != 'Z')
}

/// (parent PID, state letter) of `pid`.
fn stat_of(pid: u32) -> Option<(u32, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_follow_the_documented_layout() {
        let ports = Ports::from_base(20_000, 2).expect("valid");
        assert_eq!(
            ports,
            Ports {
                redis: 20_000,
                store: 20_001,
                intake: 20_002,
                edges: vec![(20_010, 20_011), (20_020, 20_021)]
            }
        );
        let err = Ports::from_base(65_500, 4).expect_err("past 65535");
        assert!(err.contains("65500") && err.contains("65541"), "{err}");
        assert!(Ports::from_base(20_000, 0)
            .expect_err("no edges")
            .contains("--edges"));
    }

    #[test]
    fn reads_its_own_parent_from_proc() {
        let me = std::process::id();
        assert!(is_alive(me));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        assert!(child_pids(me).contains(&child.id()));
        let _ = child.kill();
        let _ = child.wait();
        assert!(!child_pids(me).contains(&child.id()));
    }
}
