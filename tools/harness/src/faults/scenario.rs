//! The faults of the suite: what each breaks, and why it may store a copy twice.

use super::plan::Plan;
use super::row_fault::RowFault;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The store SIGKILLed, restarted on its port at heal.
    StoreKilled,
    /// The store SIGSTOPped, SIGCONTed at heal.
    StoreFrozen,
    /// The edge→store proxy reads and never answers.
    StoreBlackholed,
    /// Every store answer delayed to just under `fleet.timeout_ms`.
    StoreSlowBelow,
    /// Every store answer delayed to just over `fleet.timeout_ms`.
    StoreSlowAbove,
    /// The store's place answered by a 200 whose body is not JSON.
    StoreGarbage,
    /// The store's place answered by 401.
    Store401,
    /// The store's place answered by 503.
    Store503,
    /// Redis SIGKILLed, restarted empty on its port (keys and scripts lost).
    RedisKilled,
    /// Redis with an append-only file (`everysec`) SIGKILLed, restarted on
    /// its port from that file (at most the last second of writes lost).
    RedisKilledAof,
    /// Redis SIGSTOPped, SIGCONTed at heal.
    RedisFrozen,
    /// `FLUSHALL` mid-run (the dedupe window and every bucket gone at once).
    RedisFlushall,
    /// edge-1 SIGKILLed (pending claims held), restarted at heal.
    EdgeKilled,
    /// About half the intake's answers replaced by 503 while the fault lasts.
    IntakeFailing,
    /// The intake stores on time but its answers come after the provider's
    /// 10 s request timeout.
    IntakeTimeout,
    /// A new plugin configuration (other rates) loaded into both edges mid-run.
    ConfigReload,
    /// `fleet.settle_queue_max` 8 with the store blackholed: settles dropped.
    SettleOverflow,
    /// Redis Cluster: the busiest master SIGKILLed; at heal its replica takes
    /// over (`CLUSTER FAILOVER TAKEOVER`).
    ClusterFailover,
    /// Redis Cluster: the busiest slot resharded to another master under
    /// traffic, as `redis-cli --cluster reshard` does (keys ten at a time,
    /// then handed over: the store meets `ASK`, `TRYAGAIN`, then `MOVED`);
    /// at heal moved back the same way.
    ClusterSlotMigration,
    /// Redis Cluster: a reshard that stopped half-way (its tool died): the
    /// busiest slot left migrating with half its keys moved for the whole
    /// fault (Redis answers a hit whose keys are split `TRYAGAIN`); at heal
    /// the rest moved and the slot handed over.
    ClusterSlotMigrationStalled,
}

impl Fault {
    pub const ALL: [Fault; 20] = [
        Fault::StoreKilled,
        Fault::StoreFrozen,
        Fault::StoreBlackholed,
        Fault::StoreSlowBelow,
        Fault::StoreSlowAbove,
        Fault::StoreGarbage,
        Fault::Store401,
        Fault::Store503,
        Fault::RedisKilled,
        Fault::RedisKilledAof,
        Fault::RedisFrozen,
        Fault::RedisFlushall,
        Fault::EdgeKilled,
        Fault::IntakeFailing,
        Fault::IntakeTimeout,
        Fault::ConfigReload,
        Fault::SettleOverflow,
        Fault::ClusterFailover,
        Fault::ClusterSlotMigration,
        Fault::ClusterSlotMigrationStalled,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::StoreKilled => "store-killed",
            Fault::StoreFrozen => "store-frozen",
            Fault::StoreBlackholed => "store-blackholed",
            Fault::StoreSlowBelow => "store-slow-below-timeout",
            Fault::StoreSlowAbove => "store-slow-above-timeout",
            Fault::StoreGarbage => "store-garbage",
            Fault::Store401 => "store-401",
            Fault::Store503 => "store-503",
            Fault::RedisKilled => "redis-killed-restarted-empty",
            Fault::RedisKilledAof => "redis-killed-restarted-from-aof",
            Fault::RedisFrozen => "redis-frozen",
            Fault::RedisFlushall => "redis-flushall",
            Fault::EdgeKilled => "edge-killed",
            Fault::IntakeFailing => "intake-failing-half",
            Fault::IntakeTimeout => "intake-timeout",
            Fault::ConfigReload => "config-reload",
            Fault::SettleOverflow => "settle-queue-overflow",
            Fault::ClusterFailover => "cluster-master-killed-replica-promoted",
            Fault::ClusterSlotMigration => "cluster-slot-migrated",
            Fault::ClusterSlotMigrationStalled => "cluster-slot-migration-stalled",
        }
    }

    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether the row's Redis keeps an append-only file.
    pub fn redis_aof(self) -> bool {
        self == Fault::RedisKilledAof
    }

    /// Whether the row runs against a Redis Cluster (with replicas).
    pub fn on_cluster(self) -> bool {
        matches!(
            self,
            Fault::ClusterFailover
                | Fault::ClusterSlotMigration
                | Fault::ClusterSlotMigrationStalled
        )
    }

    /// Whether the store's place is whole again the moment the fault heals
    /// (a fault of the proxy in front of a store that kept running): fleet
    /// answers must then resume within the breaker's open time plus a probe.
    /// A restarted or thawed store, Redis or Cluster first has its own
    /// catching up to do.
    pub fn heals_at_once(self) -> bool {
        matches!(
            self,
            Fault::StoreBlackholed
                | Fault::StoreSlowBelow
                | Fault::StoreSlowAbove
                | Fault::StoreGarbage
                | Fault::Store401
                | Fault::Store503
                | Fault::SettleOverflow
        )
    }

    /// Whether Redis loses keys in this fault (buckets and claims): a restart
    /// empty, a flush, a replica promoted without its master's last writes.
    pub fn loses_redis_keys(self) -> bool {
        matches!(
            self,
            Fault::RedisKilled | Fault::RedisFlushall | Fault::ClusterFailover
        )
    }

    /// Why this fault may store an event twice, when it may.
    pub fn duplicates_reason(self) -> &'static str {
        match self {
            f if f.loses_redis_keys() => {
                "the dedupe window is gone with Redis's keys: a redelivery after the fault \
                 passes the edge, the intake's own index must catch it"
            }
            Fault::EdgeKilled | Fault::IntakeTimeout | Fault::IntakeFailing => {
                "a hook stored while its answer was lost is sent again by the provider: \
                 the intake's own index must catch it"
            }
            _ => {
                "a redelivery during the fault is admitted node-local (dedupe degraded): \
                 the intake's own index must catch it"
            }
        }
    }

    /// The deliveries' timing for this fault.
    pub fn plan(self, fast: bool) -> Plan {
        let mut plan = Plan::default_for(fast);
        if self == Fault::IntakeTimeout {
            // Answers held 12 s: the provider (10 s timeout) retries meanwhile.
            plan.deadline = Duration::from_secs(90);
        }
        plan
    }
}

impl RowFault for Fault {
    fn name(&self) -> &'static str {
        Fault::name(*self)
    }

    fn duplicates_reason(&self) -> &'static str {
        Fault::duplicates_reason(*self)
    }

    fn heals_at_once(&self) -> bool {
        Fault::heals_at_once(*self)
    }

    fn loses_redis_keys(&self) -> bool {
        Fault::loses_redis_keys(*self)
    }
}
