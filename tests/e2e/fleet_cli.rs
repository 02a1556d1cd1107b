//! The `fleet` command as a user runs it: READY once everything answers, and a
//! signal leaves no process and no port behind — twice on the same ports. A
//! part that dies, or a start-up that fails, takes the rest down with it.
//! The signing secrets reach the edges only, and the store's operator token
//! is in a file READY names, never in an edge.

use ankusa_testkit::ports::is_listening;
use ankusa_tools::children::{child_pids, is_alive};
use ankusa_tools::fleet::Ports;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A base port below the kernel's ephemeral range (so no outgoing connection
/// takes one of ours between two runs) with every fleet port free.
fn free_base(edges: usize) -> u16 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let seed = u64::from(std::process::id()) ^ u64::from(nanos);
    (0..200)
        .map(|i| 20_000 + ((seed + i * 97) % 1_200) as u16 * 10)
        .find(|base| {
            Ports::from_base(*base, edges)
                .and_then(|p| p.check_free())
                .is_ok()
        })
        .expect("no free block of ports in 20000..32000")
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status();
}

/// Waits up to 60 s for the fleet to exit; kills it and fails past that.
fn wait_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("fleet did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `fleet` and returns it with the JSON of its READY line.
fn start(base: u16, extra: &[&str]) -> (Child, serde_json::Value) {
    start_with_env(base, extra, &[])
}

/// [`start`] with `env` added to the fleet's environment.
fn start_with_env(base: u16, extra: &[&str], env: &[(&str, &str)]) -> (Child, serde_json::Value) {
    let mut child = Command::new(ankusa_testkit::paths::workspace_bin("fleet"))
        .args(["--edges", "2", "--base-port", &base.to_string()])
        .args(extra)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start fleet");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    loop {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(line) if line.starts_with("READY ") => {
                let json =
                    serde_json::from_str(&line["READY ".len()..]).expect("READY carries JSON");
                return (child, json);
            }
            Ok(_) => continue,
            Err(e) => {
                signal(child.id(), "TERM");
                let _ = wait_exit(&mut child);
                panic!("no READY line from fleet ({e})");
            }
        }
    }
}

fn assert_all_gone(children: &[u32], ports: &Ports) {
    for pid in children {
        assert!(!is_alive(*pid), "child {pid} outlived the fleet");
    }
    for (what, port) in ports.named() {
        assert!(
            !is_listening(port),
            "{what} still listening on {port} after the fleet stopped"
        );
    }
}

fn start_and_stop(base: u16, sig: &str) {
    let (mut child, json) = start(base, &[]);
    let url = |port: u16| format!("http://127.0.0.1:{port}");
    assert_eq!(
        json["edges"],
        serde_json::json!([url(base + 10), url(base + 20)])
    );
    assert_eq!(
        json["admins"],
        serde_json::json!([url(base + 11), url(base + 21)])
    );
    assert_eq!(json["store"], url(base + 1));
    assert_eq!(json["intake"], url(base + 2));
    assert_eq!(json["redis"], format!("redis://127.0.0.1:{base}/"));
    let ports = Ports::from_base(base, 2).expect("ports");
    for (what, port) in ports.named() {
        assert!(
            is_listening(port),
            "{what} is not listening on {port} after READY"
        );
    }
    let mut children = child_pids(child.id());
    children.sort_unstable();
    let mut listed: Vec<u32> = json["pids"]
        .as_array()
        .expect("pids")
        .iter()
        .filter_map(|p| p.as_u64())
        .map(|p| p as u32)
        .collect();
    listed.sort_unstable();
    assert_eq!(
        listed, children,
        "READY names every child the fleet started"
    );
    assert_eq!(children.len(), 5, "redis, store, intake and two edges");
    if sig == "TERM" {
        decision_logged(&json, base);
    }

    signal(child.id(), sig);
    assert_eq!(
        wait_exit(&mut child).code(),
        Some(0),
        "fleet exits 0 on SIG{sig}"
    );
    assert_all_gone(&children, &ports);
}

/// The fleet's edges write the shipped access log, where a hook's decision shows.
fn decision_logged(ready: &serde_json::Value, base: u16) {
    let logs: Vec<String> = ready["access_logs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(logs.len(), 2, "one access log per edge: {ready}");
    let url = format!("http://127.0.0.1:{}/webhooks/acme/gh", base + 10);
    let headers = [("x-github-delivery", "fleet-cli-logged")];
    let answer =
        ankusa_testkit::http::request("POST", &url, &headers, b"{}", Duration::from_secs(10))
            .expect("a hook through edge-1");
    assert_eq!(answer.status, 201, "{}", answer.text());
    // Envoy writes its access logs out every 10 s.
    let logged = ankusa_tests::edge_support::eventually(Duration::from_secs(20), || {
        ankusa_testkit::access_log::lines(std::path::Path::new(&logs[0]))
            .iter()
            .any(|l| l.contains("outcome=admitted") && l.contains("key=fleet-cli-logged"))
    });
    assert!(logged, "no decision in {}", logs[0]);
}

#[test]
fn starts_and_stops_cleanly_twice_on_the_same_ports() {
    let base = free_base(2);
    start_and_stop(base, "TERM");
    start_and_stop(base, "INT");
}

#[test]
fn a_part_that_dies_stops_the_whole_fleet() {
    let base = free_base(2);
    let (mut child, json) = start(base, &[]);
    let children = child_pids(child.id());
    // pids are listed redis, store, intake, edges…
    let intake = json["pids"][2].as_u64().expect("intake pid") as u32;
    signal(intake, "KILL");
    assert_eq!(
        wait_exit(&mut child).code(),
        Some(1),
        "a dead intake is a failed fleet"
    );
    assert_all_gone(&children, &Ports::from_base(base, 2).expect("ports"));
}

#[test]
fn a_refused_filter_config_stops_what_already_started() {
    let base = free_base(2);
    let dir = ankusa_testkit::process::scratch_dir("fleet-bad-config");
    let config = dir.join("filter.json");
    std::fs::write(
        &config,
        r#"{"sources": {"gh": {"tenant": "acme", "dedupe": "no-such-rule"}}}"#,
    )
    .expect("write config");
    let mut child = Command::new(ankusa_testkit::paths::workspace_bin("fleet"))
        .args(["--edges", "2", "--base-port", &base.to_string()])
        .arg("--filter-config")
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start fleet");
    let status = wait_exit(&mut child);
    let mut stdout = String::new();
    let _ = std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut stdout);
    assert_eq!(
        status.code(),
        Some(1),
        "a fleet whose edges refuse their config fails"
    );
    assert!(
        !stdout.contains("READY"),
        "no READY for a fleet that never came up: {stdout}"
    );
    assert_all_gone(&[], &Ports::from_base(base, 2).expect("ports"));
    assert!(child_pids(child.id()).is_empty());
}

#[test]
fn a_busy_port_is_refused_before_anything_starts() {
    let base = free_base(2);
    let taken = std::net::TcpListener::bind(("127.0.0.1", base + 2)).expect("bind");
    let out = Command::new(ankusa_testkit::paths::workspace_bin("fleet"))
        .args(["--edges", "2", "--base-port", &base.to_string()])
        .output()
        .expect("run fleet");
    drop(taken);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("port {} (intake)", base + 2)),
        "{err}"
    );
}

/// `NAME=value` pairs of a process's environment, from `/proc`.
fn environ(pid: u64) -> Vec<(String, String)> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/environ: {e}"));
    raw.split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

#[test]
fn secrets_go_to_the_edges_only_and_the_operator_token_to_a_file() {
    const SECRET_ENV: &str = "ANKUSA_T_FLEET_GH_SECRET";
    const SECRET: &str = "fleet-cli-signing-secret";
    let base = free_base(2);
    let (mut child, json) =
        start_with_env(base, &["--vm-env", SECRET_ENV], &[(SECRET_ENV, SECRET)]);
    let pids: Vec<u64> = json["pids"]
        .as_array()
        .expect("pids")
        .iter()
        .filter_map(|p| p.as_u64())
        .collect();
    // READY lists Redis, the store and the intake, then the edges.
    assert_eq!(pids.len(), 5, "{json}");
    // Findings are gathered and the fleet stopped before any is asserted, so
    // a failure leaves no process behind.
    let mut wrong = Vec::new();
    let file = std::path::PathBuf::from(json["operator_token_file"].as_str().unwrap_or_default());
    let operator = std::fs::read_to_string(&file).unwrap_or_default();
    let operator = operator.trim().to_string();
    if operator.len() < 16 {
        wrong.push(format!("no operator token in {}", file.display()));
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file).map_or(0o777, |m| m.permissions().mode());
    if mode & 0o077 != 0 {
        wrong.push(format!(
            "{} is readable by others ({mode:o})",
            file.display()
        ));
    }
    let mut edge_tokens = Vec::new();
    for (i, pid) in pids.iter().enumerate() {
        let env = environ(*pid);
        let has_secret = env.iter().any(|(k, v)| k == SECRET_ENV || v == SECRET);
        let holds_operator = !operator.is_empty() && env.iter().any(|(_, v)| v.contains(&operator));
        if i < 3 {
            if has_secret {
                wrong.push(format!("child {i} (pid {pid}) got the signing secret"));
            }
            continue;
        }
        if !env.iter().any(|(k, v)| k == SECRET_ENV && v == SECRET) {
            wrong.push(format!("edge {i} (pid {pid}) lacks the signing secret"));
        }
        if holds_operator {
            wrong.push(format!("edge {i} (pid {pid}) holds the operator token"));
        }
        match env.iter().find(|(k, _)| k == "ANKUSA_STORE_TOKEN") {
            Some((_, token)) => edge_tokens.push(token.clone()),
            None => wrong.push(format!("edge {i} (pid {pid}) has no store token")),
        }
    }
    // The operator token changes overrides; the edges' token may not.
    let call = |token: &str| {
        ankusa_testkit::http::request(
            "PUT",
            &format!(
                "{}/v1/overrides/acme",
                json["store"].as_str().unwrap_or_default()
            ),
            &[("authorization", &format!("Bearer {token}"))],
            br#"{"rate": 5, "burst": 10, "ttl_ms": 60000}"#,
            Duration::from_secs(10),
        )
        .map_or(0, |r| r.status)
    };
    let edge_token = edge_tokens.first().cloned().unwrap_or_default();
    let statuses = (call(&edge_token), call(&operator));
    // Each edge holds its own token, which speaks only for its own node.
    let mut distinct = edge_tokens.clone();
    distinct.sort();
    distinct.dedup();
    if distinct.len() != edge_tokens.len() {
        wrong.push("two edges hold the same store token".to_string());
    }
    let hit_as = |token: &str, node: &str| {
        let hit = format!(
            r#"{{"charges": [{{"kind": "hooks", "tenant": "acme", "units": 1, "rate": 100,
                 "burst": 100}}], "claim": null, "node": "{node}"}}"#
        );
        ankusa_testkit::http::request(
            "POST",
            &format!("{}/v1/hit", json["store"].as_str().unwrap_or_default()),
            &[("authorization", &format!("Bearer {token}"))],
            hit.as_bytes(),
            Duration::from_secs(10),
        )
        .map_or(0, |r| r.status)
    };
    let nodes = (hit_as(&edge_token, "edge-1"), hit_as(&edge_token, "edge-2"));
    signal(child.id(), "TERM");
    assert_eq!(wait_exit(&mut child).code(), Some(0));
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(statuses, (403, 200), "edge token, operator token");
    assert_eq!(
        nodes,
        (200, 403),
        "edge-1's token naming edge-1, then edge-2"
    );
}
