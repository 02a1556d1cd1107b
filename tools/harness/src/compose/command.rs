//! The two command lines a row across hosts drives: Compose, for a project
//! as a whole (`up`, `down`, one service replaced), and the Docker CLI, for
//! one container at a time (kill, pause, a network cut), which answers in
//! milliseconds where Compose v1 takes a second.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// One Compose project: which CLI runs it, its files, its env file and the
/// variables every one of its commands gets.
#[derive(Clone, Debug)]
pub struct Compose {
    /// `["docker", "compose"]` or `["docker-compose"]`.
    cli: Vec<String>,
    pub project: String,
    /// Compose files, the first one the base (paths from `root`).
    files: Vec<String>,
    env_file: Option<PathBuf>,
    env: Vec<(String, String)>,
    /// Where the files' relative paths start (the workspace).
    root: PathBuf,
}

impl Compose {
    /// `docker compose` when `docker compose version` answers, else
    /// `docker-compose` (Compose v1).
    pub fn cli() -> Vec<String> {
        let v2 = Command::new("docker")
            .args(["compose", "version"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if v2 {
            vec!["docker".into(), "compose".into()]
        } else {
            vec!["docker-compose".into()]
        }
    }

    pub fn new(
        cli: Vec<String>,
        project: &str,
        files: &[&str],
        env_file: Option<PathBuf>,
        root: PathBuf,
    ) -> Compose {
        Compose {
            cli,
            project: project.into(),
            files: files.iter().map(|f| f.to_string()).collect(),
            env_file,
            env: Vec::new(),
            root,
        }
    }

    /// Sets `name` for every command of the project.
    pub fn set_env(&mut self, name: &str, value: &str) {
        self.env.retain(|(n, _)| n != name);
        self.env.push((name.into(), value.into()));
    }

    /// The whole command line of `args`, to run with `extra` variables on
    /// top of the project's.
    fn command(&self, args: &[&str], extra: &[(&str, &str)]) -> Command {
        let mut command = Command::new(&self.cli[0]);
        command.args(&self.cli[1..]).args(["-p", &self.project]);
        if let Some(file) = &self.env_file {
            command.arg("--env-file").arg(file);
        }
        for file in &self.files {
            command.args(["-f", file]);
        }
        command.args(args).current_dir(&self.root);
        for (name, value) in self.env.iter().map(|(n, v)| (n.as_str(), v.as_str())) {
            command.env(name, value);
        }
        for (name, value) in extra {
            command.env(name, value);
        }
        command
    }

    /// Runs `args` on the project; its standard output, or what it said on
    /// failure.
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        self.run_with(args, &[])
    }

    /// [`Compose::run`] with `extra` variables (another image tag).
    pub fn run_with(&self, args: &[&str], extra: &[(&str, &str)]) -> Result<String, String> {
        let what = format!("{} {}", self.cli.join(" "), args.join(" "));
        output(&what, self.command(args, extra))
    }
}

/// A `docker … --filter` value selecting what Compose labelled
/// `com.docker.compose.KEY=VALUE` (a project, a service, a network).
pub fn compose_label(key: &str, value: &str) -> String {
    format!("label=com.docker.compose.{key}={value}")
}

/// Runs `docker ARGS`; its standard output, or what it said on failure.
pub fn docker(args: &[&str]) -> Result<String, String> {
    let mut command = Command::new("docker");
    command.args(args);
    output(&format!("docker {}", args.join(" ")), command)
}

/// `redis-cli ARGS` in container `id`, its answer trimmed.
pub fn redis_cli(id: &str, args: &[&str]) -> Result<String, String> {
    let mut command = vec!["exec", id, "redis-cli"];
    command.extend_from_slice(args);
    docker(&command).map(|out| out.trim().to_string())
}

/// Runs `docker ARGS` with `input` on its standard input (a Dockerfile for
/// `docker build -`).
pub fn docker_fed(args: &[&str], input: &str) -> Result<String, String> {
    use std::io::Write;
    let what = format!("docker {}", args.join(" "));
    let mut child = Command::new("docker")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| format!("{what}: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{what}: {e}"))?;
    said(&what, out)
}

fn output(what: &str, mut command: Command) -> Result<String, String> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    said(what, out)
}

/// A command's standard output when it succeeded, else the end of what it
/// said on its standard error.
fn said(what: &str, out: std::process::Output) -> Result<String, String> {
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let said = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = said.lines().rev().take(15).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(format!(
        "{what} failed ({}):\n{}",
        out.status,
        tail.join("\n")
    ))
}

/// The host port of `docker port` (or `docker-compose port`) output: the
/// first IPv4 binding (`127.0.0.1:32768`), else the first of any family
/// (`[::]:32768`, `:::32768`).
pub fn published_port(output: &str) -> Option<u16> {
    let ports: Vec<(bool, u16)> = output
        .lines()
        .filter_map(|line| {
            let (host, port) = line.trim().rsplit_once(':')?;
            let ipv4 = !host.contains(':') && !host.contains('[');
            Some((ipv4, port.trim().parse().ok()?))
        })
        .collect();
    ports
        .iter()
        .find(|(ipv4, _)| *ipv4)
        .or(ports.first())
        .map(|(_, port)| *port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_port_prefers_the_ipv4_binding() {
        assert_eq!(published_port("127.0.0.1:32801\n"), Some(32801));
        assert_eq!(
            published_port("[::]:49154\n0.0.0.0:49153\n"),
            Some(49153),
            "docker port lists both families"
        );
        assert_eq!(published_port(":::49155\n"), Some(49155));
        assert_eq!(published_port(""), None);
        assert_eq!(published_port("no public port\n"), None);
    }

    #[test]
    fn every_command_names_the_project_its_env_file_and_files() {
        let mut compose = Compose::new(
            vec!["docker-compose".into()],
            "ankusa-cf-1-x",
            &["docker-compose.yml", "docker/compose.faults.yml"],
            Some("docker/offline.env".into()),
            PathBuf::from("/repo"),
        );
        compose.set_env("ANKUSA_IMAGE_TAG", "dev");
        compose.set_env("ANKUSA_IMAGE_TAG", "next");
        let command = compose.command(&["up", "-d"], &[]);
        let args: Vec<_> = command.get_args().map(|a| a.to_string_lossy()).collect();
        assert_eq!(
            args.join(" "),
            "-p ankusa-cf-1-x --env-file docker/offline.env -f docker-compose.yml \
             -f docker/compose.faults.yml up -d"
        );
        let tag: Vec<_> = command
            .get_envs()
            .filter(|(n, _)| *n == "ANKUSA_IMAGE_TAG")
            .collect();
        assert_eq!(tag.len(), 1, "{tag:?}");
    }
}
