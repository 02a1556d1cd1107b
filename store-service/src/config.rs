//! Flags (with environment fallbacks) and where Redis lives.

use clap::Parser;
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
    /// How long concurrent settle requests are gathered before one flush (ms).
    #[arg(long, env = "ANKUSA_STORE_SETTLE_WINDOW_MS", default_value_t = 2)]
    pub settle_window_ms: u64,
    /// A flush starts early once this many settle operations are waiting.
    #[arg(long, env = "ANKUSA_STORE_SETTLE_BATCH_MAX", default_value_t = 2000)]
    pub settle_batch_max: usize,
}

impl Config {
    /// Defaults for an in-process server on `redis_url` (tests, benches).
    pub fn for_redis(redis_url: &str) -> Config {
        Config {
            listen: "127.0.0.1:0".into(),
            redis_url: redis_url.into(),
            max_budget_ms: 1000,
            settle_window_ms: 2,
            settle_batch_max: 2000,
        }
    }

    pub fn max_budget(&self) -> Duration {
        Duration::from_millis(self.max_budget_ms.max(1))
    }

    pub fn settle_window(&self) -> Duration {
        Duration::from_millis(self.settle_window_ms)
    }
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
                return Err(format!("--redis-url {url:?} names no Cluster node"))
            }
            RedisTarget::Cluster(nodes) => nodes.as_slice(),
        };
        for u in urls {
            if !u.starts_with("redis://") {
                return Err(format!("--redis-url: {u:?} is not a redis:// URL"));
            }
            redis::Client::open(u.as_str())
                .map_err(|e| format!("--redis-url: {u:?} is not usable: {e}"))?;
        }
        Ok(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_list_and_cluster_scheme_are_told_apart() {
        assert_eq!(
            RedisTarget::parse("redis://h:1/0"),
            Ok(RedisTarget::Single("redis://h:1/0".into()))
        );
        assert_eq!(
            RedisTarget::parse("redis://a:1/,redis://b:2/"),
            Ok(RedisTarget::Cluster(vec![
                "redis://a:1/".into(),
                "redis://b:2/".into()
            ]))
        );
        assert_eq!(
            RedisTarget::parse("redis+cluster://a:1,b:2"),
            Ok(RedisTarget::Cluster(vec![
                "redis://a:1/".into(),
                "redis://b:2/".into()
            ]))
        );
    }

    #[test]
    fn unusable_urls_are_refused_naming_the_flag() {
        let err = RedisTarget::parse("http://a:1").unwrap_err();
        assert!(
            err.contains("--redis-url") && err.contains("http://a:1"),
            "{err}"
        );
        assert!(RedisTarget::parse("redis+cluster://").is_err());
    }
}
