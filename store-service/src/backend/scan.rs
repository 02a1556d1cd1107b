//! One bounded step of `SCAN` over every key of the store's Redis: on a
//! single Redis, the one key space; on a Cluster, each master's in turn (in
//! the order of the slot map, by address), each on its own connection. The
//! operators' listings of claims and of commits walk it a step per call.

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

/// One step's keys with their values, and the next position (None: every
/// key space was walked). `T`: a string's value (None: gone, or not a
/// string), or a hash's fields and values (empty: gone, or not a hash).
pub struct Step<T = Option<String>> {
    pub found: Vec<(String, T)>,
    pub next: Option<ScanAt>,
}

/// A hash's fields and values, as `HGETALL` gives them.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// What a step reads of each key found: a string's value, or a hash's
/// entries, about [`HASH_COUNT`] at most (`HSCAN`'s first page: a hash
/// listed after some of its entries were deleted gives the next ones). A
/// key of another type (none of ours that match) reads as nothing.
const READ_STRING: &str = "if redis.call('TYPE', KEYS[1]).ok == 'string' then \
     return redis.call('GET', KEYS[1]) end return false";
const READ_HASH: &str = "if redis.call('TYPE', KEYS[1]).ok == 'hash' then \
     return redis.call('HSCAN', KEYS[1], 0, 'COUNT', ARGV[1])[2] end return {}";

/// The entries of one hash a step reads, about (a hint to Redis, `COUNT`).
pub const HASH_COUNT: u32 = 1_000;

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
        let step = self
            .scan_reading(at, pattern, count, (READ_STRING, 0))
            .await?;
        let found = step
            .found
            .into_iter()
            .map(|(key, value)| {
                let text = match value {
                    Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
                    _ => None,
                };
                (key, text)
            })
            .collect();
        Ok(Step {
            found,
            next: step.next,
        })
    }

    /// [`Backend::scan_step`] over hashes: about [`HASH_COUNT`] entries of
    /// every key found.
    pub async fn scan_hash_step(
        &self,
        at: ScanAt,
        pattern: &str,
        count: u32,
    ) -> Result<Step<Pairs>, StoreError> {
        let step = self
            .scan_reading(at, pattern, count, (READ_HASH, HASH_COUNT))
            .await?;
        let bytes = |v: &Value| match v {
            Value::BulkString(b) => Some(b.clone()),
            _ => None,
        };
        let found = step
            .found
            .into_iter()
            .map(|(key, value)| {
                let pairs = match value {
                    Value::Array(items) => items
                        .chunks_exact(2)
                        .filter_map(|p| Some((bytes(&p[0])?, bytes(&p[1])?)))
                        .collect(),
                    _ => Vec::new(),
                };
                (key, pairs)
            })
            .collect();
        Ok(Step {
            found,
            next: step.next,
        })
    }

    /// One step, each key found read by the script `read` (one key, and
    /// its one argument).
    async fn scan_reading(
        &self,
        at: ScanAt,
        pattern: &str,
        count: u32,
        read: (&str, u32),
    ) -> Result<Step<Value>, StoreError> {
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
                scan_on(&mut conn, at.cursor, pattern, count, read).await,
            )
        } else {
            let mut conn = self.conn()?;
            (1, scan_on(&mut conn, at.cursor, pattern, count, read).await)
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

type Found = (u64, Vec<(String, Value)>);

async fn scan_on<C: ConnectionLike + Send>(
    conn: &mut C,
    cursor: u64,
    pattern: &str,
    count: u32,
    (read, arg): (&str, u32),
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
    let mut reads = redis::pipe();
    for key in &keys {
        reads.cmd("EVAL").arg(read).arg(1).arg(key).arg(arg);
    }
    let values: Vec<Value> = reads.query_async(conn).await?;
    Ok((next, keys.into_iter().zip(values).collect()))
}
