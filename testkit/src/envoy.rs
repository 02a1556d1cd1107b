//! A real Envoy edge with the Ankusa filter, on free loopback ports.
//!
//! The bootstrap is `envoy/edge.template.yaml` with its `{{NAME}}`
//! placeholders filled in (see [`bootstrap`]), written to a scratch folder
//! beside Envoy's log.

pub mod bootstrap;
pub mod shell;

pub use bootstrap::{host_env_keys, render, split_lds, validate, validate_with_env, TEMPLATE};
pub use shell::Shell;

use crate::access_log;
use crate::http::{self, Response};
use crate::paths;
use crate::ports::free_port;
use crate::process::{scratch_dir, Proc};
use crate::token::{run_token, EDGE_TOKEN_ENV};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What one edge listens on and talks to.
#[derive(Clone, Debug)]
pub struct EdgeSpec {
    /// Envoy's node id (`--service-node`); the filter uses it when its config names no node.
    pub node: String,
    pub listen_port: u16,
    pub admin_port: u16,
    /// The `intake` cluster's one host, 127.0.0.1:`upstream_port`.
    pub upstream_port: u16,
    /// The `ankusa_store` cluster's one host, 127.0.0.1:`store_port`.
    pub store_port: u16,
    /// Envoy worker threads (`--concurrency`).
    pub concurrency: u32,
    /// The plugin configuration (the filter's JSON).
    pub filter_config: serde_json::Value,
    /// Environment variables for the filter's VM: set in Envoy's process
    /// environment and passed by name through `vm_config.environment_variables.host_env_keys`,
    /// so their values (signing secrets) never appear in the bootstrap or `config_dump`.
    pub vm_env: Vec<(String, String)>,
    /// The shell the core runs in: the proxy-wasm filter or the native
    /// module (from `ANKUSA_SHELL`, see [`Shell::from_env`]).
    pub shell: Shell,
}

impl EdgeSpec {
    /// A spec on fresh free ports with 2 workers.
    pub fn new(
        node: &str,
        upstream_port: u16,
        store_port: u16,
        filter_config: serde_json::Value,
    ) -> EdgeSpec {
        EdgeSpec {
            node: node.to_string(),
            listen_port: free_port(),
            admin_port: free_port(),
            upstream_port,
            store_port,
            concurrency: 2,
            filter_config,
            vm_env: Vec::new(),
            shell: Shell::from_env(),
        }
    }
}

/// A running Envoy, stopped (by PID) when dropped.
pub struct Edge {
    pub proc: Proc,
    pub spec: EdgeSpec,
    /// Where the rendered bootstrap and Envoy's log live.
    pub dir: PathBuf,
    /// The listener file Envoy watches, when the listener comes from file-based LDS.
    lds: Option<PathBuf>,
    /// The listener's access log, when the edge writes one ([`Edge::start_lds_logged`]).
    pub access_log: Option<PathBuf>,
}

/// How a listener reload ended, as Envoy's LDS counters tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reload {
    Accepted,
    Rejected,
}

impl Edge {
    /// Starts Envoy and waits until its admin says LIVE and its listener accepts;
    /// panics with Envoy's log tail if it exits or takes over 30 s.
    pub fn start(spec: EdgeSpec) -> Edge {
        Edge::started(spec, Edge::spawn)
    }

    /// Spawns an edge with `spawn` and waits until it is ready. A port
    /// `free_port` handed out can be taken before Envoy binds it (another
    /// test's client gets it as its ephemeral port): Envoy then exits (a
    /// static listener, the admin) or rejects the listener (from LDS),
    /// saying so. Spawned again on other ports, twice at most.
    fn started(spec: EdgeSpec, spawn: impl Fn(EdgeSpec) -> Edge) -> Edge {
        let mut edge = spawn(spec);
        for _ in 0..2 {
            if !edge.lost_a_port(Duration::from_secs(30)) {
                break;
            }
            let mut spec = edge.spec.clone();
            spec.listen_port = crate::ports::free_port();
            spec.admin_port = crate::ports::free_port();
            edge = spawn(spec);
        }
        edge.wait_ready(Duration::from_secs(30));
        edge
    }

    /// Waits until Envoy is ready or has exited (at most `timeout`);
    /// whether a port it was to listen on was taken: it exited saying so,
    /// or it is ready, said so, and its admin lists no listener there.
    fn lost_a_port(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let taken = |edge: &Edge| edge.log().contains("Address already in use");
            if !self.proc.is_running() {
                return taken(self);
            }
            let ready = http::get(&self.admin_url("/ready")).is_ok_and(|r| r.status == 200);
            if ready {
                return taken(self) && !self.has_listener();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Whether Envoy's admin lists a listener on the spec's listen port
    /// (whoever else may hold that port).
    fn has_listener(&self) -> bool {
        let at = format!("127.0.0.1:{}", self.spec.listen_port);
        http::get(&self.admin_url("/listeners")).is_ok_and(|r| r.text().contains(&at))
    }

    /// Starts Envoy without waiting (for configs that must be refused).
    pub fn spawn(spec: EdgeSpec) -> Edge {
        Edge::spawn_with(spec, |bootstrap| bootstrap)
    }

    /// [`Edge::spawn`], and the listener writes an access log in the
    /// shipped format ([`crate::access_log`]) to `access.log` in the edge's folder.
    pub fn spawn_logged(spec: EdgeSpec) -> Edge {
        Edge::spawn_inner(spec, |b| b, false, Some(run_token()), true)
    }

    /// Starts Envoy with its listener from file-based LDS, so [`Edge::reload`]
    /// can change the plugin configuration while it runs; waits until ready.
    pub fn start_lds(spec: EdgeSpec) -> Edge {
        Edge::started(spec, |spec| {
            Edge::spawn_inner(spec, |b| b, true, Some(run_token()), false)
        })
    }

    /// [`Edge::start_lds`], and the listener writes an access log
    /// ([`crate::access_log`]) in the edge's folder, kept across reloads.
    pub fn start_lds_logged(spec: EdgeSpec) -> Edge {
        Edge::started(spec, |spec| {
            Edge::spawn_inner(spec, |b| b, true, Some(run_token()), true)
        })
    }

    /// Starts Envoy without waiting, on the rendered bootstrap as `tweak` rewrites it
    /// (a test's variant of one cluster, say).
    pub fn spawn_with(spec: EdgeSpec, tweak: impl FnOnce(String) -> String) -> Edge {
        Edge::spawn_inner(spec, tweak, false, Some(run_token()), false)
    }

    /// [`Edge::spawn_with`], and waits until ready (on other ports if one was taken).
    pub fn start_with(spec: EdgeSpec, tweak: impl Fn(String) -> String) -> Edge {
        Edge::started(spec, |spec| Edge::spawn_with(spec, &tweak))
    }

    /// Starts Envoy with `token` (or none) as the store token in its
    /// environment instead of the run's, and waits until ready.
    pub fn start_with_token(spec: EdgeSpec, token: Option<&str>) -> Edge {
        Edge::started(spec, |spec| Edge::spawn_with_token(spec, token))
    }

    /// Starts Envoy with `token` as its store token (a token scoped to its
    /// node, say), with an access log when `logged`, without waiting.
    pub fn spawn_as(spec: EdgeSpec, token: &str, logged: bool) -> Edge {
        Edge::spawn_inner(spec, |b| b, false, Some(token), logged)
    }

    /// [`Edge::start_with_token`] without waiting (for a token that must be refused).
    pub fn spawn_with_token(spec: EdgeSpec, token: Option<&str>) -> Edge {
        Edge::spawn_inner(spec, |b| b, false, token, false)
    }

    /// Every edge gets the store token through Envoy's environment: the
    /// bootstrap only names the variable (`host_env_keys`), so the token is in
    /// neither the file, Envoy's command line, nor its config dump.
    fn spawn_inner(
        spec: EdgeSpec,
        tweak: impl FnOnce(String) -> String,
        lds: bool,
        token: Option<&str>,
        logged: bool,
    ) -> Edge {
        let dir = scratch_dir(&format!("edge-{}", spec.node));
        let bootstrap = dir.join("edge.yaml");
        let access_log = logged.then(|| dir.join("access.log"));
        let mut text = tweak(render(&spec, &paths::filter_wasm()));
        if let Some(path) = &access_log {
            text = access_log::with_access_log(&text, path);
        }
        let lds = lds.then(|| {
            // A folder of its own: Envoy reloads on any file moved into it.
            let folder = dir.join("lds");
            std::fs::create_dir_all(&folder)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", folder.display()));
            let file = folder.join("listener.yaml");
            let (boot, listener) = split_lds(&text, &file);
            write_file(&file, &listener);
            text = boot;
            file
        });
        write_file(&bootstrap, &text);
        let mut cmd = Command::new(paths::envoy_bin());
        cmd.arg("-c")
            .arg(&bootstrap)
            .args(["--concurrency", &spec.concurrency.to_string()])
            .args([
                "--service-node",
                &spec.node,
                "--service-cluster",
                "ankusa-edge",
            ])
            // Several edges run on one machine: no shared-memory hot restart.
            .arg("--disable-hot-restart")
            .args(["--log-level", "info", "--drain-time-s", "1"]);
        for (name, value) in &spec.vm_env {
            cmd.env(name, value);
        }
        if let Some(folder) = spec.shell.search_path() {
            cmd.env(shell::SEARCH_PATH_ENV, folder);
        }
        match token {
            Some(token) => cmd.env(EDGE_TOKEN_ENV, token),
            None => cmd.env_remove(EDGE_TOKEN_ENV),
        };
        let proc = Proc::spawn("envoy", cmd, &dir.join("envoy.log"));
        Edge {
            proc,
            spec,
            dir,
            lds,
            access_log,
        }
    }

    /// Gives the running edge `filter_config` by renaming a new listener file
    /// into place (an edge from [`Edge::start_lds`] only), and waits up to 30 s
    /// for Envoy to accept the listener (and finish warming it) or reject it.
    pub fn reload(&mut self, filter_config: serde_json::Value) -> Reload {
        let Some(file) = self.lds.clone() else {
            panic!("edge {} was not started with start_lds", self.spec.node);
        };
        let mut spec = self.spec.clone();
        spec.filter_config = filter_config;
        let mut text = render(&spec, &paths::filter_wasm());
        if let Some(path) = &self.access_log {
            text = access_log::with_access_log(&text, path);
        }
        let (_, listener) = split_lds(&text, &file);
        let counter = |name: &str| self.stat(&format!("envoy_listener_manager_lds_{name}"));
        let (accepted, rejected) = (counter("update_success"), counter("update_rejected"));
        let next = file.with_extension("next");
        write_file(&next, &listener);
        std::fs::rename(&next, &file)
            .unwrap_or_else(|e| panic!("cannot rename into {}: {e}", file.display()));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if counter("update_rejected") > rejected {
                return Reload::Rejected;
            }
            if counter("update_success") > accepted
                && self.stat("envoy_listener_manager_total_listeners_warming") == 0.0
            {
                self.spec = spec;
                return Reload::Accepted;
            }
            if Instant::now() > deadline {
                panic!(
                    "envoy {} neither took nor refused the new listener:\n{}",
                    self.spec.node,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until admin `/ready` answers 200 and the listener accepts.
    pub fn wait_ready(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let ready = http::get(&self.admin_url("/ready"))
                .map(|r| r.status == 200)
                .unwrap_or(false);
            if ready && crate::ports::is_listening(self.spec.listen_port) {
                return;
            }
            if !self.proc.is_running() {
                panic!(
                    "envoy {} exited before it was ready:\n{}",
                    self.spec.node,
                    self.log_tail()
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "envoy {} not ready within {timeout:?}:\n{}",
                    self.spec.node,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits up to `timeout` for Envoy to exit on its own; its exit code if it did.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !self.proc.is_running() {
                return self.proc.stop(Duration::ZERO).or(Some(-1));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// `http://127.0.0.1:LISTEN{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.spec.listen_port)
    }

    /// `http://127.0.0.1:ADMIN{path}`.
    pub fn admin_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.spec.admin_port)
    }

    /// POSTs `body` to `path` on the listener with `headers`.
    pub fn post(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<Response> {
        http::request(
            "POST",
            &self.url(path),
            headers,
            body,
            Duration::from_secs(10),
        )
    }

    /// `/stats/prometheus` under the names Prometheus stores, whichever the
    /// shell ([`shell::as_scraped`]: the native module's `envoy_ankusa_ankusa_*`
    /// as `ankusa_*`).
    pub fn scraped(&self) -> String {
        let text = http::get(&self.admin_url("/stats/prometheus"))
            .map(|r| r.text())
            .unwrap_or_default();
        shell::as_scraped(&text)
    }

    /// A metric from `/stats/prometheus`, by its exact name and labels as printed
    /// (`ankusa_admissions_total{outcome="admitted"}`); 0 if absent.
    pub fn stat(&self, name_with_labels: &str) -> f64 {
        crate::metrics::metric_value(&self.scraped(), name_with_labels)
    }

    /// The last 40 lines of Envoy's log.
    pub fn log_tail(&self) -> String {
        self.proc.log_tail()
    }

    /// Envoy's whole log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.proc.log).unwrap_or_default()
    }
}

fn write_file(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// A sane fleet configuration: both scopes "fleet", one tenant "acme", sources
/// "gh" (GitHub deliveries) and "stripe" (the JSON body's `id`).
pub fn fleet_filter_config() -> serde_json::Value {
    serde_json::json!({
        "sources": {
            "gh": {"tenant": "acme", "dedupe": "github"},
            "stripe": {"tenant": "acme", "dedupe": {"json": "id"}}
        },
        "rate_limits": {
            "scope": "fleet",
            "default": {"rate": 50, "burst": 100},
            "tenants": {"acme": {"rate": 500, "burst": 1000}}
        },
        "dedupe": {"scope": "fleet"},
        "fleet": {"cluster": "ankusa_store", "timeout_ms": 250}
    })
}
