//! A real Prometheus (Debian's `prometheus`) and its `promtool`, for the
//! tests of the shipped scrape config, alert rules and dashboard queries.
//!
//! Prometheus scrapes the processes the test started, on loopback, with its
//! storage in a scratch folder; it is stopped (by PID) when dropped.

use crate::http;
use crate::ports::free_port;
use crate::process::{scratch_dir, Proc};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const SETUP_HINT: &str =
    "Debian's `prometheus` package (prometheus, promtool) is not installed: run scripts/setup.sh";

/// The path of `name` (`prometheus` or `promtool`) on PATH; panics with the
/// setup hint when it is missing, so a test never passes by skipping.
pub fn require(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| panic!("{name} not found on PATH. {SETUP_HINT}"))
}

/// `promtool ARGS…` with `stdin`: (exit code, stdout + stderr).
pub fn promtool(args: &[&str], stdin: Option<&str>) -> (i32, String) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(require("promtool"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run promtool: {e}"));
    if let Some(mut pipe) = child.stdin.take() {
        if let Some(text) = stdin {
            pipe.write_all(text.as_bytes())
                .expect("write promtool stdin");
        }
    }
    let out = child.wait_with_output().expect("wait for promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// A running Prometheus on a free loopback port.
pub struct Prometheus {
    pub proc: Proc,
    pub port: u16,
    pub dir: PathBuf,
}

impl Prometheus {
    /// Starts with `config` (YAML text) written beside copies of `files`
    /// (so a relative `rule_files` entry finds them), and waits for `/-/ready`.
    pub fn start(config: &str, files: &[&Path]) -> Prometheus {
        let bin = require("prometheus");
        let port = free_port();
        let dir = scratch_dir("prometheus");
        for file in files {
            let name = file.file_name().unwrap_or_default();
            std::fs::copy(file, dir.join(name))
                .unwrap_or_else(|e| panic!("copy {}: {e}", file.display()));
        }
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).expect("write prometheus.yml");
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn");
        let mut proc = Proc::spawn("prometheus", cmd, &dir.join("prometheus.log"));
        proc.wait_for_port(port, Duration::from_secs(30));
        let prometheus = Prometheus { proc, port, dir };
        let ready = prometheus.wait(
            Duration::from_secs(30),
            || matches!(http::get(&prometheus.url("/-/ready")), Ok(r) if r.status == 200),
        );
        assert!(
            ready,
            "prometheus never became ready:\n{}",
            prometheus.proc.log_tail()
        );
        prometheus
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `GET /api/v1/query?query=…`: the JSON answer, whatever its status.
    pub fn query(&self, promql: &str) -> serde_json::Value {
        let url = self.url(&format!("/api/v1/query?query={}", encode(promql)));
        match http::get(&url) {
            Ok(r) => serde_json::from_slice(&r.body).unwrap_or_else(|e| {
                panic!(
                    "prometheus answered {} with non-JSON ({e}): {}",
                    r.status,
                    r.text()
                )
            }),
            Err(e) => panic!("GET {url}: {e}\n{}", self.proc.log_tail()),
        }
    }

    /// The instant vector of `promql` as (labels, value) pairs; panics on an error answer.
    pub fn vector(&self, promql: &str) -> Vec<(serde_json::Value, f64)> {
        let answer = self.query(promql);
        assert_eq!(answer["status"], "success", "query {promql}: {answer}");
        answer["data"]["result"]
            .as_array()
            .map(|series| {
                series
                    .iter()
                    .map(|s| {
                        let value = s["value"][1]
                            .as_str()
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(f64::NAN);
                        (s["metric"].clone(), value)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// `GET /api/v1/rules`, the JSON answer.
    pub fn rules(&self) -> serde_json::Value {
        let r = http::get(&self.url("/api/v1/rules")).expect("GET /api/v1/rules");
        serde_json::from_slice(&r.body).expect("rules JSON")
    }

    /// Polls `ok` every 200 ms until it holds or `timeout` passes.
    pub fn wait(&self, timeout: Duration, mut ok: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if ok() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Percent-encodes a query parameter (everything but unreserved characters).
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_promql_for_a_query_string() {
        assert_eq!(
            encode(r#"sum by (le) (rate(a{b="c"}[1m]))"#),
            "sum%20by%20%28le%29%20%28rate%28a%7Bb%3D%22c%22%7D%5B1m%5D%29%29"
        );
    }
}
