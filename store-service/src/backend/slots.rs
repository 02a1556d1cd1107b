//! Which Cluster master serves which slot: `CLUSTER SLOTS` read and parsed,
//! and the node a key's pipeline goes to.

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
    Master {
        host: String,
        port: u16,
    },
    /// The slot map doesn't know this slot yet; route by the slot itself.
    Slot(u16),
}

impl Backend {
    /// Re-reads which master serves which slots, to send one pipeline per master.
    pub async fn refresh_slots(&self) {
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
        let slot = get_slot(key.as_bytes());
        let owners = self.slots.read().unwrap_or_else(|p| p.into_inner());
        owners
            .iter()
            .find(|o| o.start <= slot && slot <= o.end)
            .map_or(Node::Slot(slot), |o| Node::Master {
                host: o.host.clone(),
                port: o.port,
            })
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
