//! Micro-batched fleet hits, per worker: which hooks share a store call.
//!
//! A hook whose worker has no hit call in flight is sent at once, alone,
//! on `/v1/hit` (no added latency when traffic is light). A hook that
//! arrives while a call is in flight waits; when that call is answered the
//! waiting hooks leave together as the next call (`/v1/hits`, up to
//! [`MAX_BATCH`]; a queue that fills up leaves at once as a call of its own).
//!
//! A hook waits only if it can afford to: the worker keeps the latency of
//! its recent calls, and a hook that, after waiting for the call in flight
//! and then its own call's latency, would not be answered within nine
//! tenths of its budget (or would leave with less than half of it) is sent
//! at once, on a call of its own beside the one in flight. So a store that
//! is slow but within the budget gets a call per hook, as without batching,
//! instead of hooks that time out waiting.
//!
//! Every hook keeps its own budget, measured from its own arrival: the
//! call that carries it times out when the earliest budget among its hooks
//! ends, and a hook with less than half its budget left when its call would
//! leave is answered from the node instead (it never waited for the call in
//! flight beyond that call's own timeout, which ended within its budget).
//! Each hook gets its own result back ([`split`]): its own answer, its own
//! refusal, or the whole call's failure.
//!
//! Settle operations ride on any hit call ([`with_settle`]): a batch
//! carries them beside its hits, a lone hit with some to carry goes as a
//! batch of one.

use crate::hook::plan::{parse_reply, CallFailure};
use crate::hook::settle::Queued;
use crate::wire::batch::{HitResult, HitsAnswer, MAX_HITS_PER_CALL};
use crate::wire::version::StoreWire;
use crate::wire::{tolerant, ErrorBody, HitReply, SettleOp, HITS_PATH, HIT_PATH};
use std::collections::VecDeque;

/// Most hooks in one call (the store takes up to [`MAX_HITS_PER_CALL`]).
pub const MAX_BATCH: usize = 64;
const _: () = assert!(MAX_BATCH <= MAX_HITS_PER_CALL);

/// A hook waiting for a call: its id in the host, its hit request (JSON),
/// when it arrived and its budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub id: u32,
    pub body: Vec<u8>,
    pub arrived_us: u64,
    pub budget_ms: u64,
}

impl Waiting {
    fn left_us(&self, now_us: u64) -> u64 {
        (self.arrived_us + self.budget_ms * 1_000).saturating_sub(now_us)
    }
}

/// What a hook that wants to call the store does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Submitted {
    /// No call is in flight: send its own call now.
    SendNow,
    /// It waits for the next call.
    Queued,
    /// It waits, and the queue is full: flush now.
    QueuedFlush,
}

impl Submitted {
    /// Whether the worker's root must be woken to send the waiting hooks
    /// now: the queue is full, or no call is in flight whose answer would
    /// send them (`in_flight` calls) and no wake is queued already.
    pub fn wakes_root(self, in_flight: usize, wake_queued: bool) -> bool {
        match self {
            Submitted::SendNow => false,
            Submitted::QueuedFlush => true,
            Submitted::Queued => in_flight == 0 && !wake_queued,
        }
    }
}

/// One store call carrying the hits of `members`, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub members: Vec<u32>,
    pub path: &'static str,
    pub body: Vec<u8>,
    pub timeout_ms: u64,
}

/// What a flush does: hooks answered from the node (too little budget left), and the call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flush {
    pub expired: Vec<u32>,
    pub call: Option<Outgoing>,
}

/// One worker's hit calls in flight and the hooks waiting for the next.
#[derive(Debug, Default)]
pub struct Batcher {
    queue: VecDeque<Waiting>,
    /// When each call in flight left (µs), oldest first: one entry a call.
    sent: VecDeque<u64>,
    /// Recent calls' latency (µs: up at once, down as a moving average); None before the first answer.
    latency_us: Option<u64>,
}

impl Batcher {
    pub fn new() -> Batcher {
        Batcher::default()
    }

    /// Calls in flight.
    pub fn in_flight(&self) -> usize {
        self.sent.len()
    }

    /// Hooks waiting.
    pub fn waiting(&self) -> usize {
        self.queue.len()
    }

    /// Recent calls' latency (µs); None before the first answer.
    pub fn latency_us(&self) -> Option<u64> {
        self.latency_us
    }

    fn sent_at(&mut self, now_us: u64) {
        self.sent.push_back(now_us);
    }

    /// Whether `hook`, arriving now, can wait for the call in flight: it
    /// would leave with at least half its budget and, at the recent latency,
    /// be answered within nine tenths of it.
    fn can_wait(&self, hook: &Waiting) -> bool {
        let Some(latency) = self.latency_us else {
            return true;
        };
        let wait = self
            .sent
            .front()
            .map_or(0, |sent| (sent + latency).saturating_sub(hook.arrived_us));
        let budget = hook.budget_ms.saturating_mul(1_000);
        wait.saturating_mul(2) <= budget
            && (wait + latency).saturating_mul(10) <= budget.saturating_mul(9)
    }

    /// A hook wants to call the store.
    pub fn submit(&mut self, hook: Waiting) -> Submitted {
        if (self.sent.is_empty() && self.queue.is_empty()) || !self.can_wait(&hook) {
            self.sent_at(hook.arrived_us);
            return Submitted::SendNow;
        }
        self.queue.push_back(hook);
        if self.queue.len() >= MAX_BATCH {
            Submitted::QueuedFlush
        } else {
            Submitted::Queued
        }
    }

    /// A call was answered, failed, or will never be answered at `now_us`
    /// (its latency, taken as the oldest in flight's, joins the average: at
    /// once when it is slower, so hooks stop waiting on a store that slowed
    /// down from its first slow answer; a quarter at a time when faster);
    /// true when hooks wait (flush them now).
    pub fn done(&mut self, now_us: u64) -> bool {
        if let Some(sent) = self.sent.pop_front() {
            let took = now_us.saturating_sub(sent);
            self.latency_us = Some(match self.latency_us {
                Some(average) if took < average => (average * 3 + took) / 4,
                _ => took,
            });
        }
        !self.queue.is_empty()
    }

    /// A waiting hook went away; true if it was waiting.
    pub fn forget(&mut self, id: u32) -> bool {
        let before = self.queue.len();
        self.queue.retain(|w| w.id != id);
        self.queue.len() != before
    }

    /// Takes up to [`MAX_BATCH`] waiting hooks: those with at least half
    /// their budget left leave as one call (counted in flight), timed out
    /// when the first of their budgets ends; the others expire.
    pub fn flush(&mut self, now_us: u64) -> Flush {
        let mut flush = Flush::default();
        let mut members: Vec<Waiting> = Vec::new();
        while members.len() < MAX_BATCH {
            let Some(hook) = self.queue.pop_front() else {
                break;
            };
            if hook.left_us(now_us) * 2 < hook.budget_ms * 1_000 || hook.left_us(now_us) < 1_000 {
                flush.expired.push(hook.id);
            } else {
                members.push(hook);
            }
        }
        if members.is_empty() {
            return flush;
        }
        let timeout_ms = members
            .iter()
            .map(|m| m.left_us(now_us) / 1_000)
            .min()
            .unwrap_or(1)
            .max(1);
        let (path, body) = match members.as_slice() {
            [one] => (HIT_PATH, one.body.clone()),
            many => (HITS_PATH, hits_body(many.iter().map(|m| m.body.as_slice()))),
        };
        self.sent_at(now_us);
        flush.call = Some(Outgoing {
            members: members.into_iter().map(|m| m.id).collect(),
            path,
            body,
            timeout_ms,
        });
        flush
    }
}

/// `{"hits":[...]}` from hit requests already serialized.
fn hits_body<'a>(hits: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut body = b"{\"hits\":[".to_vec();
    for (i, hit) in hits.enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(hit);
    }
    body.extend_from_slice(b"]}");
    body
}

/// The call carrying `body` (a request for `path`) with the settle
/// operations `ops` riding on it: `/v1/hits` carries them as `"settle"`, so
/// a lone hit (`/v1/hit`) that has some to carry goes as a batch of one.
/// Without any, the call is unchanged. (The store has taken both forms
/// since batched hits began: nothing new on the wire.) Each operation is
/// written as a store of wire `store` may be sent it ([`SettleOp::for_store`];
/// see [`crate::hook::settle::wire_for`]).
pub fn with_settle(
    path: &'static str,
    body: Vec<u8>,
    ops: &[Queued],
    store: StoreWire,
) -> (&'static str, Vec<u8>) {
    if ops.is_empty() {
        return (path, body);
    }
    let mut body = if path == HIT_PATH {
        hits_body(std::iter::once(body.as_slice()))
    } else {
        body
    };
    let ops: Vec<SettleOp> = ops.iter().map(|q| q.op.for_store(store)).collect();
    let (Ok(list), true) = (serde_json::to_vec(&ops), body.ends_with(b"]}")) else {
        return (HITS_PATH, body);
    };
    body.pop();
    body.extend_from_slice(b",\"settle\":");
    body.extend_from_slice(&list);
    body.push(b'}');
    (HITS_PATH, body)
}

/// One hook's share of a call's answer: its reply, or how its call failed,
/// as its own `/v1/hit` call would have been read.
pub type Share = Result<HitReply, CallFailure>;

/// Splits the answer of a call to `path` among its `members` hooks, in
/// order. A single hit's answer (`/v1/hit`) is the member's own; a batch
/// (`/v1/hits`, one hit or more) answered 200 with one result per hook
/// gives each its result (a refusal as the status the store gives that
/// error); any other answer is every member's failure. Second: the riding
/// settle operations the store applied (None: not applied, or none rode).
pub fn split(
    path: &str,
    members: usize,
    status: Option<&str>,
    body: Option<&[u8]>,
) -> (Vec<Share>, Option<usize>) {
    if path != HITS_PATH || status != Some("200") {
        return (vec![parse_reply(status, body); members], None);
    }
    let mut unknown = 0;
    let parsed = body.and_then(|b| tolerant::from_slice::<HitsAnswer>(b, |_| unknown += 1).ok());
    match parsed {
        Some(answer) if answer.results.len() == members => {
            let mut shares: Vec<Share> = answer.results.into_iter().map(share).collect();
            // The batch names the store's version once: each hook's reply
            // carries it, and the first one the batch's unknown fields.
            for reply in shares.iter_mut().flatten() {
                reply.wire = answer.wire;
            }
            if let Some(Ok(first)) = shares.first_mut() {
                first.unknown_fields = unknown;
            }
            (shares, answer.settled)
        }
        // A 200 that isn't one result per hook: each hook's answer is unparsable.
        _ => (vec![Err(CallFailure::Unparsable); members], None),
    }
}

/// The answer to a hook's own call (`status`, `body`), which carried
/// `riding` settle operations ([`with_settle`]): the hook's share, and
/// whether the store applied the riding operations (None: none rode).
pub fn own_answer(
    riding: usize,
    status: Option<&str>,
    body: Option<&[u8]>,
) -> (Share, Option<bool>) {
    let path = if riding == 0 { HIT_PATH } else { HITS_PATH };
    let (shares, settled) = split(path, 1, status, body);
    let share = shares
        .into_iter()
        .next()
        .unwrap_or(Err(CallFailure::Unparsable));
    (share, (riding > 0).then_some(settled == Some(riding)))
}

fn share(result: HitResult) -> Share {
    match result {
        HitResult::Reply(reply) => Ok(reply),
        HitResult::Refused(e) => Err(CallFailure::Status(status_of(&e).to_string())),
    }
}

/// The status the store answers an error code with on `/v1/hit`.
fn status_of(e: &ErrorBody) -> &'static str {
    match e.error.as_str() {
        "bad_request" => "400",
        "unauthorized" => "401",
        "timeout" | "redis_unavailable" | "overloaded" => "503",
        _ => "500",
    }
}

#[cfg(test)]
mod tests;
