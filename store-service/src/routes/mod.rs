//! HTTP routing: which path and method reach which handler, reading the
//! body and budget, and turning results into responses and metrics.

mod claims;
mod commits;
pub mod hit;
mod hits;
mod nodes;
mod overrides;
mod release;
mod reset;
mod settle;

use crate::auth::SharedAuth;
use crate::backend::Backend;
use crate::batcher::Settler;
use crate::conns::{BodyTimeout, Conn};
use crate::edges::LiveEdges;
use crate::endpoint::Endpoint;
use crate::errors::StoreError;
use crate::receipts::SharedReceipts;
use crate::spans;
use crate::tokens::Caller;
use ankusa_core::wire::{tolerant, BUDGET_HEADER};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Request, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{Instrument, Span};

/// Largest hit, hits or reset body read (1 MiB): a legal hit is a few
/// hundred bytes, a batch of `MAX_HITS_PER_CALL` (256) of them well under it.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Largest settle body read (8 MiB): a legal settle may carry
/// `MAX_SETTLE_OPS` (10 000) operations of up to ~800 bytes each, and an edge
/// whose batch the store refused would retry it forever.
pub const MAX_SETTLE_BODY_BYTES: usize = 8 * 1024 * 1024;

/// What every handler may use.
pub struct Shared {
    pub backend: Arc<Backend>,
    /// The edges heard from lately (see [`crate::edges`]).
    pub edges: Arc<LiveEdges>,
    pub settler: Settler,
    pub max_budget: Duration,
    pub auth: SharedAuth,
    /// Whether a promote needs the upstream's receipt (see [`crate::receipts`]).
    pub receipts: SharedReceipts,
}

pub type Reply = Response<Full<Bytes>>;

pub async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Reply, Infallible> {
    let endpoint = Endpoint::of(req.uri().path());
    let span = spans::request(endpoint.map_or("unknown", Endpoint::name));
    let reply = route(shared, req, endpoint).instrument(span.clone()).await;
    tracing::debug!(parent: &span, status = reply.status().as_u16(), "answered");
    Ok(reply)
}

async fn route(shared: Arc<Shared>, req: Request<Incoming>, endpoint: Option<Endpoint>) -> Reply {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    // One gate for every `/v1/*` path, known or not, before anything else
    // is looked at: an unauthenticated caller learns nothing about routes.
    let mut caller = None;
    if path.starts_with("/v1/") {
        let mut given = req.headers().get_all(AUTHORIZATION).iter();
        let presented = given.next().map(HeaderValue::as_bytes);
        let more = given.count();
        if more > 0 {
            // Which one would count depends on who reads it: refuse both.
            return fail(
                &shared,
                endpoint,
                StoreError::BadRequest(format!(
                    "authorization: sent {} times; send one `authorization: Bearer <token>`",
                    more + 1
                )),
            );
        }
        let checked = shared
            .auth
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .check(presented);
        match checked {
            Ok(held) => {
                caller = Some(held);
                // The connection has shown it belongs to a caller (see crate::conns).
                if let Some(conn) = req.extensions().get::<Arc<Conn>>() {
                    conn.authenticate();
                }
            }
            Err(refusal) => {
                shared
                    .backend
                    .metrics
                    .unauthorized
                    .with_label_values(&[refusal.label()])
                    .inc();
                let mut reply = fail(&shared, endpoint, StoreError::Unauthorized(refusal));
                reply
                    .headers_mut()
                    .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                return reply;
            }
        }
    }
    let Some(endpoint) = endpoint else {
        return fail(&shared, None, StoreError::NotFound { path });
    };
    if !endpoint.allows(&method) {
        return fail(
            &shared,
            Some(endpoint),
            StoreError::MethodNotAllowed {
                method: method.to_string(),
                path,
            },
        );
    }
    if let (Some(role), Some(needed)) = (caller.as_ref().map(|c| c.role), endpoint.role(&method)) {
        if role < needed {
            shared
                .backend
                .metrics
                .forbidden
                .with_label_values(&[endpoint.name(), "role"])
                .inc();
            let method = method.to_string();
            return fail(
                &shared,
                Some(endpoint),
                StoreError::Forbidden { role, method, path },
            );
        }
    }
    // Outside `/v1/` no token is asked, and no handler below reads it.
    let caller = caller.unwrap_or_else(Caller::operator);
    let result = match endpoint {
        Endpoint::Hit => hit::hit(&shared, req, &caller).await,
        Endpoint::Hits => hits::hits(&shared, req, &caller).await,
        Endpoint::Settle => settle::settle(&shared, req, &caller).await,
        Endpoint::Reset => reset::reset(&shared, req).await,
        Endpoint::Claims => claims::list(&shared, req).await,
        Endpoint::ClaimsRelease => claims::release(&shared, req).await,
        Endpoint::Commits => commits::list(&shared, req).await,
        Endpoint::CommitsRelease => commits::release(&shared, req).await,
        Endpoint::Overrides => overrides::list(&shared, req).await,
        Endpoint::Override => overrides::one(&shared, req).await,
        Endpoint::Metrics => {
            let mut reply = Response::new(Full::new(Bytes::from(shared.backend.metrics.render())));
            reply.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            return reply;
        }
        Endpoint::Healthz => return json(StatusCode::OK, &serde_json::json!({"status": "ok"})),
        Endpoint::Readyz => shared
            .backend
            .ping(shared.max_budget.min(Duration::from_secs(1)))
            .await
            .map(|()| json(StatusCode::OK, &serde_json::json!({"status": "ready"}))),
    };
    match result {
        Ok(reply) => reply,
        Err(e) => fail(&shared, Some(endpoint), e),
    }
}

/// Counts a success of `endpoint` with its `result` label.
pub fn count(shared: &Shared, endpoint: &str, result: &str) {
    shared
        .backend
        .metrics
        .requests
        .with_label_values(&[endpoint, result])
        .inc();
    spans::result(&Span::current(), result);
}

fn fail(shared: &Shared, endpoint: Option<Endpoint>, e: StoreError) -> Reply {
    let name = endpoint.map_or("unknown", Endpoint::name);
    match &e {
        // An outage is logged once, by the probe, as Redis goes down and up:
        // one line per failed request would flood the log at full load.
        StoreError::RedisUnavailable(d) => tracing::debug!(cause = e.code(), "{d}"),
        StoreError::Internal(d) => tracing::warn!(endpoint = name, cause = e.code(), "{d}"),
        _ => tracing::debug!("{e}"),
    }
    spans::result(&Span::current(), e.code());
    // A failed readiness probe is an answer about Redis, not a failed request.
    if endpoint == Some(Endpoint::Readyz) {
        return json(e.status(), &e.body());
    }
    if endpoint.is_some_and(Endpoint::counted) {
        count(shared, name, e.code());
    }
    let errors = &shared.backend.metrics.errors;
    errors.with_label_values(&[e.code()]).inc();
    let mut reply = json(e.status(), &e.body());
    if matches!(
        e,
        StoreError::TooLarge { .. } | StoreError::BodyTimeout { .. }
    ) {
        // The rest of the body is never read, so the connection can't carry
        // another request: say so, or a pooled client (an edge's Envoy, a
        // test's hyper) sends its next request down a socket about to close.
        reply
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    reply
}

pub fn json<T: Serialize>(status: StatusCode, body: &T) -> Reply {
    let text = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
    let mut reply = Response::new(Full::new(Bytes::from(text)));
    *reply.status_mut() = status;
    reply
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    reply
}

/// The caller's budget: its header, capped by `--max-budget-ms`; the cap
/// when there is no header.
pub fn budget(shared: &Shared, req: &Request<Incoming>) -> Result<Duration, StoreError> {
    let Some(value) = req.headers().get(BUDGET_HEADER) else {
        return Ok(shared.max_budget);
    };
    let text = value.to_str().unwrap_or("");
    match text.trim().parse::<u64>() {
        Ok(0) => Err(StoreError::BadRequest(format!(
            "{BUDGET_HEADER}: must be greater than 0"
        ))),
        Ok(ms) => Ok(Duration::from_millis(ms).min(shared.max_budget)),
        Err(_) => Err(StoreError::BadRequest(format!(
            "{BUDGET_HEADER}: {} is not a whole number of ms",
            crate::errors::quote(text)
        ))),
    }
}

/// How long a body may take when the request says nothing (a request
/// always carries the server's `--body-read-timeout-ms`, see crate::conns).
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads at most `limit` bytes within the body-read timeout and parses them
/// as `T`, naming `what` in errors. A field `T` doesn't know is skipped and
/// counted (`ankusa_store_wire_unknown_total{field}`), as the wire's
/// compatibility rule says; a type that refuses unknown fields (the
/// operators' API) still does.
pub async fn read_json<T: DeserializeOwned>(
    shared: &Shared,
    req: Request<Incoming>,
    limit: usize,
    what: &str,
) -> Result<T, StoreError> {
    let within = req
        .extensions()
        .get::<BodyTimeout>()
        .map_or(BODY_TIMEOUT, |t| t.0);
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(StoreError::TooLarge { limit });
    }
    let read = tokio::time::timeout(within, Limited::new(req.into_body(), limit).collect());
    let Ok(read) = read.await else {
        return Err(StoreError::BodyTimeout {
            ms: within.as_millis() as u64,
        });
    };
    let body = match read {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(StoreError::TooLarge { limit })
        }
        Err(e) => {
            return Err(StoreError::BadRequest(format!(
                "body could not be read: {e}"
            )))
        }
    };
    tolerant::from_slice(&body, |field| shared.backend.metrics.unknown_field(&field))
        .map_err(|e| StoreError::BadRequest(format!("body is not a valid {what}: {e}")))
}

/// Most the store keeps back from a caller's budget (see [`deadline`]).
pub const MAX_MARGIN: Duration = Duration::from_millis(5);

/// How long a late piece of Redis work is still watched, to be counted.
const LATE_WATCH: Duration = Duration::from_secs(30);

/// The time the store gives Redis work within a caller's `budget`: the
/// budget less a margin of min(5 ms, budget / 5), so the answer leaves
/// before the caller's own timeout fires (the caller also pays the network
/// and its proxy) and a script the caller no longer waits for is rare.
pub fn deadline(budget: Duration) -> Duration {
    budget.saturating_sub(MAX_MARGIN.min(budget / 5))
}

/// The last moment a hit a Redis Cluster did not run (a slot moving) may be
/// sent again: a tenth of [`deadline`] (at most [`MAX_MARGIN`]) before it,
/// so the hits that ran are still answered in time.
pub fn resend_deadline(budget: Duration) -> Instant {
    let last = deadline(budget);
    Instant::now() + last.saturating_sub(MAX_MARGIN.min(last / 10))
}

/// Runs `work` within [`deadline`]`(budget)`: past it the caller is answered
/// `timeout` and the answer is never sent. The work itself is left to
/// finish, as Redis runs a script that was sent whatever we do; if it
/// completes after the deadline it is counted in `ankusa_store_late_total`.
pub async fn within<T: Send + 'static>(
    shared: &Shared,
    endpoint: &'static str,
    budget: Duration,
    work: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
) -> Result<T, StoreError> {
    // The work runs in the request's span (and its own, if it has one).
    let mut task = tokio::spawn(work.in_current_span());
    match tokio::time::timeout(deadline(budget), &mut task).await {
        Ok(joined) => {
            joined.unwrap_or_else(|e| Err(StoreError::Internal(format!("{endpoint} task: {e}"))))
        }
        Err(_) => {
            let late = shared.backend.metrics.late.with_label_values(&[endpoint]);
            tokio::spawn(async move {
                if let Ok(Ok(Ok(_))) = tokio::time::timeout(LATE_WATCH, task).await {
                    late.inc();
                }
            });
            Err(StoreError::Timeout {
                budget_ms: budget.as_millis() as u64,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_five_ms_or_a_fifth_of_a_short_budget() {
        let ms = Duration::from_millis;
        assert_eq!(deadline(ms(25)), ms(20));
        assert_eq!(deadline(ms(1000)), ms(995));
        assert_eq!(deadline(ms(10)), ms(8));
        assert_eq!(deadline(ms(1)), Duration::from_micros(800));
    }
}
