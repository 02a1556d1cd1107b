//! A throw-away Redis on a free port: one server, or a 3-master Cluster.

use crate::process::{scratch_dir, spawn_listening, Proc};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// One `redis-server` with no persistence, stopped on drop.
pub struct Redis {
    pub port: u16,
    pub proc: Proc,
    pub dir: PathBuf,
}

impl Redis {
    /// Starts on a free port (another, if that one is taken before Redis binds it).
    pub fn start() -> Redis {
        let dir = scratch_dir("redis");
        let (proc, port) = spawn_listening(
            |port| Self::spawn_proc(server_command(port, &dir), port, &dir),
            Duration::from_secs(10),
        );
        Redis { port, proc, dir }
    }

    /// Starts on `port` with its files in `dir` (used to restart on the same port).
    pub fn start_on(port: u16, dir: &std::path::Path) -> Redis {
        Self::spawn(server_command(port, dir), port, dir)
    }

    /// [`Redis::start_on`] with an append-only file in `dir`, synced every
    /// second (`appendfsync everysec`, as docs/compose.md recommends):
    /// restarted on the same `dir`, it loads its keys back.
    pub fn start_aof_on(port: u16, dir: &std::path::Path) -> Redis {
        let mut cmd = server_command(port, dir);
        cmd.args(["--appendonly", "yes", "--appendfsync", "everysec"]);
        Self::spawn(cmd, port, dir)
    }

    fn spawn(cmd: Command, port: u16, dir: &std::path::Path) -> Redis {
        let mut proc = Self::spawn_proc(cmd, port, dir);
        proc.wait_for_port(port, Duration::from_secs(10));
        Redis {
            port,
            proc,
            dir: dir.to_path_buf(),
        }
    }

    fn spawn_proc(cmd: Command, port: u16, dir: &std::path::Path) -> Proc {
        Proc::spawn("redis-server", cmd, &dir.join(format!("redis-{port}.log")))
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Runs `redis-cli -p PORT ARGS…` and returns its stdout, trimmed.
    pub fn cli(&self, args: &[&str]) -> String {
        cli(self.port, args)
    }

    /// One field of `INFO section` (`used_memory`, `total_commands_processed`,
    /// `redis_version`…), as Redis prints it; None when absent.
    pub fn info(&self, section: &str, field: &str) -> Option<String> {
        let prefix = format!("{field}:");
        self.cli(&["INFO", section]).lines().find_map(|l| {
            l.strip_prefix(prefix.as_str())
                .map(|v| v.trim().to_string())
        })
    }

    /// [`Redis::info`] as a number; 0 when absent or not a number.
    pub fn info_number(&self, section: &str, field: &str) -> f64 {
        self.info(section, field)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    }
}

/// `redis-server` on 127.0.0.1:`port`, nothing persisted, its files in `dir`.
fn server_command(port: u16, dir: &std::path::Path) -> Command {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .args(["--dir", &dir.display().to_string()]);
    cmd
}

/// `redis-cli -p port args…` → trimmed stdout.
pub fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run redis-cli: {e}"));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Three masters, slots spread by `redis-cli --cluster create`; with
/// [`RedisCluster::start_replicated`] each master has one replica.
pub struct RedisCluster {
    pub nodes: Vec<Redis>,
}

impl RedisCluster {
    /// Three masters, no replicas.
    pub fn start() -> RedisCluster {
        Self::start_with(0)
    }

    /// Three masters with one replica each (six nodes), so a master can be
    /// failed over to its replica.
    pub fn start_replicated() -> RedisCluster {
        Self::start_with(1)
    }

    fn start_with(replicas: usize) -> RedisCluster {
        let dir = scratch_dir("redis-cluster");
        let mut nodes = Vec::new();
        let node_dir = |port: u16| dir.join(port.to_string());
        for _ in 0..3 * (1 + replicas) {
            let (proc, port) = spawn_listening(
                |port| {
                    let node_dir = node_dir(port);
                    std::fs::create_dir_all(&node_dir).unwrap_or_else(|e| panic!("mkdir: {e}"));
                    let mut cmd = server_command(port, &node_dir);
                    cmd.args(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
                        .args([
                            "--cluster-config-file",
                            &node_dir.join("nodes.conf").display().to_string(),
                        ]);
                    Proc::spawn("redis-cluster-node", cmd, &node_dir.join("redis.log"))
                },
                Duration::from_secs(10),
            );
            nodes.push(Redis {
                port,
                proc,
                dir: node_dir(port),
            });
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run redis-cli --cluster create: {e}"));
        assert!(
            out.status.success(),
            "cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        // Wait until every node agrees the cluster is up.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !nodes
            .iter()
            .all(|n| n.cli(&["cluster", "info"]).contains("cluster_state:ok"))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "cluster never reached cluster_state:ok"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        RedisCluster { nodes }
    }

    /// The nodes that are masters now, by `ROLE`.
    pub fn masters(&self) -> Vec<&Redis> {
        self.nodes
            .iter()
            .filter(|n| n.cli(&["ROLE"]).starts_with("master"))
            .collect()
    }

    /// `redis+cluster://` style list of node URLs, comma separated.
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.url())
            .collect::<Vec<_>>()
            .join(",")
    }
}
