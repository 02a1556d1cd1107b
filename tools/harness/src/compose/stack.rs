//! One row's Compose stack: `docker-compose.yml` with the fault rows'
//! override (and any the row adds) up in a project of its own, on loopback
//! ports, with secrets made for it. Its `down -v --remove-orphans` runs
//! when it is dropped, and, for stacks still up, on a panic or a signal
//! ([`down_every_stack`]). What a row reads of it is in `readings`.

use super::command::{compose_label, docker, published_port, Compose};
use super::edge_config;
use crate::faults::target::{Account, Budget};
use ankusa_testkit::access_log::Held;
use ankusa_testkit::ports::free_port;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The overrides every stack runs with (see the file).
pub const FAULTS_FILE: &str = "docker/compose.faults.yml";
/// The Redis Cluster profile's override.
pub const CLUSTER_FILE: &str = "docker/compose.cluster.yml";
/// The edges, in the order the rows name them (edge 1 first).
pub const EDGES: [&str; 2] = ["edge-1", "edge-2"];
/// The longest `up` may take to have every container healthy.
const HEALTHY_WITHIN: Duration = Duration::from_secs(120);

/// The label of an image made for one stack (the rolling restart's), whose
/// value is the project: such images are removed with the stack.
pub const IMAGE_LABEL: &str = "org.ankusa.stack";

/// Stacks up now, so a panic or a signal can take them down.
static LIVE: Mutex<Vec<Compose>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<Compose>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where this process's stacks keep their secrets and rendered edge
/// config, a folder a stack, removed with it.
pub fn scratch_root() -> PathBuf {
    std::env::temp_dir().join(format!("ankusa-cf-{}", std::process::id()))
}

/// Takes down every stack still up, and removes their secrets (for
/// `children::on_abrupt_exit`, and at the end of a run).
pub fn down_every_stack() {
    let stacks: Vec<Compose> = live().drain(..).collect();
    for compose in stacks {
        eprintln!("[compose-faults] down -v {}", compose.project);
        take_down(&compose);
    }
    let _ = std::fs::remove_dir_all(scratch_root());
}

/// `down -v --remove-orphans`, then the images made for the project.
fn take_down(compose: &Compose) {
    if let Err(e) = compose.run(&["down", "-v", "--remove-orphans"]) {
        eprintln!("[compose-faults] {e}");
    }
    let label = format!("label={IMAGE_LABEL}={}", compose.project);
    let images = docker(&["image", "ls", "-q", "--filter", &label]).unwrap_or_default();
    for image in images.lines() {
        let _ = docker(&["rmi", "-f", image]);
    }
}

/// What a row's stack is made of beyond the base and the fault override.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    /// More override files (the Cluster profile's).
    pub overrides: Vec<&'static str>,
    /// Store replicas (`--scale store=N`; 0 counts as 1).
    pub store_replicas: usize,
}

/// Where a stack runs and what every stack of a run shares.
#[derive(Clone, Debug)]
pub struct Setting {
    /// `docker compose` or `docker-compose`.
    pub cli: Vec<String>,
    /// The workspace (docker-compose.yml, envoy/edge.yaml, docker/).
    pub root: PathBuf,
    pub env_file: Option<PathBuf>,
}

/// A project up, and what a row reads of it.
pub struct Stack {
    pub compose: Compose,
    dir: PathBuf,
    /// Each edge's listener and admin port on 127.0.0.1.
    pub(super) edge_ports: Vec<(u16, u16)>,
    pub(super) intake_port: u16,
    /// The GitHub signing secret the edges verify `gh` with.
    pub secret: String,
    pub(super) budget: Budget,
    /// Hooks held by containers since replaced, with their pid.
    pub(super) retired: Vec<(Held, u32)>,
    pub account: Account,
}

impl Stack {
    /// Brings `project` up in `shape` and waits until every container is
    /// healthy (the one-shot ones exited 0).
    pub fn up(setting: &Setting, project: &str, shape: &Shape) -> Result<Stack, String> {
        let dir = scratch_root().join(project);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let secrets = dir.join("secrets");
        let made = std::process::Command::new("bash")
            .arg(setting.root.join("docker/make-secrets.sh"))
            .arg(&secrets)
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("cannot run docker/make-secrets.sh: {e}"))?;
        if !made.success() {
            return Err(format!(
                "docker/make-secrets.sh {} failed",
                secrets.display()
            ));
        }
        let secret = first_value(&secrets.join("gh_signing_secret"))?;
        let shipped = std::fs::read_to_string(setting.root.join("envoy/edge.yaml"))
            .map_err(|e| format!("envoy/edge.yaml: {e}"))?;
        let rendered = edge_config::render(&shipped)?;
        let budget = edge_config::budget(&rendered)?;
        let config = dir.join("edge.yaml");
        std::fs::write(&config, rendered).map_err(|e| format!("{}: {e}", config.display()))?;

        let mut files = vec!["docker-compose.yml", FAULTS_FILE];
        files.extend(shape.overrides.iter().copied());
        let mut compose = Compose::new(
            setting.cli.clone(),
            project,
            &files,
            setting.env_file.clone(),
            setting.root.clone(),
        );
        // Every published port is chosen here, so Docker allocates none of
        // its own that could take one of them, and a replaced edge comes
        // back on the port the provider sends to.
        let edge_ports: Vec<(u16, u16)> =
            EDGES.iter().map(|_| (free_port(), free_port())).collect();
        let intake_port = free_port();
        let path = |p: &Path| p.to_string_lossy().into_owned();
        compose.set_env("ANKUSA_SECRETS_DIR", &path(&secrets));
        compose.set_env("ANKUSA_FAULTS_EDGE_CONFIG", &path(&config));
        compose.set_env("ANKUSA_EDGES_IP", "127.0.0.1");
        for (i, (listen, admin)) in edge_ports.iter().enumerate() {
            compose.set_env(&format!("ANKUSA_EDGE_{}_PORT", i + 1), &listen.to_string());
            compose.set_env(
                &format!("ANKUSA_EDGE_{}_ADMIN_PORT", i + 1),
                &admin.to_string(),
            );
        }
        compose.set_env("ANKUSA_INTAKE_PORT", &intake_port.to_string());
        compose.set_env("ANKUSA_PROMETHEUS_PORT", &free_port().to_string());

        live().push(compose.clone());
        let stack = Stack {
            compose,
            dir,
            edge_ports,
            intake_port,
            secret,
            budget,
            retired: Vec::new(),
            account: Account::default(),
        };
        // Prometheus and the provider's container stay down: the rows send
        // from the host and read the edges' gauges themselves, and two
        // cores have none to spare.
        let stores = format!("store={}", shape.store_replicas.max(1));
        stack.compose.run(&[
            "up",
            "-d",
            "--scale",
            "provider=0",
            "--scale",
            "prometheus=0",
            "--scale",
            &stores,
        ])?;
        stack.wait_healthy(&stack.containers_all()?)?;
        stack.check_ports()?;
        Ok(stack)
    }

    /// `docker LIST` (`ps -a`, `network ls`) of what Compose labelled
    /// `key=value` in the project, a line each in `format`.
    fn list(&self, list: &[&str], key: &str, value: &str, format: &str) -> Result<String, String> {
        let (project, label) = (
            compose_label("project", &self.compose.project),
            compose_label(key, value),
        );
        let mut args = list.to_vec();
        args.extend(["--filter", &project, "--filter", &label, "--format", format]);
        docker(&args)
    }

    /// The ids of `service`'s containers, stopped ones included, by replica
    /// number.
    pub fn containers(&self, service: &str) -> Result<Vec<String>, String> {
        let listed = self.list(
            &["ps", "-a"],
            "service",
            service,
            "{{.Label \"com.docker.compose.container-number\"}} {{.ID}}",
        )?;
        let mut ids: Vec<(u32, String)> = listed
            .lines()
            .filter_map(|l| {
                let (n, id) = l.split_once(' ')?;
                Some((n.parse().unwrap_or(0), id.to_string()))
            })
            .collect();
        ids.sort();
        Ok(ids.into_iter().map(|(_, id)| id).collect())
    }

    /// The Docker name of the network docker-compose.yml calls `name`.
    pub fn network(&self, name: &str) -> Result<String, String> {
        let listed = self.list(&["network", "ls"], "network", name, "{{.Name}}")?;
        listed
            .lines()
            .next()
            .map(str::to_string)
            .ok_or_else(|| format!("{} has no network {name}", self.compose.project))
    }

    /// The one container of `service`.
    pub fn container(&self, service: &str) -> Result<String, String> {
        self.containers(service)?
            .into_iter()
            .next()
            .ok_or_else(|| format!("{} has no {service} container", self.compose.project))
    }

    fn containers_all(&self) -> Result<Vec<String>, String> {
        let project = compose_label("project", &self.compose.project);
        let listed = docker(&["ps", "-a", "--filter", &project, "--format", "{{.ID}}"])?;
        Ok(listed.lines().map(str::to_string).collect())
    }

    /// Waits until every one of `ids` is healthy, or has exited 0 when it
    /// has no healthcheck (a one-shot service).
    pub fn wait_healthy(&self, ids: &[String]) -> Result<(), String> {
        let deadline = Instant::now() + HEALTHY_WITHIN;
        loop {
            let mut waiting = Vec::new();
            for id in ids {
                let state = docker(&[
                    "inspect", "-f",
                    "{{.Name}} {{.State.Status}} {{.State.ExitCode}} {{if .State.Health}}{{.State.Health.Status}}{{end}}",
                    id,
                ])?;
                let fields: Vec<&str> = state.split_whitespace().collect();
                match fields.as_slice() {
                    [_, "running", _, "healthy"] | [_, "exited", "0"] => {}
                    [name, "exited", code, ..] => {
                        return Err(format!("{name} exited {code}:\n{}", self.logs_tail(id)))
                    }
                    _ => waiting.push(state.trim().to_string()),
                }
            }
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "not healthy within {HEALTHY_WITHIN:?}: {}",
                    waiting.join("; ")
                ));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The last lines a container wrote, for an error message.
    pub fn logs_tail(&self, id: &str) -> String {
        docker(&["logs", "--tail", "30", id]).unwrap_or_default()
    }

    /// The host port `docker port` says `service`'s `port` is published on.
    pub fn published(&self, service: &str, port: u16) -> Result<u16, String> {
        let out = docker(&["port", &self.container(service)?, &format!("{port}/tcp")])?;
        published_port(&out).ok_or_else(|| format!("{service}:{port} is not published: {out}"))
    }

    /// Checks every port chosen for the stack is the one Docker published.
    fn check_ports(&self) -> Result<(), String> {
        let mut wanted = vec![("intake", 8080, self.intake_port)];
        for (edge, (listen, admin)) in EDGES.iter().zip(&self.edge_ports) {
            wanted.push((edge, 10000, *listen));
            wanted.push((edge, 9901, *admin));
        }
        for (service, port, chosen) in wanted {
            let published = self.published(service, port)?;
            if published != chosen {
                return Err(format!(
                    "{service}:{port} is published on {published}, not on {chosen}"
                ));
            }
        }
        Ok(())
    }

    /// Brings the stack down (volumes and all), once.
    fn down(&mut self) {
        let mut live = live();
        let Some(i) = live.iter().position(|c| c.project == self.compose.project) else {
            return;
        };
        live.remove(i);
        drop(live);
        take_down(&self.compose);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        self.down();
    }
}

/// The first line of a secret file that is neither blank nor a `#` comment
/// (what `docker/bin/ankusa-secret-env` hands a container).
fn first_value(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .ok_or_else(|| format!("{} holds no value", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_its_first_line_that_is_not_a_comment() {
        let dir = std::env::temp_dir().join(format!("ankusa-cf-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("s");
        std::fs::write(&file, "# rotated 2026-01\n\n  whsec_abc  \nwhsec_old\n").expect("write");
        assert_eq!(first_value(&file).expect("value"), "whsec_abc");
        std::fs::write(&file, "# none\n").expect("write");
        assert!(first_value(&file).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
