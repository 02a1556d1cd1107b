//! HTTP for the intake: hyper 1.x, HTTP/1.1 and HTTP/2 on one port.

use super::journal::{Journal, Outcome, Record};
use ankusa_core::wire::receipt;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// Largest body the intake stores (bytes); more is a 413.
pub const MAX_BODY: usize = 8 * 1024 * 1024;
/// Longest `x-intake-delay-ms` honoured, so a typo can't hang a test for hours.
pub const MAX_DELAY_MS: u64 = 120_000;
/// Longest hook id kept (bytes), the same limit the store puts on the wire.
pub const MAX_ID_LEN: usize = 64;

#[derive(Clone, Debug)]
pub struct Config {
    pub data_dir: PathBuf,
    /// How long a stored event key makes a later copy a duplicate (ms).
    pub dedupe_ttl_ms: u64,
    /// Obey the test headers (`x-intake-delay-ms`, `x-intake-status`). Off,
    /// they are ignored: the edge forwards whatever a sender sets, and a
    /// sender must not be able to hold the intake or make it drop a hook.
    pub obey_test_headers: bool,
    /// The key its receipts are signed with (the store's): each 2xx for a
    /// hook it holds that came with `x-ankusa-tenant` carries
    /// `x-ankusa-receipt`. None: no receipts.
    pub receipt_key: Option<Vec<u8>>,
}

/// Serves `listener` until `shutdown` resolves.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let journal = Journal::open(&config.data_dir, config.dedupe_ttl_ms)?;
    let receipt_key: Option<Arc<[u8]>> = config.receipt_key.as_deref().map(Arc::from);
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of descriptors and the like: back off, don't spin.
                    eprintln!("intake: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let journal = journal.clone();
        let obey = config.obey_test_headers;
        let key = receipt_key.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                handle(req, journal.clone(), obey, key.clone())
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The key receipts are signed with, shared by every connection.
type ReceiptKey = Option<Arc<[u8]>>;

async fn handle(
    req: Request<Incoming>,
    journal: Journal,
    obey: bool,
    key: ReceiptKey,
) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(answer(req, journal, obey, key)
        .await
        .unwrap_or_else(Refusal::into_response))
}

/// A request the intake won't store, and why.
struct Refusal {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl Refusal {
    fn into_response(self) -> Response<Full<Bytes>> {
        json(
            self.status,
            serde_json::json!({"error": self.code, "message": self.message}),
        )
    }
}

type Answer = Result<Response<Full<Bytes>>, Refusal>;

async fn answer(req: Request<Incoming>, journal: Journal, obey: bool, key: ReceiptKey) -> Answer {
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/healthz") => Ok(json(StatusCode::OK, serde_json::json!({"status": "ok"}))),
        (&Method::GET, "/hooks") => {
            let read = tokio::task::spawn_blocking(move || journal.summaries()).await;
            match read.unwrap_or_else(|e| Err(format!("reading the journal stopped: {e}"))) {
                Ok(hooks) => Ok(json(StatusCode::OK, serde_json::Value::Array(hooks))),
                Err(e) => Err(error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "journal_unreadable",
                    &e,
                )),
            }
        }
        (&Method::GET, "/stats") => Ok(json(
            StatusCode::OK,
            serde_json::json!({
                "hooks": journal.stored(),
                "duplicates_caught": journal.duplicates_caught(),
            }),
        )),
        (&Method::POST, _) => store(req, journal, obey, key).await,
        (&Method::GET, path) => Err(error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("no such path: {path}"),
        )),
        (method, _) => Err(error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            &format!("method {method} is not allowed: POST a hook, GET /hooks, /stats or /healthz"),
        )),
    }
}

/// `obey`: the test headers are read (see [`Config::obey_test_headers`]);
/// `key`: a stored hook's answer carries its receipt.
async fn store(req: Request<Incoming>, journal: Journal, obey: bool, key: ReceiptKey) -> Answer {
    let (delay_ms, forced) = if obey {
        (
            header_number(&req, "x-intake-delay-ms", 0..=MAX_DELAY_MS)?,
            header_number(&req, "x-intake-status", 100..=599)?,
        )
    } else {
        (None, None)
    };
    refuse_foreign_edge_headers(&req)?;
    let id = match header_text(&req, "x-ankusa-hook-id")? {
        Some(id) if id.is_empty() || id.len() > MAX_ID_LEN => {
            return Err(bad_request(&format!(
                "header x-ankusa-hook-id must be 1..={MAX_ID_LEN} bytes, got {} bytes: {id:?}",
                id.len()
            )))
        }
        Some(id) => id,
        None => crate::ids::Rng::from_entropy().uuid_v7(crate::ids::now_ms()),
    };
    let tenant = header_text(&req, "x-ankusa-tenant")?;
    let source = header_text(&req, "x-ankusa-source")?;
    let event_key = header_text(&req, "x-ankusa-event-key")?;
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                &format!("body is over {MAX_BODY} bytes"),
            ))
        }
        Err(e) => return Err(bad_request(&format!("cannot read the body: {e}"))),
    };
    if let Some(delay_ms) = delay_ms {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    }
    // The receipt names the id the hook is held under: its own, or an
    // older copy's when the index reports a duplicate.
    let receipt_tenant = tenant.clone();
    let receipt_for = |held: &str| {
        key.as_deref()
            .zip(receipt_tenant.as_deref())
            .map(|(key, tenant)| receipt::receipt(key, tenant, held))
    };
    if let Some(code) = forced {
        let status = StatusCode::from_u16(code as u16).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = json(
            status,
            serde_json::json!({"status": "forced", "code": code}),
        );
        // A forced 2xx stands for an upstream that acknowledges what it
        // doesn't keep (the benchmarks' upstream): it vouches for the hook
        // as a 2xx does, with a receipt.
        if status.is_success() {
            with_receipt(&mut response, receipt_for(&id));
        }
        return Ok(response);
    }
    let (body, body_b64) = match String::from_utf8(body.to_vec()) {
        Ok(text) => (Some(text), None),
        Err(_) => (None, Some(crate::codec::base64(&body))),
    };
    let record = Record {
        id,
        tenant,
        source,
        event_key,
        received_ms: crate::ids::now_ms(),
        body,
        body_b64,
    };
    match journal.append(record).await {
        Ok(Outcome::Stored(id)) => {
            let mut response = json(
                StatusCode::CREATED,
                serde_json::json!({"status": "accepted", "id": id}),
            );
            with_receipt(&mut response, receipt_for(&id));
            Ok(response)
        }
        Ok(Outcome::Duplicate(old)) => {
            let mut response = json(
                StatusCode::CREATED,
                serde_json::json!({"status": "accepted", "id": old, "duplicate": true}),
            );
            if let Ok(value) = hyper::header::HeaderValue::from_str(&old) {
                response.headers_mut().insert("x-ankusa-hook-id", value);
            }
            with_receipt(&mut response, receipt_for(&old));
            Ok(response)
        }
        // Not stored, so not a 2xx: the edge releases its claim and the sender retries.
        Err(message) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_unavailable",
            &message,
        )),
    }
}

/// Adds `x-ankusa-receipt` to a stored hook's answer (lower-case hex, always
/// a valid header value).
fn with_receipt(response: &mut Response<Full<Bytes>>, receipt: Option<String>) {
    if let Some(value) = receipt.and_then(|r| hyper::header::HeaderValue::from_str(&r).ok()) {
        response.headers_mut().insert(receipt::HEADER, value);
    }
}

/// The `x-ankusa-*` headers the edge sets on a hook it forwards.
const EDGE_HEADERS: [&str; 4] = [
    "x-ankusa-hook-id",
    "x-ankusa-tenant",
    "x-ankusa-source",
    "x-ankusa-event-key",
];

/// 400 for an `x-ankusa-*` header the edge never sets: the edge removes
/// every such header a sender sets, so one arriving here came from
/// elsewhere (a sender the edge let it through for, or a caller around it).
fn refuse_foreign_edge_headers<B>(req: &Request<B>) -> Result<(), Refusal> {
    let foreign = req.headers().iter().find(|(name, _)| {
        name.as_str().starts_with("x-ankusa-") && !EDGE_HEADERS.contains(&name.as_str())
    });
    match foreign {
        None => Ok(()),
        Some((name, value)) => {
            let shown: String = String::from_utf8_lossy(value.as_bytes())
                .chars()
                .take(64)
                .collect();
            Err(bad_request(&format!(
                "header {name}: {shown:?} is not one the edge sets ({}): it came from elsewhere",
                EDGE_HEADERS.join(", ")
            )))
        }
    }
}

/// A header as text; `None` when absent; 400 when it is not visible
/// ASCII/UTF-8, or repeated (the edge sets each of its headers once: two
/// copies mean one came from elsewhere).
fn header_text<B>(req: &Request<B>, name: &str) -> Result<Option<String>, Refusal> {
    let copies: Vec<_> = req.headers().get_all(name).iter().collect();
    if copies.len() > 1 {
        return Err(bad_request(&format!(
            "header {name} appears {} times ({copies:?}); it is set once, by the edge",
            copies.len()
        )));
    }
    match copies.first() {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .map(|s| Some(s.trim().to_string()))
            .map_err(|_| {
                bad_request(&format!(
                    "header {name} is not visible ASCII: {:?}",
                    value.as_bytes()
                ))
            }),
    }
}

fn header_number<B>(
    req: &Request<B>,
    name: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<Option<u64>, Refusal> {
    let Some(text) = header_text(req, name)? else {
        return Ok(None);
    };
    match text.parse::<u64>() {
        Ok(n) if range.contains(&n) => Ok(Some(n)),
        _ => Err(bad_request(&format!(
            "header {name} must be a whole number in {}..={}, got {text:?}",
            range.start(),
            range.end()
        ))),
    }
}

fn bad_request(message: &str) -> Refusal {
    error(StatusCode::BAD_REQUEST, "bad_request", message)
}

fn error(status: StatusCode, code: &'static str, message: &str) -> Refusal {
    Refusal {
        status,
        code,
        message: message.to_string(),
    }
}

fn json(status: StatusCode, body: serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}
