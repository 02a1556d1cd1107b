//! Commands that must run at most once (hits: a hit is not idempotent),
//! sent in one pipeline and followed where Redis sends them: a command
//! answered `NOSCRIPT` (a Redis that lost its script cache), `MOVED`, `ASK`
//! or `TRYAGAIN` did not run on that node, so it alone is sent again: after
//! the script loads, to the node named (after `ASKING` for `ASK`), after a
//! short pause for `TRYAGAIN`, until it runs, the rounds run out or the
//! caller's deadline comes. A command whose pipeline failed in flight is
//! never sent again: it may have run.

use super::direct::Addr;
use super::{Backend, Node};
use crate::errors::StoreError;
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, Value};
use std::time::{Duration, Instant};

/// A command's last reply (an error reply among them, as
/// `Value::ServerError`), or why it has none.
pub type Once = Result<Value, StoreError>;

/// How many rounds may follow a `MOVED` or `ASK`: a redirect loop (two
/// nodes that disagree during a reshard) ends here.
pub const MAX_HOPS: usize = 5;

/// The first pause before a command answered `TRYAGAIN` (a multi-key
/// command on a slot whose keys are moving) is sent again; each next pause
/// doubles, up to [`TRYAGAIN_PAUSE_MAX`], until the deadline.
pub const TRYAGAIN_PAUSE: Duration = Duration::from_millis(2);
pub const TRYAGAIN_PAUSE_MAX: Duration = Duration::from_millis(16);

/// Where a command goes next, and why it went there.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Next {
    /// Ran (or failed for good): this is its reply.
    Done,
    /// `MOVED`: the slot now lives at this node.
    Moved(u16, Addr),
    /// `ASK`: this one command goes to this node, after `ASKING`.
    Ask(Addr),
    /// `TRYAGAIN`: the same node, after a pause.
    TryAgain,
    /// `NOSCRIPT`: the same node, after the script loads.
    NoScript,
}

/// What a reply asks of its command.
pub fn next(reply: &Value) -> Next {
    let Value::ServerError(e) = reply else {
        return Next::Done;
    };
    let redirect = || e.details().and_then(Addr::of_redirect);
    match e.code() {
        "MOVED" => redirect().map_or(Next::Done, |(slot, addr)| Next::Moved(slot, addr)),
        "ASK" => redirect().map_or(Next::Done, |(_, addr)| Next::Ask(addr)),
        "TRYAGAIN" => Next::TryAgain,
        "NOSCRIPT" => Next::NoScript,
        _ => Next::Done,
    }
}

/// A command that did not run: where it goes next, whether that is a hop
/// (another node, or the same after the loads) or waits a pause first, and
/// why, for the answer if it never runs.
struct Step {
    to: Target,
    hop: bool,
    pause: bool,
    why: String,
}

/// Where one round sends a command.
#[derive(Clone, PartialEq, Eq, Debug)]
struct Target {
    node: Node,
    asking: bool,
    /// Whether the round sends the script loads first.
    load: bool,
}

impl Backend {
    /// Runs each of `cmds` at most once on `node`, following Redis's
    /// redirects until `deadline`; `loads` (commands whose replies are
    /// dropped: the `SCRIPT LOAD`s of the scripts `cmds` call by hash) go
    /// first in a round after a `NOSCRIPT` and in every round to another
    /// node. One reply per command, in order; second, how long the rounds
    /// waited for Redis.
    pub async fn run_once(
        &self,
        node: &Node,
        loads: &[Cmd],
        cmds: &Pipeline,
        deadline: Instant,
    ) -> (Vec<Once>, Duration) {
        let count = cmds.cmd_iter().count();
        let mut replies: Vec<Option<Once>> = (0..count).map(|_| None).collect();
        let first = Target {
            node: node.clone(),
            asking: false,
            load: false,
        };
        let mut todo: Vec<(usize, Target)> = (0..count).map(|i| (i, first.clone())).collect();
        let mut waited = Duration::ZERO;
        let mut last_refusal: Option<String> = None;
        let (mut hops, mut pause_for, mut sent) = (0, TRYAGAIN_PAUSE, false);
        // Each round either follows a redirect (at most MAX_HOPS), pauses
        // (until the deadline) or leaves nothing to send.
        while !todo.is_empty() && hops <= MAX_HOPS && !(sent && Instant::now() >= deadline) {
            sent = true;
            let mut again = Vec::new();
            let (mut pause, mut hopped) = (false, false);
            let mut targets: Vec<Target> = Vec::new();
            for (_, t) in &todo {
                if !targets.contains(t) {
                    targets.push(t.clone());
                }
            }
            for target in targets {
                let group: Vec<usize> = todo
                    .iter()
                    .filter(|(_, t)| *t == target)
                    .map(|(i, _)| *i)
                    .collect();
                let started = Instant::now();
                let sent = self
                    .send_round(&target, loads, cmds, &group, deadline)
                    .await;
                waited += started.elapsed();
                match sent {
                    Ok(values) => {
                        for (i, value) in group.into_iter().zip(values) {
                            match self.follow(&target, &value) {
                                None => replies[i] = Some(Ok(value)),
                                Some(step) => {
                                    hopped |= step.hop;
                                    pause |= step.pause;
                                    last_refusal = Some(step.why);
                                    again.push((i, step.to));
                                }
                            }
                        }
                    }
                    Err(e) => {
                        for i in group {
                            replies[i] = Some(Err(copy(&e)));
                        }
                    }
                }
            }
            todo = again;
            hops += usize::from(hopped);
            if pause && !todo.is_empty() {
                let left = deadline.saturating_duration_since(Instant::now());
                tokio::time::sleep(pause_for.min(left)).await;
                pause_for = (pause_for * 2).min(TRYAGAIN_PAUSE_MAX);
            }
        }
        if !todo.is_empty() {
            self.metrics.redirects_unfinished.inc_by(todo.len() as u64);
        }
        let why = last_refusal.unwrap_or_default();
        let replies = replies
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|| {
                    Err(StoreError::RedisUnavailable(format!(
                        "Cluster redirects did not end in time: {why}"
                    )))
                })
            })
            .collect();
        (replies, waited)
    }

    /// Where a command whose reply is `reply` goes next, counted; `None`
    /// when it ran (or failed for good).
    fn follow(&self, target: &Target, reply: &Value) -> Option<Step> {
        let step = |to: Target, hop: bool, pause: bool, why: String| Step {
            to,
            hop,
            pause,
            why,
        };
        let (kind, step) = match next(reply) {
            Next::Done => return None,
            Next::Moved(slot, addr) => {
                self.moved(slot, &addr);
                let to = Target {
                    node: Node::Master(addr),
                    asking: false,
                    load: true,
                };
                ("moved", step(to, true, false, format!("slot {slot} moved")))
            }
            Next::Ask(addr) => {
                let to = Target {
                    node: Node::Master(addr),
                    asking: true,
                    load: true,
                };
                ("ask", step(to, true, false, "a slot is migrating".into()))
            }
            Next::NoScript => {
                let to = Target {
                    load: true,
                    ..target.clone()
                };
                let why = "the script cache was empty".into();
                ("noscript", step(to, true, false, why))
            }
            Next::TryAgain => {
                let why = "a slot's keys are moving".into();
                ("tryagain", step(target.clone(), false, true, why))
            }
        };
        self.metrics.redirects.with_label_values(&[kind]).inc();
        Some(step)
    }

    /// One pipeline: `loads`, then the commands of `group` (each after
    /// `ASKING` when the target asks it), to the target's node, within
    /// `deadline`. The replies of the commands of `group`, in order. The
    /// first round (every command, plainly) sends `cmds` itself; only a
    /// round after a redirect builds a pipeline of its own.
    async fn send_round(
        &self,
        target: &Target,
        loads: &[Cmd],
        cmds: &Pipeline,
        group: &[usize],
        deadline: Instant,
    ) -> Result<Vec<Value>, StoreError> {
        let loads = if target.load { loads } else { &[] };
        let whole = loads.is_empty() && !target.asking && group.len() == cmds.cmd_iter().count();
        let built;
        let pipe = if whole {
            cmds
        } else {
            let all: Vec<&Cmd> = cmds.cmd_iter().collect();
            let mut pipe = Pipeline::new();
            for load in loads {
                pipe.add_command(load.clone());
            }
            for &i in group {
                if target.asking {
                    pipe.cmd("ASKING");
                }
                pipe.add_command(all[i].clone());
            }
            built = pipe;
            &built
        };
        let per = 1 + usize::from(target.asking);
        let expected = loads.len() + group.len() * per;
        let left = deadline.saturating_duration_since(Instant::now());
        let budget_ms = left.as_millis() as u64;
        self.metrics.pipeline_round_trips.inc();
        let sent = tokio::time::timeout(left, self.send_to(&target.node, pipe, expected, left));
        let started = Instant::now();
        let result = sent.await;
        self.metrics
            .redis_seconds
            .observe(started.elapsed().as_secs_f64());
        let values = match result {
            Err(_) => return Err(StoreError::Timeout { budget_ms }),
            Ok(Err(e)) => {
                if let Node::Master(addr) = &target.node {
                    self.direct.forget(addr);
                }
                // A master gone (failover): the map is read again at once.
                self.slots_stale();
                return Err(StoreError::from_redis(&e));
            }
            Ok(Ok(values)) if values.len() == expected => values,
            Ok(Ok(values)) => {
                return Err(StoreError::Internal(format!(
                    "{} replies to {expected} commands",
                    values.len()
                )))
            }
        };
        Ok(values
            .into_iter()
            .skip(loads.len())
            .skip(per - 1)
            .step_by(per)
            .collect())
    }

    /// Sends `pipe` to `node` once: the single Redis's connection, or a
    /// master's own connection (opened within `limit`).
    async fn send_to(
        &self,
        node: &Node,
        pipe: &Pipeline,
        count: usize,
        limit: Duration,
    ) -> redis::RedisResult<Vec<Value>> {
        match node {
            Node::Master(addr) => {
                let mut conn = self.direct.get(addr, limit).await?;
                conn.req_packed_commands(pipe, 0, count).await
            }
            Node::Slot(slot) => {
                // The map is empty or stale: read it again for the next call.
                self.slots_stale();
                Err(redis::RedisError::from((
                    redis::ErrorKind::ClusterDown,
                    "no master known for the slot",
                    slot.to_string(),
                )))
            }
            Node::Single => {
                let mut conn = self
                    .conn()
                    .map_err(|e| redis::RedisError::from(std::io::Error::other(e.to_string())))?;
                conn.req_packed_commands(pipe, 0, count).await
            }
        }
    }
}

/// The same failure for each command of a failed round.
fn copy(e: &StoreError) -> StoreError {
    match e {
        StoreError::Timeout { budget_ms } => StoreError::Timeout {
            budget_ms: *budget_ms,
        },
        StoreError::RedisUnavailable(why) => StoreError::RedisUnavailable(why.clone()),
        other => StoreError::Internal(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error reply `-CODE detail` as Redis writes it.
    fn error(code: &str, detail: &str) -> Value {
        let wire = format!("-{code} {detail}\r\n");
        let value = redis::parse_redis_value(wire.as_bytes()).expect("an error reply");
        assert!(matches!(value, Value::ServerError(_)), "{value:?}");
        value
    }

    #[test]
    fn only_a_command_the_cluster_did_not_run_goes_again() {
        let addr = Addr {
            host: "127.0.0.1".into(),
            port: 7002,
        };
        assert_eq!(
            next(&error("MOVED", "3999 127.0.0.1:7002")),
            Next::Moved(3999, addr.clone())
        );
        assert_eq!(next(&error("ASK", "3999 127.0.0.1:7002")), Next::Ask(addr));
        assert_eq!(
            next(&error(
                "TRYAGAIN",
                "Multiple keys request during rehashing of slot"
            )),
            Next::TryAgain
        );
        // Ran, or failed in a way another node would not mend: its reply stands.
        for done in [
            Value::Array(vec![Value::Int(1)]),
            error("ERR", "user_script:1: boom"),
            error("CLUSTERDOWN", "The cluster is down"),
            error("MOVED", "garbled"),
            error("ASK", ""),
        ] {
            assert_eq!(next(&done), Next::Done, "{done:?}");
        }
    }
}
