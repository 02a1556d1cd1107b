//! A keep-alive HTTP/1.1 load generator: N clients, each on a connection of
//! its own, sending one request after another for a fixed time; reports the
//! rate and latency percentiles as the clients saw them.
//!
//! `{i}` in a header value or the body becomes a counter shared by every
//! client, so each request can carry a fresh key (a webhook delivery id).
//! A connection the server closes (Envoy may close one after a local reply)
//! is reopened and counted, not treated as a failure.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue, HOST};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The placeholder replaced by the request counter.
pub const COUNTER: &str = "{i}";

/// Text with `{i}` placeholders, split once so each request only joins.
#[derive(Clone, Debug)]
pub struct Template {
    parts: Vec<String>,
}

impl Template {
    pub fn new(text: &str) -> Template {
        Template {
            parts: text.split(COUNTER).map(str::to_string).collect(),
        }
    }

    pub fn render(&self, i: u64) -> String {
        self.parts.join(&i.to_string())
    }
}

/// What to send, how hard and for how long.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    /// `http://HOST:PORT/path`.
    pub url: String,
    pub method: String,
    /// `(name, value)`; values may hold `{i}`.
    pub headers: Vec<(String, String)>,
    /// May hold `{i}`.
    pub body: String,
    /// Concurrent clients, one connection each.
    pub clients: usize,
    pub duration: Duration,
    /// A 2xx counts as ok only if its body starts with this.
    pub expect_body: Option<String>,
    /// Longest wait for a connection or one answer; past it the request is an error.
    pub timeout: Duration,
    /// Requests per second over all clients (each client paced at its share);
    /// `None`: each client sends as soon as its last answer is in.
    pub rate: Option<f64>,
    /// Stop after this many requests (counter values `0..n`), or at `duration`.
    pub max_requests: Option<u64>,
}

/// `name:value` (as `--header` takes it) → `(name, value)`, both trimmed.
pub fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once(':')
        .ok_or_else(|| format!("--header must be name:value, got {text:?}"))?;
    let name = name.trim();
    HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("--header {text:?}: {name:?} is not a header name"))?;
    Ok((name.to_string(), value.trim().to_string()))
}

/// What the clients saw.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// 2xx answers (with the expected body, when one is set).
    pub ok: u64,
    pub non_2xx: u64,
    /// 2xx answers whose body did not start as expected.
    pub bad_body: u64,
    /// No answer: connect failed, connection lost mid-request, or timed out.
    pub errors: u64,
    /// Connections opened, the first of each client included.
    pub connects: u64,
    pub clients: u64,
    pub elapsed: Duration,
    /// Latencies of the ok answers (µs), sorted once the run ends.
    pub latencies_us: Vec<u32>,
}

impl Report {
    /// Ok answers per second.
    pub fn rps(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.ok as f64 / secs
        } else {
            0.0
        }
    }

    /// Connections opened beyond each client's first.
    pub fn reconnects(&self) -> u64 {
        self.connects.saturating_sub(self.clients)
    }

    /// The `p`-quantile (0..=1) of ok latencies, in ms; 0 with no ok answer.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        percentile_ms(&self.latencies_us, p)
    }

    /// One `key=value` line; `rps=` comes first (scripts read it).
    pub fn line(&self) -> String {
        format!(
            "rps={:.0} p50_ms={:.3} p99_ms={:.3} ok={} non_2xx={} bad_body={} errors={} reconnects={} clients={} seconds={:.1}",
            self.rps(),
            self.percentile_ms(0.50),
            self.percentile_ms(0.99),
            self.ok,
            self.non_2xx,
            self.bad_body,
            self.errors,
            self.reconnects(),
            self.clients,
            self.elapsed.as_secs_f64()
        )
    }

    fn absorb(&mut self, other: Report) {
        self.ok += other.ok;
        self.non_2xx += other.non_2xx;
        self.bad_body += other.bad_body;
        self.errors += other.errors;
        self.connects += other.connects;
        self.latencies_us.extend(other.latencies_us);
    }
}

/// The request parts every client shares, checked once before the run.
struct Plan {
    authority: String,
    path: String,
    method: Method,
    headers: Vec<(HeaderName, Template)>,
    body: Template,
    expect_body: Option<Bytes>,
    timeout: Duration,
    counter: AtomicU64,
    max_requests: Option<u64>,
    /// Each client's time between sends, when paced.
    period: Option<Duration>,
}

impl Plan {
    fn new(spec: &LoadSpec) -> Result<Plan, String> {
        let uri: Uri = spec
            .url
            .parse()
            .map_err(|e| format!("--url {:?}: {e}", spec.url))?;
        if uri.scheme_str() != Some("http") {
            return Err(format!("--url {:?}: only http:// is supported", spec.url));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| format!("--url {:?}: no host", spec.url))?
            .to_string();
        let path = uri
            .path_and_query()
            .map_or("/".to_string(), |p| p.as_str().to_string());
        let method = Method::from_bytes(spec.method.as_bytes())
            .map_err(|_| format!("--method {:?} is not an HTTP method", spec.method))?;
        let mut headers = Vec::new();
        for (name, value) in &spec.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("--header {name:?} is not a header name"))?;
            let value = Template::new(value);
            HeaderValue::from_str(&value.render(0)).map_err(|_| {
                format!(
                    "--header {name}: {:?} is not a header value",
                    value.render(0)
                )
            })?;
            headers.push((name, value));
        }
        if spec.clients == 0 {
            return Err("--clients must be at least 1, got 0".to_string());
        }
        let period = match spec.rate {
            None => None,
            Some(r) if r.is_finite() && r > 0.0 => {
                Some(Duration::from_secs_f64(spec.clients as f64 / r))
            }
            Some(r) => return Err(format!("--rate must be requests per second > 0, got {r}")),
        };
        Ok(Plan {
            authority,
            path,
            method,
            headers,
            body: Template::new(&spec.body),
            expect_body: spec.expect_body.clone().map(Bytes::from),
            timeout: spec.timeout,
            counter: AtomicU64::new(0),
            max_requests: spec.max_requests,
            period,
        })
    }

    /// The next request, or `None` once `max_requests` are out.
    fn request(&self) -> Result<Option<Request<Full<Bytes>>>, String> {
        let i = self.counter.fetch_add(1, Ordering::Relaxed);
        if self.max_requests.is_some_and(|max| i >= max) {
            return Ok(None);
        }
        let mut req = Request::builder()
            .method(self.method.clone())
            .uri(self.path.as_str())
            .header(HOST, self.authority.as_str());
        for (name, value) in &self.headers {
            req = req.header(name, value.render(i));
        }
        req.body(Full::new(Bytes::from(self.body.render(i))))
            .map(Some)
            .map_err(|e| format!("cannot build request {i}: {e}"))
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, String> {
        let open = async {
            let stream = tokio::net::TcpStream::connect(self.authority.as_str())
                .await
                .map_err(|e| format!("connect {}: {e}", self.authority))?;
            let _ = stream.set_nodelay(true);
            let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| format!("handshake {}: {e}", self.authority))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(sender)
        };
        tokio::time::timeout(self.timeout, open)
            .await
            .map_err(|_| format!("connect {}: timed out", self.authority))?
    }
}

/// Runs `spec` on a runtime of its own and returns what the clients saw.
pub fn run(spec: &LoadSpec) -> Result<Report, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(drive(spec))
}

/// Runs every spec at once on one runtime of its own; the reports in the same order.
pub fn run_all(specs: Vec<LoadSpec>) -> Result<Vec<Report>, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async {
        let tasks: Vec<_> = specs
            .into_iter()
            .map(|s| tokio::spawn(async move { drive(&s).await }))
            .collect();
        let mut out = Vec::new();
        for t in tasks {
            out.push(t.await.map_err(|e| format!("a load failed: {e}"))??);
        }
        Ok(out)
    })
}

/// Runs `spec` on the current runtime.
pub async fn drive(spec: &LoadSpec) -> Result<Report, String> {
    let plan = Arc::new(Plan::new(spec)?);
    let started = Instant::now();
    let deadline = started + spec.duration;
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..spec.clients {
        // Paced clients start spread over one period, not all at once.
        let first = plan.period.map_or(started, |p| {
            started + p.mul_f64(k as f64 / spec.clients as f64)
        });
        tasks.spawn(client(plan.clone(), first, deadline));
    }
    let mut all = Report {
        clients: spec.clients as u64,
        ..Report::default()
    };
    while let Some(done) = tasks.join_next().await {
        all.absorb(done.map_err(|e| format!("a client failed: {e}"))??);
    }
    all.elapsed = started.elapsed();
    all.latencies_us.sort_unstable();
    Ok(all)
}

async fn client(plan: Arc<Plan>, first: Instant, deadline: Instant) -> Result<Report, String> {
    let mut tally = Report::default();
    let mut open: Option<SendRequest<Full<Bytes>>> = None;
    let mut next = first;
    while Instant::now() < deadline {
        if let Some(period) = plan.period {
            let now = Instant::now();
            if next > now {
                tokio::time::sleep(next - now).await;
            }
            // A client that fell behind sends at once and doesn't try to catch up.
            next = (next + period).max(Instant::now());
            if Instant::now() >= deadline {
                break;
            }
        }
        let mut sender = match open.take() {
            Some(sender) if !sender.is_closed() => sender,
            _ => match plan.connect().await {
                Ok(sender) => {
                    tally.connects += 1;
                    sender
                }
                Err(_) => {
                    tally.errors += 1;
                    // Don't spin on a refused port.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        if sender.ready().await.is_err() {
            continue;
        }
        let Some(req) = plan.request()? else {
            break;
        };
        let sent = Instant::now();
        let exchange = async {
            let res = sender.send_request(req).await?;
            let status = res.status();
            let body = res.into_body().collect().await?.to_bytes();
            Ok::<_, hyper::Error>((status, body))
        };
        match tokio::time::timeout(plan.timeout, exchange).await {
            Ok(Ok((status, body))) => {
                if !status.is_success() {
                    tally.non_2xx += 1;
                } else if plan
                    .expect_body
                    .as_ref()
                    .is_some_and(|prefix| !body.starts_with(prefix))
                {
                    tally.bad_body += 1;
                } else {
                    tally.ok += 1;
                    let us = sent.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
                    tally.latencies_us.push(us);
                }
                open = Some(sender);
            }
            // The connection is dropped with the sender: the next turn reconnects.
            Ok(Err(_)) | Err(_) => tally.errors += 1,
        }
    }
    Ok(tally)
}

/// The `p`-quantile (0..=1) of `sorted_us` (latencies in µs, ascending), in
/// ms; 0 when there are none.
pub fn percentile_ms(sorted_us: &[u32], p: f64) -> f64 {
    let n = sorted_us.len();
    if n == 0 {
        return 0.0;
    }
    let i = ((n as f64 * p).ceil() as usize).clamp(1, n) - 1;
    f64::from(sorted_us[i]) / 1000.0
}

#[cfg(test)]
mod tests;
