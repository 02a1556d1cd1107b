//! The `fleet` command as a user runs it: READY once everything answers, and a
//! SIGTERM leaves no process and no port behind — twice on the same ports.

use ankusa_testkit::ports::is_listening;
use ankusa_tests::fleet::{child_pids, is_alive, Ports};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A base port below the kernel's ephemeral range (so no outgoing connection
/// takes one of ours between the two runs) with every fleet port free.
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

fn start_and_stop(base: u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleet"))
        .args(["--edges", "2", "--base-port", &base.to_string()])
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
    let ready = loop {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(line) if line.starts_with("READY ") => break line,
            Ok(_) => continue,
            Err(e) => {
                let _ = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status();
                let _ = child.wait();
                panic!("no READY line from fleet ({e})");
            }
        }
    };
    let json: serde_json::Value =
        serde_json::from_str(&ready["READY ".len()..]).expect("READY carries JSON");
    assert_eq!(
        json["edges"],
        serde_json::json!([
            format!("http://127.0.0.1:{}", base + 10),
            format!("http://127.0.0.1:{}", base + 20)
        ])
    );
    assert_eq!(json["admins"][1], format!("http://127.0.0.1:{}", base + 21));
    assert_eq!(json["store"], format!("http://127.0.0.1:{}", base + 1));
    assert_eq!(json["intake"], format!("http://127.0.0.1:{}", base + 2));
    assert_eq!(json["redis"], format!("redis://127.0.0.1:{base}/"));
    let ports = Ports::from_base(base, 2).expect("ports");
    for (what, port) in ports.named() {
        assert!(
            is_listening(port),
            "{what} is not listening on {port} after READY"
        );
    }
    let children = child_pids(child.id());
    let mut listed: Vec<u32> = json["pids"]
        .as_array()
        .expect("pids")
        .iter()
        .filter_map(|p| p.as_u64())
        .map(|p| p as u32)
        .collect();
    listed.sort_unstable();
    let mut seen = children.clone();
    seen.sort_unstable();
    assert_eq!(listed, seen, "READY names every child the fleet started");
    assert_eq!(children.len(), 5, "redis, store, intake and two edges");

    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("fleet did not exit within 60 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "fleet exits 0 on SIGTERM");
    for pid in children {
        assert!(!is_alive(pid), "child {pid} outlived the fleet");
    }
    for (what, port) in ports.named() {
        assert!(
            !is_listening(port),
            "{what} still listening on {port} after the fleet stopped"
        );
    }
}

#[test]
fn starts_and_stops_cleanly_twice_on_the_same_ports() {
    let base = free_base(2);
    start_and_stop(base);
    start_and_stop(base);
}

#[test]
fn a_busy_port_is_refused_before_anything_starts() {
    let base = free_base(2);
    let taken = std::net::TcpListener::bind(("127.0.0.1", base + 2)).expect("bind");
    let out = Command::new(env!("CARGO_BIN_EXE_fleet"))
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
