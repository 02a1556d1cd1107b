//! docker-compose.yml for users: valid, every file it mounts or builds from
//! exists, the edge image compiles the filter in a stage of its Dockerfile,
//! every Envoy config it mounts passes `envoy --mode validate` as the
//! container will see it (mounted files and files copied into the image), and
//! Prometheus scrapes the compose services and, like Grafana, listens on
//! 127.0.0.1 only. These read the files; scripts/compose-test.sh builds the
//! images and runs the stack on the Docker engine.

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
    /// The Dockerfile stage built (`build.target`).
    target: Option<String>,
    /// Published ports as printed (`127.0.0.1:9090:9090/tcp`, or `published: N` lines).
    ports: Vec<String>,
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
                    ("ports", Some(port)) => service.ports.push(port.to_string()),
                    ("build", None) => {
                        if let Some(v) = text.strip_prefix("target:") {
                            service.target = Some(v.trim().to_string());
                        }
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

/// One Dockerfile stage: its base image and its instructions (continuations joined).
#[derive(Debug, Default, Clone)]
struct Stage {
    from: String,
    lines: Vec<String>,
}

/// The named stages of a Dockerfile, each `FROM ${ARG}` read with the
/// default its global `ARG` gives (the public image).
fn stages(dockerfile: &str) -> BTreeMap<String, Stage> {
    let mut all = BTreeMap::new();
    let mut args: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut joined = String::new();
    for raw in dockerfile.lines() {
        let line = raw.trim();
        if line.starts_with('#') || (line.is_empty() && joined.is_empty()) {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            joined.push_str(head);
            continue;
        }
        joined.push_str(line);
        let instruction = std::mem::take(&mut joined);
        let words: Vec<&str> = instruction.split_whitespace().collect();
        if let (None, ["ARG", arg]) = (&current, words.as_slice()) {
            if let Some((name, value)) = arg.split_once('=') {
                args.insert(name.to_string(), value.to_string());
            }
        }
        if words.first() == Some(&"FROM") {
            let name = match words.as_slice() {
                [_, _, as_, name] if as_.eq_ignore_ascii_case("as") => name.to_string(),
                _ => words.get(1).unwrap_or(&"").to_string(),
            };
            all.insert(
                name.clone(),
                Stage {
                    from: resolve(words.get(1).unwrap_or(&""), &args),
                    lines: Vec::new(),
                },
            );
            current = Some(name);
        } else if let Some(stage) = current.as_ref().and_then(|c| all.get_mut(c)) {
            stage.lines.push(instruction);
        }
    }
    all
}

/// `${NAME}` (or `$NAME`) replaced by the global ARG's default.
fn resolve(word: &str, args: &BTreeMap<String, String>) -> String {
    let name = word
        .strip_prefix("${")
        .and_then(|w| w.strip_suffix('}'))
        .or_else(|| word.strip_prefix('$'));
    match name.and_then(|n| args.get(n)) {
        Some(value) => value.clone(),
        None => word.to_string(),
    }
}

/// `(from stage, source, destination)` of every `COPY --from=…` in `stage`.
fn copies_from_stages(stage: &Stage) -> Vec<(String, String, String)> {
    stage
        .lines
        .iter()
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            match words.as_slice() {
                ["COPY", from, src, dst] => from
                    .strip_prefix("--from=")
                    .map(|f| (f.to_string(), src.to_string(), dst.to_string())),
                _ => None,
            }
        })
        .collect()
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
        [
            "edge-1",
            "edge-2",
            "grafana",
            "intake",
            "prometheus",
            "provider",
            "redis",
            "store"
        ],
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
        .filter(|(_, s)| s.target.as_deref() == Some("edge"))
        .collect();
    assert_eq!(
        edges.len(),
        2,
        "two Envoy edges built from the `edge` stage"
    );
    let scratch = ankusa_testkit::process::scratch_dir("compose");
    for (name, service) in edges {
        // The image has the filter compiled in: map each file the edge stage
        // copies from another stage to what that stage builds on the host.
        let dockerfile = service
            .context
            .clone()
            .unwrap_or_else(workspace_root)
            .join(service.dockerfile.as_deref().unwrap_or("Dockerfile"));
        let stages = stages(&std::fs::read_to_string(&dockerfile).expect("read Dockerfile"));
        let edge_stage = stages
            .get("edge")
            .unwrap_or_else(|| panic!("{} has no `edge` stage", dockerfile.display()));
        assert!(
            edge_stage.from.starts_with("envoyproxy/envoy:v1.40."),
            "the edge image is Envoy 1.40: {}",
            edge_stage.from
        );
        let mut files = service.binds.clone();
        for (from, _src, dst) in copies_from_stages(edge_stage) {
            let builder = stages
                .get(&from)
                .unwrap_or_else(|| panic!("the edge stage copies from missing stage {from}"));
            let script = builder.lines.join("\n");
            assert!(
                script.contains("rustup target add wasm32-wasip1")
                    && script.contains("-p ankusa-filter --target wasm32-wasip1"),
                "stage {from} does not compile the filter for wasm32-wasip1:\n{script}"
            );
            assert!(
                wasm.exists(),
                "{name}'s image holds the filter at {dst}; to validate its config here, build it with `cargo build -p ankusa-filter --target wasm32-wasip1 --release` (scripts/test.sh does)"
            );
            files.push((wasm.clone(), dst));
        }
        assert!(
            files.iter().any(|(host, _)| *host == wasm),
            "{name} has no filter: neither mounted nor copied into its image"
        );
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
        let text = as_seen_on_host(host, &files);
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

/// Each service's lines (below its name) in `docker-compose config`'s output.
fn service_blocks(yaml: &str) -> BTreeMap<String, Vec<String>> {
    let mut all: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut in_services, mut current) = (false, None::<String>);
    for line in yaml.lines() {
        let indent = line.len() - line.trim_start().len();
        match indent {
            0 => {
                in_services = line.trim() == "services:";
                current = None;
            }
            2 if in_services => current = Some(line.trim().trim_end_matches(':').to_string()),
            _ => {
                if let Some(name) = &current {
                    all.entry(name.clone()).or_default().push(line.to_string());
                }
            }
        }
    }
    all
}

/// A published port: the host address it is bound to (None: every
/// interface) and the container port.
#[derive(Debug, PartialEq, Eq)]
struct Published {
    host_ip: Option<String>,
    target: u16,
}

/// The `ports:` of one service block, in the short (`ip:host:container/tcp`)
/// or long (`published:`, `target:`, `host_ip:`) form.
fn published(block: &[String]) -> Vec<Published> {
    let mut out: Vec<Published> = Vec::new();
    let mut in_ports = false;
    for line in block {
        let indent = line.len() - line.trim_start().len();
        let text = line.trim();
        // Keys sit at 4 spaces, and so do their block-list items.
        if indent == 4 && !text.starts_with("- ") {
            in_ports = text == "ports:";
            continue;
        }
        if !in_ports {
            continue;
        }
        let (item, text) = match text.strip_prefix("- ") {
            Some(rest) => (true, rest.trim()),
            None => (false, text),
        };
        let number = |v: &str| {
            v.trim()
                .trim_matches('\'')
                .trim_matches('"')
                .parse::<u16>()
                .ok()
        };
        if item && !text.contains(": ") && !text.ends_with(':') {
            // Short form: [ip:]host:container[/proto].
            let spec = text.trim_matches('\'').trim_matches('"');
            let spec = spec.split('/').next().unwrap_or(spec);
            let parts: Vec<&str> = spec.split(':').collect();
            let target = parts.last().and_then(|p| number(p)).unwrap_or(0);
            let host_ip = (parts.len() == 3).then(|| parts[0].to_string());
            out.push(Published { host_ip, target });
            continue;
        }
        if item {
            out.push(Published {
                host_ip: None,
                target: 0,
            });
        }
        let Some(last) = out.last_mut() else { continue };
        if let Some((k, v)) = text.split_once(':') {
            match k.trim() {
                "target" => last.target = number(v).unwrap_or(0),
                "host_ip" => last.host_ip = Some(v.trim().to_string()),
                _ => {}
            }
        }
    }
    out
}

/// The store publishes nothing, the Envoy admin and the intake's listing
/// only on the host's loopback; the tokens come from Compose secrets (the
/// edges get the edge token only, the operator token stays in the store,
/// the receipt key goes to the store and the intake alone) and no token
/// literal sits in the file.
#[test]
fn compose_publishes_no_store_and_no_admin_on_every_interface_and_holds_no_token() {
    let raw = std::fs::read_to_string(workspace_root().join("docker-compose.yml"))
        .expect("read docker-compose.yml");
    for line in raw.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
        let lower = line.to_ascii_lowercase();
        assert!(
            !lower.contains("bearer") && !lower.contains("authorization"),
            "a credential in docker-compose.yml: {line}"
        );
        // A store token variable (ANKUSA_STORE_TOKEN, ANKUSA_STORE_EDGE_TOKEN_FILE,
        // ANKUSA_STORE_OPERATOR_TOKENS, …) may only be given a value read
        // from a secret.
        for (at, _) in line.match_indices("ANKUSA_STORE_") {
            let rest = &line[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let (name, rest) = rest.split_at(end);
            if !name.contains("TOKEN") && !name.contains("KEY") {
                continue;
            }
            if let Some(value) = rest.strip_prefix('=').or_else(|| rest.strip_prefix(':')) {
                assert!(
                    value.contains("/run/secrets/"),
                    "a token set inline in docker-compose.yml: {line}"
                );
            }
        }
        // Nor a long random-looking literal anywhere.
        let longest_hex = line
            .split(|c: char| !c.is_ascii_hexdigit())
            .map(str::len)
            .max()
            .unwrap_or(0);
        assert!(
            longest_hex < 24,
            "a token-like literal in docker-compose.yml: {line}"
        );
    }
    let Some(yaml) = normalized_config() else {
        return;
    };
    let blocks = service_blocks(&yaml);
    let store = &blocks["store"];
    assert_eq!(published(store), [], "the store publishes a port");
    for line in [
        "ANKUSA_STORE_EDGE_TOKEN_FILE: /run/secrets/store_edge_token",
        "ANKUSA_STORE_OPERATOR_TOKEN_FILE: /run/secrets/store_operator_token",
        "ANKUSA_STORE_RECEIPT_KEY_FILE: /run/secrets/receipt_key",
    ] {
        assert!(
            store.iter().any(|l| l.trim() == line),
            "the store reads its tokens from the secrets ({line}):\n{}",
            store.join("\n")
        );
    }
    for name in ["edge-1", "edge-2"] {
        let ports = published(&blocks[name]);
        let admin: Vec<&Published> = ports.iter().filter(|p| p.target == 9901).collect();
        assert_eq!(admin.len(), 1, "{name}: {ports:?}");
        assert_eq!(
            admin[0].host_ip.as_deref(),
            Some("127.0.0.1"),
            "{name}: {ports:?}"
        );
        let own = format!("{}_token", name.replace('-', "_"));
        assert!(
            blocks[name]
                .iter()
                .any(|l| l.trim() == format!("- source: {own}")),
            "{name} gets its own store token secret ({own})"
        );
        let other = if name == "edge-1" {
            "edge_2_token"
        } else {
            "edge_1_token"
        };
        for secret in [
            "store_operator_token",
            "receipt_key",
            "store_edge_token",
            other,
        ] {
            assert!(
                !blocks[name].iter().any(|l| l.contains(secret)),
                "{name} gets {secret}:\n{}",
                blocks[name].join("\n")
            );
        }
    }
    for p in published(&blocks["intake"]) {
        assert_eq!(p.host_ip.as_deref(), Some("127.0.0.1"), "intake: {p:?}");
    }
    // The intake signs receipts with the key the store checks them with.
    let intake = blocks["intake"].join("\n");
    assert!(
        intake.contains("- source: receipt_key") && intake.contains("/run/secrets/receipt_key"),
        "the intake gets the receipt key:\n{intake}"
    );
}

#[test]
fn reads_published_ports_in_both_forms() {
    let block: Vec<String> = "    ports:\n    - published: 10001\n      target: 10000\n    - 127.0.0.1:9901:9901/tcp\n    - published: 8080\n      target: 8080\n      host_ip: 127.0.0.1\n    - 7070:7070\n    restart: always\n"
        .lines()
        .map(str::to_string)
        .collect();
    let local = || Some("127.0.0.1".to_string());
    assert_eq!(
        published(&block),
        [
            Published {
                host_ip: None,
                target: 10000
            },
            Published {
                host_ip: local(),
                target: 9901
            },
            Published {
                host_ip: local(),
                target: 8080
            },
            Published {
                host_ip: None,
                target: 7070
            },
        ]
    );
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

#[test]
fn compose_prometheus_scrapes_compose_services_and_the_dashboards_listen_on_loopback() {
    let Some(yaml) = normalized_config() else {
        return;
    };
    let services = services(&yaml);
    let prometheus = &services["prometheus"];
    let config = prometheus
        .binds
        .iter()
        .find(|(_, container)| container == "/etc/prometheus")
        .map(|(host, _)| host.join("prometheus.yml"))
        .expect("prometheus mounts its config folder at /etc/prometheus");
    let text = std::fs::read_to_string(&config).expect("read prometheus.yml");
    let targets: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- targets:"))
        .flat_map(|list| {
            list.trim()
                .trim_matches(['[', ']'])
                .split(',')
                .map(|t| t.trim().trim_matches('"').to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        targets,
        ["edge-1:9901", "edge-2:9901", "store:7070"],
        "the edges' admin and the store"
    );
    for target in &targets {
        let host = target.split(':').next().unwrap_or_default();
        assert!(
            services.contains_key(host),
            "{target} is not a compose service"
        );
    }
    for name in ["prometheus", "grafana"] {
        let ports = &services[name].ports;
        assert!(!ports.is_empty(), "{name} publishes no port");
        for port in ports {
            assert!(
                port.starts_with("127.0.0.1:"),
                "{name} publishes {port} beyond loopback"
            );
        }
    }
}

#[test]
fn reads_dockerfile_stages_and_their_copies() {
    let text = "# c\nARG ENVOY_IMAGE=envoyproxy/envoy:v1.40.0\nFROM rust:1 AS filter-build\nRUN rustup target add wasm32-wasip1\nRUN cargo build \\\n -p ankusa-filter --target wasm32-wasip1\n\nFROM ${ENVOY_IMAGE} AS edge\nCOPY --from=filter-build /out/f.wasm /etc/f.wasm\n";
    let s = stages(text);
    assert_eq!(s["edge"].from, "envoyproxy/envoy:v1.40.0");
    assert_eq!(
        s["filter-build"].lines,
        [
            "RUN rustup target add wasm32-wasip1",
            "RUN cargo build -p ankusa-filter --target wasm32-wasip1"
        ]
    );
    assert_eq!(
        copies_from_stages(&s["edge"]),
        [(
            "filter-build".to_string(),
            "/out/f.wasm".to_string(),
            "/etc/f.wasm".to_string()
        )]
    );
}

/// Every long-running service has a healthcheck, and every service waits
/// for what it depends on to be healthy (not merely started), so `up -d`
/// returns once the fleet answers. scripts/compose-test.sh checks the same
/// on a running stack.
#[test]
fn compose_services_have_healthchecks_and_wait_for_healthy_dependencies() {
    let Some(yaml) = normalized_config() else {
        return;
    };
    for (name, block) in service_blocks(&yaml) {
        let keys: Vec<&str> = block
            .iter()
            .filter(|l| l.len() - l.trim_start().len() == 4)
            .map(|l| l.trim().trim_end_matches(':'))
            .collect();
        // The provider is a one-shot batch of traffic: nothing to be healthy.
        if name != "provider" {
            assert!(keys.contains(&"healthcheck"), "{name} has no healthcheck");
        }
        let mut in_depends = false;
        let mut dependencies = 0;
        for line in &block {
            let indent = line.len() - line.trim_start().len();
            if indent == 4 {
                in_depends = line.trim() == "depends_on:";
                continue;
            }
            if in_depends && indent == 6 {
                dependencies += 1;
            }
            if in_depends && indent == 8 {
                assert_eq!(
                    line.trim(),
                    "condition: service_healthy",
                    "{name} starts before a dependency is healthy"
                );
            }
        }
        if ["store", "edge-1", "edge-2", "prometheus", "provider"].contains(&name.as_str()) {
            assert!(dependencies > 0, "{name} waits for nothing");
        }
    }
}

/// The images a user's engine pulls are the defaults of variables, so an
/// engine that can't pull runs the same file with local stand-ins
/// (docker/offline.env), and the file names no stand-in itself.
#[test]
fn compose_images_are_variables_defaulting_to_the_public_images() {
    let raw = std::fs::read_to_string(workspace_root().join("docker-compose.yml"))
        .expect("read docker-compose.yml");
    for (variable, public) in [
        ("ANKUSA_REDIS_IMAGE", "redis:7-alpine"),
        ("ANKUSA_PROMETHEUS_IMAGE", "prom/prometheus:v2.42.0"),
        ("ANKUSA_GRAFANA_IMAGE", "grafana/grafana:11.3.0"),
        ("ANKUSA_RUST_IMAGE", "rust:1-bookworm"),
        ("ANKUSA_BASE_IMAGE", "debian:bookworm-slim"),
        ("ANKUSA_ENVOY_IMAGE", "envoyproxy/envoy:v1.40.0"),
    ] {
        assert!(
            raw.contains(&format!("${{{variable}:-{public}}}")),
            "docker-compose.yml does not default {variable} to {public}"
        );
    }
    assert!(
        !raw.contains("ankusa-local/"),
        "docker-compose.yml names a local stand-in"
    );
    let offline = std::fs::read_to_string(workspace_root().join("docker/offline.env"))
        .expect("read docker/offline.env");
    for variable in [
        "ANKUSA_REDIS_IMAGE",
        "ANKUSA_PROMETHEUS_IMAGE",
        "ANKUSA_RUST_IMAGE",
        "ANKUSA_BASE_IMAGE",
        "ANKUSA_ENVOY_IMAGE",
        "ANKUSA_PREBUILT",
    ] {
        assert!(
            offline
                .lines()
                .any(|l| l.starts_with(&format!("{variable}="))),
            "docker/offline.env does not set {variable}"
        );
    }
    let ignored = std::fs::read_to_string(workspace_root().join(".dockerignore"))
        .expect("read .dockerignore");
    for secret in ["docker/secrets/", ".env"] {
        assert!(
            ignored.lines().any(|l| l.trim() == secret),
            ".dockerignore does not keep {secret} out of the build context (a secret in a layer)"
        );
    }
}
