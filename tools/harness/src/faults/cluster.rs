//! The Redis Cluster moves of the Cluster rows: which master and slot are
//! busiest, moving a slot's keys, waiting for the cluster to settle.

use ankusa_testkit::redis::{cli, RedisCluster};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The master (port) holding the most keys.
pub(super) fn busiest_master(cluster: &RedisCluster) -> u16 {
    cluster
        .masters()
        .iter()
        .max_by_key(|n| n.cli(&["DBSIZE"]).parse::<u64>().unwrap_or(0))
        .map_or(0, |n| n.port)
}

/// The slot most of `port`'s keys (a sample of up to 1000) hash to.
pub(super) fn busiest_slot(port: u16) -> u16 {
    let keys = cli(port, &["--scan"]);
    let mut counts = std::collections::HashMap::new();
    for key in keys.lines().take(1000) {
        if let Ok(slot) = cli(port, &["CLUSTER", "KEYSLOT", key]).parse::<u16>() {
            *counts.entry(slot).or_insert(0u32) += 1;
        }
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map_or(0, |(slot, _)| slot)
}

/// Sets `slot` moving from `src` to `dst`: importing on `dst` first, then
/// migrating on `src` (the order `redis-cli --cluster reshard` uses).
pub(super) fn start_moving(slot: u16, src: u16, dst: u16) {
    let (src_id, dst_id) = (
        cli(src, &["CLUSTER", "MYID"]),
        cli(dst, &["CLUSTER", "MYID"]),
    );
    let slot = slot.to_string();
    cli(dst, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src_id]);
    cli(src, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &dst_id]);
}

/// Gives `slot` to `dst` on every master: `dst` first (its epoch is bumped,
/// so no gossip hands the slot back), then the others.
pub(super) fn hand_over(cluster: &RedisCluster, slot: u16, dst: u16) {
    let dst_id = cli(dst, &["CLUSTER", "MYID"]);
    let slot = slot.to_string();
    let mut order = vec![dst];
    order.extend(
        cluster
            .masters()
            .iter()
            .map(|n| n.port)
            .filter(|p| *p != dst),
    );
    for port in order {
        cli(port, &["CLUSTER", "SETSLOT", &slot, "NODE", &dst_id]);
    }
}

/// Moves `slot` from `src` to `dst` the way `redis-cli --cluster reshard`
/// does, under whatever traffic runs: migrating, its keys moved ten at a
/// time, handed over. How many keys moved, and how long it took.
pub(super) fn reshard(cluster: &RedisCluster, slot: u16, src: u16, dst: u16) -> (u64, Duration) {
    let started = Instant::now();
    start_moving(slot, src, dst);
    let moved = migrate_keys(slot, src, dst, None, 10);
    hand_over(cluster, slot, dst);
    (moved, started.elapsed())
}

/// Moves `share` of `slot`'s keys (all when `None`) from `src` to `dst` with
/// `MIGRATE`, `batch` keys a command, the commands sent one after the other
/// on one connection (as a reshard tool does); how many it moved. Keys
/// written meanwhile are picked up by another pass, up to five.
pub(super) fn migrate_keys(slot: u16, src: u16, dst: u16, share: Option<f64>, batch: usize) -> u64 {
    let slot_text = slot.to_string();
    let count = cli(src, &["CLUSTER", "COUNTKEYSINSLOT", &slot_text])
        .parse::<u64>()
        .unwrap_or(0);
    let mut left = share.map_or(u64::MAX, |s| (count as f64 * s).ceil() as u64);
    let mut moved = 0;
    for _ in 0..5 {
        if left == 0 {
            break;
        }
        let listed = cli(src, &["CLUSTER", "GETKEYSINSLOT", &slot_text, "100000"]);
        let keys: Vec<&str> = listed
            .lines()
            .filter(|k| !k.is_empty())
            .take(usize::try_from(left).unwrap_or(usize::MAX))
            .collect();
        if keys.is_empty() {
            break;
        }
        let commands: Vec<String> = keys
            .chunks(batch.max(1))
            .map(|chunk| {
                let quoted: Vec<String> = chunk.iter().map(|k| format!("\"{k}\"")).collect();
                format!(
                    "MIGRATE 127.0.0.1 {dst} \"\" 0 5000 REPLACE KEYS {}",
                    quoted.join(" ")
                )
            })
            .collect();
        let replies = cli_session(src, &commands);
        if let Some(refused) = replies.iter().find(|r| *r != "OK" && *r != "NOKEY") {
            // Refused (the keys stay where they are): stop rather than retry forever.
            eprintln!("MIGRATE of slot {slot} :{src}→:{dst} answered {refused:?}");
            return moved;
        }
        moved += keys.len() as u64;
        left = left.saturating_sub(keys.len() as u64);
    }
    moved
}

/// Sends `commands` to `port` one after the other on one `redis-cli`
/// connection (its standard input); one reply line each.
fn cli_session(port: u16, commands: &[String]) -> Vec<String> {
    let child = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return vec!["cannot start redis-cli".into()];
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(commands.join("\n").as_bytes());
        let _ = stdin.write_all(b"\n");
    }
    let out = child
        .wait_with_output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    String::from_utf8_lossy(&out)
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

/// Waits up to 20 s until every answering node says `cluster_state:ok`.
pub(super) fn wait_cluster_ok(cluster: &RedisCluster) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let ok = cluster.nodes.iter().all(|n| {
            let info = n.cli(&["CLUSTER", "INFO"]);
            info.is_empty() || info.contains("cluster_state:ok")
        });
        if ok {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
