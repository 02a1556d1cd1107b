//! `MONITOR` on some Redis nodes, to count what each node really ran: Redis
//! feeds a command to its monitors once it has executed it, so a command
//! refused with a redirect (`MOVED`, `ASK`, `TRYAGAIN`) is never listed. An
//! `EVALSHA` answered `NOSCRIPT` is (it ran and found no script): a script's
//! runs are counted by the commands it runs itself, which are listed too.

use crate::process::{scratch_dir, Proc};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Numbers each probe, so a probe is never mistaken for an earlier one.
static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One `redis-cli MONITOR` per node, each writing to its own file, stopped
/// (by PID) on drop.
pub struct Monitor {
    watches: Vec<(u16, Proc, PathBuf)>,
}

impl Monitor {
    /// Starts monitoring every port of `ports`; returns once each monitor
    /// has seen a probe command sent after it started.
    pub fn start(ports: &[u16]) -> Monitor {
        let dir = scratch_dir("redis-monitor");
        let watches = ports
            .iter()
            .map(|&port| {
                let log = dir.join(format!("monitor-{port}.log"));
                let mut cmd = Command::new("redis-cli");
                cmd.args(["-p", &port.to_string(), "MONITOR"]);
                (port, Proc::spawn("redis-cli-monitor", cmd, &log), log)
            })
            .collect();
        let monitor = Monitor { watches };
        for (port, _, _) in &monitor.watches {
            monitor.wait_for_probe(*port);
        }
        monitor
    }

    /// Sends `ECHO` to `port` until its monitor lists it: a monitor starts
    /// listing only once its `MONITOR` command ran, and lists in order, so
    /// what the node ran before the probe is then in the file.
    fn wait_for_probe(&self, port: u16) {
        let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let probe = format!("monitor-probe-{port}-{n}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            crate::redis::cli(port, &["ECHO", &probe]);
            if self.lines(port).iter().any(|l| l.contains(&probe)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("MONITOR on :{port} never listed a probe");
    }

    /// What `port`'s monitor has listed so far, a line per command.
    pub fn lines(&self, port: u16) -> Vec<String> {
        self.watches
            .iter()
            .filter(|(p, _, _)| *p == port)
            .flat_map(|(_, _, log)| {
                std::fs::read_to_string(log)
                    .unwrap_or_default()
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// How many times, on every node together, a script ran `command` with
    /// an argument equal to `arg`, up to now.
    pub fn count(&self, command: &str, arg: &str) -> usize {
        self.watches
            .iter()
            .map(|(port, _, _)| self.count_on(*port, command, arg))
            .sum()
    }

    /// [`Monitor::count`] on the node at `port` alone.
    pub fn count_on(&self, port: u16, command: &str, arg: &str) -> usize {
        self.wait_for_probe(port);
        let command = format!("\"{}\"", command.to_ascii_uppercase());
        let arg = format!("\"{arg}\"");
        self.lines(port)
            .into_iter()
            .filter(|l| l.contains(" lua]"))
            .filter(|l| {
                let mut words = l.split_whitespace().skip(3);
                words
                    .next()
                    .is_some_and(|w| w.eq_ignore_ascii_case(&command))
                    && words.any(|w| w == arg)
            })
            .count()
    }
}
