//! A connection of its own to each Cluster master, for commands that must
//! run at most once (hits). A multiplexed connection writes each command
//! once and never sends it again by itself, and it answers one reply per
//! command, a redirect among them as that command's own reply (a Cluster
//! client instead fails or resends the whole pipeline).

use redis::aio::MultiplexedConnection;
use redis::{
    AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisResult,
};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// A Cluster master's address, as `CLUSTER SLOTS` and redirects name it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Addr {
    pub host: String,
    pub port: u16,
}

impl Addr {
    /// The `host:port` of a `MOVED`/`ASK` reply's details (`3999 127.0.0.1:7001`);
    /// the host may be an IPv6 address, its port after the last `:`.
    pub fn of_redirect(details: &str) -> Option<(u16, Addr)> {
        let mut parts = details.split_whitespace();
        let slot = parts.next()?.parse().ok()?;
        let (host, port) = parts.next()?.rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return None;
        }
        Some((
            slot,
            Addr {
                host: host.to_string(),
                port: port.parse().ok()?,
            },
        ))
    }
}

/// The connections, one per master address, opened on first use with the
/// seed URL's credentials, TLS and database.
pub struct Direct {
    seed: Option<ConnectionInfo>,
    conns: Mutex<HashMap<Addr, MultiplexedConnection>>,
}

impl Direct {
    /// Connections modelled on `seed_url` (the first Cluster seed).
    pub fn new(seed_url: Option<&str>) -> Direct {
        Direct {
            seed: seed_url.and_then(|u| u.into_connection_info().ok()),
            conns: Mutex::new(HashMap::new()),
        }
    }

    /// The connection to `addr`, opened within `limit` when there is none.
    pub async fn get(&self, addr: &Addr, limit: Duration) -> RedisResult<MultiplexedConnection> {
        if let Some(conn) = self.lock().get(addr) {
            return Ok(conn.clone());
        }
        let mut info = self.seed.clone().ok_or_else(|| {
            redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "no Cluster seed URL"))
        })?;
        info.addr = match info.addr {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: addr.host.clone(),
                port: addr.port,
                insecure,
                tls_params,
            },
            _ => ConnectionAddr::Tcp(addr.host.clone(), addr.port),
        };
        let config = AsyncConnectionConfig::new().set_connection_timeout(limit);
        let conn = redis::Client::open(info)?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        self.lock().insert(addr.clone(), conn.clone());
        Ok(conn)
    }

    /// Drops the connection to `addr` (it failed): the next use opens another.
    pub fn forget(&self, addr: &Addr) {
        self.lock().remove(addr);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Addr, MultiplexedConnection>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_names_its_slot_and_node() {
        let addr = |host: &str, port| Addr {
            host: host.into(),
            port,
        };
        assert_eq!(
            Addr::of_redirect("3999 127.0.0.1:7001"),
            Some((3999, addr("127.0.0.1", 7001)))
        );
        assert_eq!(
            Addr::of_redirect("12 ::1:7002"),
            Some((12, addr("::1", 7002)))
        );
        assert_eq!(
            Addr::of_redirect("0 redis-2.internal:6379"),
            Some((0, addr("redis-2.internal", 6379)))
        );
        for bad in [
            "",
            "3999",
            "x 127.0.0.1:1",
            "1 127.0.0.1",
            "1 :7001",
            "1 h:port",
        ] {
            assert_eq!(Addr::of_redirect(bad), None, "{bad:?}");
        }
    }
}
