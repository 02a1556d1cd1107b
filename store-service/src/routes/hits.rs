//! `POST /v1/hits`: several hooks' hits, each exactly as `/v1/hit` would
//! run it, in one Redis pipeline per node.
//!
//! Each hit is read and checked on its own: a malformed one is answered with
//! its own `bad_request` (naming `hits[i]` and the field) and the others run.
//! Every pipeline starts with `SCRIPT LOAD` of the hit script, so a Redis
//! that lost its script cache (restart, `SCRIPT FLUSH`) runs the batch all
//! the same: no hit is ever sent twice, as a hit is not idempotent.

use super::hit::{keys_and_args, parse_reply};
use super::{budget, count, json, read_json, within, Reply, Shared};
use crate::backend::{Backend, Node};
use crate::errors::StoreError;
use crate::keys;
use ankusa_core::wire::{ErrorBody, HitReply, HitRequest};
use ankusa_core::wire_batch::{check_count, item_field, HitResult, HitsAnswer};
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use redis::Value;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::task::JoinSet;

/// The body as read: each hit still raw, so one bad hit refuses only itself.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHits {
    hits: Vec<serde_json::Value>,
}

type Answered = Result<HitReply, StoreError>;

pub async fn hits(shared: &Shared, req: Request<Incoming>) -> Result<Reply, StoreError> {
    let budget = budget(shared, &req)?;
    let raw: RawHits = read_json(req, super::MAX_BODY_BYTES, "hits request").await?;
    check_count(raw.hits.len()).map_err(|e| StoreError::BadRequest(e.to_string()))?;
    let total = raw.hits.len();
    let mut results: Vec<Option<HitResult>> = vec![None; total];
    let mut valid = Vec::with_capacity(total);
    for (i, item) in raw.hits.into_iter().enumerate() {
        match read_item(i, item) {
            Ok(hit) => valid.push((i, hit)),
            Err(e) => results[i] = Some(refused(&e)),
        }
    }
    if !valid.is_empty() {
        shared.backend.conn()?;
        let backend = Arc::clone(&shared.backend);
        let answered = within(shared, "hits", budget, async move {
            Ok(execute(backend, valid).await)
        })
        .await?;
        // A batch none of whose hits reached Redis fails as a whole, as
        // `/v1/hit` would: the caller's breaker sees one failed call.
        if answered.iter().all(|(_, a)| a.is_err()) {
            if let Some((_, Err(e))) = answered.into_iter().next() {
                return Err(e);
            }
            return Err(StoreError::Internal("an empty batch was run".into()));
        }
        for (i, answer) in answered {
            results[i] = Some(match answer {
                Ok(reply) => HitResult::Reply(reply),
                Err(e) => refused(&e),
            });
        }
    }
    let results: Vec<HitResult> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| refused(&StoreError::Internal("a hit was not run".into()))))
        .collect();
    shared.backend.metrics.hits_per_call.observe(total as f64);
    count(shared, "hits", "ok");
    Ok(json(StatusCode::OK, &HitsAnswer { results }))
}

fn read_item(index: usize, item: serde_json::Value) -> Result<HitRequest, StoreError> {
    let hit: HitRequest = serde_json::from_value(item)
        .map_err(|e| StoreError::BadRequest(format!("hits[{index}]: not a valid hit: {e}")))?;
    hit.validate()
        .map_err(|e| StoreError::BadRequest(item_field(index, &e).to_string()))?;
    Ok(hit)
}

fn refused(e: &StoreError) -> HitResult {
    let ErrorBody { error, message } = e.body();
    HitResult::Refused(ErrorBody { error, message })
}

/// Runs every hit, one pipeline per Redis node, the nodes at once.
async fn execute(backend: Arc<Backend>, hits: Vec<(usize, HitRequest)>) -> Vec<(usize, Answered)> {
    let mut by_node: HashMap<Node, Vec<(usize, HitRequest)>> = HashMap::new();
    for (i, hit) in hits {
        // Every key of one hit carries its tenant's hash tag: one slot.
        let node = backend.node_of(&keys::override_of(hit.tenant().unwrap_or_default()));
        by_node.entry(node).or_default().push((i, hit));
    }
    let mut sends = JoinSet::new();
    for (node, group) in by_node {
        let backend = Arc::clone(&backend);
        sends.spawn(async move { send(&backend, &node, group).await });
    }
    let mut out = Vec::new();
    while let Some(joined) = sends.join_next().await {
        match joined {
            Ok(answers) => out.extend(answers),
            Err(e) => log::warn!("hits pipeline task: {e}"),
        }
    }
    out
}

/// One pipeline to `node`: `SCRIPT LOAD` of the hit script, then one
/// EVALSHA per hit. Each hit gets its own reply, or its own error.
async fn send(
    backend: &Backend,
    node: &Node,
    group: Vec<(usize, HitRequest)>,
) -> Vec<(usize, Answered)> {
    let mut pipe = redis::pipe();
    pipe.cmd("SCRIPT")
        .arg("LOAD")
        .arg(&backend.scripts.hit_text);
    let sha = backend.scripts.hit.get_hash();
    for (_, hit) in &group {
        let (keys, args) = keys_and_args(hit);
        pipe.cmd("EVALSHA")
            .arg(sha)
            .arg(keys.len())
            .arg(&keys)
            .arg(&args);
    }
    let result = backend
        .send_pipeline_values(node, &pipe, group.len() + 1)
        .await;
    let values = match result {
        Ok(values) if values.len() == group.len() + 1 => values,
        Ok(values) => {
            let e = format!("{} replies to {} commands", values.len(), group.len() + 1);
            return every(group, || StoreError::Internal(e.clone()));
        }
        Err(e) => {
            if matches!(e.kind(), redis::ErrorKind::Moved | redis::ErrorKind::Ask) {
                backend.refresh_slots().await;
            } else {
                log::debug!("hits pipeline on {node:?}: {e}");
            }
            return every(group, || StoreError::from_redis(&e));
        }
    };
    let mut answers = Vec::with_capacity(group.len());
    let mut moved = false;
    for ((i, _), value) in group.into_iter().zip(values.into_iter().skip(1)) {
        let answer = match value {
            Value::Array(reply) => parse_reply(&reply),
            Value::ServerError(e) if matches!(e.code(), "MOVED" | "ASK") => {
                moved = true;
                Err(StoreError::RedisUnavailable(
                    "Cluster slots are moving".into(),
                ))
            }
            Value::ServerError(e) => Err(StoreError::Internal(format!("hit script: {e:?}"))),
            other => Err(StoreError::Internal(format!(
                "unexpected hit script reply {other:?}"
            ))),
        };
        answers.push((i, answer));
    }
    if moved {
        backend.refresh_slots().await;
    }
    answers
}

fn every(group: Vec<(usize, HitRequest)>, e: impl Fn() -> StoreError) -> Vec<(usize, Answered)> {
    group.into_iter().map(|(i, _)| (i, Err(e()))).collect()
}
