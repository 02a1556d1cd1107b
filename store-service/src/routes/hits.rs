//! `POST /v1/hits`: several hooks' hits, each exactly as `/v1/hit` would
//! run it, in one Redis pipeline per node.
//!
//! Each hit is read and checked on its own: a malformed one is answered with
//! its own `bad_request` (naming `hits[i]` and the field) and the others run.
//! The hits call the hit script by its hash; a Redis that lost its script
//! cache (restart, `SCRIPT FLUSH`) answers those `NOSCRIPT` without running
//! them, and they alone are sent again after `SCRIPT LOAD`: no hit is ever
//! sent twice, as a hit is not idempotent.

use super::hit::{answer_of, hit_cmd, node_of, result_of};
use super::{budget, count, json, nodes, read_json, resend_deadline, within, Reply, Shared};
use crate::backend::{Backend, Node};
use crate::errors::StoreError;
use crate::keys;
use crate::receipts;
use crate::spans;
use crate::tokens::Caller;
use ankusa_core::wire::batch::{check_count, check_settle, item_field, HitResult, HitsAnswer};
use ankusa_core::wire::version::WIRE_VERSION;
use ankusa_core::wire::{tolerant, HitReply, HitRequest, SettleOp};
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use redis::Value;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;
use tracing::{Instrument, Span};

/// The body as read: each hit still its JSON text, so one bad hit refuses
/// only itself, and a good one is read straight into a [`HitRequest`]
/// (no `serde_json::Value` tree built first).
#[derive(Deserialize)]
struct RawHits {
    hits: Vec<Box<RawValue>>,
    #[serde(default)]
    settle: Vec<SettleOp>,
}

type Answered = Result<HitReply, StoreError>;

/// A hit to run: its index in the batch, the hit, and its span.
type Item = (usize, HitRequest, Span);

/// What one node runs: hits and settle operations.
type NodeWork = (Vec<Item>, Vec<SettleOp>);

pub async fn hits(
    shared: &Shared,
    req: Request<Incoming>,
    caller: &Caller,
) -> Result<Reply, StoreError> {
    let mut budget = budget(shared, &req)?;
    let raw: RawHits = read_json(shared, req, super::MAX_BODY_BYTES, "hits request").await?;
    check_count(raw.hits.len()).map_err(|e| StoreError::BadRequest(e.to_string()))?;
    check_settle(&raw.settle).map_err(|e| StoreError::BadRequest(e.to_string()))?;
    nodes::check_settle(shared, caller, "hits", &raw.settle)?;
    // `settled` counts every riding operation the store is done with: one
    // the receipt check left out is answered, and sending it again would
    // change nothing.
    let riding = raw.settle.len();
    let settles = receipts::screen(&shared.receipts, &shared.backend.metrics, raw.settle);
    let total = raw.hits.len();
    let mut results: Vec<Option<HitResult>> = vec![None; total];
    let mut valid = Vec::with_capacity(total);
    // Each distinct node name is admitted once (a batch is one edge's).
    let mut admitted: HashMap<String, Result<(), StoreError>> = HashMap::new();
    for (i, item) in raw.hits.iter().enumerate() {
        let read = read_item(shared, i, item)
            .and_then(|hit| nodes::check_hit(shared, caller, "hits", &hit).map(|()| hit));
        let hit = match read {
            Ok(hit) => hit,
            Err(e) => {
                results[i] = Some(refused(&e));
                continue;
            }
        };
        if let Some(node) = &hit.node {
            if !admitted.contains_key(node) {
                // Asking Redis about a new name spends the same budget.
                let asked = Instant::now();
                let done = nodes::admit(shared, caller, "hits", node, budget).await;
                budget = budget.saturating_sub(asked.elapsed());
                match done {
                    Err(e @ StoreError::NodeForbidden { .. }) => {
                        admitted.insert(node.clone(), Err(e))
                    }
                    // Redis unreached: the batch fails as a whole, as below.
                    Err(e) => return Err(e),
                    Ok(()) => admitted.insert(node.clone(), Ok(())),
                };
            }
            if let Some(Err(e)) = admitted.get(node) {
                results[i] = Some(refused(e));
                continue;
            }
        }
        let span = spans::hit(&hit);
        valid.push((i, hit, span));
    }
    let mut settled = (riding > 0 && settles.is_empty()).then_some(riding);
    if !valid.is_empty() || !settles.is_empty() {
        shared.backend.conn()?;
        let backend = Arc::clone(&shared.backend);
        let settle_count = settles.len();
        let deadline = resend_deadline(budget);
        let (answered, settles_ok) = within(shared, "hits", budget, async move {
            Ok(execute(backend, valid, settles, deadline).await)
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
            settled = Some(riding);
        }
    }
    let results: Vec<HitResult> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| refused(&StoreError::Internal("a hit was not run".into()))))
        .collect();
    shared.backend.metrics.hits_per_call.observe(total as f64);
    count(shared, "hits", "ok");
    Ok(json(
        StatusCode::OK,
        &HitsAnswer {
            results,
            settled,
            wire: Some(WIRE_VERSION),
        },
    ))
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

fn read_item(shared: &Shared, index: usize, item: &RawValue) -> Result<HitRequest, StoreError> {
    let metrics = &shared.backend.metrics;
    let hit: HitRequest = tolerant::from_str(item.get(), |field| {
        metrics.unknown_field(&format!("hits.{field}"))
    })
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
    deadline: Instant,
) -> (Vec<(usize, Answered)>, bool) {
    let mut by_node: HashMap<Node, NodeWork> = HashMap::new();
    for (i, hit, span) in hits {
        let node = node_of(&backend, &hit);
        by_node.entry(node).or_default().0.push((i, hit, span));
    }
    for op in settles {
        let node = backend.node_of(&keys::claim(op.claim()));
        by_node.entry(node).or_default().1.push(op);
    }
    let mut sends = JoinSet::new();
    for (node, (group, ops)) in by_node {
        let backend = Arc::clone(&backend);
        let send = async move { send(&backend, &node, group, &ops, deadline).await };
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

/// One pipeline to `node`: one EVALSHA per hit, then the settle script's
/// calls for the settle operations (one per tenant).
/// Each hit gets its own reply, or its own error; a hit Redis did not run
/// (its script cache empty: after `SCRIPT LOAD` of the scripts; a Cluster
/// slot moving: where the Cluster says) is sent again by itself, until
/// `deadline` (see `Backend::run_once`).
/// Second: whether every settle operation was applied. Third: how long the
/// pipelines waited for Redis, recorded on each hit's span with its result.
async fn send(
    backend: &Backend,
    node: &Node,
    group: Vec<Item>,
    ops: &[SettleOp],
    deadline: Instant,
) -> (Vec<(usize, Answered)>, bool, Duration) {
    let loads = &backend.scripts.loads[..if ops.is_empty() { 1 } else { 2 }];
    let mut cmds = redis::pipe();
    for (_, hit, _) in &group {
        cmds.add_command(hit_cmd(backend, hit));
    }
    let calls = crate::batcher::settle_calls(backend, ops);
    for (cmd, _) in &calls {
        cmds.add_command(cmd.clone());
    }
    let (replies, waited) = backend.run_once(node, loads, &cmds, deadline).await;
    let mut replies = replies.into_iter();
    let mut answers = Vec::with_capacity(group.len());
    for (i, _, span) in group {
        let answer = replies.next().map_or_else(
            || Err(StoreError::Internal("a hit had no reply".into())),
            answer_of,
        );
        note(&span, &answer, waited);
        answers.push((i, answer));
    }
    let settled: Vec<Value> = replies.map_while(Result::ok).collect();
    let settles_ok = match crate::batcher::per_op(&calls, &settled) {
        Ok(outcomes) => {
            crate::batcher::count_outcomes(backend, ops, &outcomes);
            true
        }
        Err(_) => false,
    };
    (answers, settles_ok, waited)
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
            wire: None,
            unknown_fields: 0,
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
