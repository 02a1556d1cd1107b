//! One bounded step of `SCAN` over every key of the store's Redis: on a
//! single Redis, the one key space; on a Cluster, each master's in turn (in
//! the order of the slot map, by address), each on its own connection. The
//! operators' listing of claims walks it a step per call.

use super::direct::Addr;
use super::{Backend, PROBE_TIMEOUT};
use crate::errors::StoreError;
use redis::aio::ConnectionLike;
use redis::Value;

/// Where a step ran and where the next one starts: the master's index in
/// [`Backend::scan_targets`] (0 on a single Redis) and its `SCAN` cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanAt {
    pub target: usize,
    pub cursor: u64,
}

/// One step's keys with their values (None: gone, or not a string), and
/// the next position (None: every key space was walked).
pub struct Step {
    pub found: Vec<(String, Option<String>)>,
    pub next: Option<ScanAt>,
}

impl Backend {
    /// How many key spaces a scan walks: 1, or the Cluster's masters.
    fn scan_targets(&self) -> Vec<Addr> {
        let owners = self.slots.read().unwrap_or_else(|p| p.into_inner());
        let mut masters: Vec<Addr> = owners
            .iter()
            .map(|o| Addr {
                host: o.host.clone(),
                port: o.port,
            })
            .collect();
        masters.sort_by(|a, b| (&a.host, a.port).cmp(&(&b.host, b.port)));
        masters.dedup();
        masters
    }

    /// `SCAN at.cursor MATCH pattern COUNT count` on the key space `at`
    /// names, then `GET` of every key found, in one pipeline.
    pub async fn scan_step(
        &self,
        at: ScanAt,
        pattern: &str,
        count: u32,
    ) -> Result<Step, StoreError> {
        let redis = |e: redis::RedisError| StoreError::from_redis(&e);
        let (spaces, reply) = if self.is_cluster() {
            let masters = self.scan_targets();
            let addr = masters.get(at.target).ok_or_else(|| {
                StoreError::BadRequest(format!(
                    "cursor: key space {} is not one of the {} masters (the Cluster changed: \
                     start again without a cursor)",
                    at.target,
                    masters.len()
                ))
            })?;
            let mut conn = self.direct.get(addr, PROBE_TIMEOUT).await.map_err(redis)?;
            (
                masters.len(),
                scan_on(&mut conn, at.cursor, pattern, count).await,
            )
        } else {
            let mut conn = self.conn()?;
            (1, scan_on(&mut conn, at.cursor, pattern, count).await)
        };
        let (cursor, found) = reply.map_err(redis)?;
        let next = match cursor {
            0 if at.target + 1 < spaces => Some(ScanAt {
                target: at.target + 1,
                cursor: 0,
            }),
            0 => None,
            cursor => Some(ScanAt {
                target: at.target,
                cursor,
            }),
        };
        Ok(Step { found, next })
    }
}

type Found = (u64, Vec<(String, Option<String>)>);

async fn scan_on<C: ConnectionLike + Send>(
    conn: &mut C,
    cursor: u64,
    pattern: &str,
    count: u32,
) -> redis::RedisResult<Found> {
    let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(count)
        .query_async(conn)
        .await?;
    if keys.is_empty() {
        return Ok((next, Vec::new()));
    }
    let mut gets = redis::pipe();
    for key in &keys {
        // A key of another type (none of ours match) reads as nothing.
        gets.cmd("EVAL")
            .arg("if redis.call('TYPE', KEYS[1]).ok == 'string' then return redis.call('GET', KEYS[1]) end return false")
            .arg(1)
            .arg(key);
    }
    let values: Vec<Value> = gets.query_async(conn).await?;
    let found = keys
        .into_iter()
        .zip(values)
        .map(|(key, value)| {
            let text = match value {
                Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                _ => None,
            };
            (key, text)
        })
        .collect();
    Ok((next, found))
}
