//! `fleet.connection`: how a shell reaches the store. `"callout"` (the
//! default): Envoy's HTTP callouts through the `fleet.cluster` cluster, as
//! both shells always have. `"direct"`: the native module's own keep-alive
//! connection to `fleet.store` (`host:port`), off Envoy's workers, its
//! answers handed back through each hook's stream scheduler. Only a shell
//! that may own sockets can take `"direct"`: the proxy-wasm filter refuses
//! it ([`StoreConnection::refused_without_sockets`]).

use super::ConfigError;

/// How store calls leave the edge.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub enum StoreConnection {
    /// Envoy's HTTP callouts through `fleet.cluster`.
    #[default]
    Callout,
    /// A connection the shell owns, to the store at this address.
    Direct(StoreAddr),
}

/// `fleet.store`: the store's `host:port` for a direct connection.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct StoreAddr {
    /// A name or an IP address (an IPv6 one without its brackets).
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for StoreAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

const CONNECTION: &str = "fleet.connection";
const STORE: &str = "fleet.store";

impl StoreConnection {
    /// Reads `fleet.connection` and `fleet.store` (each None when absent).
    pub fn read(
        connection: Option<&str>,
        store: Option<&str>,
    ) -> Result<StoreConnection, ConfigError> {
        match (connection.unwrap_or("callout"), store) {
            ("callout", None) => Ok(StoreConnection::Callout),
            ("callout", Some(store)) => Err(ConfigError::new(
                STORE,
                format!(
                    "{store:?} is only used when {CONNECTION} is \"direct\" \
                     (it is \"callout\": calls go through fleet.cluster)"
                ),
            )),
            ("direct", None) => Err(ConfigError::new(
                STORE,
                format!("is missing: {CONNECTION} \"direct\" needs the store's \"host:port\""),
            )),
            ("direct", Some(store)) => StoreAddr::parse(store).map(StoreConnection::Direct),
            (other, _) => Err(ConfigError::new(
                CONNECTION,
                format!("must be \"callout\" or \"direct\", got {other:?}"),
            )),
        }
    }

    /// Why a shell that can't own sockets (the proxy-wasm filter) refuses
    /// this connection (None: it takes it).
    pub fn refused_without_sockets(&self) -> Option<ConfigError> {
        match self {
            StoreConnection::Callout => None,
            StoreConnection::Direct(addr) => Some(ConfigError::new(
                CONNECTION,
                format!(
                    "\"direct\" (to {addr}) needs a shell that owns its sockets, the native \
                     module; the proxy-wasm filter calls the store through Envoy: use \
                     \"callout\" and fleet.cluster"
                ),
            )),
        }
    }

    /// The direct connection's store (None: callouts).
    pub fn direct(&self) -> Option<&StoreAddr> {
        match self {
            StoreConnection::Callout => None,
            StoreConnection::Direct(addr) => Some(addr),
        }
    }
}

impl StoreAddr {
    /// `host:port` (`[v6]:port` for an IPv6 address), the port 1 to 65535.
    pub fn parse(text: &str) -> Result<StoreAddr, ConfigError> {
        let bad =
            |why: &str| ConfigError::new(STORE, format!("{text:?} is not \"host:port\": {why}"));
        if text.contains("://") {
            return Err(bad("no scheme, only the host and the port"));
        }
        let (host, port) = text.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let host = match host.strip_prefix('[') {
            Some(v6) => v6.strip_suffix(']').ok_or_else(|| bad("an unclosed '['"))?,
            None if host.contains(':') => return Err(bad("an IPv6 address goes in [brackets]")),
            None => host,
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if host
            .chars()
            .any(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':')))
        {
            return Err(bad(
                "the host may hold only letters, digits, '.', '-', '_' (and ':' in [v6])",
            ));
        }
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad("the port must be a number from 1 to 65535"))?;
        Ok(StoreAddr {
            host: host.to_string(),
            port,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(connection: Option<&str>, store: Option<&str>) -> Result<StoreConnection, String> {
        StoreConnection::read(connection, store).map_err(|e| e.to_string())
    }

    #[test]
    fn callouts_are_the_default_and_direct_takes_the_stores_address() {
        assert_eq!(read(None, None), Ok(StoreConnection::Callout));
        assert_eq!(read(Some("callout"), None), Ok(StoreConnection::Callout));
        let direct = read(Some("direct"), Some("127.0.0.1:8081")).unwrap();
        let addr = direct.direct().unwrap();
        assert_eq!((addr.host.as_str(), addr.port), ("127.0.0.1", 8081));
        let v6 = read(Some("direct"), Some("[::1]:80")).unwrap();
        assert_eq!(v6.direct().unwrap().to_string(), "[::1]:80");
        let name = read(Some("direct"), Some("ankusa-store.ns.svc:8081")).unwrap();
        assert_eq!(name.direct().unwrap().host, "ankusa-store.ns.svc");
    }

    #[test]
    fn a_missing_or_malformed_store_or_an_unknown_connection_is_refused_naming_field_and_value() {
        assert_eq!(
            read(Some("direct"), None).unwrap_err(),
            "fleet.store: is missing: fleet.connection \"direct\" needs the store's \"host:port\""
        );
        for (bad, why) in [
            ("store", "no port"),
            (":8081", "no host"),
            ("store:0", "the port must be a number from 1 to 65535"),
            ("store:70000", "the port must be a number from 1 to 65535"),
            ("store:http", "the port must be a number from 1 to 65535"),
            ("::1:80", "an IPv6 address goes in [brackets]"),
            ("a b:80", "the host may hold only"),
            ("http://store:80", "no scheme, only the host and the port"),
        ] {
            let e = read(Some("direct"), Some(bad)).unwrap_err();
            assert!(
                e.starts_with(&format!("fleet.store: {bad:?} is not \"host:port\": {why}")),
                "{bad}: {e}"
            );
        }
        assert_eq!(
            read(Some("socket"), None).unwrap_err(),
            "fleet.connection: must be \"callout\" or \"direct\", got \"socket\""
        );
        assert!(read(None, Some("store:80")).unwrap_err().starts_with(
            "fleet.store: \"store:80\" is only used when fleet.connection is \"direct\""
        ));
    }

    #[test]
    fn a_shell_without_sockets_refuses_direct_naming_the_field() {
        assert_eq!(StoreConnection::Callout.refused_without_sockets(), None);
        let direct = read(Some("direct"), Some("store:8081")).unwrap();
        let e = direct.refused_without_sockets().unwrap();
        assert_eq!(e.field, "fleet.connection");
        assert!(e.message.contains("\"direct\" (to store:8081)"), "{e}");
    }
}
