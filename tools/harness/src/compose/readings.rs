//! What a row reads of its stack, as its target: the published edges and
//! intake, the edges' Envoy pids and access logs (their standard output),
//! and the store's own errors from its `/metrics`, read from inside its
//! container since it publishes no port; and an edge's access log kept
//! when it is replaced.

use super::command::{compose_label, docker};
use super::stack::{Stack, EDGES};
use crate::faults::target::{hit_errors, Account, Budget, Target};
use ankusa_testkit::access_log::{parse_line, Held};

/// The host pid of a running container's first process.
pub(super) fn pid_of(id: &str) -> Option<u32> {
    docker(&["inspect", "-f", "{{.State.Pid}}", id])
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|pid| *pid != 0)
}

/// The hooks edge container `id` held, from its access log (its
/// standard output; the healthchecks' `GET /ankusa/ready` left out),
/// with its Envoy's `pid`.
fn held_by(id: &str, pid: u32) -> Vec<(Held, u32)> {
    let mut command = std::process::Command::new("docker");
    command
        .args(["logs", id])
        .stderr(std::process::Stdio::null());
    let out = command.output().map(|o| o.stdout).unwrap_or_default();
    String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| l.contains("\"POST "))
        .filter_map(parse_line)
        .map(|h| (h, pid))
        .collect()
}

/// The store's `/metrics`, read from inside replica `id` (it publishes no port).
fn store_metrics(id: &str) -> String {
    let fetch = "exec 3<>/dev/tcp/127.0.0.1/7070 && \
                 printf 'GET /metrics HTTP/1.0\\r\\nHost: store\\r\\n\\r\\n' >&3 && cat <&3";
    docker(&["exec", id, "bash", "-c", fetch]).unwrap_or_default()
}

/// The host pids of `project`'s running edge containers' Envoy (two
/// Docker calls, whatever the number of edges).
fn edge_pids_of(project: &str) -> Vec<u32> {
    let project = compose_label("project", project);
    let listed = docker(&[
        "ps",
        "--filter",
        &project,
        "--format",
        "{{.Label \"com.docker.compose.service\"}} {{.ID}}",
    ])
    .unwrap_or_default();
    let mut ids: Vec<&str> = listed
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(service, _)| EDGES.contains(service))
        .map(|(_, id)| id)
        .collect();
    if ids.is_empty() {
        return Vec::new();
    }
    let mut args = vec!["inspect", "-f", "{{.State.Pid}}"];
    args.append(&mut ids);
    docker(&args)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .filter(|pid| *pid != 0)
        .collect()
}

impl Stack {
    /// Stops edge container `id` before it is replaced, keeping what it held.
    pub fn retire_edge(&mut self, id: &str) -> Result<(), String> {
        let pid = pid_of(id).unwrap_or(0);
        docker(&["stop", id])?;
        let held = held_by(id, pid);
        self.retired.extend(held);
        Ok(())
    }
}

impl Target for Stack {
    fn edge_urls(&self) -> Vec<String> {
        self.edge_ports
            .iter()
            .map(|(listen, _)| format!("http://127.0.0.1:{listen}"))
            .collect()
    }

    fn admin_urls(&self) -> Vec<String> {
        self.edge_ports
            .iter()
            .map(|(_, admin)| format!("http://127.0.0.1:{admin}/stats/prometheus"))
            .collect()
    }

    fn intake_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.intake_port)
    }

    fn edge_pids(&self) -> Vec<u32> {
        edge_pids_of(&self.compose.project)
    }

    /// The rolling restart replaces edges within its fault: their pids are
    /// looked up again every second.
    fn edge_pid_finder(&self) -> Option<Box<dyn Fn() -> Vec<u32> + Send>> {
        let project = self.compose.project.clone();
        Some(Box::new(move || edge_pids_of(&project)))
    }

    fn held(&self) -> Vec<(Held, u32)> {
        let mut held = self.retired.clone();
        for edge in EDGES {
            for id in self.containers(edge).unwrap_or_default() {
                if let Some(pid) = pid_of(&id) {
                    held.extend(held_by(&id, pid));
                }
            }
        }
        held
    }

    fn store_hit_errors(&self) -> u64 {
        self.containers("store")
            .unwrap_or_default()
            .iter()
            .map(|id| hit_errors(&store_metrics(id)))
            .sum()
    }

    fn budget(&self) -> Budget {
        self.budget
    }

    fn account(&mut self) -> Account {
        std::mem::take(&mut self.account)
    }
}
