use super::*;

/// Chunks an upstream read, each with when it arrived.
type Seen = Arc<Mutex<Vec<(Instant, Vec<u8>)>>>;

/// A line upstream: answers `echo:<what it read>` to every chunk and records
/// each chunk with when it arrived.
struct Echo {
    port: u16,
    seen: Seen,
    connections: Arc<AtomicU64>,
}

impl Echo {
    fn start() -> Echo {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicU64::new(0));
        let (s, c) = (seen.clone(), connections.clone());
        // Detached: the test process ends it.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = stream.read(&mut buf) {
                        if n == 0 {
                            return;
                        }
                        s.lock().unwrap().push((Instant::now(), buf[..n].to_vec()));
                        let mut answer = b"echo:".to_vec();
                        answer.extend_from_slice(&buf[..n]);
                        if stream.write_all(&answer).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Echo {
            port,
            seen,
            connections,
        }
    }

    fn seen(&self) -> Vec<Vec<u8>> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(_, b)| b.clone())
            .collect()
    }
}

fn client(proxy: &FaultProxy, read_timeout: Duration) -> TcpStream {
    let c = TcpStream::connect(("127.0.0.1", proxy.port)).unwrap();
    c.set_read_timeout(Some(read_timeout)).unwrap();
    c
}

/// Reads until `want` bytes or an error; what came and the error, if any.
fn read_n(c: &mut TcpStream, want: usize) -> (Vec<u8>, Option<ErrorKind>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < want {
        match c.read(&mut buf) {
            Ok(0) => return (got, Some(ErrorKind::UnexpectedEof)),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => return (got, Some(e.kind())),
        }
    }
    (got, None)
}

fn eventually(timeout: Duration, f: impl Fn() -> bool) -> bool {
    let until = Instant::now() + timeout;
    while Instant::now() < until {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    f()
}

#[test]
fn pass_forwards_both_ways() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.port);
    let mut c = client(&proxy, Duration::from_secs(5));
    c.write_all(b"ping").unwrap();
    assert_eq!(read_n(&mut c, 9), (b"echo:ping".to_vec(), None));
    assert_eq!(echo.seen(), [b"ping".to_vec()]);
    assert_eq!(proxy.connections(), 1);
}

#[test]
fn a_delayed_request_reaches_the_upstream_after_its_client_gave_up() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.port);
    proxy.set_mode(Mode::DelayRequest(Duration::from_millis(400)));
    let sent = Instant::now();
    let mut c = client(&proxy, Duration::from_millis(100));
    c.write_all(b"late").unwrap();
    let (got, err) = read_n(&mut c, 1);
    assert!(got.is_empty(), "answered before the delay: {got:?}");
    assert!(matches!(
        err,
        Some(ErrorKind::WouldBlock | ErrorKind::TimedOut)
    ));
    drop(c); // the caller's timeout: it closes and leaves
    assert!(
        eventually(Duration::from_secs(5), || echo.seen().len() == 1),
        "the request never reached the upstream"
    );
    let arrived = echo.seen.lock().unwrap()[0].0;
    assert!(arrived.duration_since(sent) >= Duration::from_millis(400));
    assert_eq!(echo.seen(), [b"late".to_vec()]);
}

#[test]
fn a_delayed_response_is_held_after_the_upstream_ran_it() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.port);
    proxy.set_mode(Mode::DelayResponse(Duration::from_millis(300)));
    let sent = Instant::now();
    let mut c = client(&proxy, Duration::from_secs(5));
    c.write_all(b"slow").unwrap();
    assert_eq!(read_n(&mut c, 9), (b"echo:slow".to_vec(), None));
    assert!(sent.elapsed() >= Duration::from_millis(300));
    let arrived = echo.seen.lock().unwrap()[0].0;
    assert!(
        arrived.duration_since(sent) < Duration::from_millis(300),
        "the request itself was not held"
    );
}

#[test]
fn a_blackhole_reads_and_never_answers_nor_connects() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.port);
    proxy.set_mode(Mode::Blackhole);
    let mut c = client(&proxy, Duration::from_millis(300));
    c.write_all(b"anyone?").unwrap();
    let (got, err) = read_n(&mut c, 1);
    assert!(got.is_empty());
    assert!(matches!(
        err,
        Some(ErrorKind::WouldBlock | ErrorKind::TimedOut)
    ));
    assert_eq!(echo.connections.load(Ordering::SeqCst), 0);
}

#[test]
fn reset_closes_the_client_with_a_reset() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.port);
    proxy.set_mode(Mode::Reset);
    let mut c = client(&proxy, Duration::from_secs(5));
    c.write_all(b"hello").unwrap();
    let (got, err) = read_n(&mut c, 1);
    assert!(got.is_empty());
    assert_eq!(err, Some(ErrorKind::ConnectionReset));
    assert_eq!(echo.connections.load(Ordering::SeqCst), 0);
}

#[test]
fn garbage_answers_the_given_bytes_and_closes() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.port);
    proxy.set_mode(Mode::Garbage(b"HTTP/1.1 200 OK\r\n\r\nnot json".to_vec()));
    let mut c = client(&proxy, Duration::from_secs(5));
    c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let (got, err) = read_n(&mut c, usize::MAX);
    assert_eq!(got, b"HTTP/1.1 200 OK\r\n\r\nnot json");
    assert_eq!(err, Some(ErrorKind::UnexpectedEof));
    assert!(echo.seen().is_empty());
}

#[test]
fn the_mode_switches_on_a_kept_alive_connection() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.port);
    let mut c = client(&proxy, Duration::from_millis(300));
    c.write_all(b"one").unwrap();
    assert_eq!(read_n(&mut c, 8).0, b"echo:one");
    proxy.set_mode(Mode::Blackhole);
    assert_eq!(proxy.mode(), Mode::Blackhole);
    c.write_all(b"two").unwrap();
    assert!(
        read_n(&mut c, 1).0.is_empty(),
        "a blackhole answers nothing"
    );
    proxy.set_mode(Mode::Pass);
    c.write_all(b"three").unwrap();
    assert_eq!(read_n(&mut c, 10).0, b"echo:three");
    assert_eq!(echo.seen(), [b"one".to_vec(), b"three".to_vec()]);
}

#[test]
fn dropping_the_proxy_stops_it_even_mid_delay() {
    let echo = Echo::start();
    let proxy = FaultProxy::start(echo.port);
    let port = proxy.port;
    proxy.set_mode(Mode::DelayRequest(Duration::from_secs(60)));
    let mut c = client(&proxy, Duration::from_millis(100));
    c.write_all(b"held").unwrap();
    assert!(eventually(Duration::from_secs(5), || proxy.connections() == 1));
    drop(proxy); // joins every thread: returns only once they stopped
    assert!(!crate::ports::is_listening(port));
    assert!(echo.seen().is_empty(), "a stopped proxy delivers nothing");
}

#[test]
fn it_carries_a_real_redis_conversation_and_delays_it() {
    let redis = crate::redis::Redis::start();
    let proxy = FaultProxy::start(redis.port);
    assert_eq!(crate::redis::cli(proxy.port, &["SET", "k", "v"]), "OK");
    proxy.set_mode(Mode::DelayRequest(Duration::from_millis(200)));
    let started = Instant::now();
    assert_eq!(crate::redis::cli(proxy.port, &["GET", "k"]), "v");
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(redis.cli(&["GET", "k"]), "v", "written through the proxy");
}
