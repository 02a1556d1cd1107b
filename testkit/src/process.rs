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
        if !self.listens_on(port, timeout) {
            panic!(
                "{} exited: 127.0.0.1:{port} was taken:\n{}",
                self.name,
                self.log_tail()
            );
        }
    }

    /// Waits until 127.0.0.1:`port` accepts connections (true), or until
    /// the child exits saying the port was taken (false: its output says
    /// "Address already in use", as Redis, the store and the intake say
    /// it). Panics with the child's log tail if it exits otherwise or
    /// `timeout` passes first.
    pub fn listens_on(&mut self, port: u16, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if crate::ports::is_listening(port) {
                return true;
            }
            if !self.is_running() {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                if log.contains(PORT_TAKEN) {
                    return false;
                }
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

/// What a server that lost its port says (the OS's words for `EADDRINUSE`).
const PORT_TAKEN: &str = "Address already in use";

/// A child that `spawn(port)` starts on a port from
/// [`crate::ports::free_port`], listening there within `timeout`. A port
/// handed out can be taken before the child binds it (another test's client
/// gets it as its ephemeral port): the child exits saying so, and is started
/// again on another port, twice at most. Its port comes back with it.
pub fn spawn_listening(spawn: impl Fn(u16) -> Proc, timeout: Duration) -> (Proc, u16) {
    let mut port = crate::ports::free_port();
    let mut proc = spawn(port);
    for _ in 0..2 {
        if proc.listens_on(port, timeout) {
            return (proc, port);
        }
        port = crate::ports::free_port();
        proc = spawn(port);
    }
    proc.wait_for_port(port, timeout);
    (proc, port)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// `sh -c script`, its output in `dir`.
    fn sh(script: &str, dir: &Path, name: &str) -> Proc {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        Proc::spawn(name, cmd, &dir.join(format!("{name}.log")))
    }

    /// A child listening on `port` for 30 s.
    fn listener(port: u16, dir: &Path) -> Proc {
        let script = format!(
            "exec python3 -c 'import socket, time; s = socket.socket(); \
             s.bind((\"127.0.0.1\", {port})); s.listen(); time.sleep(30)'"
        );
        sh(&script, dir, "listener")
    }

    #[test]
    fn a_child_that_lost_its_port_is_started_again_on_another() {
        let dir = scratch_dir("spawn-listening");
        let ports = std::cell::RefCell::new(Vec::new());
        let (_proc, port) = spawn_listening(
            |port| {
                ports.borrow_mut().push(port);
                if ports.borrow().len() == 1 {
                    sh(
                        "echo 'bind: Address already in use' >&2; exit 1",
                        &dir,
                        "lost",
                    )
                } else {
                    listener(port, &dir)
                }
            },
            Duration::from_secs(10),
        );
        let ports = ports.into_inner();
        assert_eq!(ports.len(), 2, "{ports:?}");
        assert_eq!(ports[1], port);
        assert_ne!(ports[0], port);
        assert!(crate::ports::is_listening(port));
    }

    #[test]
    #[should_panic(expected = "exited before listening")]
    fn a_child_that_fails_for_another_reason_is_not_started_again() {
        let dir = scratch_dir("spawn-failing");
        let started = Cell::new(0);
        spawn_listening(
            |_| {
                started.set(started.get() + 1);
                assert_eq!(started.get(), 1, "started again");
                sh("echo 'no such configuration'; exit 1", &dir, "failing")
            },
            Duration::from_secs(10),
        );
    }
}
