//! A TCP fault proxy: a free loopback port in front of a real upstream (the
//! store, Redis) that fails in the way a test asks, switched at runtime.
//!
//! ```no_run
//! use ankusa_testkit::fault::{FaultProxy, Mode};
//! use std::time::Duration;
//! let proxy = FaultProxy::start(6379);            // forwards to 127.0.0.1:6379
//! proxy.set_mode(Mode::DelayRequest(Duration::from_millis(300)));
//! // ... point the client at proxy.port ...
//! proxy.set_mode(Mode::Pass);
//! ```
//!
//! The mode is read for every chunk a client sends, so a switch takes effect
//! on the next request, even on a kept-alive connection. A client that gives
//! up (closes) does not cancel what it already sent: the proxy still delivers
//! it and keeps the upstream connection open for [`LINGER`], so the upstream
//! runs the request as a real one would after a caller's timeout.
//!
//! Bounded: at most [`MAX_CONNECTIONS`] client connections at once (more are
//! closed on accept), two threads each; every wait is short and checks the
//! stop flag, so dropping the proxy stops and joins every thread within about
//! a second.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How the proxy treats what a client sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forwards both ways unchanged.
    Pass,
    /// Holds each chunk bound for the upstream this long, then sends it on:
    /// the upstream runs the request late, even if the client left meanwhile.
    DelayRequest(Duration),
    /// Holds each chunk bound for the client this long: the upstream ran the
    /// request on time, its answer comes late.
    DelayResponse(Duration),
    /// Accepts and reads, never answers, never connects upstream.
    Blackhole,
    /// Reads the first chunk, then closes the client's connection with a TCP
    /// reset (RST) without answering.
    Reset,
    /// Reads the first chunk, answers these bytes instead of the upstream, then closes.
    Garbage(Vec<u8>),
}

/// Client connections served at once; more are closed as soon as accepted.
pub const MAX_CONNECTIONS: usize = 1024;
/// How long an upstream connection stays open after its client closed, so a
/// request sent just before the client gave up still runs.
pub const LINGER: Duration = Duration::from_secs(5);
/// The longest any blocking read waits before it checks the stop flag.
const POLL: Duration = Duration::from_millis(50);
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

struct Shared {
    upstream: SocketAddr,
    mode: Mutex<Mode>,
    stop: AtomicBool,
    live: AtomicUsize,
    accepted: AtomicU64,
    refused: AtomicU64,
    conns: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    fn mode(&self) -> Mode {
        self.mode.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Sleeps `d` in short steps; false if the proxy stopped meanwhile.
    fn sleep(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while !self.stopped() {
            let now = Instant::now();
            if now >= until {
                return true;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(10)));
        }
        false
    }
}

/// A running proxy on 127.0.0.1:`port`; stops (and joins its threads) on drop.
pub struct FaultProxy {
    pub port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// A passing proxy on a free port in front of 127.0.0.1:`upstream_port`.
    pub fn start(upstream_port: u16) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("fault proxy: cannot bind 127.0.0.1:0: {e}"));
        let port = listener
            .local_addr()
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("fault proxy: no local address: {e}"));
        let shared = Arc::new(Shared {
            upstream: SocketAddr::from(([127, 0, 0, 1], upstream_port)),
            mode: Mutex::new(Mode::Pass),
            stop: AtomicBool::new(false),
            live: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            conns: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let accept = std::thread::spawn(move || accept_loop(&listener, &s));
        FaultProxy {
            port,
            shared,
            accept: Some(accept),
        }
    }

    /// Switches the mode; it applies from the next chunk any client sends.
    pub fn set_mode(&self, mode: Mode) {
        *self.shared.mode.lock().unwrap_or_else(|p| p.into_inner()) = mode;
    }

    pub fn mode(&self) -> Mode {
        self.shared.mode()
    }

    /// Client connections accepted so far (those refused over the bound included).
    pub fn connections(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Client connections closed on accept because [`MAX_CONNECTIONS`] were open.
    pub fn refused(&self) -> u64 {
        self.shared.refused.load(Ordering::SeqCst)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept with a connection of our own.
        let _ = TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], self.port)),
            Duration::from_millis(200),
        );
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let conns =
            std::mem::take(&mut *self.shared.conns.lock().unwrap_or_else(|p| p.into_inner()));
        for t in conns {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stopped() {
            return;
        }
        let Ok(client) = client else { continue };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if shared.live.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            shared.refused.fetch_add(1, Ordering::SeqCst);
            continue; // dropped: closed
        }
        shared.live.fetch_add(1, Ordering::SeqCst);
        let s = shared.clone();
        let handle = std::thread::spawn(move || {
            serve(client, &s);
            s.live.fetch_sub(1, Ordering::SeqCst);
        });
        let mut conns = shared.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.retain(|h| !h.is_finished());
        conns.push(handle);
    }
}

/// A read that gave bytes, hit the end, or only timed out.
enum Got {
    Data(usize),
    End,
    Idle,
}

fn read_some(stream: &mut TcpStream, buf: &mut [u8]) -> Got {
    match stream.read(buf) {
        Ok(0) => Got::End,
        Ok(n) => Got::Data(n),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Got::Idle,
        Err(_) => Got::End,
    }
}

/// Closes `stream` with a reset instead of an orderly FIN.
fn reset(stream: TcpStream) {
    let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    drop(stream);
}

/// One client connection: its request side runs here, the answer side (once
/// an upstream connection exists) on a second thread.
fn serve(mut client: TcpStream, shared: &Arc<Shared>) {
    let _ = client.set_nodelay(true);
    let _ = client.set_read_timeout(Some(POLL));
    let _ = client.set_write_timeout(Some(WRITE_TIMEOUT));
    // Set once the client has closed its side: the answer side's deadline.
    let client_gone: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let mut upstream: Option<(TcpStream, JoinHandle<()>)> = None;
    let mut buf = vec![0u8; 64 * 1024];
    while !shared.stopped() {
        let n = match read_some(&mut client, &mut buf) {
            Got::Data(n) => n,
            Got::Idle => continue,
            Got::End => break,
        };
        match shared.mode() {
            Mode::Blackhole => continue,
            Mode::Reset => {
                if let Some((up, _)) = &upstream {
                    let _ = up.shutdown(Shutdown::Both);
                }
                reset(client);
                return join_answer_side(upstream);
            }
            Mode::Garbage(bytes) => {
                let _ = client.write_all(&bytes);
                let _ = client.shutdown(Shutdown::Both);
                if let Some((up, _)) = &upstream {
                    let _ = up.shutdown(Shutdown::Both);
                }
                return join_answer_side(upstream);
            }
            Mode::DelayRequest(d) => {
                if !shared.sleep(d) {
                    break;
                }
            }
            Mode::Pass | Mode::DelayResponse(_) => {}
        }
        if upstream.is_none() {
            match connect_upstream(&client, shared, &client_gone) {
                Some(pair) => upstream = Some(pair),
                None => {
                    reset(client);
                    return;
                }
            }
        }
        let Some((up, _)) = upstream.as_mut() else {
            break;
        };
        if up.write_all(&buf[..n]).is_err() {
            let _ = client.shutdown(Shutdown::Both);
            break;
        }
    }
    // The client is done sending (or left): the upstream keeps what it got
    // and may still answer, until LINGER passes.
    *client_gone.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now() + LINGER);
    join_answer_side(upstream);
}

fn join_answer_side(upstream: Option<(TcpStream, JoinHandle<()>)>) {
    if let Some((_, answer)) = upstream {
        let _ = answer.join();
    }
}

/// Connects to the upstream and starts the thread that carries its answers back.
fn connect_upstream(
    client: &TcpStream,
    shared: &Arc<Shared>,
    client_gone: &Arc<Mutex<Option<Instant>>>,
) -> Option<(TcpStream, JoinHandle<()>)> {
    let up = TcpStream::connect_timeout(&shared.upstream, Duration::from_secs(1)).ok()?;
    let _ = up.set_nodelay(true);
    let _ = up.set_read_timeout(Some(POLL));
    let _ = up.set_write_timeout(Some(WRITE_TIMEOUT));
    let (mut from, mut to) = (up.try_clone().ok()?, client.try_clone().ok()?);
    let (s, gone) = (shared.clone(), client_gone.clone());
    let answer = std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if s.stopped() {
                break;
            }
            let deadline = *gone.lock().unwrap_or_else(|p| p.into_inner());
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let n = match read_some(&mut from, &mut buf) {
                Got::Data(n) => n,
                Got::Idle => continue,
                Got::End => break,
            };
            if let Mode::DelayResponse(d) = s.mode() {
                if !s.sleep(d) {
                    break;
                }
            }
            // A client that left can't take the answer; the upstream has run
            // the request all the same, which is the point.
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    });
    Some((up, answer))
}

#[cfg(test)]
mod tests;
