//! Settle coalescing. Settle requests from every edge land on one queue; a
//! flush takes what arrived within a window (or up to a batch size) and
//! sends each Redis node one pipeline, so a batch of any size costs one
//! round trip per node. The window is cut short by the tightest caller: a
//! request is flushed no later than half its budget after it arrived, so a
//! long window never makes an edge's settle call time out.
//!
//! The queue is bounded in operations (not requests): each waiting or
//! flushing operation holds a permit, and a settle that finds too few free is
//! answered `overloaded` at once rather than growing memory while Redis is
//! slow. The edge keeps the batch and retries it.

use crate::backend::{Backend, Node};
use crate::commits;
use crate::committed;
use crate::errors::StoreError;
use crate::keys;
use ankusa_core::wire::SettleOp;
use redis::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// One settle request waiting for its flush.
struct Job {
    ops: Vec<SettleOp>,
    /// The latest its flush may start and still answer within the caller's budget.
    flush_by: Instant,
    done: oneshot::Sender<Result<usize, StoreError>>,
    /// Its room in the queue, given back once its flush is done.
    room: OwnedSemaphorePermit,
}

/// The handle routes use to queue settle operations.
#[derive(Clone)]
pub struct Settler {
    tx: mpsc::UnboundedSender<Job>,
    room: Room,
}

/// The queue's bound: one permit per operation waiting or flushing.
#[derive(Clone)]
struct Room {
    free: Arc<Semaphore>,
    max: usize,
    backend: Arc<Backend>,
}

impl Room {
    /// Sets `ankusa_store_settle_queued_ops`.
    fn show(&self) {
        let queued = self.max - self.free.available_permits();
        self.backend.metrics.settle_queued_ops.set(queued as i64);
    }
}

impl Settler {
    /// Queues `ops`, to be flushed no later than `flush_by`; the receiver
    /// yields once their flush is done. When the queue has no room for them,
    /// `overloaded` at once. A request larger than the whole queue is taken
    /// when the queue is empty.
    pub fn submit(
        &self,
        ops: Vec<SettleOp>,
        flush_by: Instant,
    ) -> Result<oneshot::Receiver<Result<usize, StoreError>>, StoreError> {
        let wanted = ops.len().clamp(1, self.room.max) as u32;
        let room = Arc::clone(&self.room.free)
            .try_acquire_many_owned(wanted)
            .map_err(|_| StoreError::Overloaded {
                queued_max: self.room.max,
            })?;
        self.room.show();
        let (done, rx) = oneshot::channel();
        if let Err(mpsc::error::SendError(job)) = self.tx.send(Job {
            ops,
            flush_by,
            done,
            room,
        }) {
            let _ = job.done.send(Err(StoreError::RedisUnavailable(
                "the settle queue is closed".into(),
            )));
        }
        Ok(rx)
    }
}

/// Starts the batcher. It runs until every [`Settler`] is dropped, flushing
/// what is queued; once `draining` turns true it stops waiting out windows.
pub fn spawn(
    backend: Arc<Backend>,
    window: Duration,
    batch_max: usize,
    queue_max: usize,
    draining: watch::Receiver<bool>,
) -> (Settler, tokio::task::JoinHandle<()>) {
    // Permits are taken in u32 counts.
    let queue_max = queue_max.clamp(1, u32::MAX as usize);
    let (tx, rx) = mpsc::unbounded_channel();
    let room = Room {
        free: Arc::new(Semaphore::new(queue_max)),
        max: queue_max,
        backend: Arc::clone(&backend),
    };
    let task = tokio::spawn(run(
        rx,
        backend,
        window,
        batch_max.max(1),
        draining,
        room.clone(),
    ));
    (Settler { tx, room }, task)
}

async fn run(
    mut rx: mpsc::UnboundedReceiver<Job>,
    backend: Arc<Backend>,
    window: Duration,
    batch_max: usize,
    mut draining: watch::Receiver<bool>,
    room: Room,
) {
    let mut flushes = JoinSet::new();
    while let Some(first) = rx.recv().await {
        let mut count = first.ops.len();
        // A window from the first arrival, cut short by any job's own deadline.
        let mut deadline = (Instant::now() + window).min(first.flush_by);
        let mut jobs = vec![first];
        while count < batch_max && !*draining.borrow() {
            tokio::select! {
                job = rx.recv() => match job {
                    Some(job) => {
                        count += job.ops.len();
                        deadline = deadline.min(job.flush_by);
                        jobs.push(job);
                    }
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
                changed = draining.changed() => if changed.is_err() { break },
            }
        }
        // Flush in the background so the next batch gathers meanwhile.
        let room = room.clone();
        let backend = Arc::clone(&backend);
        flushes.spawn(async move {
            flush(backend, jobs).await;
            room.show();
        });
        while flushes.try_join_next().is_some() {}
    }
    while flushes.join_next().await.is_some() {}
}

/// One queued operation, with the job it came from.
struct Entry {
    job: usize,
    op: SettleOp,
}

async fn flush(backend: Arc<Backend>, jobs: Vec<Job>) {
    let total: usize = jobs.iter().map(|j| j.ops.len()).sum();
    backend.metrics.settle_batch_ops.observe(total as f64);
    let mut dones = Vec::with_capacity(jobs.len());
    let mut rooms = Vec::with_capacity(jobs.len());
    let mut by_node: HashMap<Node, Vec<Entry>> = HashMap::new();
    for (i, job) in jobs.into_iter().enumerate() {
        rooms.push(job.room);
        for op in job.ops {
            let node = backend.node_of(&keys::claim(op.claim()));
            by_node.entry(node).or_default().push(Entry { job: i, op });
        }
        dones.push((job.done, None::<StoreError>));
    }
    let mut sends = JoinSet::new();
    for (node, entries) in by_node {
        let backend = Arc::clone(&backend);
        sends.spawn(async move {
            let result = apply(&backend, &node, &entries).await;
            (entries, result)
        });
    }
    let mut counts = vec![0usize; dones.len()];
    while let Some(joined) = sends.join_next().await {
        let Ok((entries, result)) = joined else {
            continue;
        };
        for entry in &entries {
            match &result {
                Ok(()) => counts[entry.job] += 1,
                Err(e) => {
                    let slot = &mut dones[entry.job].1;
                    if slot.is_none() {
                        *slot = Some(match e {
                            StoreError::RedisUnavailable(d) => {
                                StoreError::RedisUnavailable(d.clone())
                            }
                            other => StoreError::Internal(other.to_string()),
                        });
                    }
                }
            }
        }
    }
    // Room is given back before the answers leave, so a caller that settles
    // again on its answer finds it.
    drop(rooms);
    for ((done, failed), applied) in dones.into_iter().zip(counts) {
        let _ = done.send(match failed {
            Some(e) => Err(e),
            None => Ok(applied),
        });
    }
}

/// Applies `entries` on `node` in one pipeline. When a Cluster moved a slot
/// since the slot map was read, the node answers MOVED/ASK: the map is read
/// again and the entries are regrouped and sent once more. Both ops are
/// idempotent (a second promote finds the key committed, a second release
/// finds it free), so a resend is safe.
async fn apply(backend: &Backend, node: &Node, entries: &[Entry]) -> Result<(), StoreError> {
    match send(backend, node, entries).await {
        Err(Failure::Redirected) => {
            backend.refresh_slots().await;
            let mut regrouped: HashMap<Node, Vec<&Entry>> = HashMap::new();
            for entry in entries {
                let node = backend.node_of(&keys::claim(entry.op.claim()));
                regrouped.entry(node).or_default().push(entry);
            }
            for (node, group) in regrouped {
                let group: Vec<Entry> = group
                    .into_iter()
                    .map(|e| Entry {
                        job: e.job,
                        op: e.op.clone(),
                    })
                    .collect();
                match send(backend, &node, &group).await {
                    Ok(()) => {}
                    Err(Failure::Redirected) => {
                        return Err(StoreError::RedisUnavailable(
                            "Cluster slots are moving".into(),
                        ))
                    }
                    Err(Failure::Failed(e)) => return Err(e),
                }
            }
            Ok(())
        }
        Err(Failure::Failed(e)) => Err(e),
        Ok(()) => Ok(()),
    }
}

enum Failure {
    /// The node no longer serves some of the keys.
    Redirected,
    Failed(StoreError),
}

/// One pipeline to `node`: the settle script's calls ([`settle_calls`]). A Redis that lost its script cache (restart, `SCRIPT FLUSH`)
/// answers `NOSCRIPT` without running them; the batch is then sent once
/// more with `SCRIPT LOAD` in front (both ops are idempotent, so one that
/// did run is safe to send again).
async fn send(backend: &Backend, node: &Node, entries: &[Entry]) -> Result<(), Failure> {
    match send_pipeline(backend, node, entries, false).await {
        Sent::NoScript => match send_pipeline(backend, node, entries, true).await {
            Sent::Done(done) => done,
            Sent::NoScript => Err(Failure::Failed(StoreError::Internal(
                "the settle script was not found after its load".into(),
            ))),
        },
        Sent::Done(done) => done,
    }
}

/// What one settle pipeline came to.
enum Sent {
    Done(Result<(), Failure>),
    /// The node's script cache lacked the settle script: nothing ran.
    NoScript,
}

/// [`send`]'s pipeline, with the script's load in front when `load`.
async fn send_pipeline(backend: &Backend, node: &Node, entries: &[Entry], load: bool) -> Sent {
    let mut pipe = redis::pipe();
    if load {
        pipe.add_command(backend.scripts.loads[1].clone());
    }
    let calls = settle_calls(backend, entries.iter().map(|e| &e.op));
    for (cmd, _) in &calls {
        pipe.add_command(cmd.clone());
    }
    let loads = usize::from(load);
    let result = backend
        .send_pipeline(node, &pipe, calls.len() + loads)
        .await
        .map(|values| values.into_iter().skip(loads).collect::<Vec<_>>());
    let answered = |code: &str| match &result {
        Ok(values) => values.iter().any(|v| has_code(v, code)),
        Err(e) => e.code() == Some(code),
    };
    if answered("MOVED") || answered("ASK") {
        return Sent::Done(Err(Failure::Redirected));
    }
    if answered("NOSCRIPT") {
        return Sent::NoScript;
    }
    Sent::Done(match result {
        Err(e) => {
            tracing::warn!("settle pipeline on {node:?}: {e}");
            Err(Failure::Failed(StoreError::from_redis(&e)))
        }
        Ok(values) => match values.iter().find(|v| matches!(v, Value::ServerError(_))) {
            Some(err) => Err(Failure::Failed(StoreError::Internal(format!(
                "settle op failed: {err:?}"
            )))),
            None => match per_op(&calls, &values) {
                Ok(outcomes) => {
                    count_outcomes(backend, entries.iter().map(|e| &e.op), &outcomes);
                    Ok(())
                }
                Err(e) => Err(Failure::Failed(e)),
            },
        },
    })
}

fn has_code(value: &Value, code: &str) -> bool {
    matches!(value, Value::ServerError(e) if e.code() == code)
}

/// Most operations in one settle script call: a call runs alone on its
/// Redis, so a flush of thousands is cut into calls that each hold it briefly.
pub const OPS_PER_CALL: usize = 64;

/// The settle script's calls for `ops` (all bound for one node), each with
/// the positions in `ops` of the operations it carries: one call per
/// tenant (one hash tag, so one Cluster slot) and per [`OPS_PER_CALL`].
/// Each operation moves its claim only while it is pending under
/// `claim.hook_id`. A promote commits it under the hook id the upstream
/// answered with, in the layout of `--committed-layout`; one whose pending
/// key expired, or that names a key its hook never held, changes nothing
/// (the redelivery is admitted and the upstream's own index catches the copy).
/// A promote with no receipt is one applied unproven (`ops` come from
/// `receipts::screen`, which leaves a receipt only where it verified one):
/// the call also records it in its node's index of unproven commits.
pub fn settle_calls<'a>(
    backend: &Backend,
    ops: impl IntoIterator<Item = &'a SettleOp>,
) -> Vec<(redis::Cmd, Vec<usize>)> {
    let mut by_tenant: Vec<(&str, Vec<(usize, &SettleOp)>)> = Vec::new();
    for (i, op) in ops.into_iter().enumerate() {
        let tenant = op.claim().tenant.as_str();
        match by_tenant.iter_mut().find(|(t, _)| *t == tenant) {
            Some((_, group)) => group.push((i, op)),
            None => by_tenant.push((tenant, vec![(i, op)])),
        }
    }
    let mut calls = Vec::new();
    for (_, group) in &by_tenant {
        for chunk in group.chunks(OPS_PER_CALL) {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(backend.scripts.settle.get_hash()).arg(chunk.len());
            for (_, op) in chunk {
                cmd.arg(keys::claim(op.claim()));
            }
            cmd.arg(backend.layout.as_str());
            for (_, op) in chunk {
                let claim = op.claim();
                cmd.arg(keys::pending_prefix(&claim.hook_id));
                match op {
                    SettleOp::Promote { hook_id, .. } => {
                        cmd.arg("promote")
                            .arg(&committed::lookup_args(claim)[..])
                            .arg(committed::hook_value(hook_id))
                            .arg(hook_id);
                    }
                    SettleOp::Release { .. } => {
                        cmd.arg("release")
                            .arg(&committed::lookup_args(claim)[..])
                            .arg(&["", ""][..]);
                    }
                }
            }
            // Each promote without a verified receipt, for its node's index
            // (see `commits`): its place in the call (from 1) and the series.
            for (at, (_, op)) in chunk.iter().enumerate() {
                if let SettleOp::Promote {
                    claim,
                    receipt: None,
                    ..
                } = op
                {
                    cmd.arg(at + 1).arg(commits::index_series(
                        &claim.tenant,
                        &claim.node,
                        claim.ttl_ms,
                    ));
                }
            }
            calls.push((cmd, chunk.iter().map(|(i, _)| *i).collect()));
        }
    }
    calls
}

/// Each operation's answer, in the order of the operations, from the
/// replies of their [`settle_calls`] (one array per call).
pub fn per_op(
    calls: &[(redis::Cmd, Vec<usize>)],
    replies: &[Value],
) -> Result<Vec<Value>, StoreError> {
    let total = calls.iter().map(|(_, ops)| ops.len()).sum();
    let mut out = vec![Value::Nil; total];
    if replies.len() != calls.len() {
        return Err(StoreError::Internal(format!(
            "{} settle calls had {} replies",
            calls.len(),
            replies.len()
        )));
    }
    for ((_, ops), reply) in calls.iter().zip(replies) {
        match reply {
            Value::Array(answers) if answers.len() == ops.len() => {
                for (i, answer) in ops.iter().zip(answers) {
                    out[*i] = answer.clone();
                }
            }
            other => {
                return Err(StoreError::Internal(format!(
                    "unexpected settle script reply {other:?}"
                )))
            }
        }
    }
    Ok(out)
}

/// The `op` label of a settle operation.
pub fn op_name(op: &SettleOp) -> &'static str {
    match op {
        SettleOp::Promote { .. } => "promote",
        SettleOp::Release { .. } => "release",
    }
}

/// Counts the settle script's answers to `ops`: every one in
/// `ankusa_store_settle_ops_total{op}`, and one that changed nothing (the
/// key was free, committed, or pending under another hook) also in
/// `ankusa_store_settle_skipped_total{op,why}`.
pub fn count_outcomes<'a>(
    backend: &Backend,
    ops: impl IntoIterator<Item = &'a SettleOp>,
    values: &[Value],
) {
    for (op, value) in ops.into_iter().zip(values) {
        let name = op_name(op);
        backend.metrics.settle_ops.with_label_values(&[name]).inc();
        let why = match value {
            Value::BulkString(b) => std::str::from_utf8(b).ok(),
            Value::SimpleString(s) => Some(s.as_str()),
            _ => None,
        };
        if let Some(why @ ("free" | "committed" | "other_hook")) = why {
            backend
                .metrics
                .settle_skipped
                .with_label_values(&[name, why])
                .inc();
        }
    }
}
