//! Which Cluster master serves which slot: `CLUSTER SLOTS` read and parsed,
//! and the node a key's pipeline goes to.

use super::direct::Addr;
use super::{Backend, PROBE_TIMEOUT};
use redis::cluster_routing::get_slot;
use redis::Value;

/// A Cluster master and the slots it serves (from `CLUSTER SLOTS`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct SlotOwner {
    pub start: u16,
    pub end: u16,
    pub host: String,
    pub port: u16,
}

/// Where a pipeline goes: the single Redis, or one Cluster master.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Node {
    Single,
    Master(Addr),
    /// The slot map doesn't know this slot yet; route by the slot itself.
    Slot(u16),
}

impl Backend {
    /// Re-reads which master serves which slots, to send one pipeline per master.
    pub async fn refresh_slots(&self) {
        if !self.is_cluster() {
            return;
        }
        let Ok(mut conn) = self.conn() else { return };
        let reply = tokio::time::timeout(
            PROBE_TIMEOUT,
            redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async::<Value>(&mut conn),
        )
        .await;
        match reply {
            Ok(Ok(value)) => {
                let owners = parse_cluster_slots(&value);
                if !owners.is_empty() {
                    *self.slots.write().unwrap_or_else(|p| p.into_inner()) = owners;
                }
            }
            Ok(Err(e)) => tracing::warn!("CLUSTER SLOTS: {e}"),
            Err(_) => tracing::warn!("CLUSTER SLOTS did not answer in {PROBE_TIMEOUT:?}"),
        }
    }

    /// The node that owns `key`.
    pub fn node_of(&self, key: &str) -> Node {
        if !self.is_cluster() {
            return Node::Single;
        }
        self.node_of_slot(get_slot(key.as_bytes()))
    }

    /// The master serving `slot`, by the map as last read.
    fn node_of_slot(&self, slot: u16) -> Node {
        let owners = self.slots.read().unwrap_or_else(|p| p.into_inner());
        owners
            .iter()
            .find(|o| o.start <= slot && slot <= o.end)
            .map_or(Node::Slot(slot), |o| {
                Node::Master(Addr {
                    host: o.host.clone(),
                    port: o.port,
                })
            })
    }

    /// A `MOVED` reply: `slot` lives at `addr` from now on (the map says so
    /// at once, for this slot alone), and the whole map is read again soon.
    pub fn moved(&self, slot: u16, addr: &Addr) {
        let mut owners = self.slots.write().unwrap_or_else(|p| p.into_inner());
        let mut split = Vec::with_capacity(owners.len() + 2);
        for o in owners.drain(..) {
            if o.start <= slot && slot <= o.end {
                if o.start < slot {
                    split.push(SlotOwner {
                        end: slot - 1,
                        ..o.clone()
                    });
                }
                if slot < o.end {
                    split.push(SlotOwner {
                        start: slot + 1,
                        ..o.clone()
                    });
                }
            } else {
                split.push(o);
            }
        }
        split.push(SlotOwner {
            start: slot,
            end: slot,
            host: addr.host.clone(),
            port: addr.port,
        });
        *owners = split;
        drop(owners);
        self.slots_stale();
    }

    /// Asks the monitor to read the slot map again now (a redirect, or a
    /// master that stopped answering).
    pub fn slots_stale(&self) {
        if self.is_cluster() {
            self.stale.notify_one();
        }
    }
}

/// `CLUSTER SLOTS` → masters and their slot ranges; malformed rows are skipped.
pub fn parse_cluster_slots(value: &Value) -> Vec<SlotOwner> {
    let Value::Array(rows) = value else {
        return Vec::new();
    };
    rows.iter()
        .filter_map(|row| {
            let Value::Array(fields) = row else {
                return None;
            };
            let start = int(fields.first()?)?;
            let end = int(fields.get(1)?)?;
            let Value::Array(master) = fields.get(2)? else {
                return None;
            };
            let host = match master.first()? {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                Value::SimpleString(s) => s.clone(),
                _ => return None,
            };
            let port = int(master.get(1)?)?;
            Some(SlotOwner {
                start: u16::try_from(start).ok()?,
                end: u16::try_from(end).ok()?,
                host,
                port: u16::try_from(port).ok()?,
            })
        })
        .collect()
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RedisTarget;
    use crate::metrics::Metrics;
    use std::sync::Arc;

    fn owner(start: u16, end: u16, port: u16) -> SlotOwner {
        SlotOwner {
            start,
            end,
            host: "127.0.0.1".into(),
            port,
        }
    }

    #[test]
    fn a_moved_slot_leaves_its_neighbours_with_their_master() {
        let target = RedisTarget::Cluster(vec!["redis://127.0.0.1:7000/".into()]);
        let backend = Backend::new(
            target,
            Arc::new(Metrics::new()),
            crate::committed::Layout::Compact,
        );
        *backend.slots.write().unwrap() = vec![owner(0, 5460, 7000), owner(5461, 16383, 7001)];
        let to = Addr {
            host: "127.0.0.1".into(),
            port: 7002,
        };
        for (slot, at) in [(0, 7002), (1, 7000), (5460, 7000), (5461, 7001)] {
            if slot == 0 {
                backend.moved(0, &to);
            }
            let Node::Master(addr) = backend.node_of_slot(slot) else {
                panic!("slot {slot} has no master");
            };
            assert_eq!(addr.port, at, "slot {slot}");
        }
        backend.moved(3000, &to);
        backend.moved(16383, &to);
        let owners = backend.slots.read().unwrap().clone();
        let served: u32 = owners.iter().map(|o| u32::from(o.end - o.start) + 1).sum();
        assert_eq!(served, 16384, "{owners:?}");
        for (slot, at) in [
            (2999, 7000),
            (3000, 7002),
            (3001, 7000),
            (16382, 7001),
            (16383, 7002),
        ] {
            let Node::Master(addr) = backend.node_of_slot(slot) else {
                panic!("slot {slot} has no master");
            };
            assert_eq!(addr.port, at, "slot {slot}");
        }
    }

    #[test]
    fn cluster_slots_reply_lists_each_master_and_its_range() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("127.0.0.1", 7000),
                node("127.0.0.1", 7003),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                node("127.0.0.1", 7001),
            ]),
            Value::Array(vec![Value::Int(1)]),
        ]);
        assert_eq!(
            parse_cluster_slots(&reply),
            vec![
                SlotOwner {
                    start: 0,
                    end: 5460,
                    host: "127.0.0.1".into(),
                    port: 7000
                },
                SlotOwner {
                    start: 5461,
                    end: 16383,
                    host: "127.0.0.1".into(),
                    port: 7001
                },
            ]
        );
    }
}
