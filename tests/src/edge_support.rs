//! Shared pieces of the Envoy edge tests: configs, concurrent senders, and
//! stand-in stores that fail in each way a real one can.

use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::http::{self, Response};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Both scopes "node": `acme` gets `burst` hooks refilled at 1/s, every other tenant the default.
pub fn node_config(burst: u64) -> Value {
    json!({
        "sources": {
            "gh": {"tenant": "acme", "dedupe": "github"},
            "any": {"dedupe": "github"},
            "stripe": {"tenant": "acme", "dedupe": {"json": "id"}}
        },
        "rate_limits": {
            "default": {"rate": 1000, "burst": 1000},
            "tenants": {"acme": {"rate": 1, "burst": burst}}
        }
    })
}

/// An edge with 2 workers in front of `upstream_port`, its store at `store_port`.
pub fn edge(node: &str, upstream_port: u16, store_port: u16, config: Value) -> Edge {
    Edge::start(EdgeSpec::new(node, upstream_port, store_port, config))
}

/// POSTs a GitHub-style delivery (`x-github-delivery: delivery`) to `path`.
pub fn deliver(edge: &Edge, path: &str, delivery: &str) -> Response {
    let body = format!(r#"{{"delivery":"{delivery}"}}"#);
    edge.post(
        path,
        &[
            ("content-type", "application/json"),
            ("x-github-delivery", delivery),
        ],
        body.as_bytes(),
    )
    .unwrap_or_else(|e| panic!("POST {path} failed: {e}\n{}", edge.log_tail()))
}

/// Runs `f(i)` for i in 0..total on `clients` threads (one connection per request); answers in order of i.
pub fn concurrently<T: Send + 'static>(
    clients: usize,
    total: usize,
    f: impl Fn(usize) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let next = Arc::new(AtomicU64::new(0));
    let results = Arc::new(Mutex::new(Vec::with_capacity(total)));
    let handles: Vec<JoinHandle<()>> = (0..clients)
        .map(|_| {
            let (f, next, results) = (f.clone(), next.clone(), results.clone());
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                if i >= total {
                    return;
                }
                let r = f(i);
                results.lock().unwrap().push((i, r));
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a client thread panicked");
    }
    let mut results = std::mem::take(&mut *results.lock().unwrap());
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

/// A stand-in store on a free port that fails in one way, counting the connections it saw.
pub struct FakeStore {
    pub port: u16,
    pub connections: Arc<AtomicU64>,
    pub requests: Arc<AtomicU64>,
    /// Of those, hit calls (`/v1/hit` or a batch on `/v1/hits`): the ones the
    /// breaker counts (a settle batch isn't one).
    pub hits: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fault {
    /// Accepts and never answers (every call times out).
    Blackhole,
    /// Answers `200` with a body that is not a hit answer.
    Garbage,
}

impl FakeStore {
    /// On a port the kernel picks as it binds: a port probed first could be
    /// taken meanwhile (an outgoing connection's ephemeral port).
    pub fn start(fault: Fault) -> FakeStore {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake store");
        let port = listener.local_addr().expect("fake store address").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let connections = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(AtomicU64::new(0));
        let hits = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (c, r, h, s) = (
            connections.clone(),
            requests.clone(),
            hits.clone(),
            stop.clone(),
        );
        let thread = std::thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        c.fetch_add(1, Ordering::SeqCst);
                        match fault {
                            Fault::Blackhole => {
                                // Count what arrives, answer nothing, keep the socket open.
                                let _ = stream.set_nonblocking(true);
                                held.push(stream);
                            }
                            Fault::Garbage => {
                                let (r, h, s) = (r.clone(), h.clone(), s.clone());
                                std::thread::spawn(move || answer_garbage(stream, &r, &h, &s));
                            }
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
                for stream in &mut held {
                    let mut buf = [0u8; 65536];
                    if let Ok(n) = stream.read(&mut buf) {
                        if n > 0 {
                            let text = String::from_utf8_lossy(&buf[..n]);
                            r.fetch_add(text.matches("POST /v1/").count() as u64, Ordering::SeqCst);
                            // A batch of hits is one call, as the breaker counts.
                            let calls = text.matches("POST /v1/hit ").count()
                                + text.matches("POST /v1/hits ").count();
                            h.fetch_add(calls as u64, Ordering::SeqCst);
                        }
                    }
                }
            }
        });
        FakeStore {
            port,
            connections,
            requests,
            hits,
            stop,
            thread: Some(thread),
        }
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for FakeStore {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads requests off a keep-alive connection and answers each with garbage.
fn answer_garbage(
    mut stream: TcpStream,
    requests: &AtomicU64,
    hits: &AtomicU64,
    stop: &AtomicBool,
) {
    // Short reads so a stopped fake closes its keep-alive connections too:
    // a pooled connection must not keep answering for a store that is gone.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let mut pending = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let n = match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return,
        };
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&pending[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if pending.len() < end + 4 + len {
                break;
            }
            pending.drain(..end + 4 + len);
            requests.fetch_add(1, Ordering::SeqCst);
            if head.starts_with("post /v1/hit ") || head.starts_with("post /v1/hits ") {
                hits.fetch_add(1, Ordering::SeqCst);
            }
            let body = "this is not json";
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            if stream.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    }
}

/// Polls `f` every 50 ms until it is true or `timeout` passes; whether it became true.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `GET url` → status (0 when nothing answers).
pub fn status_of(url: &str) -> u16 {
    http::get(url).map(|r| r.status).unwrap_or(0)
}

/// A fleet config: both scopes "fleet", `acme` with `burst` hooks at 1/s, a
/// generous budget (this machine is shared) and the given settle interval.
pub fn fleet_config(burst: u64, settle_interval_ms: u64) -> Value {
    let mut config = ankusa_testkit::envoy::fleet_filter_config();
    config["rate_limits"]["tenants"]["acme"] = json!({"rate": 1, "burst": burst});
    config["fleet"]["timeout_ms"] = json!(1_000);
    config["fleet"]["settle_interval_ms"] = json!(settle_interval_ms);
    config
}

/// The sum of every series of `name` whose labels contain `label` (e.g.
/// `endpoint="settle"`) in Prometheus text at `url`, under the names
/// Prometheus stores (see [`ankusa_testkit::envoy::shell::as_scraped`]).
pub fn metric_sum(url: &str, name: &str, label: &str) -> f64 {
    let text = http::get(url).map(|r| r.text()).unwrap_or_default();
    let text = ankusa_testkit::envoy::shell::as_scraped(&text);
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

/// The Redis key of a GitHub delivery's claim for tenant `acme`, source `gh`.
pub fn claim_key(delivery: &str) -> String {
    format!("ankusa:{{acme}}:claim:gh:{delivery}")
}

/// What `delivery`'s claim holds in either layout: `p:<hook id>:<node>`
/// while pending, `c:<hook id>` once committed (the compact layout, or the
/// old one a store of 0.2.0 or `--committed-layout dual` writes), "" when free.
pub fn claim_value(redis: &ankusa_testkit::redis::Redis, delivery: &str) -> String {
    let key = claim_key(delivery);
    let [script, hex] = ankusa_store::committed::read_either(&key).expect("a claim key");
    redis.cli(&["EVAL", &script, "1", &key, &hex])
}

/// `method` on the store's `path` with the run's operator token (what
/// changing an override needs; the edges hold only the edge token).
pub fn store_call(
    store: &ankusa_testkit::store::Store,
    method: &str,
    path: &str,
    body: &str,
) -> Response {
    let bearer = format!("Bearer {}", ankusa_testkit::token::operator_token());
    http::request(
        method,
        &store.url_of(path),
        &[
            ("authorization", bearer.as_str()),
            ("content-type", "application/json"),
        ],
        body.as_bytes(),
        Duration::from_secs(10),
    )
    .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}
