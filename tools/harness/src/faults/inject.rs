//! Breaking what a row's fault breaks, mid-run, and healing it.

use super::cluster::{
    busiest_master, busiest_slot, hand_over, migrate_keys, reshard, start_moving, wait_cluster_ok,
};
use super::fleet::{row_config, FaultFleet, STORE_ARGS, TIMEOUT_MS};
use super::scenario::Fault;
use ankusa_testkit::envoy::Edge;
use ankusa_testkit::fault::{FaultProxy, Mode};
use ankusa_testkit::redis::{cli, Redis};
use ankusa_testkit::store::Store;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A bare HTTP answer the store's place gives instead of the store.
pub(super) fn http_answer(status: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// Breaks what `fault` breaks.
pub(crate) fn inject(fault: Fault, fleet: &mut FaultFleet, intake_flap: &AtomicBool) {
    let store_mode = |mode: Mode| fleet.store_proxy.set_mode(mode);
    match fault {
        Fault::StoreKilled => fleet.store.proc.signal("KILL"),
        Fault::StoreFrozen => fleet.store.proc.signal("STOP"),
        Fault::StoreBlackholed | Fault::SettleOverflow => store_mode(Mode::Blackhole),
        Fault::StoreSlowBelow => store_mode(Mode::DelayResponse(Duration::from_millis(
            TIMEOUT_MS * 4 / 5,
        ))),
        Fault::StoreSlowAbove => {
            store_mode(Mode::DelayResponse(Duration::from_millis(TIMEOUT_MS + 100)))
        }
        Fault::StoreGarbage => store_mode(Mode::Garbage(http_answer(
            "200 OK",
            b"{\"decision\":\x00\xff[[[",
        ))),
        Fault::Store401 => store_mode(Mode::Garbage(http_answer(
            "401 Unauthorized",
            b"{\"error\":\"unauthorized\"}",
        ))),
        Fault::Store503 => store_mode(Mode::Garbage(http_answer(
            "503 Service Unavailable",
            b"{\"error\":\"redis_unavailable\"}",
        ))),
        Fault::RedisKilled | Fault::RedisKilledAof => fleet.redis().proc.signal("KILL"),
        Fault::RedisFrozen => fleet.redis().proc.signal("STOP"),
        Fault::RedisFlushall => {
            let _ = fleet.redis().cli(&["FLUSHALL"]);
            let _ = fleet.redis().cli(&["SCRIPT", "FLUSH"]);
        }
        Fault::ClusterFailover => {
            let port = busiest_master(fleet.cluster());
            let keys = cli(port, &["DBSIZE"]);
            let replica = fleet
                .cluster()
                .nodes
                .iter()
                .find(|n| replica_of(n.port) == Some(port))
                .map(|n| n.port);
            if let Some(node) = fleet.cluster().nodes.iter().find(|n| n.port == port) {
                node.proc.signal("KILL");
            }
            let killed = std::time::Instant::now();
            fleet
                .notes
                .push(format!("master :{port} ({keys} keys) killed"));
            // Until the cluster promotes the replica (node timeout 2 s), no
            // master owns the dead master's slots: the time it took is the
            // part of the fault the store can do nothing about.
            while let Some(replica) = replica {
                if cli(replica, &["ROLE"]).starts_with("master") {
                    let after = killed.elapsed();
                    fleet.promoted_after = Some(after);
                    fleet.notes.push(format!(
                        "the cluster promoted its replica :{replica} {} ms later",
                        after.as_millis()
                    ));
                    break;
                }
                if killed.elapsed() > PROMOTION_WAIT {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Fault::ClusterSlotMigration => {
            let (slot, src, dst) = busiest_slot_and_target(fleet);
            let (moved, took) = reshard(fleet.cluster(), slot, src, dst);
            fleet.notes.push(format!(
                "slot {slot} resharded :{src}→:{dst} under traffic ({moved} keys, {} ms)",
                took.as_millis()
            ));
            fleet.migration = Some((slot, src, dst));
        }
        Fault::ClusterSlotMigrationStalled => {
            let (slot, src, dst) = busiest_slot_and_target(fleet);
            start_moving(slot, src, dst);
            // Half the keys now, and the reshard stops there: the store finds
            // some here, is sent to the target for the rest (ASK), and Redis
            // answers a hit whose keys are split TRYAGAIN.
            let moved = migrate_keys(slot, src, dst, Some(0.5), 100);
            fleet.notes.push(format!(
                "slot {slot} set migrating :{src}→:{dst}, {moved} keys moved"
            ));
            fleet.migration = Some((slot, src, dst));
        }
        Fault::EdgeKilled => fleet.edges[0].proc.signal("KILL"),
        Fault::IntakeFailing => intake_flap.store(true, Ordering::SeqCst),
        Fault::IntakeTimeout => fleet
            .intake_proxy
            .set_mode(Mode::DelayResponse(Duration::from_secs(12))),
        Fault::ConfigReload => {
            let mut config = row_config(fault);
            config["rate_limits"]["tenants"]["acme"] =
                serde_json::json!({"rate": 400, "burst": 800});
            for edge in &mut fleet.edges {
                let _ = edge.reload(config.clone());
            }
        }
    }
}

/// How long the failover row waits for the cluster to promote a replica
/// before leaving it to the heal (`CLUSTER FAILOVER TAKEOVER`).
const PROMOTION_WAIT: Duration = Duration::from_millis(4500);

/// The port of the master `port` replicates, when it is a replica.
fn replica_of(port: u16) -> Option<u16> {
    let role = cli(port, &["ROLE"]);
    let mut lines = role.lines();
    if lines.next() != Some("slave") {
        return None;
    }
    lines.nth(1).and_then(|p| p.trim().parse().ok())
}

/// The busiest master's busiest slot, and another master to move it to.
fn busiest_slot_and_target(fleet: &FaultFleet) -> (u16, u16, u16) {
    let src = busiest_master(fleet.cluster());
    let dst = fleet
        .cluster()
        .masters()
        .iter()
        .map(|n| n.port)
        .find(|p| *p != src)
        .unwrap_or(src);
    (busiest_slot(src), src, dst)
}

/// Heals what [`inject`] broke.
pub(crate) fn heal(fault: Fault, fleet: &mut FaultFleet, intake_flap: &AtomicBool) {
    match fault {
        Fault::StoreKilled => {
            let port = fleet.store.port;
            let _ = fleet.store.proc.stop(Duration::from_secs(1));
            fleet.store = Store::start_on(port, &fleet.redis_url(), &STORE_ARGS);
        }
        Fault::StoreFrozen => fleet.store.proc.signal("CONT"),
        Fault::RedisKilled | Fault::RedisKilledAof => {
            let (port, dir) = (fleet.redis().port, fleet.redis().dir.clone());
            let _ = fleet.redis().proc.stop(Duration::from_secs(1));
            let redis = if fault.redis_aof() {
                Redis::start_aof_on(port, &dir)
            } else {
                Redis::start_on(port, &dir)
            };
            let keys = redis.cli(&["DBSIZE"]);
            if fault.redis_aof() {
                fleet.notes.push(format!(
                    "restarted with {keys} keys loaded from its append-only file"
                ));
            }
            fleet.redis_keys_after_restart = keys.parse().ok();
            fleet.redis = Some(redis);
        }
        Fault::RedisFrozen => fleet.redis().proc.signal("CONT"),
        Fault::ClusterFailover => {
            // The replica of the dead master: a node whose ROLE says slave and
            // whose master is not answering.
            let nodes = fleet.cluster.as_ref().map_or(&[][..], |c| &c.nodes[..]);
            let mut took_over = false;
            for node in nodes {
                let Some(master_port) = replica_of(node.port) else {
                    continue;
                };
                if cli(master_port, &["PING"]) != "PONG" {
                    took_over = true;
                    node.cli(&["CLUSTER", "FAILOVER", "TAKEOVER"]);
                    fleet.notes.push(format!(
                        "at heal its replica :{} took over (CLUSTER FAILOVER TAKEOVER)",
                        node.port
                    ));
                }
            }
            if !took_over && fleet.promoted_after.is_none() {
                fleet.notes.push(
                    "its replica had already been promoted by the cluster (node timeout 2 s)"
                        .into(),
                );
            }
            wait_cluster_ok(fleet.cluster());
        }
        Fault::ClusterSlotMigration => {
            if let Some((slot, src, dst)) = fleet.migration.take() {
                let (moved, took) = reshard(fleet.cluster(), slot, dst, src);
                fleet.notes.push(format!(
                    "at heal moved back ({moved} keys, {} ms)",
                    took.as_millis()
                ));
            }
        }
        Fault::ClusterSlotMigrationStalled => {
            if let Some((slot, src, dst)) = fleet.migration.take() {
                let moved = migrate_keys(slot, src, dst, None, 100);
                hand_over(fleet.cluster(), slot, dst);
                fleet.notes.push(format!(
                    "at heal the other {moved} keys moved and the slot given to :{dst}"
                ));
            }
        }
        Fault::RedisFlushall | Fault::ConfigReload => {}
        Fault::EdgeKilled => {
            let spec = fleet.edges[0].spec.clone();
            let _ = fleet.edges[0].proc.stop(Duration::from_secs(1));
            if let Some(log) = fleet.edges[0].access_log.clone() {
                let pid = fleet.edges[0].proc.pid();
                fleet.old_access_logs.push((log, pid));
            }
            fleet.edges[0] = Edge::start_lds_logged(spec);
        }
        Fault::IntakeFailing => intake_flap.store(false, Ordering::SeqCst),
        Fault::IntakeTimeout => fleet.intake_proxy.set_mode(Mode::Pass),
        _ => fleet.store_proxy.set_mode(Mode::Pass),
    }
}

/// Replaces about half the intake's answers by 503 while `flap` is set
/// (the intake-failing fault), until `done`.
pub(crate) fn flap_intake(proxy: &FaultProxy, done: &AtomicBool, flap: &AtomicBool) {
    let (mut failing, mut touched) = (false, false);
    while !done.load(Ordering::SeqCst) {
        if flap.load(Ordering::SeqCst) {
            failing = !failing;
            proxy.set_mode(if failing {
                Mode::Garbage(http_answer("503 Service Unavailable", b"{}"))
            } else {
                Mode::Pass
            });
            touched = true;
        } else if touched {
            proxy.set_mode(Mode::Pass);
            (failing, touched) = (false, false);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
