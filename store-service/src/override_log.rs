//! The override change log: what `GET /v1/overrides` answers from.
//!
//! Every PUT, DELETE and expiry of an override takes the next version of one
//! counter, under an epoch named when the log is first made (see
//! `scripts/override_log.lua`). The log lives under one hash tag
//! ([`keys::OVERRIDE_LOG`]), so each operation is one script on one slot,
//! one round trip, a Cluster included; a page of changes costs a range read
//! of the log and one `HMGET`, however many overrides are stored. The
//! tenant's own key ([`keys::override_of`], what the hit script reads) is
//! written beside it by the route.

use crate::backend::Backend;
use crate::errors::StoreError;
use crate::keys;
use ankusa_core::fleet::overrides::page::ListQuery;
use ankusa_core::fleet::overrides::Override;
use redis::Script;
use std::sync::LazyLock;
use std::time::Instant;

/// Deletions remembered: a caller whose version is older than the oldest
/// forgotten one is answered a gap and lists the whole.
pub const GONE_MAX: usize = 10_000;
/// Expired overrides turned into deletions by one list call, at most.
pub const SWEEP_MAX: usize = 256;

const PRELUDE: &str = include_str!("scripts/override_log.lua");

fn script(body: &str) -> Script {
    let prelude = PRELUDE
        .replace("GONE_MAX", &GONE_MAX.to_string())
        .replace("SWEEP_MAX", &SWEEP_MAX.to_string());
    let body = body.replace("SWEEP_MAX", &SWEEP_MAX.to_string());
    Script::new(&format!("{prelude}\n{body}"))
}

static PUT: LazyLock<Script> = LazyLock::new(|| script(include_str!("scripts/override_put.lua")));
static DELETE: LazyLock<Script> =
    LazyLock::new(|| script(include_str!("scripts/override_delete.lua")));
static LIST: LazyLock<Script> = LazyLock::new(|| script(include_str!("scripts/override_list.lua")));

async fn run<T: redis::FromRedisValue>(
    backend: &Backend,
    script: &Script,
    args: &[&str],
) -> Result<T, StoreError> {
    let mut conn = backend.conn()?;
    let mut call = script.prepare_invoke();
    for key in keys::OVERRIDE_LOG {
        call.key(key);
    }
    for arg in args {
        call.arg(*arg);
    }
    let started = Instant::now();
    let reply = call.invoke_async::<T>(&mut conn).await;
    backend
        .metrics
        .redis_seconds
        .observe(started.elapsed().as_secs_f64());
    reply.map_err(|e| StoreError::from_redis(&e))
}

/// Records `o` (as `text`) as the tenant's override: its version in the log.
pub async fn record_put(backend: &Backend, o: &Override, text: &str) -> Result<u64, StoreError> {
    let expiry = o.expires_at_ms.map(|at| at.to_string()).unwrap_or_default();
    run(backend, &PUT, &[&o.tenant, text, &expiry]).await
}

/// Records the tenant's override as deleted; whether the log held one.
pub async fn record_delete(backend: &Backend, tenant: &str) -> Result<bool, StoreError> {
    let deleted: u64 = run(backend, &DELETE, &[tenant]).await?;
    Ok(deleted == 1)
}

/// A page of changes as answered: an [`OverridePage`] in JSON, built by
/// the script around the overrides' stored JSON as it is (the store wrote
/// each with `serde_json` on its PUT), so a page of 1 000 costs the store no
/// parse and no re-encoding of them, and the edge checks every entry.
///
/// [`OverridePage`]: ankusa_core::fleet::overrides::page::OverridePage
pub struct RawPage {
    pub gap: bool,
    pub body: String,
}

/// The changes `q` asks for (see [`ankusa_core::fleet::overrides::page`]).
pub async fn page(backend: &Backend, q: &ListQuery) -> Result<RawPage, StoreError> {
    let since = q.since.to_string();
    let limit = q.limit.to_string();
    let epoch = q.epoch.clone().unwrap_or_default();
    let (gap, body): (u8, String) = run(backend, &LIST, &[&since, &epoch, &limit]).await?;
    Ok(RawPage {
        gap: gap == 1,
        body,
    })
}

/// Carries the overrides a store from before the change log indexed in
/// [`keys::OLD_OVERRIDE_INDEX`] into the log, then drops that index; a
/// tenant already in the log keeps its entry. What was carried over.
pub async fn carry_over(backend: &Backend) -> Result<usize, StoreError> {
    let mut conn = backend.conn()?;
    let tenants: Vec<String> = redis::cmd("ZRANGE")
        .arg(keys::OLD_OVERRIDE_INDEX)
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .map_err(|e| StoreError::from_redis(&e))?;
    let mut carried = 0;
    for tenant in &tenants {
        let text: Option<String> = redis::cmd("GET")
            .arg(keys::override_of(tenant))
            .query_async(&mut conn)
            .await
            .map_err(|e| StoreError::from_redis(&e))?;
        let listed: bool = redis::cmd("HEXISTS")
            .arg(keys::OVERRIDE_LOG[1])
            .arg(tenant)
            .query_async(&mut conn)
            .await
            .map_err(|e| StoreError::from_redis(&e))?;
        if let (Some(text), false) = (text, listed) {
            let o = parse_override(&text)?;
            record_put(backend, &o, &text).await?;
            carried += 1;
        }
    }
    let _: u64 = redis::cmd("DEL")
        .arg(keys::OLD_OVERRIDE_INDEX)
        .query_async(&mut conn)
        .await
        .map_err(|e| StoreError::from_redis(&e))?;
    Ok(carried)
}

/// A stored override; a value the store did not write is an internal error.
pub fn parse_override(text: &str) -> Result<Override, StoreError> {
    serde_json::from_str(text)
        .map_err(|e| StoreError::Internal(format!("stored override {text:?}: {e}")))
}
