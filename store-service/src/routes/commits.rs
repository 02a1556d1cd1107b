//! `GET /v1/commits` and `POST /v1/commits/release`: an operator lists the
//! commits a node made without a verified receipt and removes them (see
//! [`crate::commits`]).

use super::release::release_each;
use super::{budget, count, json, read_json, within, Reply, Shared};
use crate::claims::{cursor_text, ClaimsQuery, SCAN_COUNT};
use crate::commits::{self, ReleaseRequest, Unproven};
use crate::errors::StoreError;
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use std::sync::Arc;

/// One step of `SCAN` (about [`SCAN_COUNT`] keys): the node's unproven
/// commits in the index hashes among them, and the cursor of the next step
/// (null: done). A page may be empty while the cursor is not: call again.
pub async fn list(shared: &Shared, req: Request<Incoming>) -> Result<Reply, StoreError> {
    let query = ClaimsQuery::parse(req.uri().query()).map_err(StoreError::BadRequest)?;
    let budget = budget(shared, &req)?;
    let backend = Arc::clone(&shared.backend);
    let pattern = commits::pattern(&query);
    let at = query.at;
    let step = within(shared, "commits", budget, async move {
        backend.scan_hash_step(at, &pattern, SCAN_COUNT).await
    })
    .await?;
    let listed: Vec<Unproven> = step
        .found
        .iter()
        .flat_map(|(key, pairs)| Unproven::all_of(key, pairs))
        .filter(|commit| commits::lists(&query, commit))
        .collect();
    count(shared, "commits", "ok");
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({
            "node": query.node,
            "commits": listed,
            "cursor": step.next.map(cursor_text),
        }),
    ))
}

/// Removes each commit named while its node's index lists it under the same
/// hook id and its event is committed under it: `released`, and `kept`.
pub async fn release(shared: &Shared, req: Request<Incoming>) -> Result<Reply, StoreError> {
    let budget = budget(shared, &req)?;
    let asked: ReleaseRequest =
        read_json(shared, req, super::MAX_BODY_BYTES, "commits release").await?;
    asked.check().map_err(StoreError::BadRequest)?;
    let calls = asked
        .commits
        .iter()
        .map(|c| {
            let (keys, args) = c.release_call();
            (keys.to_vec(), args.to_vec())
        })
        .collect();
    let backend = Arc::clone(&shared.backend);
    let released = within(
        shared,
        "commits_release",
        budget,
        release_each(backend, |s| &s.commits_release, calls),
    )
    .await?;
    count(shared, "commits_release", "ok");
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({"released": released.0, "kept": released.1}),
    ))
}
