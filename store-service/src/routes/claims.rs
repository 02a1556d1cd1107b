//! `GET /v1/claims` and `POST /v1/claims/release`: an operator lists the
//! pending claims a node made and releases them (see [`crate::claims`]).

use super::release::release_each;
use super::{budget, count, json, read_json, within, Reply, Shared};
use crate::claims::{cursor_text, ClaimsQuery, Pending, ReleaseRequest, SCAN_COUNT};
use crate::errors::StoreError;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use std::sync::Arc;

/// One step of `SCAN` (about [`SCAN_COUNT`] keys): the node's pending claims
/// among them, and the cursor of the next step (null: done). A page may be
/// empty while the cursor is not: call again with it.
pub async fn list(shared: &Shared, req: Request<Incoming>) -> Result<Reply, StoreError> {
    let query = ClaimsQuery::parse(req.uri().query()).map_err(StoreError::BadRequest)?;
    let budget = budget(shared, &req)?;
    let backend = Arc::clone(&shared.backend);
    let asked = query.clone();
    let step = within(shared, "claims", budget, async move {
        backend
            .scan_step(asked.at, &asked.pattern(), SCAN_COUNT)
            .await
    })
    .await?;
    let claims: Vec<Pending> = step
        .found
        .iter()
        .filter_map(|(key, value)| Pending::of(key, value.as_deref()?))
        .filter(|claim| query.lists(claim))
        .collect();
    count(shared, "claims", "ok");
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({
            "node": query.node,
            "claims": claims,
            "cursor": step.next.map(cursor_text),
        }),
    ))
}

/// Releases each claim named while it still holds the same pending value
/// (hook and node): `released`, and `kept` (it held anything else).
pub async fn release(shared: &Shared, req: Request<Incoming>) -> Result<Reply, StoreError> {
    let budget = budget(shared, &req)?;
    let asked: ReleaseRequest =
        read_json(shared, req, super::MAX_BODY_BYTES, "claims release").await?;
    asked.check().map_err(StoreError::BadRequest)?;
    let calls = asked
        .claims
        .iter()
        .map(|c| (c.redis_key(), c.value()))
        .collect();
    let backend = Arc::clone(&shared.backend);
    let released = within(
        shared,
        "claims_release",
        budget,
        release_each(backend, |s| &s.claims_release, calls),
    )
    .await?;
    count(shared, "claims_release", "ok");
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({"released": released.0, "kept": released.1}),
    ))
}
