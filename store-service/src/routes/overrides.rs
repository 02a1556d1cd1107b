//! `/v1/overrides[/<tenant>]`: fleet overrides set at runtime.
//!
//! `PUT /v1/overrides/<tenant>` stores an [`Override`] under
//! [`keys::override_of`] with its expiry as a Redis `PXAT` (so it survives
//! a store restart and vanishes on its own), and records the change in the
//! [`override_log`]. `GET` reads one, `DELETE` removes one, and
//! `GET /v1/overrides?since=V` answers the changes since version `V`, a page
//! at a time (what edges poll; see [`ankusa_core::fleet::overrides::page`]). Expiry
//! and the version are taken from Redis's clock, the same clock the hit
//! script charges on.
//!
//! Changing an override does not reset the tenant's buckets: a lowered burst
//! makes a fuller bucket count as full (the GCRA's level clamp) and it drains
//! at the new rate, so the lowered limit holds at once; a raised one gives
//! room at once. `POST /v1/reset` still forgets the buckets when wanted.

use super::{budget, count, json, read_json, within, Reply, Shared};
use crate::backend::Backend;
use crate::errors::StoreError;
use crate::keys;
/// A stored override (what the hit answer carries, too).
pub use crate::override_log::parse_override as parse;
use crate::override_log::{self, parse_override};
use ankusa_core::fleet::overrides::page::ListQuery;
use ankusa_core::fleet::overrides::{check_tenant, Override, OverrideRequest};
use ankusa_core::wire::OVERRIDE_PREFIX;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use std::sync::Arc;
use std::time::Instant;

/// Redis's clock in unix ms.
async fn redis_now_ms(backend: &Backend) -> Result<u64, StoreError> {
    let mut conn = backend.conn()?;
    let (s, us): (u64, u64) = redis::cmd("TIME")
        .query_async(&mut conn)
        .await
        .map_err(|e| StoreError::from_redis(&e))?;
    Ok(s * 1000 + us / 1000)
}

fn observe(backend: &Backend, started: Instant) {
    backend
        .metrics
        .redis_seconds
        .observe(started.elapsed().as_secs_f64());
}

/// The tenant of `/v1/overrides/<tenant>`, checked as a name.
fn tenant_of(path: &str) -> Result<String, StoreError> {
    let tenant = path.trim_start_matches(OVERRIDE_PREFIX);
    check_tenant(tenant).map_err(|e| StoreError::BadRequest(e.to_string()))?;
    Ok(tenant.to_string())
}

pub async fn one(shared: &Shared, req: Request<Incoming>) -> Result<Reply, StoreError> {
    let tenant = tenant_of(req.uri().path())?;
    let budget = budget(shared, &req)?;
    let backend = Arc::clone(&shared.backend);
    match *req.method() {
        Method::PUT => {
            let body: OverrideRequest =
                read_json(shared, req, super::MAX_BODY_BYTES, "override").await?;
            let stored = within(shared, "overrides", budget, async move {
                put(&backend, &tenant, body).await
            })
            .await?;
            count(shared, "override", "put");
            Ok(json(StatusCode::OK, &stored))
        }
        Method::GET => {
            let found = within(shared, "overrides", budget, async move {
                get(&backend, &tenant).await.map(|o| (tenant, o))
            })
            .await?;
            count(shared, "override", "get");
            Ok(match found {
                (_, Some(o)) => json(StatusCode::OK, &o),
                (tenant, None) => {
                    let none = StoreError::NoOverride { tenant };
                    json(none.status(), &none.body())
                }
            })
        }
        Method::DELETE => {
            let deleted = within(shared, "overrides", budget, async move {
                let mut conn = backend.conn()?;
                let started = Instant::now();
                let deleted: u64 = redis::cmd("DEL")
                    .arg(keys::override_of(&tenant))
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| StoreError::from_redis(&e))?;
                observe(&backend, started);
                override_log::record_delete(&backend, &tenant).await?;
                Ok((tenant, deleted))
            })
            .await?;
            count(shared, "override", "delete");
            Ok(json(
                StatusCode::OK,
                &serde_json::json!({ "tenant": deleted.0, "deleted": deleted.1 }),
            ))
        }
        ref other => Err(StoreError::MethodNotAllowed {
            method: other.to_string(),
            path: format!("{OVERRIDE_PREFIX}{tenant}"),
        }),
    }
}

pub async fn list(shared: &Shared, req: Request<Incoming>) -> Result<Reply, StoreError> {
    let query =
        ListQuery::parse(req.uri().query()).map_err(|e| StoreError::BadRequest(e.to_string()))?;
    let budget = budget(shared, &req)?;
    let backend = Arc::clone(&shared.backend);
    let asked = query.clone();
    let page = within(shared, "overrides", budget, async move {
        override_log::page(&backend, &asked).await
    })
    .await?;
    let kind = match (page.gap, query.since) {
        (true, _) => "gap",
        (false, 0) => "full",
        (false, _) => "delta",
    };
    count(shared, "overrides", kind);
    let mut reply = Reply::new(Full::new(Bytes::from(page.body)));
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(reply)
}

async fn put(
    backend: &Backend,
    tenant: &str,
    body: OverrideRequest,
) -> Result<Override, StoreError> {
    let now = redis_now_ms(backend).await?;
    let o = body
        .into_override(tenant, now)
        .map_err(|e| StoreError::BadRequest(e.to_string()))?;
    let text = serde_json::to_string(&o).map_err(|e| StoreError::Internal(e.to_string()))?;
    let mut conn = backend.conn()?;
    let started = Instant::now();
    let mut set = redis::cmd("SET");
    set.arg(keys::override_of(tenant)).arg(&text);
    if let Some(at) = o.expires_at_ms {
        set.arg("PXAT").arg(at);
    }
    let _: () = set
        .query_async(&mut conn)
        .await
        .map_err(|e| StoreError::from_redis(&e))?;
    observe(backend, started);
    override_log::record_put(backend, &o, &text).await?;
    Ok(o)
}

/// The tenant's override, None when there is none in force.
pub async fn get(backend: &Backend, tenant: &str) -> Result<Option<Override>, StoreError> {
    let mut conn = backend.conn()?;
    let started = Instant::now();
    let text: Option<String> = redis::cmd("GET")
        .arg(keys::override_of(tenant))
        .query_async(&mut conn)
        .await
        .map_err(|e| StoreError::from_redis(&e))?;
    observe(backend, started);
    text.map(|t| parse_override(&t)).transpose()
}
