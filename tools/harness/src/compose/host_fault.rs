//! The faults across hosts: what each breaks in a Compose stack, the stack
//! and the timeline it needs, and which rows a run names (`quick`: the CI's,
//! `long`, `all`, or names).

use super::stack::{Shape, CLUSTER_FILE};
use crate::faults::row_fault::RowFault;
use crate::faults::{Fault, Plan};
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostFault {
    /// edge-1 taken off the `store` network (it still reaches the intake
    /// and its senders); connected again at heal.
    EdgeCutFromStore,
    /// The store's container SIGKILLed; started again at heal.
    StoreKilled,
    /// Redis's container SIGKILLed; started again at heal from its
    /// append-only file (its volume keeps it).
    RedisKilledAof,
    /// edge-1's container frozen (`docker pause`): the provider's
    /// redeliveries go to edge-2; thawed at heal.
    EdgePaused,
    /// Under traffic, each edge and then the store replaced by a container
    /// of a new image, one at a time, each healthy before the next.
    RollingRestart,
    /// Two store replicas behind the edges' `store` name; one SIGKILLed,
    /// started again at heal.
    StoreReplicaKilled,
    /// A Redis Cluster of three masters with a replica each: the busiest
    /// master SIGKILLed, its replica promoted by the cluster; the old master
    /// started again at heal (it rejoins as a replica).
    ClusterFailover,
}

impl HostFault {
    pub const ALL: [HostFault; 7] = [
        HostFault::EdgeCutFromStore,
        HostFault::StoreKilled,
        HostFault::RedisKilledAof,
        HostFault::EdgePaused,
        HostFault::RollingRestart,
        HostFault::StoreReplicaKilled,
        HostFault::ClusterFailover,
    ];
    /// The rows CI runs: a stack each, about a minute in all with the ups and downs.
    pub const QUICK: [HostFault; 4] = [
        HostFault::EdgeCutFromStore,
        HostFault::StoreKilled,
        HostFault::RedisKilledAof,
        HostFault::EdgePaused,
    ];
    pub const LONG: [HostFault; 3] = [
        HostFault::RollingRestart,
        HostFault::StoreReplicaKilled,
        HostFault::ClusterFailover,
    ];

    pub fn name(self) -> &'static str {
        match self {
            HostFault::EdgeCutFromStore => "edge-cut-from-store",
            HostFault::StoreKilled => "store-killed-restarted",
            HostFault::RedisKilledAof => "redis-killed-restarted-from-aof",
            HostFault::EdgePaused => "edge-paused",
            HostFault::RollingRestart => "rolling-restart",
            HostFault::StoreReplicaKilled => "store-replicas-one-killed",
            HostFault::ClusterFailover => "redis-cluster-master-failover",
        }
    }

    /// The rows `spec` names: `quick`, `long`, `all` or row names, comma
    /// separated, each row once, in the order named.
    pub fn select(spec: &str) -> Result<Vec<HostFault>, String> {
        let mut rows: Vec<HostFault> = Vec::new();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let named: &[HostFault] = match item {
                "quick" => &HostFault::QUICK,
                "long" => &HostFault::LONG,
                "all" => &HostFault::ALL,
                name => match HostFault::ALL.iter().find(|f| f.name() == name) {
                    Some(f) => std::slice::from_ref(f),
                    None => {
                        let names: Vec<&str> = HostFault::ALL.iter().map(|f| f.name()).collect();
                        return Err(format!(
                            "no row {name:?}: quick, long, all or {}",
                            names.join(", ")
                        ));
                    }
                },
            };
            for fault in named {
                if !rows.contains(fault) {
                    rows.push(*fault);
                }
            }
        }
        if rows.is_empty() {
            return Err(format!("no row in {spec:?}"));
        }
        Ok(rows)
    }

    /// The fault on loopback this one is closest to: it says why copies
    /// may reach the intake and whether Redis loses keys.
    fn twin(self) -> Fault {
        match self {
            HostFault::EdgeCutFromStore => Fault::StoreBlackholed,
            HostFault::StoreKilled | HostFault::StoreReplicaKilled => Fault::StoreKilled,
            HostFault::RedisKilledAof => Fault::RedisKilledAof,
            HostFault::EdgePaused | HostFault::RollingRestart => Fault::EdgeKilled,
            HostFault::ClusterFailover => Fault::ClusterFailover,
        }
    }

    /// The stack the row runs on.
    pub fn shape(self) -> Shape {
        match self {
            HostFault::StoreReplicaKilled => Shape {
                store_replicas: 2,
                ..Shape::default()
            },
            HostFault::ClusterFailover => Shape {
                overrides: vec![CLUSTER_FILE],
                ..Shape::default()
            },
            _ => Shape::default(),
        }
    }

    /// The row's timeline. The quick rows take the loopback suite's fast
    /// one (the fault from 2 s to 4.5 s) with 12 s of traffic rather than
    /// 8: Envoy resolves the store's name every 5 s, so a store found again
    /// only at the next resolution shows within the row. The store replica
    /// and the Cluster take its full one (16 s, from 4 s to 9 s), long
    /// enough for the edges to drop a dead address and for the cluster to
    /// promote a replica; the rolling restart lasts as long as three
    /// replacements take, so its traffic runs 40 s.
    pub fn plan(self) -> Plan {
        match self {
            HostFault::StoreReplicaKilled | HostFault::ClusterFailover => Plan::default_for(false),
            HostFault::RollingRestart => Plan {
                events: 2400,
                rate: 60.0,
                fault_at: Duration::from_secs(4),
                heal_at: Duration::from_secs(5),
                deadline: Duration::from_secs(120),
            },
            _ => Plan {
                events: 480,
                ..Plan::default_for(true)
            },
        }
    }
}

impl RowFault for HostFault {
    fn name(&self) -> &'static str {
        HostFault::name(*self)
    }

    fn duplicates_reason(&self) -> &'static str {
        self.twin().duplicates_reason()
    }

    /// None of them: each heal has the edges find a container again
    /// (Envoy resolves the store's name every 5 s) or waits for one to
    /// start, so the time to recover is measured, not bounded.
    fn heals_at_once(&self) -> bool {
        false
    }

    fn loses_redis_keys(&self) -> bool {
        self.twin().loses_redis_keys()
    }

    /// Cut off, edge-1 answers alone while edge-2 still reaches the store:
    /// one share. With a store replica dead, each edge answers alone the
    /// calls it still sends there (Envoy keeps the address until it
    /// resolves the store's name again) and the store the others: two. A
    /// replaced edge comes back knowing no live count, so it divides by
    /// `fleet.nodes` (1 as shipped: the whole quota) when the store is
    /// replaced next: two. In a failover the store's calls for the dead
    /// master's slots wait out the budget one by one while the cluster
    /// promotes its replica and the store finds it: two.
    fn shares_beyond_quota(&self) -> u64 {
        match self {
            HostFault::EdgeCutFromStore => 1,
            HostFault::StoreReplicaKilled
            | HostFault::RollingRestart
            | HostFault::ClusterFailover => 2,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_names_groups_and_rows_each_once_in_order() {
        assert_eq!(HostFault::select("quick").expect("quick"), HostFault::QUICK);
        assert_eq!(HostFault::select("all").expect("all"), HostFault::ALL);
        assert_eq!(
            HostFault::select("edge-paused, quick").expect("mixed"),
            vec![
                HostFault::EdgePaused,
                HostFault::EdgeCutFromStore,
                HostFault::StoreKilled,
                HostFault::RedisKilledAof,
            ]
        );
        assert_eq!(
            HostFault::select("long,rolling-restart").expect("long"),
            HostFault::LONG
        );
        let unknown = HostFault::select("quick,store-frozen").expect_err("unknown");
        assert!(unknown.contains("\"store-frozen\""), "{unknown}");
        assert!(HostFault::select(" , ").is_err());
    }

    #[test]
    fn quick_and_long_split_every_row() {
        let mut both: Vec<HostFault> = HostFault::QUICK
            .into_iter()
            .chain(HostFault::LONG)
            .collect();
        both.sort_by_key(|f| f.name());
        let mut all = HostFault::ALL.to_vec();
        all.sort_by_key(|f| f.name());
        assert_eq!(both, all);
    }

    #[test]
    fn only_the_cluster_failover_may_lose_a_bucket() {
        let losing: Vec<&str> = HostFault::ALL
            .iter()
            .filter(|f| RowFault::loses_redis_keys(*f))
            .map(|f| f.name())
            .collect();
        assert_eq!(losing, ["redis-cluster-master-failover"]);
    }
}
