//! The Redis Cluster moves of the Cluster rows: which master and slot are
//! busiest, moving a slot's keys, waiting for the cluster to settle.

use ankusa_testkit::redis::{cli, RedisCluster};
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
/// `MIGRATE`, `batch` keys at a time; how many it moved.
pub(super) fn migrate_keys(slot: u16, src: u16, dst: u16, share: Option<f64>, batch: u64) -> u64 {
    let mut moved = 0;
    let slot_text = slot.to_string();
    let count = cli(src, &["CLUSTER", "COUNTKEYSINSLOT", &slot_text])
        .parse::<u64>()
        .unwrap_or(0);
    let mut left = share.map_or(u64::MAX, |s| (count as f64 * s).ceil() as u64);
    while left > 0 {
        let take = left.min(batch).to_string();
        let keys = cli(src, &["CLUSTER", "GETKEYSINSLOT", &slot_text, &take]);
        let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
        if keys.is_empty() {
            return moved;
        }
        let dst_text = dst.to_string();
        let mut args = vec![
            "MIGRATE",
            "127.0.0.1",
            &dst_text,
            "",
            "0",
            "5000",
            "REPLACE",
            "KEYS",
        ];
        args.extend(keys.iter().copied());
        let reply = cli(src, &args);
        // NOKEY: the keys expired between listing and moving them.
        if reply != "OK" && reply != "NOKEY" {
            // Refused (the keys stay where they are): stop rather than retry forever.
            eprintln!("MIGRATE of slot {slot} :{src}→:{dst} answered {reply:?}");
            return moved;
        }
        moved += keys.len() as u64;
        left = left.saturating_sub(keys.len() as u64);
    }
    moved
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
