//! Free TCP ports on 127.0.0.1.

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// Ports handed out by this process, so parallel tests never get the same one
/// between the probe and the child's bind.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A port nothing listens on right now, never returned twice by this process.
pub fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("cannot bind 127.0.0.1:0 to find a free port: {e}"));
        let mut seen = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
        if seen.get_or_insert_with(HashSet::new).insert(port) {
            return port;
        }
    }
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
pub fn is_listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &([127, 0, 0, 1], port).into(),
        std::time::Duration::from_millis(200),
    )
    .is_ok()
}
