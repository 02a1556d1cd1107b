//! Breaking what a row across hosts breaks, mid-run, and healing it: Docker
//! on one container or network at a time, Compose where a service is
//! replaced.

use super::cluster;
use super::command::{docker, redis_cli};
use super::host_fault::HostFault;
use super::readings::pid_of;
use super::rollout;
use super::stack::Stack;
use crate::faults::stalls::unix_ms;
use crate::faults::target::Frozen;
use std::time::{Duration, Instant};

/// How long the failover row waits for the cluster to promote a replica
/// (its node timeout is 2 s; the election follows).
const PROMOTION_WAIT: Duration = Duration::from_secs(15);
/// How long a restarted Redis may take to load its append-only file.
const LOAD_WAIT: Duration = Duration::from_secs(20);

/// What a row keeps between its fault and its heal.
#[derive(Debug, Default)]
pub struct Broken {
    /// The container stopped, paused or cut off.
    container: String,
    /// The new images' tag (the rolling restart).
    next_tag: String,
}

/// What must be ready before traffic starts (the rolling restart's images).
pub fn prepare(fault: HostFault, stack: &mut Stack) -> Result<Broken, String> {
    let mut broken = Broken::default();
    if fault == HostFault::RollingRestart {
        broken.next_tag = rollout::prepare(stack)?;
    }
    Ok(broken)
}

/// Breaks what `fault` breaks.
pub fn inject(fault: HostFault, stack: &mut Stack, broken: &mut Broken) -> Result<(), String> {
    match fault {
        HostFault::EdgeCutFromStore => {
            broken.container = stack.container("edge-1")?;
            docker(&[
                "network",
                "disconnect",
                &stack.network("store")?,
                &broken.container,
            ])?;
        }
        HostFault::StoreKilled => {
            broken.container = stack.container("store")?;
            docker(&["kill", &broken.container])?;
        }
        HostFault::RedisKilledAof => {
            broken.container = stack.container("redis")?;
            docker(&["kill", &broken.container])?;
        }
        HostFault::EdgePaused => {
            broken.container = stack.container("edge-1")?;
            let pid = pid_of(&broken.container)
                .ok_or_else(|| format!("no pid for edge-1 ({})", broken.container))?;
            // From before the pause is asked for: a hook the edge took
            // while Docker froze it was held across the freeze too.
            let from_unix_ms = unix_ms();
            docker(&["pause", &broken.container])?;
            stack.account.frozen.push(Frozen {
                pid,
                from_unix_ms,
                to_unix_ms: u64::MAX,
            });
        }
        HostFault::RollingRestart => rollout::roll(stack, &broken.next_tag)?,
        HostFault::StoreReplicaKilled => {
            let replicas = stack.containers("store")?;
            let [_, second] = replicas.as_slice() else {
                return Err(format!(
                    "two store replicas wanted, {} found",
                    replicas.len()
                ));
            };
            broken.container = second.clone();
            docker(&["kill", &broken.container])?;
            stack
                .account
                .notes
                .push("the second of two store replicas killed".into());
        }
        HostFault::ClusterFailover => fail_over(stack, broken)?,
    }
    Ok(())
}

/// Kills the busiest master and waits for the cluster to promote its replica.
fn fail_over(stack: &mut Stack, broken: &mut Broken) -> Result<(), String> {
    let nodes = cluster::nodes(stack)?;
    let (master, keys, replica) = cluster::busiest_master(&nodes)?;
    broken.container = master.id.clone();
    docker(&["kill", &master.id])?;
    stack
        .account
        .notes
        .push(format!("master {} ({keys} keys) killed", master.service));
    match cluster::wait_promoted(&replica, PROMOTION_WAIT) {
        Some(after) => {
            stack.account.promoted_after = Some(after);
            stack.account.notes.push(format!(
                "the cluster promoted its replica {} {} ms later",
                replica.service,
                after.as_millis()
            ));
        }
        None => stack.account.notes.push(format!(
            "its replica {} was not promoted within {} s",
            replica.service,
            PROMOTION_WAIT.as_secs()
        )),
    }
    Ok(())
}

/// Heals what [`inject`] broke.
pub fn heal(fault: HostFault, stack: &mut Stack, broken: &Broken) -> Result<(), String> {
    let id = broken.container.as_str();
    match fault {
        HostFault::EdgeCutFromStore => {
            // With its service's name again, as Compose had attached it.
            docker(&[
                "network",
                "connect",
                "--alias",
                "edge-1",
                &stack.network("store")?,
                id,
            ])?;
        }
        HostFault::StoreKilled | HostFault::StoreReplicaKilled => {
            docker(&["start", id])?;
        }
        HostFault::RedisKilledAof => {
            docker(&["start", id])?;
            let keys = keys_once_loaded(id)?;
            stack.account.redis_keys_after_restart = Some(keys);
            stack.account.notes.push(format!(
                "restarted with {keys} keys loaded from its append-only file"
            ));
        }
        HostFault::EdgePaused => {
            docker(&["unpause", id])?;
            let thawed = unix_ms();
            for frozen in &mut stack.account.frozen {
                frozen.to_unix_ms = frozen.to_unix_ms.min(thawed);
            }
        }
        HostFault::RollingRestart => {}
        HostFault::ClusterFailover => {
            docker(&["start", id])?;
            let nodes = cluster::nodes(stack)?;
            let ok = cluster::wait_ok(&nodes, Duration::from_secs(20));
            stack.account.notes.push(if ok {
                "at heal the old master started again, the cluster ok".into()
            } else {
                "at heal the old master started again; the cluster was not ok within 20 s".into()
            });
        }
    }
    Ok(())
}

/// The keys a restarted Redis holds once it answers (its append-only file
/// loaded).
fn keys_once_loaded(id: &str) -> Result<u64, String> {
    let started = Instant::now();
    loop {
        if redis_cli(id, &["PING"]).is_ok_and(|pong| pong == "PONG") {
            let keys = redis_cli(id, &["DBSIZE"])?;
            return keys
                .parse()
                .map_err(|_| format!("DBSIZE answered {keys:?}"));
        }
        if started.elapsed() > LOAD_WAIT {
            return Err(format!(
                "Redis did not answer within {LOAD_WAIT:?} of its restart"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
