//! What every store test needs: the service in-process on port 0, an HTTP
//! client, a Redis (single or Cluster) to look into, and request builders.

use ankusa_store::{server, Config};
use ankusa_testkit::redis::{cli, Redis, RedisCluster};
use ankusa_testkit::store::Store;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The service running inside the test's runtime.
pub struct Service {
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), String>>,
}

impl Service {
    pub async fn start(config: Config) -> Service {
        // A port from the testkit's registry, never an OS-chosen one: the binary
        // tests in this process take ports from the registry too, and must not
        // find this service on the port they handed their child.
        let listener = ankusa_testkit::ports::bind_free();
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server::run(listener, config, async {
            let _ = stopped.await;
        }));
        Service {
            url,
            stop: Some(stop),
            task,
        }
    }

    /// Starts against `redis_url` and waits until Redis answers through it.
    pub async fn ready(redis_url: &str) -> Service {
        let service = Service::start(Config::for_redis(redis_url)).await;
        service.wait_ready(Duration::from_secs(20)).await;
        service
    }

    pub async fn wait_ready(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let http = Http::new();
        while http.get(&format!("{}/readyz", self.url)).await.0 != 200 {
            assert!(Instant::now() < deadline, "store never became ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// One series of `/metrics`, 0 if absent.
    pub async fn metric(&self, name: &str) -> f64 {
        let (_, text) = Http::new().get(&self.at("/metrics")).await;
        ankusa_testkit::metrics::metric_value(&text, name)
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let result = tokio::time::timeout(Duration::from_secs(20), &mut self.task).await;
        assert!(
            matches!(result, Ok(Ok(Ok(())))),
            "server did not stop cleanly: {result:?}"
        );
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A keep-alive HTTP/1.1 client; every status is an answer to look at.
#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Http {
    pub fn new() -> Http {
        Http {
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    pub async fn send(
        &self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> (u16, String) {
        let mut req = hyper::Request::builder().method(method).uri(url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(Bytes::from(body))).expect("request");
        let res = tokio::time::timeout(Duration::from_secs(20), self.client.request(req))
            .await
            .unwrap_or_else(|_| panic!("{method} {url} did not answer in 20 s"))
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = res.status().as_u16();
        let body = res
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    pub async fn get(&self, url: &str) -> (u16, String) {
        self.send("GET", url, &[], Vec::new()).await
    }

    /// POSTs JSON and reads a JSON answer.
    pub async fn post(&self, url: &str, body: &Value) -> (u16, Value) {
        self.post_with(url, &[], body).await
    }

    pub async fn post_with(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> (u16, Value) {
        let (status, text) = self
            .send("POST", url, headers, body.to_string().into_bytes())
            .await;
        let json = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("status {status}, not JSON ({e}): {text}"));
        (status, json)
    }
}

/// The Redis behind the service, to read keys and TTLs directly.
pub enum Db {
    Single(Redis),
    Cluster(RedisCluster),
}

impl Db {
    pub fn url(&self) -> String {
        match self {
            Db::Single(r) => r.url(),
            Db::Cluster(c) => c.url(),
        }
    }

    /// `redis-cli` against the node holding the key (`-c` follows redirects).
    pub fn cli(&self, args: &[&str]) -> String {
        match self {
            Db::Single(r) => r.cli(args),
            Db::Cluster(c) => {
                let mut all = vec!["-c"];
                all.extend_from_slice(args);
                cli(c.nodes[0].port, &all)
            }
        }
    }

    pub fn get(&self, key: &str) -> String {
        self.cli(&["GET", key])
    }

    /// What the claim key `key` (`ankusa:{t}:claim:<source>:<event key>`)
    /// reads as in either layout: its value when the old layout's key is
    /// there (`p:…` pending, or `c:<hook id>` committed), else
    /// `c:<hook id>` when the event is committed in the compact layout (any
    /// series of the tenant), else "".
    pub fn committed(&self, key: &str) -> String {
        committed_at(|args| self.cli(args), key)
    }

    /// The longest PTTL among the tenant's compact entries (every series,
    /// partition counter and bucket of the tenant `{t}` of `key`), -2 with none.
    pub fn committed_pttl(&self, key: &str) -> i64 {
        let tag = key.split(":claim:").next().expect("a claim key");
        self.keys(&format!("{tag}:committed:*"))
            .iter()
            .map(|k| self.pttl(k))
            .max()
            .unwrap_or(-2)
    }
}

/// [`Db::committed`] through `cli` (a `redis-cli` reaching the key's node).
pub fn committed_at(cli: impl Fn(&[&str]) -> String, key: &str) -> String {
    let [script, hex] = ankusa_store::committed::read_either(key).expect("a claim key");
    cli(&["EVAL", &script, "1", key, &hex])
}

impl Db {
    pub fn pttl(&self, key: &str) -> i64 {
        let out = self.cli(&["PTTL", key]);
        out.parse()
            .unwrap_or_else(|_| panic!("PTTL {key}: {out:?}"))
    }

    pub fn exists(&self, key: &str) -> bool {
        self.cli(&["EXISTS", key]) == "1"
    }

    /// The port of every node.
    pub fn ports(&self) -> Vec<u16> {
        match self {
            Db::Single(r) => vec![r.port],
            Db::Cluster(c) => c.nodes.iter().map(|n| n.port).collect(),
        }
    }

    /// `SCRIPT` commands (`LOAD`, `FLUSH`…) every node has run, from
    /// `INFO commandstats`.
    pub fn script_commands(&self) -> u64 {
        self.ports()
            .into_iter()
            .flat_map(|p| {
                cli(p, &["INFO", "commandstats"])
                    .lines()
                    .filter(|l| l.starts_with("cmdstat_script"))
                    .filter_map(|l| {
                        let calls = l.split_once("calls=")?.1.split(',').next()?;
                        calls.parse::<u64>().ok()
                    })
                    .collect::<Vec<_>>()
            })
            .sum()
    }

    /// Empties every node's script cache (`SCRIPT FLUSH`), as a restart would.
    pub fn flush_scripts(&self) {
        for p in self.ports() {
            assert_eq!(cli(p, &["SCRIPT", "FLUSH"]), "OK");
        }
    }

    /// Every key matching `pattern`, over every node, sorted.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let mut keys: Vec<String> = self
            .ports()
            .into_iter()
            .flat_map(|p| {
                cli(p, &["KEYS", pattern])
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .filter(|k| !k.is_empty())
            .collect();
        keys.sort();
        keys
    }

    /// Redis's clock in µs (the clock of the hit script).
    pub fn now_us(&self) -> u64 {
        let out = self.cli(&["TIME"]);
        let mut parts = out.lines().map(|l| l.trim().parse::<u64>().expect("TIME"));
        let (s, us) = (parts.next().expect("seconds"), parts.next().expect("µs"));
        s * 1_000_000 + us
    }
}

/// `units` against a quota of `rate` per second and `burst` at once.
pub fn charge(kind: &str, tenant: &str, units: u64, rate: u64, burst: u64) -> Value {
    json!({"kind": kind, "tenant": tenant, "units": units, "rate": rate, "burst": burst})
}

pub fn claim(tenant: &str, key: &str, hook_id: &str, ttl_ms: u64, pending_ttl_ms: u64) -> Value {
    json!({"tenant": tenant, "source_id": "gh", "key": key, "hook_id": hook_id, "node": "edge-1",
           "ttl_ms": ttl_ms, "pending_ttl_ms": pending_ttl_ms})
}

pub fn hit(charges: Vec<Value>, claim: Option<Value>) -> Value {
    json!({"charges": charges, "claim": claim})
}

pub fn promote(claim: &Value, hook_id: &str) -> Value {
    json!({"op": "promote", "claim": claim, "hook_id": hook_id})
}

pub fn release(claim: &Value) -> Value {
    json!({"op": "release", "claim": claim})
}

/// Every page of the operators' listing `GET /v1/<what>?<query>` (`claims`
/// or `commits`), following its cursor to the end: the items, each page's
/// `<what>` array.
pub async fn list_all(
    http: &Http,
    store: &Service,
    operator: &str,
    what: &str,
    query: &str,
) -> Vec<Value> {
    let bearer = format!("Bearer {operator}");
    let mut cursor: Option<String> = None;
    let mut all = Vec::new();
    for _ in 0..1_000 {
        let mut url = store.at(&format!("/v1/{what}?{query}"));
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let (status, text) = http
            .send("GET", &url, &[("authorization", bearer.as_str())], vec![])
            .await;
        assert_eq!(status, 200, "{text}");
        let page: Value = serde_json::from_str(&text).expect("JSON");
        all.extend(page[what].as_array().cloned().unwrap_or_default());
        match page["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return all,
        }
    }
    panic!("the listing of {what} never ended");
}

/// `store` (the binary, started by the caller) once it answers `/readyz`;
/// its log in the failure otherwise.
pub fn ready(store: Store) -> Store {
    assert!(
        store.wait_ready(Duration::from_secs(10)),
        "{}",
        store.proc.log_tail()
    );
    store
}
