//! A child process that is stopped when its guard is dropped.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running child. Dropping it sends SIGTERM to its PID, waits up to 5 s, then
/// SIGKILLs: a failing test leaves nothing behind.
pub struct Proc {
    pub name: String,
    child: Option<Child>,
    /// stdout and stderr of the child go here.
    pub log: PathBuf,
}

impl Proc {
    /// Starts `cmd` with its output appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Proc {
        if let Some(dir) = log.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("cannot open log {}: {e}", log.display()));
        let err = out
            .try_clone()
            .unwrap_or_else(|e| panic!("cannot dup log handle: {e}"));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({cmd:?}): {e}"));
        Proc {
            name: name.to_string(),
            child: Some(child),
            log: log.to_path_buf(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// Whether the child is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Waits until 127.0.0.1:`port` accepts connections; panics with the
    /// child's log tail if it exits or `timeout` passes first.
    pub fn wait_for_port(&mut self, port: u16, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if crate::ports::is_listening(port) {
                return;
            }
            if !self.is_running() {
                panic!(
                    "{} exited before listening on {port}:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "{} did not listen on {port} within {timeout:?}:\n{}",
            self.name,
            self.log_tail()
        );
    }

    /// The last 40 lines of the child's output.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// Sends `signal` (e.g. "STOP", "CONT", "TERM", "KILL") to the child.
    pub fn signal(&self, signal: &str) {
        if let Some(child) = &self.child {
            send_signal(child.id(), signal);
        }
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status
    /// code, if it exited by itself within the grace period.
    pub fn stop(&mut self, grace: Duration) -> Option<i32> {
        let mut child = self.child.take()?;
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        // A stopped child can't act on TERM: wake it first. The child is
        // already out of `self.child`, so signal its PID directly.
        send_signal(child.id(), "CONT");
        send_signal(child.id(), "TERM");
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// SIGKILL at once, like a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// A fresh directory for one test's files under the workspace's `target/`.
pub fn scratch_dir(name: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = crate::paths::target_dir()
        .join("it")
        .join(format!("{name}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// `kill -<signal> <pid>`, never with a PID of 0: that would signal the
/// whole process group, the test runner included.
fn send_signal(pid: u32, signal: &str) {
    if pid == 0 {
        return;
    }
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status();
}

/// The machine's load averages over 1, 5 and 15 minutes, as `/proc/loadavg` has them.
pub fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Resident memory of `pid` in KiB, from `/proc/<pid>/status` (0 when gone).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}
