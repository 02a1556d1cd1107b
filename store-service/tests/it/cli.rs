//! The binary's flags and their environment fallbacks.

use ankusa_testkit::http::get;
use ankusa_testkit::paths::workspace_bin;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::process::scratch_dir;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::Proc;
use std::process::Command;
use std::time::Duration;

/// The store binary with no flags: its listen address, `redis`, a run edge token
/// and `env` all from the environment; the process and its port once it listens.
fn spawn(name: &str, redis: &Redis, env: &[(&str, &str)]) -> (Proc, u16) {
    let port = free_port();
    let mut cmd = Command::new(workspace_bin("ankusa-store"));
    cmd.env("ANKUSA_STORE_LISTEN", format!("127.0.0.1:{port}"))
        .env("ANKUSA_REDIS_URL", redis.url())
        .env(
            "ANKUSA_STORE_EDGE_TOKENS",
            ankusa_testkit::token::run_token(),
        )
        .envs(env.iter().copied());
    let mut proc = Proc::spawn("ankusa-store", cmd, &scratch_dir(name).join("store.log"));
    proc.wait_for_port(port, Duration::from_secs(10));
    (proc, port)
}

#[test]
fn listen_address_and_redis_url_come_from_the_environment_without_flags() {
    let redis = Redis::start();
    let (mut proc, port) = spawn("store-env", &redis, &[]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !matches!(get(&format!("http://127.0.0.1:{port}/readyz")), Ok(r) if r.status == 200) {
        assert!(
            std::time::Instant::now() < deadline,
            "never ready:\n{}",
            proc.log_tail()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        proc.stop(Duration::from_secs(10)),
        Some(0),
        "{}",
        proc.log_tail()
    );
}

#[test]
fn an_unusable_redis_url_stops_the_start_naming_the_flag() {
    let out = Command::new(workspace_bin("ankusa-store"))
        .args([
            "--listen",
            &format!("127.0.0.1:{}", free_port()),
            "--redis-url",
            "http://example:1",
        ])
        .output()
        .expect("run ankusa-store");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--redis-url: \"http://example:1\" is not a redis:// URL"),
        "{err}"
    );
}

/// The runtime's worker threads of process `pid`, by the name the store gives them.
fn workers(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("list the store's threads")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "ankusa-worker")
        .count()
}

#[test]
fn threads_sets_the_worker_threads_and_a_bad_count_is_refused_naming_the_flag() {
    let redis = Redis::start();
    for threads in ["1", "3"] {
        let (mut proc, _) = spawn(
            "store-threads",
            &redis,
            &[("ANKUSA_STORE_THREADS", threads)],
        );
        // The runtime names its workers as each starts: wait for the count
        // to reach the flag's (and show what it was if it never does).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while workers(proc.pid()).to_string() != threads && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            workers(proc.pid()).to_string(),
            threads,
            "{}",
            proc.log_tail()
        );
        proc.stop(Duration::from_secs(10));
    }
    let out = Command::new(workspace_bin("ankusa-store"))
        .args(["--redis-url", &redis.url(), "--threads", "many"])
        .output()
        .expect("run ankusa-store");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--threads") && err.contains("many"), "{err}");
}
