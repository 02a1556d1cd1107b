//! The `ankusa-store` binary on a free port, stopped on drop.

use crate::paths::workspace_bin;
use crate::process::{scratch_dir, spawn_listening, Proc};
use crate::token::{
    operator_token, receipt_key_file, run_token, EDGE_TOKENS_ENV, OLD_STORE_TOKENS_ENV,
    OPERATOR_TOKENS_ENV, RECEIPTS_ENV, RECEIPT_KEY_FILE_ENV, STORE_TOKEN_VARS,
};
use std::process::Command;
use std::time::{Duration, Instant};

/// The variables that set the store's logs and traces: a test's store has
/// none of the test process's, only those its test gives it.
pub const TELEMETRY_VARS: [&str; 7] = [
    "RUST_LOG",
    "ANKUSA_LOG",
    "ANKUSA_LOG_FORMAT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_SAMPLER",
    "OTEL_SERVICE_NAME",
];

pub struct Store {
    pub proc: Proc,
    pub port: u16,
}

/// The run's edge and operator tokens and its receipt key file, as the
/// store's environment names them: every store a test starts this way
/// checks receipts (`required`), as the intakes of [`crate::intake`] send them.
fn run_tokens() -> [(&'static str, &'static str); 3] {
    [
        (EDGE_TOKENS_ENV, run_token()),
        (OPERATOR_TOKENS_ENV, operator_token()),
        (RECEIPT_KEY_FILE_ENV, receipt_key_file()),
    ]
}

impl Store {
    /// Starts on a free port against `redis_url` (another, if that one is
    /// taken before the store binds it); returns once `/healthz` answers
    /// (Redis need not be up: `/readyz` says whether it is).
    pub fn start(redis_url: &str) -> Store {
        Self::start_with_args(redis_url, &[])
    }

    /// [`Store::start`] with `extra_args` (e.g. `["--receipts", "accept-missing"]`).
    pub fn start_with_args(redis_url: &str, extra_args: &[&str]) -> Store {
        let env = run_tokens();
        let (proc, port) = spawn_listening(
            |port| Self::spawn_proc(port, redis_url, extra_args, &env),
            Duration::from_secs(10),
        );
        Self::healthy(proc, port)
    }

    /// [`Store::start`] with no receipt key: promotes are committed unproven,
    /// as before receipts (for an upstream that sends none).
    pub fn start_without_receipts(redis_url: &str) -> Store {
        let env = &run_tokens()[..2];
        let (proc, port) = spawn_listening(
            |port| Self::spawn_proc(port, redis_url, &[], env),
            Duration::from_secs(10),
        );
        Self::healthy(proc, port)
    }

    /// [`Store::start`] in a process allowed `descriptors` open files
    /// (`ulimit -n`, soft and hard), as a container's limit would: the store
    /// sizes its connection limit from it.
    pub fn start_limited(redis_url: &str, descriptors: u64) -> Store {
        let env = run_tokens();
        let (proc, port) = spawn_listening(
            |port| {
                Self::spawn_bin(
                    &workspace_bin("ankusa-store"),
                    port,
                    redis_url,
                    &[],
                    &env,
                    Some(descriptors),
                )
            },
            Duration::from_secs(10),
        );
        Self::healthy(proc, port)
    }

    /// Starts on `port` with `extra_args` (e.g. `["--settle-window-ms", "50"]`),
    /// accepting the run's edge token ([`crate::token::run_token`]), which the
    /// edges of [`crate::envoy`] present, and its operator token
    /// ([`crate::token::operator_token`]), which tests changing overrides use.
    pub fn start_on(port: u16, redis_url: &str, extra_args: &[&str]) -> Store {
        Self::start_with_env(port, redis_url, extra_args, &run_tokens())
    }

    /// [`Store::start_on`] accepting `edge_tokens` (an
    /// `ANKUSA_STORE_EDGE_TOKENS` list: `<token> nodes=… live=…` items,
    /// comma separated) as its edge tokens instead of the run's, with the
    /// run's operator token and receipt key.
    pub fn start_with_edge_tokens(
        port: u16,
        redis_url: &str,
        extra_args: &[&str],
        edge_tokens: &str,
    ) -> Store {
        let mut env = run_tokens();
        env[0] = (EDGE_TOKENS_ENV, edge_tokens);
        Self::start_with_env(port, redis_url, extra_args, &env)
    }

    /// Starts on `port` with `extra_args` and only `env` added to the
    /// environment (no token unless `env` gives one).
    pub fn start_with_env(
        port: u16,
        redis_url: &str,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> Store {
        let mut proc = Self::spawn_proc(port, redis_url, extra_args, env);
        proc.wait_for_port(port, Duration::from_secs(10));
        Self::healthy(proc, port)
    }

    /// [`Store::start`] with another build of the store: `binary` (a
    /// previous release's, for the mixed-version run).
    pub fn start_binary(binary: &std::path::Path, redis_url: &str) -> Store {
        let env = run_tokens();
        let (proc, port) = spawn_listening(
            |port| Self::spawn_bin(binary, port, redis_url, &[], &env, None),
            Duration::from_secs(10),
        );
        Self::healthy(proc, port)
    }

    fn spawn_proc(port: u16, redis_url: &str, extra_args: &[&str], env: &[(&str, &str)]) -> Proc {
        Self::spawn_bin(
            &workspace_bin("ankusa-store"),
            port,
            redis_url,
            extra_args,
            env,
            None,
        )
    }

    /// `binary` on `port`; with `descriptors`, under that open-file limit.
    fn spawn_bin(
        binary: &std::path::Path,
        port: u16,
        redis_url: &str,
        extra_args: &[&str],
        env: &[(&str, &str)],
        descriptors: Option<u64>,
    ) -> Proc {
        let listen = format!("127.0.0.1:{port}");
        let mut cmd = match descriptors {
            None => Command::new(binary),
            Some(n) => {
                // The shell sets the limit, then becomes the store (same pid).
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                    .arg(binary);
                sh
            }
        };
        cmd.args(["--listen", &listen, "--redis-url", redis_url])
            .args(extra_args)
            .env_remove(OLD_STORE_TOKENS_ENV);
        for var in STORE_TOKEN_VARS
            .iter()
            .chain(&TELEMETRY_VARS)
            .chain(&[RECEIPT_KEY_FILE_ENV, RECEIPTS_ENV])
        {
            cmd.env_remove(var);
        }
        cmd.envs(env.iter().copied());
        let log = scratch_dir("store").join(format!("store-{port}.log"));
        Proc::spawn("ankusa-store", cmd, &log)
    }

    /// The store `proc` listening on `port`, once `/healthz` answers 200.
    fn healthy(proc: Proc, port: u16) -> Store {
        let store = Store { proc, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !matches!(crate::http::get(&store.url_of("/healthz")), Ok(r) if r.status == 200) {
            assert!(
                Instant::now() < deadline,
                "ankusa-store /healthz never answered 200:\n{}",
                store.proc.log_tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        store
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `http://127.0.0.1:PORT/path`.
    pub fn url_of(&self, path: &str) -> String {
        format!("{}{path}", self.url())
    }

    /// Waits up to `timeout` for `/readyz` to answer 200 (Redis reachable).
    pub fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if matches!(crate::http::get(&self.url_of("/readyz")), Ok(r) if r.status == 200) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The value of one series on `/metrics`, named as exposed, labels sorted by
    /// name: `ankusa_store_requests_total{endpoint="hit",result="ok"}`. 0 if absent.
    pub fn metric(&self, name_with_labels: &str) -> f64 {
        let text = crate::http::get(&self.url_of("/metrics"))
            .map(|r| r.text())
            .unwrap_or_default();
        crate::metrics::metric_value(&text, name_with_labels)
    }
}
