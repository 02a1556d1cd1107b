//! `POST /v1/reset`: forget a tenant's buckets (its limits changed).

use super::{budget, count, json, read_json, within, Reply, Shared};
use crate::errors::StoreError;
use crate::keys;
use ankusa_core::wire::ResetRequest;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use std::time::Instant;

pub async fn reset(shared: &Shared, req: Request<Incoming>) -> Result<Reply, StoreError> {
    let budget = budget(shared, &req)?;
    let reset: ResetRequest =
        read_json(shared, req, super::MAX_BODY_BYTES, "reset request").await?;
    reset
        .validate()
        .map_err(|e| StoreError::BadRequest(e.to_string()))?;
    let backend = std::sync::Arc::clone(&shared.backend);
    let tenant = reset.tenant.clone();
    let deleted = within(shared, "reset", budget, async move {
        let mut conn = backend.conn()?;
        let started = Instant::now();
        // Both keys share the `{tenant}` hash tag: one DEL, one slot.
        let deleted = redis::cmd("DEL")
            .arg(&keys::buckets(&tenant))
            .query_async::<u64>(&mut conn)
            .await;
        backend
            .metrics
            .redis_seconds
            .observe(started.elapsed().as_secs_f64());
        deleted.map_err(|e| StoreError::from_redis(&e))
    })
    .await?;
    count(shared, "reset", "ok");
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({ "tenant": reset.tenant, "deleted": deleted }),
    ))
}
