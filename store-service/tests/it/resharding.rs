//! A Cluster slot moved under the store's slot map: the batch that meets
//! the redirect is answered as failed and runs no hit twice (a Cluster
//! client that resent the pipeline after the redirect ran the hits before
//! it again); the store re-reads the map and the next batch runs.

use crate::common::{charge, hit, Http, Service};
use ankusa_testkit::redis::{cli, RedisCluster};
use serde_json::json;

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
    let key = format!("ankusa:{{{tenant}}}:rl:hooks");
    cli(cluster.nodes[0].port, &["CLUSTER", "KEYSLOT", &key])
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slot_moved_under_a_batch_runs_no_hit_twice() {
    let cluster = RedisCluster::start();
    let service = Service::ready(&cluster.url()).await;
    let http = Http::new();
    // Two tenants served by one master, in different slots.
    let tenants: Vec<(String, u16, u16)> = (0..200)
        .map(|i| {
            let t = format!("reshard-{i}");
            let slot = slot_of(&cluster, &t);
            (t, slot, owner(&cluster, slot))
        })
        .collect();
    let (stays, moves) = tenants
        .iter()
        .enumerate()
        .find_map(|(i, a)| {
            tenants[i + 1..]
                .iter()
                .find(|b| b.2 == a.2 && b.1 != a.1)
                .map(|b| (a.clone(), b.clone()))
        })
        .expect("two tenants on one master");
    // The moving tenant's slot (empty) goes to another master, behind the store's back.
    let to = cluster
        .masters()
        .into_iter()
        .map(|m| m.port)
        .find(|p| *p != moves.2)
        .unwrap();
    let to_id = cli(to, &["CLUSTER", "MYID"]);
    for master in cluster.masters() {
        let slot = moves.1.to_string();
        assert_eq!(
            cli(master.port, &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]),
            "OK"
        );
    }
    assert_eq!(owner(&cluster, moves.1), to);

    // One hook each, against a burst of 2 refilled once a second.
    let batch = json!({"hits": [
        hit(vec![charge("hooks", &stays.0, 1, 1, 2)], None),
        hit(vec![charge("hooks", &moves.0, 1, 1, 2)], None),
    ]});
    let (status, answer) = http.post(&service.at("/v1/hits"), &batch).await;
    // The redirect fails the batch as a whole (every hit in it met it), as
    // a store Redis can't serve: 503, and the edges answer from the node.
    assert!(
        status == 200 || (status == 503 && answer["error"] == "redis_unavailable"),
        "{status} {answer}"
    );
    // Whatever the batch was answered, the staying tenant was charged once:
    // one more hook fits its burst of 2.
    let (status, single) = http
        .post(
            &service.at("/v1/hit"),
            &hit(vec![charge("hooks", &stays.0, 1, 1, 2)], None),
        )
        .await;
    assert_eq!(status, 200, "{single}");
    assert_eq!(
        single["result"], "ok",
        "the first batch charged {} more than once: {answer} then {single}",
        stays.0
    );
    // The store follows the move: the next batch is answered hit by hit.
    let again = json!({"hits": [hit(vec![charge("hooks", &moves.0, 1, 1, 2)], None)]});
    let (status, answer) = http.post(&service.at("/v1/hits"), &again).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"][0]["result"], "ok", "{answer}");
    service.stop().await;
}
