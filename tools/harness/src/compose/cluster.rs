//! The Redis Cluster of the Compose profile (`docker/compose.cluster.yml`),
//! as the failover row sees it: each node's role from `redis-cli ROLE` run
//! in its container, which master is busiest, which node replicates it.

use super::command::{docker, redis_cli};
use super::stack::Stack;
use std::time::{Duration, Instant};

/// The cluster's node services.
pub const NODES: [&str; 6] = [
    "redis-node-1",
    "redis-node-2",
    "redis-node-3",
    "redis-node-4",
    "redis-node-5",
    "redis-node-6",
];

/// A node's answer to `ROLE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// A master, with the addresses (`ip`) of its replicas.
    Master { replicas: Vec<String> },
    /// A replica of the master at `ip`.
    Replica { master: String },
    /// Not answering, or an answer this doesn't read.
    Unknown,
}

/// Reads `redis-cli ROLE`'s output, one element a line: `master`, the
/// offset, then ip, port and offset per replica; or `slave`, the master's
/// ip, port, state and offset.
pub fn parse_role(text: &str) -> Role {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    match lines.first() {
        Some(&"master") => Role::Master {
            replicas: lines
                .get(2..)
                .unwrap_or_default()
                .chunks(3)
                .filter_map(|c| c.first().map(|ip| ip.to_string()))
                .collect(),
        },
        Some(&"slave") | Some(&"replica") => {
            lines.get(1).map_or(Role::Unknown, |ip| Role::Replica {
                master: ip.to_string(),
            })
        }
        _ => Role::Unknown,
    }
}

/// A node: its service, container and address on the `redis` network.
#[derive(Clone, Debug)]
pub struct Node {
    pub service: &'static str,
    pub id: String,
    pub ip: String,
}

/// Every node of the stack's cluster.
pub fn nodes(stack: &Stack) -> Result<Vec<Node>, String> {
    NODES
        .iter()
        .map(|service| {
            let id = stack.container(service)?;
            let ip = docker(&[
                "inspect",
                "-f",
                "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                &id,
            ])?;
            Ok(Node {
                service,
                id,
                ip: ip.trim().to_string(),
            })
        })
        .collect()
}

/// The master holding the most keys, its key count and its replica.
pub fn busiest_master(nodes: &[Node]) -> Result<(Node, u64, Node), String> {
    let mut best: Option<(Node, u64, Vec<String>)> = None;
    for node in nodes {
        if let Role::Master { replicas } = parse_role(&redis_cli(&node.id, &["ROLE"])?) {
            let keys = redis_cli(&node.id, &["DBSIZE"])?.parse().unwrap_or(0);
            if best.as_ref().is_none_or(|(_, most, _)| keys > *most) {
                best = Some((node.clone(), keys, replicas));
            }
        }
    }
    let (master, keys, replicas) = best.ok_or("no node answers as a master")?;
    let replica = nodes
        .iter()
        .find(|n| replicas.contains(&n.ip))
        .ok_or_else(|| format!("{} has no replica among the nodes", master.service))?;
    Ok((master, keys, replica.clone()))
}

/// Waits up to `within` until `node` answers as a master; how long it took.
pub fn wait_promoted(node: &Node, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < within {
        let role = redis_cli(&node.id, &["ROLE"]).unwrap_or_default();
        if matches!(parse_role(&role), Role::Master { .. }) {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Waits up to `within` until every node that answers says `cluster_state:ok`.
pub fn wait_ok(nodes: &[Node], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let ok = nodes.iter().all(|n| {
            redis_cli(&n.id, &["CLUSTER", "INFO"])
                .is_ok_and(|info| info.contains("cluster_state:ok"))
        });
        if ok {
            return true;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_masters_role_lists_its_replicas_and_a_replicas_its_master() {
        let master = "master\n3129\n172.20.0.7\n6379\n3129\n";
        assert_eq!(
            parse_role(master),
            Role::Master {
                replicas: vec!["172.20.0.7".into()]
            }
        );
        assert_eq!(parse_role("master\n0\n"), Role::Master { replicas: vec![] });
        let replica = "slave\n172.20.0.3\n6379\nconnected\n3129\n";
        assert_eq!(
            parse_role(replica),
            Role::Replica {
                master: "172.20.0.3".into()
            }
        );
        assert_eq!(parse_role(""), Role::Unknown);
        assert_eq!(parse_role("LOADING Redis is loading"), Role::Unknown);
    }
}
