//! Breaking what a row's fault breaks, mid-run, and healing it.

use super::cluster::{busiest_master, busiest_slot, migrate_keys, wait_cluster_ok};
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
            if let Some(node) = fleet.cluster().nodes.iter().find(|n| n.port == port) {
                node.proc.signal("KILL");
            }
            fleet
                .notes
                .push(format!("master :{port} ({keys} keys) killed"));
        }
        Fault::ClusterSlotMigration => {
            let src = busiest_master(fleet.cluster());
            let slot = busiest_slot(src);
            let dst = fleet
                .cluster()
                .masters()
                .iter()
                .map(|n| n.port)
                .find(|p| *p != src)
                .unwrap_or(src);
            let (src_id, dst_id) = (
                cli(src, &["CLUSTER", "MYID"]),
                cli(dst, &["CLUSTER", "MYID"]),
            );
            let slot_text = slot.to_string();
            cli(
                dst,
                &["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &src_id],
            );
            cli(
                src,
                &["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &dst_id],
            );
            // Half the keys now: the store finds some here, is sent to the target for the rest (ASK).
            let moved = migrate_keys(slot, src, dst, Some(0.5));
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
            for node in nodes {
                let role = node.cli(&["ROLE"]);
                let mut lines = role.lines();
                if lines.next() != Some("slave") {
                    continue;
                }
                let master_port: u16 = lines
                    .nth(1)
                    .and_then(|p| p.trim().parse().ok())
                    .unwrap_or(0);
                if cli(master_port, &["PING"]) != "PONG" {
                    node.cli(&["CLUSTER", "FAILOVER", "TAKEOVER"]);
                    fleet.notes.push(format!(
                        "at heal its replica :{} took over (CLUSTER FAILOVER TAKEOVER)",
                        node.port
                    ));
                }
            }
            if fleet.notes.len() < 2 {
                fleet.notes.push(
                    "its replica had already been promoted by the cluster (node timeout 2 s)"
                        .into(),
                );
            }
            wait_cluster_ok(fleet.cluster());
        }
        Fault::ClusterSlotMigration => {
            if let Some((slot, src, dst)) = fleet.migration.take() {
                let moved = migrate_keys(slot, src, dst, None);
                fleet.notes.push(format!(
                    "at heal the other {moved} keys moved and the slot given to :{dst}"
                ));
                let dst_id = cli(dst, &["CLUSTER", "MYID"]);
                let slot_text = slot.to_string();
                for node in fleet.cluster().masters() {
                    node.cli(&["CLUSTER", "SETSLOT", &slot_text, "NODE", &dst_id]);
                }
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
