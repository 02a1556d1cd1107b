//! `POST /v1/hits`: several hooks' hits, each exactly as `/v1/hit` would
//! run it, in one Redis pipeline per node.
//!
//! Each hit is read and checked on its own: a malformed one is answered with
//! its own `bad_request` (naming `hits[i]` and the field) and the others run.
//! Every pipeline starts with `SCRIPT LOAD` of the hit script, so a Redis
//! that lost its script cache (restart, `SCRIPT FLUSH`) runs the batch all
//! the same: no hit is ever sent twice, as a hit is not idempotent.

use super::hit::{keys_and_args, parse_reply, result_of};
use super::{budget, count, json, read_json, within, Reply, Shared};
use crate::backend::{Backend, Node};
use crate::errors::StoreError;
use crate::keys;
use crate::spans;
use ankusa_core::wire::batch::{check_count, check_settle, item_field, HitResult, HitsAnswer};
use ankusa_core::wire::{HitReply, HitRequest, SettleOp};
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use redis::Value;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tracing::{Instrument, Span};

/// The body as read: each hit still raw, so one bad hit refuses only itself.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHits {
    hits: Vec<serde_json::Value>,
    #[serde(default)]
    settle: Vec<SettleOp>,
}

type Answered = Result<HitReply, StoreError>;

/// A hit to run: its index in the batch, the hit, and its span.
type Item = (usize, HitRequest, Span);

/// What one node runs: hits and settle operations.
type NodeWork = (Vec<Item>, Vec<SettleOp>);

pub async fn hits(shared: &Shared, req: Request<Incoming>) -> Result<Reply, StoreError> {
    let budget = budget(shared, &req)?;
    let raw: RawHits = read_json(req, super::MAX_BODY_BYTES, "hits request").await?;
    check_count(raw.hits.len()).map_err(|e| StoreError::BadRequest(e.to_string()))?;
    check_settle(&raw.settle).map_err(|e| StoreError::BadRequest(e.to_string()))?;
    let settles = raw.settle;
    let total = raw.hits.len();
    let mut results: Vec<Option<HitResult>> = vec![None; total];
    let mut valid = Vec::with_capacity(total);
    for (i, item) in raw.hits.into_iter().enumerate() {
        match read_item(i, item) {
            Ok(hit) => {
                if let Some(node) = &hit.node {
                    shared.edges.note(node);
                }
                let span = spans::hit(&hit);
                valid.push((i, hit, span));
            }
            Err(e) => results[i] = Some(refused(&e)),
        }
    }
    let mut settled = None;
    if !valid.is_empty() || !settles.is_empty() {
        shared.backend.conn()?;
        let backend = Arc::clone(&shared.backend);
        let settle_count = settles.len();
        let (answered, settles_ok) = within(shared, "hits", budget, async move {
            Ok(execute(backend, valid, settles).await)
        })
        .await?;
        for (i, answer) in failed_as_a_whole(answered)? {
            results[i] = Some(match answer {
                Ok(mut reply) => {
                    reply.edges = shared.edges.count();
                    HitResult::Reply(reply)
                }
                Err(e) => refused(&e),
            });
        }
        if settles_ok && settle_count > 0 {
            settled = Some(settle_count);
        }
    }
    let results: Vec<HitResult> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| refused(&StoreError::Internal("a hit was not run".into()))))
        .collect();
    shared.backend.metrics.hits_per_call.observe(total as f64);
    count(shared, "hits", "ok");
    Ok(json(StatusCode::OK, &HitsAnswer { results, settled }))
}

/// A batch none of whose hits reached Redis fails as a whole, as `/v1/hit`
/// would: the caller's breaker sees one failed call, not a 200 of failures.
/// The first hit's error stands for the call; a batch with one hit answered
/// is answered hit by hit.
fn failed_as_a_whole(
    answered: Vec<(usize, Answered)>,
) -> Result<Vec<(usize, Answered)>, StoreError> {
    if answered.iter().any(|(_, a)| a.is_ok()) {
        return Ok(answered);
    }
    match answered.into_iter().next() {
        Some((_, Err(e))) => Err(e),
        _ => Err(StoreError::Internal("an empty batch was run".into())),
    }
}

fn read_item(index: usize, item: serde_json::Value) -> Result<HitRequest, StoreError> {
    let hit: HitRequest = serde_json::from_value(item)
        .map_err(|e| StoreError::BadRequest(format!("hits[{index}]: not a valid hit: {e}")))?;
    hit.validate()
        .map_err(|e| StoreError::BadRequest(item_field(index, &e).to_string()))?;
    Ok(hit)
}

fn refused(e: &StoreError) -> HitResult {
    HitResult::Refused(e.body())
}

/// Runs every hit and riding settle operation, one pipeline per Redis
/// node, the nodes at once; whether every settle operation was applied.
async fn execute(
    backend: Arc<Backend>,
    hits: Vec<Item>,
    settles: Vec<SettleOp>,
) -> (Vec<(usize, Answered)>, bool) {
    let mut by_node: HashMap<Node, NodeWork> = HashMap::new();
    for (i, hit, span) in hits {
        // Every key of one hit carries its tenant's hash tag: one slot.
        let node = backend.node_of(&keys::override_of(hit.tenant().unwrap_or_default()));
        by_node.entry(node).or_default().0.push((i, hit, span));
    }
    for op in settles {
        let node = backend.node_of(&keys::claim(op.claim()));
        by_node.entry(node).or_default().1.push(op);
    }
    let mut sends = JoinSet::new();
    for (node, (group, ops)) in by_node {
        let backend = Arc::clone(&backend);
        let send = async move { send(&backend, &node, group, &ops).await };
        sends.spawn(send.in_current_span());
    }
    let mut out = Vec::new();
    let mut settles_ok = true;
    // The nodes are waited for at once: the request waited for the slowest.
    let mut waited = Duration::ZERO;
    while let Some(joined) = sends.join_next().await {
        match joined {
            Ok((answers, ok, took)) => {
                out.extend(answers);
                settles_ok &= ok;
                waited = waited.max(took);
            }
            Err(e) => {
                tracing::warn!("hits pipeline task: {e}");
                settles_ok = false;
            }
        }
    }
    spans::redis(&Span::current(), waited);
    (out, settles_ok)
}

/// One pipeline to `node`: `SCRIPT LOAD` of the hit script (and of the
/// settle script, with settle operations among `ops`), one EVALSHA per hit, then
/// the settle operations. Each hit gets its own reply, or its own error;
/// the settle operations succeed or fail together. Third: how long the
/// pipeline waited for Redis, recorded on each hit's span with its result.
async fn send(
    backend: &Backend,
    node: &Node,
    group: Vec<Item>,
    ops: &[SettleOp],
) -> (Vec<(usize, Answered)>, bool, Duration) {
    let mut pipe = redis::pipe();
    pipe.cmd("SCRIPT")
        .arg("LOAD")
        .arg(&backend.scripts.hit_text);
    let settles = !ops.is_empty();
    if settles {
        pipe.cmd("SCRIPT")
            .arg("LOAD")
            .arg(backend.scripts.settle_text);
    }
    let loads = 1 + usize::from(settles);
    let sha = backend.scripts.hit.get_hash();
    for (_, hit, _) in &group {
        let (keys, args) = keys_and_args(hit);
        pipe.cmd("EVALSHA")
            .arg(sha)
            .arg(keys.len())
            .arg(&keys)
            .arg(&args);
    }
    for op in ops {
        crate::batcher::push_op(&mut pipe, backend, op);
    }
    let expected = loads + group.len() + ops.len();
    let started = Instant::now();
    let result = backend.send_pipeline_values(node, &pipe, expected).await;
    let waited = started.elapsed();
    let values = match result {
        Ok(values) if values.len() == expected => values,
        Ok(values) => {
            let e = format!("{} replies to {expected} commands", values.len());
            return (
                every(group, waited, || StoreError::Internal(e.clone())),
                false,
                waited,
            );
        }
        Err(e) => {
            if matches!(e.kind(), redis::ErrorKind::Moved | redis::ErrorKind::Ask) {
                backend.refresh_slots().await;
            } else {
                tracing::debug!("hits pipeline on {node:?}: {e}");
            }
            return (
                every(group, waited, || StoreError::from_redis(&e)),
                false,
                waited,
            );
        }
    };
    let mut values = values.into_iter().skip(loads);
    let mut answers = Vec::with_capacity(group.len());
    let mut moved = false;
    for (i, _, span) in group {
        let answer = match values.next() {
            Some(Value::Array(reply)) => parse_reply(&reply),
            Some(Value::ServerError(e)) if matches!(e.code(), "MOVED" | "ASK") => {
                moved = true;
                Err(StoreError::RedisUnavailable(
                    "Cluster slots are moving".into(),
                ))
            }
            Some(Value::ServerError(e)) => Err(StoreError::Internal(format!("hit script: {e:?}"))),
            other => Err(StoreError::Internal(format!(
                "unexpected hit script reply {other:?}"
            ))),
        };
        note(&span, &answer, waited);
        answers.push((i, answer));
    }
    let settled: Vec<Value> = values.collect();
    let settles_ok = settled.iter().all(|v| !matches!(v, Value::ServerError(_)));
    if moved {
        backend.refresh_slots().await;
    }
    if settles_ok {
        crate::batcher::count_outcomes(backend, ops, &settled);
    }
    (answers, settles_ok, waited)
}

/// Every hit of `group` failed with `e` after `waited`.
fn every(group: Vec<Item>, waited: Duration, e: impl Fn() -> StoreError) -> Vec<(usize, Answered)> {
    group
        .into_iter()
        .map(|(i, _, span)| {
            let answer = Err(e());
            note(&span, &answer, waited);
            (i, answer)
        })
        .collect()
}

/// Records a hit's result and its pipeline's wait for Redis on its span.
fn note(span: &Span, answer: &Answered, waited: Duration) {
    spans::redis(span, waited);
    match answer {
        Ok(reply) => spans::result(span, result_of(&reply.answer)),
        Err(e) => spans::result(span, e.code()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_core::wire::HitAnswer;

    fn failed() -> Answered {
        Err(StoreError::RedisUnavailable("down".into()))
    }

    #[test]
    fn a_batch_fails_as_a_whole_only_when_no_hit_was_answered() {
        let all_failed = failed_as_a_whole(vec![(1, failed()), (0, failed())]);
        assert!(matches!(all_failed, Err(StoreError::RedisUnavailable(_))));
        let ok = HitReply {
            answer: HitAnswer::Ok,
            in_force: None,
            levels: Vec::new(),
            edges: None,
        };
        let one_answered = vec![(0, failed()), (1, Ok(ok))];
        let kept = failed_as_a_whole(one_answered).expect("answered hit by hit");
        assert_eq!(kept.len(), 2);
        assert!(kept[0].1.is_err() && kept[1].1.is_ok());
        assert!(matches!(
            failed_as_a_whole(Vec::new()),
            Err(StoreError::Internal(_))
        ));
    }
}
