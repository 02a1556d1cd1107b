//! `POST /v1/hit`: every charge and the claim in one script call.

use super::{budget, count, json, nodes, read_json, resend_deadline, within, Reply, Shared};
use crate::backend::{Backend, Node, Once};
use crate::committed;
use crate::errors::StoreError;
use crate::keys;
use crate::spans;
use crate::tokens::Caller;
use ankusa_core::limit::gcra::wait_ms;
use ankusa_core::wire::version::WIRE_VERSION;
use ankusa_core::wire::{HitAnswer, HitReply, HitRequest};
use hyper::body::Incoming;
use hyper::{Request, StatusCode};
use redis::Value;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tracing::{Instrument, Span};

pub async fn hit(
    shared: &Shared,
    req: Request<Incoming>,
    caller: &Caller,
) -> Result<Reply, StoreError> {
    let mut budget = budget(shared, &req)?;
    let hit: HitRequest = read_json(shared, req, super::MAX_BODY_BYTES, "hit request").await?;
    hit.validate()
        .map_err(|e| StoreError::BadRequest(e.to_string()))?;
    nodes::check_hit(shared, caller, "hit", &hit)?;
    if let Some(node) = &hit.node {
        // Asking Redis about a new name spends the same budget.
        let asked = Instant::now();
        nodes::admit(shared, caller, "hit", node, budget).await?;
        budget = budget.saturating_sub(asked.elapsed());
    }
    let request = Span::current();
    spans::tenant(&request, hit.tenant().unwrap_or_default());
    let span = spans::hit(&hit);
    let backend = std::sync::Arc::clone(&shared.backend);
    let deadline = resend_deadline(budget);
    let work = async move { run(&backend, &hit, deadline).await }.instrument(span.clone());
    let answered = within(shared, "hit", budget, work).await;
    let (mut answer, waited) = answered.inspect_err(|e| spans::result(&span, e.code()))?;
    spans::redis(&request, waited);
    answer.edges = shared.edges.count();
    answer.wire = Some(WIRE_VERSION);
    let result = result_of(&answer.answer);
    spans::result(&span, result);
    count(shared, "hit", result);
    shared.backend.metrics.hits_per_call.observe(1.0);
    Ok(json(StatusCode::OK, &answer))
}

/// The `result` label of an answer.
pub fn result_of(answer: &HitAnswer) -> &'static str {
    match answer {
        HitAnswer::Ok => "ok",
        HitAnswer::Duplicate { .. } => "duplicate",
        HitAnswer::Pending { .. } => "pending",
        HitAnswer::RateLimited { .. } => "rate_limited",
    }
}

/// Runs one hit within `deadline`: its answer, and how long Redis took
/// (recorded on the current span, the hit's). On a Cluster it goes where the
/// hits of a batch go, following a moving slot (see `Backend::run_once`).
pub async fn run(
    backend: &Backend,
    hit: &HitRequest,
    deadline: Instant,
) -> Result<(HitReply, Duration), StoreError> {
    if backend.is_cluster() {
        let node = node_of(backend, hit);
        let mut cmds = redis::pipe();
        cmds.add_command(hit_cmd(backend, hit));
        let loads = &backend.scripts.loads[..1];
        let (mut replies, waited) = backend.run_once(&node, loads, &cmds, deadline).await;
        spans::redis(&Span::current(), waited);
        let reply = replies
            .pop()
            .unwrap_or_else(|| Err(StoreError::Internal("the hit had no reply".into())));
        return answer_of(reply).map(|answer| (answer, waited));
    }
    let mut conn = backend.conn()?;
    let (keys, args) = keys_and_args(hit);
    let mut call = backend.scripts.hit.prepare_invoke();
    for key in &keys {
        call.key(key);
    }
    for arg in &args {
        call.arg(arg);
    }
    let started = Instant::now();
    let reply = call.invoke_async::<Vec<Value>>(&mut conn).await;
    let waited = started.elapsed();
    backend.metrics.redis_seconds.observe(waited.as_secs_f64());
    spans::redis(&Span::current(), waited);
    let reply = reply.map_err(|e| StoreError::from_redis(&e))?;
    Ok((parse_reply(&reply)?, waited))
}

/// The node that runs `hit`: every key of one hit carries its tenant's hash
/// tag, so one slot.
pub fn node_of(backend: &Backend, hit: &HitRequest) -> Node {
    backend.node_of(&keys::override_of(hit.tenant().unwrap_or_default()))
}

/// The hit script's call for one validated hit, by its hash (a pipeline
/// loads the script first).
pub fn hit_cmd(backend: &Backend, hit: &HitRequest) -> redis::Cmd {
    let (keys, args) = keys_and_args(hit);
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(backend.scripts.hit.get_hash())
        .arg(keys.len())
        .arg(&keys)
        .arg(&args);
    cmd
}

/// A hit's answer from the hit script's reply.
pub fn answer_of(reply: Once) -> Result<HitReply, StoreError> {
    match reply? {
        Value::Array(reply) => parse_reply(&reply),
        Value::ServerError(e) => Err(StoreError::Internal(format!("hit script: {e:?}"))),
        other => Err(StoreError::Internal(format!(
            "unexpected hit script reply {other:?}"
        ))),
    }
}

/// The hit script's KEYS and ARGV for one validated hit (see `hit.lua`),
/// its compact lookups named on the store's clock.
pub fn keys_and_args(hit: &HitRequest) -> (Vec<String>, Vec<Vec<u8>>) {
    // Before 1970 (a clock never set) reads as 0: the script then names
    // the partitions itself.
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    keys_and_args_at(hit, now_ms)
}

/// [`keys_and_args`] with the store's clock at `now_ms` (unix ms).
pub fn keys_and_args_at(hit: &HitRequest, now_ms: u64) -> (Vec<String>, Vec<Vec<u8>>) {
    let mut keys = Vec::with_capacity(5);
    let mut args: Vec<Vec<u8>> = Vec::with_capacity(16);
    let mut text = |t: String| args.push(t.into_bytes());
    for charge in &hit.charges {
        keys.push(keys::bucket(&charge.tenant, charge.kind));
    }
    // `validate` made every charge and the claim name one tenant.
    keys.push(keys::override_of(hit.tenant().unwrap_or_default()));
    text(hit.charges.len().to_string());
    for charge in &hit.charges {
        text(charge.units.to_string());
        text(charge.rate.to_string());
        text(charge.burst.to_string());
    }
    // The event key's claim first, then the replay guard's body claim: the
    // script checks them in this order, so a taken event key answers as before.
    let claims: Vec<_> = hit.claim.iter().chain(&hit.replay).collect();
    for claim in &claims {
        keys.push(keys::claim(claim));
        text(claim.hook_id.clone());
        text(claim.node.clone());
        text(claim.pending_ttl_ms.to_string());
    }
    // Then each claim's compact lookup (claims.lua), then the partitions
    // each reads, named on the store's clock.
    for claim in &claims {
        args.extend(committed::lookup_args(claim));
    }
    for claim in &claims {
        args.extend(committed::partitions_sent(claim, now_ms));
    }
    (keys, args)
}

/// `{'ok', levels}`, `{'duplicate', hook_id}`, `{'pending', ms}` or
/// `{'rate_limited', µs}`, each followed by the tenant's override text when
/// one is in force. `levels`: each bucket's level after the charge,
/// comma-separated, in charge order (empty without charges).
pub fn parse_reply(reply: &[Value]) -> Result<HitReply, StoreError> {
    let text = |v: Option<&Value>| -> Option<String> {
        match v? {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::SimpleString(s) => Some(s.clone()),
            Value::Int(i) => Some(i.to_string()),
            _ => None,
        }
    };
    let number = |v: Option<&Value>| text(v).and_then(|t| t.parse::<u64>().ok());
    let unexpected = || StoreError::Internal(format!("unexpected hit script reply {reply:?}"));
    let mut levels = Vec::new();
    let (answer, fields) = match text(reply.first()).as_deref() {
        Some("ok") => {
            let listed = text(reply.get(1)).ok_or_else(unexpected)?;
            for level in listed.split(',').filter(|l| !l.is_empty()) {
                levels.push(level.parse::<u64>().map_err(|_| unexpected())?);
            }
            (HitAnswer::Ok, 2)
        }
        Some("duplicate") => (
            HitAnswer::Duplicate {
                hook_id: text(reply.get(1)).ok_or_else(unexpected)?,
            },
            2,
        ),
        Some("pending") => (
            HitAnswer::Pending {
                retry_after_ms: number(reply.get(1)).ok_or_else(unexpected)?.max(1),
            },
            2,
        ),
        Some("rate_limited") => (
            HitAnswer::RateLimited {
                retry_after_ms: wait_ms(number(reply.get(1)).ok_or_else(unexpected)?),
            },
            2,
        ),
        _ => return Err(unexpected()),
    };
    let in_force = match reply.get(fields) {
        None => None,
        Some(v) => Some(super::overrides::parse(
            &text(Some(v)).ok_or_else(unexpected)?,
        )?),
    };
    Ok(HitReply {
        answer,
        in_force,
        levels,
        edges: None,
        wire: None,
        unknown_fields: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn script_replies_become_answers() {
        let ok = parse_reply(&[bulk("ok"), bulk("")]).unwrap();
        assert_eq!((ok.answer, ok.levels), (HitAnswer::Ok, vec![]));
        assert_eq!(
            parse_reply(&[bulk("duplicate"), bulk("h1")])
                .unwrap()
                .answer,
            HitAnswer::Duplicate {
                hook_id: "h1".into()
            }
        );
        assert_eq!(
            parse_reply(&[bulk("pending"), Value::Int(250)])
                .unwrap()
                .answer,
            HitAnswer::Pending {
                retry_after_ms: 250
            }
        );
    }

    #[test]
    fn a_wait_in_us_rounds_up_to_whole_ms_and_never_to_zero() {
        let wait = |us: &str| {
            parse_reply(&[bulk("rate_limited"), bulk(us)])
                .unwrap()
                .answer
        };
        assert_eq!(wait("1"), HitAnswer::RateLimited { retry_after_ms: 1 });
        assert_eq!(wait("1000"), HitAnswer::RateLimited { retry_after_ms: 1 });
        assert_eq!(wait("1001"), HitAnswer::RateLimited { retry_after_ms: 2 });
    }

    #[test]
    fn an_override_after_the_fields_is_carried() {
        let o = r#"{"tenant":"t","rate":1,"burst":2,"version":9}"#;
        let r = parse_reply(&[bulk("rate_limited"), bulk("1000"), bulk(o)]).unwrap();
        assert_eq!(r.answer, HitAnswer::RateLimited { retry_after_ms: 1 });
        assert_eq!(
            r.in_force.map(|o| (o.rate, o.burst, o.version)),
            Some((Some(1), Some(2), 9))
        );
        let r = parse_reply(&[bulk("ok"), bulk("1000000,250"), bulk(o)]).unwrap();
        assert_eq!(r.levels, vec![1_000_000, 250]);
        assert_eq!(r.in_force.map(|o| o.tenant), Some("t".to_string()));
        assert!(matches!(
            parse_reply(&[bulk("ok"), bulk(""), bulk("not json")]),
            Err(StoreError::Internal(_))
        ));
    }

    #[test]
    fn an_unexpected_reply_is_an_internal_error() {
        for levels in [None, Some("x"), Some("1,,-2")] {
            let mut reply = vec![bulk("ok")];
            reply.extend(levels.map(bulk));
            assert!(
                matches!(parse_reply(&reply), Err(StoreError::Internal(_))),
                "{levels:?}"
            );
        }
        assert!(matches!(
            parse_reply(&[bulk("maybe")]),
            Err(StoreError::Internal(_))
        ));
        assert!(matches!(
            parse_reply(&[bulk("pending")]),
            Err(StoreError::Internal(_))
        ));
    }
}
