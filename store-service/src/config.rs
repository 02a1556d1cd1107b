//! Flags (with environment fallbacks) and where Redis lives.

use crate::tokens::{Role, RoleTokens};
use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

/// `ankusa-store` settings; every flag also reads an environment variable.
#[derive(Parser, Clone, Debug)]
#[command(
    name = "ankusa-store",
    version,
    about = "The Ankusa fleet store in front of Redis"
)]
pub struct Config {
    /// Address to listen on (HTTP/1.1 and cleartext HTTP/2).
    #[arg(long, env = "ANKUSA_STORE_LISTEN", default_value = "127.0.0.1:7070")]
    pub listen: String,
    /// `redis://host:port/db` for one Redis; a comma-separated list of
    /// `redis://` node URLs, or `redis+cluster://h:p,h:p`, for Redis Cluster.
    #[arg(
        long,
        env = "ANKUSA_REDIS_URL",
        default_value = "redis://127.0.0.1:6379/0"
    )]
    pub redis_url: String,
    /// Ceiling on a caller's `x-ankusa-budget-ms`, and the budget of callers that send none.
    #[arg(long, env = "ANKUSA_STORE_MAX_BUDGET_MS", default_value_t = 1000)]
    pub max_budget_ms: u64,
    /// How long concurrent settle requests are gathered before one flush (ms);
    /// a request is flushed no later than half its budget after it arrived.
    #[arg(long, env = "ANKUSA_STORE_SETTLE_WINDOW_MS", default_value_t = 100)]
    pub settle_window_ms: u64,
    /// A flush starts early once this many settle operations are waiting.
    #[arg(long, env = "ANKUSA_STORE_SETTLE_BATCH_MAX", default_value_t = 2000)]
    pub settle_batch_max: usize,
    /// Most settle operations waiting for a flush; a settle that doesn't fit
    /// is answered 503 `overloaded` (the edge retries it later).
    #[arg(long, env = "ANKUSA_STORE_SETTLE_QUEUE_MAX", default_value_t = 100_000)]
    pub settle_queue_max: usize,
    /// How long a client may take to send a request's headers (ms); a slower
    /// one is disconnected, so idle half-requests can't pile up. hyper counts
    /// an idle keep-alive connection's wait for its next request against it,
    /// so it stays above the edges' pool `idle_timeout` (20 s).
    #[arg(
        long,
        env = "ANKUSA_STORE_HEADER_READ_TIMEOUT_MS",
        default_value_t = 30_000
    )]
    pub header_read_timeout_ms: u64,
    /// How long a request's body may take to arrive once its headers have
    /// (ms); a slower one is answered 408 `body_timeout` and its connection
    /// closed. The largest body (a settle of 8 MiB) needs 0.8 MiB/s at the
    /// default.
    #[arg(
        long,
        env = "ANKUSA_STORE_BODY_READ_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub body_read_timeout_ms: u64,
    /// Most connections open at once; 0: the process's descriptor limit
    /// (`ulimit -n`) less 64 kept for Redis and files, at most 16 384. At the
    /// limit a new connection closes the oldest one that has not yet sent an
    /// accepted token, else the authenticated one idle the longest, else it
    /// is itself closed (see `store-service/README.md`, "Connections").
    #[arg(long, env = "ANKUSA_STORE_MAX_CONNECTIONS", default_value_t = 0)]
    pub max_connections: usize,
    /// A file of the edges' bearer tokens, one per line (`#` comments
    /// allowed), each followed by the node names it speaks for
    /// (`nodes=edge-a`, or `nodes=edge-* live=4`): hits, settles, reading
    /// overrides. More can come from the ANKUSA_STORE_EDGE_TOKENS environment
    /// variable (comma separated). There is no flag carrying a token itself.
    #[arg(long, env = "ANKUSA_STORE_EDGE_TOKEN_FILE", value_name = "PATH")]
    pub edge_token_file: Option<PathBuf>,
    /// A file of the operators' bearer tokens, one per line: all an edge
    /// may, and changing overrides and resetting a tenant's buckets. More can
    /// come from ANKUSA_STORE_OPERATOR_TOKENS (comma separated).
    #[arg(long, env = "ANKUSA_STORE_OPERATOR_TOKEN_FILE", value_name = "PATH")]
    pub operator_token_file: Option<PathBuf>,
    /// Refused: the single-role token file of earlier versions (its tokens
    /// did everything). Use --edge-token-file and --operator-token-file.
    #[arg(long, env = "ANKUSA_STORE_TOKEN_FILE", value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// A file holding the key the upstream signs its receipts with (the first
    /// line that isn't blank or a `#` comment; further lines are also
    /// accepted, for a rotation): a promote commits a claim only with the
    /// upstream's proof that it stored the hook. Without it, promotes are
    /// committed unproven. Read again on SIGHUP. There is no flag carrying a
    /// key itself.
    #[arg(long, env = "ANKUSA_STORE_RECEIPT_KEY_FILE", value_name = "PATH")]
    pub receipt_key_file: Option<PathBuf>,
    /// What a promote without a receipt does when a key is given: `required`
    /// (the default: not applied, the claim expires pending and the sender's
    /// retry is admitted) or `accept-missing` (applied: while edges of v0.1.0,
    /// which send none, still run). A promote with an invalid receipt is
    /// never applied.
    #[arg(long, env = "ANKUSA_STORE_RECEIPTS", value_enum, value_name = "MODE")]
    pub receipts: Option<crate::receipts::Mode>,
    /// Where committed claims are written: `compact` (the default: the
    /// compact layout only) or `dual` (both layouts, while stores of 0.2.0,
    /// which read only the old one, share the Redis: see docs/deploy.md,
    /// "Upgrading"). Both read claims of both layouts.
    #[arg(
        long,
        env = "ANKUSA_STORE_COMMITTED_LAYOUT",
        value_enum,
        value_name = "LAYOUT",
        default_value_t = crate::committed::Layout::Compact
    )]
    pub committed_layout: crate::committed::Layout,
    /// Accept `/v1/*` calls with no token: only when something in front of the
    /// store (mTLS) authenticates its callers.
    #[arg(long, env = "ANKUSA_STORE_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,
    /// Worker threads serving requests; 0: one per core. On a machine whose
    /// cores Redis and the edges share, fewer threads spend less CPU per
    /// request (no hand-offs between threads).
    #[arg(long, env = "ANKUSA_STORE_THREADS", default_value_t = 0)]
    pub threads: usize,
    /// How long an edge counts as live after its last hit (ms): the count
    /// every answer carries (`edges`) is of the edges heard within it.
    #[arg(long, env = "ANKUSA_STORE_EDGES_TTL_MS", default_value_t = 5_000)]
    pub edges_ttl_ms: u64,
    /// How often the names heard are written to Redis and the count read (ms).
    #[arg(long, env = "ANKUSA_STORE_EDGES_REFRESH_MS", default_value_t = 1_000)]
    pub edges_refresh_ms: u64,
    /// Log lines as `text` (for people) or `json` (one object a line, for
    /// log pipelines). Which lines: RUST_LOG (ANKUSA_LOG also read), e.g.
    /// `info` (the default) or `info,ankusa_store=debug` (a line per request).
    #[arg(long, env = "ANKUSA_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Where to export traces, OTLP over HTTP (protobuf): the collector's
    /// base URL, spans going to `<URL>/v1/traces`
    /// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, if set, is the whole URL).
    /// Unset: no traces, and no work for them.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Tokens given in code (tests, embedders); the binary fills it from
    /// ANKUSA_STORE_EDGE_TOKENS and ANKUSA_STORE_OPERATOR_TOKENS.
    #[arg(skip)]
    pub tokens: RoleTokens,
    /// Receipt keys given in code (tests, embedders), beside the key file's.
    #[arg(skip)]
    pub receipt_keys: crate::receipts::Keys,
}

impl Config {
    /// Defaults for an in-process server on `redis_url` (tests, benches),
    /// with no authentication: see [`Config::with_tokens`].
    pub fn for_redis(redis_url: &str) -> Config {
        Config {
            listen: "127.0.0.1:0".into(),
            redis_url: redis_url.into(),
            max_budget_ms: 1000,
            settle_window_ms: 100,
            settle_batch_max: 2000,
            settle_queue_max: 100_000,
            header_read_timeout_ms: 30_000,
            body_read_timeout_ms: 10_000,
            max_connections: 0,
            edge_token_file: None,
            operator_token_file: None,
            token_file: None,
            insecure_no_auth: true,
            receipt_key_file: None,
            receipts: None,
            committed_layout: crate::committed::Layout::Compact,
            receipt_keys: Default::default(),
            threads: 0,
            edges_ttl_ms: 5_000,
            edges_refresh_ms: 1_000,
            log_format: LogFormat::Text,
            otlp_endpoint: None,
            tokens: RoleTokens::default(),
        }
    }

    /// The same server requiring one of `tokens` on every `/v1/*` call.
    pub fn with_tokens(mut self, tokens: RoleTokens) -> Config {
        self.insecure_no_auth = false;
        self.tokens = tokens;
        self
    }

    /// The same server checking every promote's receipt against `keys`
    /// (`mode`: None, the default for a key, `required`).
    pub fn with_receipts(
        mut self,
        keys: crate::receipts::Keys,
        mode: Option<crate::receipts::Mode>,
    ) -> Config {
        self.receipt_keys = keys;
        self.receipts = mode;
        self
    }

    /// The receipt policy: the keys given in code and the key file's, and `--receipts`.
    pub fn receipts(&self) -> Result<crate::receipts::Receipts, String> {
        crate::receipts::Receipts::new(
            &self.receipt_keys,
            self.receipt_key_file.as_deref(),
            self.receipts,
        )
    }

    /// The token file of `role`, if one was given.
    pub fn token_file_of(&self, role: Role) -> Option<&PathBuf> {
        match role {
            Role::Edge => self.edge_token_file.as_ref(),
            Role::Operator => self.operator_token_file.as_ref(),
        }
    }

    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms.max(1))
    }

    pub fn body_read_timeout(&self) -> Duration {
        Duration::from_millis(self.body_read_timeout_ms.max(1))
    }

    /// `--max-connections`, or (0) what the descriptor limit allows (see
    /// [`connections_for`]).
    pub fn connection_limit(&self) -> usize {
        if self.max_connections > 0 {
            return self.max_connections;
        }
        let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        connections_for(soft)
    }

    pub fn max_budget(&self) -> Duration {
        Duration::from_millis(self.max_budget_ms.max(1))
    }

    pub fn settle_window(&self) -> Duration {
        Duration::from_millis(self.settle_window_ms)
    }
}

/// Descriptors the store keeps for itself below its limit: the listener,
/// Redis connections (one per node, and the probe's), log and token files.
pub const RESERVED_DESCRIPTORS: u64 = 64;
/// The most connections the store takes by default, whatever its
/// descriptor limit: each costs memory (a task, buffers) even when idle.
pub const MAX_DEFAULT_CONNECTIONS: usize = 16_384;

/// The connection limit a soft descriptor limit of `soft` allows (None:
/// unlimited): `soft` less [`RESERVED_DESCRIPTORS`], at least 16, at most
/// [`MAX_DEFAULT_CONNECTIONS`].
pub fn connections_for(soft: Option<u64>) -> usize {
    let allowed = soft.map_or(u64::MAX, |s| s.saturating_sub(RESERVED_DESCRIPTORS));
    let allowed = usize::try_from(allowed).unwrap_or(usize::MAX);
    allowed.clamp(16, MAX_DEFAULT_CONNECTIONS)
}

/// How log lines are written (`--log-format`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// `2026-01-01T00:00:00.000000Z  INFO ankusa_store::server: listening on …`
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `fields`, and the spans.
    Json,
}

/// One Redis, or the seed nodes of a Cluster.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum RedisTarget {
    Single(String),
    Cluster(Vec<String>),
}

impl RedisTarget {
    /// Reads `--redis-url`; a URL redis-rs can't use is refused here, so a
    /// typo stops the service at start rather than looking like an outage.
    pub fn parse(url: &str) -> Result<RedisTarget, String> {
        let url = url.trim();
        let target = if let Some(rest) = url.strip_prefix("redis+cluster://") {
            let nodes = rest
                .split(',')
                .map(|n| n.trim().trim_end_matches('/'))
                .filter(|n| !n.is_empty())
                .map(|n| format!("redis://{n}/"))
                .collect::<Vec<_>>();
            RedisTarget::Cluster(nodes)
        } else if url.contains(',') {
            RedisTarget::Cluster(
                url.split(',')
                    .map(|n| n.trim().to_string())
                    .filter(|n| !n.is_empty())
                    .collect(),
            )
        } else {
            RedisTarget::Single(url.to_string())
        };
        let urls = match &target {
            RedisTarget::Single(u) => std::slice::from_ref(u),
            RedisTarget::Cluster(nodes) if nodes.is_empty() => {
                return Err(format!(
                    "--redis-url {:?} names no Cluster node",
                    redact_url(url)
                ))
            }
            RedisTarget::Cluster(nodes) => nodes.as_slice(),
        };
        for u in urls {
            let shown = redact_url(u);
            if !u.starts_with("redis://") {
                return Err(format!("--redis-url: {shown:?} is not a redis:// URL"));
            }
            redis::Client::open(u.as_str())
                .map_err(|e| format!("--redis-url: {shown:?} is not usable: {e}"))?;
        }
        Ok(target)
    }
}

/// `url` (or a comma-separated list of URLs) with every password replaced
/// by `***`, for log lines and errors: `redis://user:pw@h:1/0` becomes
/// `redis://user:***@h:1/0`, and `redis://pw@h` (a bare secret) `redis://***@h`.
pub fn redact_url(url: &str) -> String {
    url.split(',').map(redact_one).collect::<Vec<_>>().join(",")
}

fn redact_one(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_string();
    };
    let user = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => "***".to_string(),
    };
    format!("{scheme}://{user}@{host}{tail}")
}

#[cfg(test)]
mod tests;
