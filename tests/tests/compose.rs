//! docker-compose.yml for users: valid, every file it mounts or builds from
//! exists, and every Envoy config it mounts passes `envoy --mode validate`
//! as the container will see it. (No Docker engine here: nothing is run.)

use ankusa_testkit::paths::{envoy_bin, workspace_root};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the test needs of one service in `docker-compose config`'s output.
#[derive(Default, Debug)]
struct Service {
    image: Option<String>,
    command: Vec<String>,
    /// (host path, container path) of bind mounts.
    binds: Vec<(PathBuf, String)>,
    dockerfile: Option<String>,
    context: Option<PathBuf>,
}

/// `docker-compose config`, or None (with a note) when docker-compose is absent.
fn normalized_config() -> Option<String> {
    let root = workspace_root();
    let out = match Command::new("docker-compose")
        .arg("config")
        .current_dir(&root)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED: docker-compose is not installed (scripts/setup.sh installs it)");
            return None;
        }
        Err(e) => panic!("cannot run docker-compose: {e}"),
    };
    assert!(
        out.status.success(),
        "docker-compose config failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Reads the services out of the normalized YAML (two-space indents, block
/// lists), which is all `docker-compose config` prints.
fn services(yaml: &str) -> BTreeMap<String, Service> {
    let mut all: BTreeMap<String, Service> = BTreeMap::new();
    let (mut in_services, mut current, mut key) = (false, String::new(), String::new());
    for line in yaml.lines() {
        let indent = line.len() - line.trim_start().len();
        let text = line.trim();
        match indent {
            0 => in_services = text == "services:",
            2 if in_services => {
                current = text.trim_end_matches(':').to_string();
                all.entry(current.clone()).or_default();
            }
            4 if in_services && !text.starts_with("- ") => {
                let (k, v) = text
                    .split_once(':')
                    .map_or((text, ""), |(k, v)| (k, v.trim()));
                key = k.to_string();
                if key == "image" {
                    all.entry(current.clone()).or_default().image = Some(v.to_string());
                }
            }
            _ if in_services && indent >= 4 => {
                let service = all.entry(current.clone()).or_default();
                let item = text.strip_prefix("- ").map(str::trim);
                match (key.as_str(), item) {
                    ("command", Some(arg)) => {
                        service.command.push(arg.trim_matches('\'').to_string())
                    }
                    ("volumes", Some(mount)) if mount.starts_with('/') => {
                        let mut parts = mount.split(':');
                        let host = PathBuf::from(parts.next().unwrap_or_default());
                        service
                            .binds
                            .push((host, parts.next().unwrap_or_default().to_string()));
                    }
                    ("build", None) => {
                        if let Some(v) = text.strip_prefix("dockerfile:") {
                            service.dockerfile = Some(v.trim().to_string());
                        }
                        if let Some(v) = text.strip_prefix("context:") {
                            service.context = Some(PathBuf::from(v.trim()));
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    all
}

/// The Envoy config as the container sees it, with every mounted container
/// path replaced by its host path so Envoy on the host can follow it.
fn as_seen_on_host(config: &Path, binds: &[(PathBuf, String)]) -> String {
    let mut text = std::fs::read_to_string(config)
        .unwrap_or_else(|e| panic!("read {}: {e}", config.display()));
    for (host, container) in binds {
        text = text.replace(container.as_str(), &host.display().to_string());
    }
    text
}

#[test]
fn compose_file_is_valid_and_everything_it_mounts_exists_and_validates() {
    let Some(yaml) = normalized_config() else {
        return;
    };
    let services = services(&yaml);
    let names: Vec<&str> = services.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["edge-1", "edge-2", "intake", "provider", "redis", "store"],
        "the documented topology"
    );

    let wasm = workspace_root().join("target/wasm32-wasip1/release/ankusa_filter.wasm");
    for (name, service) in &services {
        for (host, container) in &service.binds {
            let hint = if *host == wasm {
                " — build it with `cargo build -p ankusa-filter --target wasm32-wasip1 --release` (scripts/test.sh does)"
            } else {
                ""
            };
            assert!(
                host.exists(),
                "{name} mounts {} at {container}, which does not exist{hint}",
                host.display()
            );
        }
        if let Some(dockerfile) = &service.dockerfile {
            let context = service.context.clone().unwrap_or_else(workspace_root);
            assert!(
                context.join(dockerfile).exists(),
                "{name} builds from missing {dockerfile}"
            );
        }
    }

    let edges: Vec<(&String, &Service)> = services
        .iter()
        .filter(|(_, s)| {
            s.image
                .as_deref()
                .is_some_and(|i| i.starts_with("envoyproxy/envoy:"))
        })
        .collect();
    assert_eq!(edges.len(), 2, "two Envoy edges");
    let scratch = ankusa_testkit::process::scratch_dir("compose");
    for (name, service) in edges {
        let node = service
            .command
            .iter()
            .position(|a| a == "--service-node")
            .map(|i| &service.command[i + 1]);
        assert_eq!(node, Some(name), "{name} names its own node id");
        let config = service
            .command
            .iter()
            .position(|a| a == "-c")
            .map(|i| service.command[i + 1].clone());
        let config = config.unwrap_or_else(|| panic!("{name} passes no -c config"));
        let (host, _) = service
            .binds
            .iter()
            .find(|(_, container)| *container == config)
            .unwrap_or_else(|| panic!("{name}'s config {config} is not mounted from the host"));
        let rendered = scratch.join(format!("{name}.yaml"));
        let text = as_seen_on_host(host, &service.binds);
        std::fs::write(&rendered, &text).expect("write rendered config");
        // The secrets the container gets from its env file; any value will do here.
        let secrets = ankusa_testkit::envoy::host_env_keys(&text);
        let out = Command::new(envoy_bin())
            .envs(secrets.iter().map(|n| (n, "validate-only-secret")))
            .args([
                "--mode",
                "validate",
                "--disable-hot-restart",
                "--service-node",
                name,
                "-c",
            ])
            .arg(&rendered)
            .output()
            .expect("run envoy --mode validate");
        assert!(
            out.status.success(),
            "{} (mounted by {name}) fails envoy --mode validate:\n{}{}",
            host.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn reads_services_from_normalized_yaml() {
    let yaml = "services:\n  edge-1:\n    command:\n    - envoy\n    - -c\n    - /etc/envoy/edge.yaml\n    image: envoyproxy/envoy:v1.40.0\n    volumes:\n    - /h/edge.yaml:/etc/envoy/edge.yaml:ro\n    - data:/data\n  store:\n    build:\n      context: /w\n      dockerfile: docker/rust.Dockerfile\nvolumes:\n  data: {}\n";
    let s = services(yaml);
    assert_eq!(s["edge-1"].command, ["envoy", "-c", "/etc/envoy/edge.yaml"]);
    assert_eq!(
        s["edge-1"].binds,
        [(
            PathBuf::from("/h/edge.yaml"),
            "/etc/envoy/edge.yaml".to_string()
        )]
    );
    assert_eq!(
        s["store"].dockerfile.as_deref(),
        Some("docker/rust.Dockerfile")
    );
    assert_eq!(s["store"].context, Some(PathBuf::from("/w")));
    assert_eq!(s.len(), 2);
}
