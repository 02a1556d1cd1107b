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

/// A listener on 127.0.0.1 at a port from [`free_port`], for a server the
/// test runs in-process. A port taken between the probe and this bind (by
/// another process, or as the local end of an outgoing connection) is given
/// up for another; any other failure panics naming the port.
pub fn bind_free() -> TcpListener {
    bind_first_free(free_port)
}

/// [`bind_free`] over the ports `next` hands out.
fn bind_first_free(mut next: impl FnMut() -> u16) -> TcpListener {
    let mut last = None;
    for _ in 0..20 {
        let port = next();
        match TcpListener::bind(("127.0.0.1", port)) {
            Ok(listener) => return listener,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => panic!("cannot bind 127.0.0.1:{port}: {e}"),
        }
    }
    panic!("20 free ports were taken before they could be bound, the last: {last:?}")
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
pub fn is_listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &([127, 0, 0, 1], port).into(),
        std::time::Duration::from_millis(200),
    )
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_free_port_is_listening_and_never_handed_out_again() {
        let listener = bind_free();
        let port = listener.local_addr().unwrap().port();
        assert!(is_listening(port));
        assert!((0..50).all(|_| free_port() != port));
    }

    #[test]
    fn a_port_taken_after_the_probe_is_given_up_for_the_next() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let ports = [taken.local_addr().unwrap().port(), free_port()];
        let mut handed = ports.into_iter();
        let listener = bind_first_free(|| handed.next().unwrap());
        assert_eq!(listener.local_addr().unwrap().port(), ports[1]);
    }
}
