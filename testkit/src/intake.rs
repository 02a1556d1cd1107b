//! The sample intake (`intake` from ankusa-tools) on a free port: the upstream
//! every edge in a test forwards admitted hooks to. It signs receipts with the
//! run's receipt key ([`crate::token::receipt_key_file`]), as the stores of
//! [`crate::store`] check them.

use crate::process::{scratch_dir, spawn_listening, Proc};
use crate::token::{receipt_key_file, INTAKE_RECEIPT_KEY_ENV, INTAKE_RECEIPT_KEY_FLAG};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The flag that makes the intake obey its test headers.
pub const OBEY_TEST_HEADERS: &str = "--obey-test-headers";

/// A running intake, stopped on drop; its journal stays in `dir`.
pub struct Intake {
    pub proc: Proc,
    pub port: u16,
    pub dir: PathBuf,
}

impl Intake {
    /// Starts on a free port (another, if that one is taken before the intake binds it).
    pub fn start() -> Intake {
        Self::start_free(&[])
    }

    /// [`Intake::start`], obeying the test headers `x-intake-delay-ms` and
    /// `x-intake-status` (`--obey-test-headers`).
    pub fn start_obeying() -> Intake {
        Self::start_free(&[OBEY_TEST_HEADERS])
    }

    fn start_free(extra_args: &[&str]) -> Intake {
        let dir = scratch_dir("intake");
        let (proc, port) = spawn_listening(
            |port| Self::spawn_proc(port, &dir, extra_args),
            Duration::from_secs(10),
        );
        Intake { proc, port, dir }
    }

    /// Starts on `port` with its journal in `dir` (restart on the same port and
    /// folder to test what survives); `extra_args` e.g. `["--dedupe-ttl-ms", "500"]`.
    pub fn start_on(port: u16, dir: &Path, extra_args: &[&str]) -> Intake {
        let mut proc = Self::spawn_proc(port, dir, extra_args);
        proc.wait_for_port(port, Duration::from_secs(10));
        Intake {
            proc,
            port,
            dir: dir.to_path_buf(),
        }
    }

    fn spawn_proc(port: u16, dir: &Path, extra_args: &[&str]) -> Proc {
        let mut cmd = Command::new(crate::paths::workspace_bin("intake"));
        cmd.args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--data-dir", &dir.join("data").display().to_string()])
            .args([INTAKE_RECEIPT_KEY_FLAG, receipt_key_file()])
            .env_remove(INTAKE_RECEIPT_KEY_ENV)
            .args(extra_args);
        Proc::spawn("intake", cmd, &dir.join(format!("intake-{port}.log")))
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `GET /hooks`: every stored hook as `{"id","tenant","source","event_key"}`.
    pub fn hooks(&self) -> Vec<serde_json::Value> {
        let answer = crate::http::get(&format!("{}/hooks", self.url())).unwrap_or_else(|e| {
            panic!(
                "GET {}/hooks failed: {e}\n{}",
                self.url(),
                self.proc.log_tail()
            )
        });
        assert_eq!(
            answer.status,
            200,
            "GET /hooks answered {}: {}",
            answer.status,
            answer.text()
        );
        match answer.json() {
            serde_json::Value::Array(hooks) => hooks,
            other => panic!("GET /hooks is not a JSON array: {other}"),
        }
    }

    /// Stops the process and waits for it (the journal stays).
    pub fn stop(&mut self) {
        self.proc.stop(Duration::from_secs(5));
    }
}
