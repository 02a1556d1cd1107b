//! What `POST /v1/claims/release` and `POST /v1/commits/release` share: one
//! call of their release script per item named, on one connection, each
//! answering 1 when it removed the item and 0 when it kept it.

use crate::backend::Backend;
use crate::errors::StoreError;
use crate::scripts::Scripts;
use redis::{Script, ToRedisArgs};
use std::sync::Arc;

/// Runs `script` once per `(keys, args)` of `calls`: how many it released,
/// and how many it kept.
pub async fn release_each<K: ToRedisArgs, A: ToRedisArgs>(
    backend: Arc<Backend>,
    script: fn(&Scripts) -> &Script,
    calls: Vec<(K, A)>,
) -> Result<(u64, u64), StoreError> {
    let mut conn = backend.conn()?;
    let mut released = 0u64;
    for (keys, args) in &calls {
        let done: u64 = script(&backend.scripts)
            .key(keys)
            .arg(args)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| StoreError::from_redis(&e))?;
        released += done;
    }
    Ok((released, calls.len() as u64 - released))
}
