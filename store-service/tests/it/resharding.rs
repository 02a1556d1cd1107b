//! Cluster slots that move under the store: a hit a node did not run
//! (`MOVED`, `ASK`, `TRYAGAIN`) is sent again, alone, to where the Cluster
//! says, and answered; no hit runs twice. `MONITOR` on every master counts
//! each run of the hit script by its one read of the hit's strings (the `MGET`
//! naming its bucket and claim keys): one per run.

use crate::common::{charge, claim, hit, Http, Service};
use ankusa_testkit::redis::{cli, RedisCluster};
use ankusa_testkit::redis_monitor::Monitor;
use serde_json::{json, Value};
use std::time::Duration;

/// The port of the master serving `slot`, from `CLUSTER NODES`.
fn owner(cluster: &RedisCluster, slot: u16) -> u16 {
    let nodes = cli(cluster.nodes[0].port, &["CLUSTER", "NODES"]);
    for line in nodes.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if !fields.get(2).is_some_and(|f| f.contains("master")) {
            continue;
        }
        let serves = fields[8..].iter().any(|range| {
            let mut ends = range.split('-').filter_map(|n| n.parse::<u16>().ok());
            match (ends.next(), ends.next()) {
                (Some(a), Some(b)) => a <= slot && slot <= b,
                (Some(a), None) => a == slot,
                _ => false,
            }
        });
        if serves {
            let address = fields[1].split('@').next().unwrap_or_default();
            return address.rsplit(':').next().unwrap().parse().unwrap();
        }
    }
    panic!("no master serves slot {slot}:\n{nodes}");
}

fn slot_of(cluster: &RedisCluster, tenant: &str) -> u16 {
    let key = bucket(tenant);
    cli(cluster.nodes[0].port, &["CLUSTER", "KEYSLOT", &key])
        .parse()
        .unwrap()
}

/// The hooks bucket of `tenant`: an argument of each of its hits.
fn bucket(tenant: &str) -> String {
    format!("ankusa:{{{tenant}}}:rl:hooks")
}

/// A tenant of `prefix` and its slot and master.
type Placed = (String, u16, u16);

fn placed(cluster: &RedisCluster, prefix: &str) -> Vec<Placed> {
    (0..200)
        .map(|i| {
            let t = format!("{prefix}-{i}");
            let slot = slot_of(cluster, &t);
            (t, slot, owner(cluster, slot))
        })
        .collect()
}

/// A master other than `port`.
fn other_master(cluster: &RedisCluster, port: u16) -> u16 {
    cluster
        .masters()
        .into_iter()
        .map(|m| m.port)
        .find(|p| *p != port)
        .unwrap()
}

/// Sets `slot` moving from `src` to `dst` (importing there first), as a
/// reshard starts.
fn start_moving(slot: u16, src: u16, dst: u16) {
    let slot = slot.to_string();
    let (src_id, dst_id) = (
        cli(src, &["CLUSTER", "MYID"]),
        cli(dst, &["CLUSTER", "MYID"]),
    );
    assert_eq!(
        cli(dst, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &src_id]),
        "OK"
    );
    assert_eq!(
        cli(src, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &dst_id]),
        "OK"
    );
}

/// Gives `slot` to `dst` on every master in `masters`, `dst` first (which
/// bumps its epoch, so no gossip hands the slot back), as a reshard ends.
fn hand_over(masters: &[u16], slot: u16, dst: u16) {
    let slot = slot.to_string();
    let dst_id = cli(dst, &["CLUSTER", "MYID"]);
    let mut order = vec![dst];
    order.extend(masters.iter().filter(|p| **p != dst));
    for port in order {
        assert_eq!(
            cli(port, &["CLUSTER", "SETSLOT", &slot, "NODE", &dst_id]),
            "OK"
        );
    }
}

/// Moves every key of `slot` from `src` to `dst` (`MIGRATE`).
fn migrate_all(slot: u16, src: u16, dst: u16) {
    let slot_text = slot.to_string();
    let keys = cli(src, &["CLUSTER", "GETKEYSINSLOT", &slot_text, "100"]);
    let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
    assert!(!keys.is_empty(), "slot {slot} holds no key on :{src}");
    let dst = dst.to_string();
    let mut args = vec!["MIGRATE", "127.0.0.1", &dst, "", "0", "5000", "KEYS"];
    args.extend(keys);
    assert_eq!(cli(src, &args), "OK");
}

fn masters(cluster: &RedisCluster) -> Vec<u16> {
    cluster.masters().iter().map(|m| m.port).collect()
}

fn result(answer: &Value, i: usize) -> &Value {
    &answer["results"][i]["result"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_moved_slot_is_followed_and_no_hit_runs_twice() {
    let cluster = RedisCluster::start();
    let service = Service::ready(&cluster.url()).await;
    let http = Http::new();
    // Three tenants served by one master, in different slots.
    let tenants = placed(&cluster, "reshard");
    let on_one: Vec<&Placed> =
        tenants
            .iter()
            .filter(|t| t.2 == tenants[0].2)
            .fold(Vec::new(), |mut seen, t| {
                if seen.iter().all(|s: &&Placed| s.1 != t.1) {
                    seen.push(t);
                }
                seen
            });
    let (stays, moves, moves_alone) = (on_one[0], on_one[1], on_one[2]);
    // Two slots go to another master, behind the store's back.
    let to = other_master(&cluster, moves.2);
    for slot in [moves.1, moves_alone.1] {
        start_moving(slot, moves.2, to);
        hand_over(&masters(&cluster), slot, to);
    }
    assert_eq!(owner(&cluster, moves.1), to);
    let monitor = Monitor::start(&masters(&cluster));

    // One hook each, against a burst of 2 refilled once a second.
    let batch = json!({"hits": [
        hit(vec![charge("hooks", &stays.0, 1, 1, 2)], None),
        hit(vec![charge("hooks", &moves.0, 1, 1, 2)], Some(claim(&moves.0, "ev-1", "h-1", 60_000, 5_000))),
    ]});
    let (status, answer) = http.post(&service.at("/v1/hits"), &batch).await;
    // The moved hit is sent again to its new master and answered there.
    assert_eq!(status, 200, "{answer}");
    assert_eq!(result(&answer, 0), "ok", "{answer}");
    assert_eq!(result(&answer, 1), "ok", "{answer}");
    // A lone hit (`/v1/hit`) follows a move as a batch does.
    let (status, single) = http
        .post(
            &service.at("/v1/hit"),
            &hit(vec![charge("hooks", &moves_alone.0, 1, 1, 2)], None),
        )
        .await;
    assert_eq!(status, 200, "{single}");
    assert_eq!(single["result"], "ok", "{single}");
    // Each hit ran exactly once, the moved ones on their new master.
    for tenant in [stays, moves, moves_alone] {
        assert_eq!(
            monitor.count("MGET", &bucket(&tenant.0)),
            1,
            "{}'s hit ran {} times",
            tenant.0,
            monitor.count("MGET", &bucket(&tenant.0))
        );
    }
    assert_eq!(monitor.count_on(to, "MGET", &bucket(&moves.0)), 1);
    let moved = r#"ankusa_store_cluster_redirects_total{reply="moved"}"#;
    assert!(service.metric(moved).await >= 1.0);
    // The claim the moved hit wrote is where its slot now lives.
    let claimed = cli(
        to,
        &["EXISTS", &format!("ankusa:{{{}}}:claim:gh:ev-1", moves.0)],
    );
    assert_eq!(claimed, "1");
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_migrating_under_hits_answers_them_once_its_keys_have_moved() {
    let cluster = RedisCluster::start();
    let service = Service::ready(&cluster.url()).await;
    let http = Http::new();
    let tenant = placed(&cluster, "migrating").remove(0);
    let (slot, src) = (tenant.1, tenant.2);
    let dst = other_master(&cluster, src);
    // The tenant has an override and a bucket: every key of a plain hit
    // exists. 100 units at 1 a second: the bucket key lives 100 s.
    let override_body = json!({"rate": 1, "burst": 1000});
    let (status, text) = http
        .send(
            "PUT",
            &service.at(&format!("/v1/overrides/{}", tenant.0)),
            &[],
            override_body.to_string().into_bytes(),
        )
        .await;
    assert_eq!(status, 200, "{text}");
    let plain = hit(vec![charge("hooks", &tenant.0, 100, 1, 1000)], None);
    let (status, answer) = http.post(&service.at("/v1/hit"), &plain).await;
    assert_eq!((status, &answer["result"]), (200, &json!("ok")), "{answer}");

    // The slot starts moving to `dst` and every key of it moves: the source
    // answers ASK, the target runs a hit whose keys it holds.
    start_moving(slot, src, dst);
    migrate_all(slot, src, dst);
    let monitor = Monitor::start(&masters(&cluster));
    let (status, asked) = http
        .post(&service.at("/v1/hits"), &json!({"hits": [plain]}))
        .await;
    assert_eq!((status, result(&asked, 0)), (200, &json!("ok")), "{asked}");
    assert_eq!(monitor.count_on(dst, "MGET", &bucket(&tenant.0)), 1);
    assert_eq!(monitor.count("MGET", &bucket(&tenant.0)), 1);

    // A hit with a claim names a key neither node holds: Redis answers
    // TRYAGAIN while the slot moves. Past its budget it is answered
    // unavailable and never ran; once the slot has moved, it runs once.
    let claimed = hit(
        vec![charge("hooks", &tenant.0, 1, 1, 1000)],
        Some(claim(&tenant.0, "ev-migrating", "h-9", 60_000, 5_000)),
    );
    let short = [("x-ankusa-budget-ms", "40")];
    let (status, refused) = http
        .post_with(
            &service.at("/v1/hits"),
            &short,
            &json!({"hits": [claimed.clone()]}),
        )
        .await;
    assert_eq!(status, 503, "{refused}");
    let code = refused["error"].as_str().unwrap_or_default();
    assert!(matches!(code, "redis_unavailable" | "timeout"), "{refused}");
    let key = format!("ankusa:{{{}}}:claim:gh:ev-migrating", tenant.0);
    assert_eq!(monitor.count("MGET", &key), 0);
    // The slot is handed over while the next call waits on TRYAGAIN.
    let handover = std::thread::spawn({
        let masters = masters(&cluster);
        move || {
            std::thread::sleep(Duration::from_millis(150));
            hand_over(&masters, slot, dst);
        }
    });
    let (status, answer) = http
        .post(&service.at("/v1/hits"), &json!({"hits": [claimed]}))
        .await;
    handover.join().unwrap();
    assert_eq!(
        (status, result(&answer, 0)),
        (200, &json!("ok")),
        "{answer}"
    );
    assert_eq!(
        monitor.count("MGET", &key),
        1,
        "the claimed hit ran more than once"
    );
    assert_eq!(cli(dst, &["EXISTS", &key]), "1");
    for reply in ["ask", "tryagain"] {
        let series = format!("ankusa_store_cluster_redirects_total{{reply=\"{reply}\"}}");
        assert!(service.metric(&series).await >= 1.0, "{series}");
    }
    service.stop().await;
}
