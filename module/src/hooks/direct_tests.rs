//! Store calls on the module's own connection (`fleet.connection:
//! "direct"`) through the exported hooks over the fake Envoy, against a
//! store of the test's own on a loopback socket: the answer handed back
//! through the stream's scheduler, a black-holed store answered at the
//! budget, a refused connection and a garbage answer falling back to the
//! node, and a stream gone before its answer left untouched.

use super::store_tests::{arrive, end, envoy, fallbacks, OK, SERIAL};
use super::tests::{config, decision, reset};
use super::*;
use crate::abi::fake::{self, COMMITS_ANY_THREAD};
use crate::direct;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

/// How a test's store answers each request it reads.
#[derive(Clone, Copy)]
enum Answers {
    /// `200` with this body, on a kept connection.
    Ok(&'static str),
    /// These bytes, then the connection is closed.
    Raw(&'static str),
    /// Never: the request is read and the connection held open.
    BlackHole,
}

/// Reads one request off `conn`: its head and body as text (None: closed).
fn read_request(conn: &mut BufReader<TcpStream>) -> Option<String> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if conn.read_line(&mut line).ok()? == 0 {
            return None;
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|n| n.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    conn.read_exact(&mut body).ok()?;
    Some(head + &String::from_utf8_lossy(&body))
}

/// A store on a free loopback port: its address, and each request it read.
/// With `hold`, an answer waits for a message on the returned sender.
fn store(answers: Answers, hold: bool) -> (String, Receiver<String>, Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (seen, requests) = channel();
    let (release, released) = channel::<()>();
    let released = std::sync::Arc::new(std::sync::Mutex::new(released));
    std::thread::spawn(move || {
        // Each connection on a thread of its own, as a store serves them.
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            let (seen, released) = (seen.clone(), std::sync::Arc::clone(&released));
            std::thread::spawn(move || answer_on(conn, answers, hold, &seen, &released));
        }
    });
    (addr, requests, release)
}

/// Answers the requests of one connection.
fn answer_on(
    conn: TcpStream,
    answers: Answers,
    hold: bool,
    seen: &Sender<String>,
    released: &std::sync::Mutex<Receiver<()>>,
) {
    let mut conn = BufReader::new(conn);
    while let Some(request) = read_request(&mut conn) {
        let _ = seen.send(request);
        if hold {
            let _ = released.lock().map(|r| r.recv());
        }
        match answers {
            Answers::Ok(body) => {
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.get_mut().write_all(reply.as_bytes());
            }
            Answers::Raw(bytes) => {
                let _ = conn.get_mut().write_all(bytes.as_bytes());
                return;
            }
            Answers::BlackHole => std::thread::sleep(Duration::from_secs(5)),
        }
    }
}

/// A port nothing listens on.
fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

fn direct_config(store: &str, tenant: &str) -> *const c_void {
    let json = format!(
        r#"{{"node":"edge-1",
            "fleet":{{"timeout_ms":40,"connection":"direct","store":"{store}"}},
            "sources":{{"gh":{{"tenant":"{tenant}","dedupe":"github"}}}},
            "rate_limits":{{"scope":"fleet","default":{{"rate":100,"burst":100}}}}}}"#
    );
    let config = config(&json);
    assert!(!config.is_null(), "{:?}", fake::with(|f| f.logs.clone()));
    config
}

/// The next answer a connection or the timer thread handed over through a
/// stream's scheduler: its event. Waits for it (a failing test stops after 10 s).
fn handed_over() -> u64 {
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        {
            let mut commits = COMMITS_ANY_THREAD.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(at) = commits.iter().position(|e| direct::is_answer(*e)) {
                return commits.remove(at);
            }
        }
        assert!(Instant::now() < give_up, "no answer was handed over");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A test's start: the store tests' lock held, the fake Envoy and the
/// commits seen so far cleared.
fn begin() -> std::sync::MutexGuard<'static, ()> {
    let serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    reset(&[]);
    clear_commits();
    serial
}

fn clear_commits() {
    COMMITS_ANY_THREAD
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clear();
}

/// Envoy runs the stream's scheduled event on its worker (this thread).
fn run(n: usize, filter: *const c_void, event: u64) {
    envoy_dynamic_module_on_http_filter_scheduled(envoy(n), filter, event);
}

#[test]
fn a_direct_call_carries_the_budget_and_its_answer_comes_back_through_the_streams_scheduler() {
    let _serial = begin();
    let (addr, requests, _) = store(Answers::Ok(OK), false);
    let config = direct_config(&addr, "direct");
    let (filter, status) = arrive(config, 1, "d-1");
    assert_eq!(status, HEADERS_STOP, "held for the store's answer");
    assert!(
        fake::with(|f| f.callouts.is_empty()),
        "no Envoy callout is made"
    );
    let request = requests.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        request.starts_with("POST /v1/hit HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(request.contains("x-ankusa-budget-ms: 40\r\n"), "{request}");
    assert!(request.contains("host: ankusa-store\r\n"), "{request}");
    assert!(request.contains(r#""charges""#), "{request}");
    assert_eq!(
        fake::with(|f| f.continued),
        0,
        "not before the worker runs it"
    );

    let event = handed_over();
    run(1, filter, event);
    assert_eq!(fake::with(|f| f.continued_on.clone()), [envoy(1) as usize]);
    let line = decision();
    assert!(
        line.starts_with("outcome=admitted") && line.contains("decided=store"),
        "{line}"
    );
    run(1, filter, event);
    assert_eq!(fake::with(|f| f.continued), 1, "an answer is taken once");
    end(1, filter);
    assert_eq!(direct::outstanding(), (0, 0));
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}

#[test]
fn a_black_holed_store_is_answered_at_the_budget_and_the_hook_falls_back() {
    let _serial = begin();
    let (addr, requests, _) = store(Answers::BlackHole, false);
    let config = direct_config(&addr, "direct-hole");
    let before = fallbacks();
    let (filter, _) = arrive(config, 1, "d-hole");
    requests.recv_timeout(Duration::from_secs(10)).unwrap();
    let event = handed_over();
    run(1, filter, event);
    assert_eq!(fake::with(|f| f.continued), 1, "let through from the node");
    assert!(decision().contains("decided=fallback"), "{}", decision());
    assert_eq!(fallbacks() - before, 1);
    end(1, filter);
    assert_eq!(direct::outstanding(), (0, 0));
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}

#[test]
fn a_refused_connection_and_a_garbage_answer_fall_back_to_the_node() {
    let _serial = begin();
    for (n, addr) in [
        (1, closed_port()),
        (2, store(Answers::Raw("SSH-2.0-OpenSSH\r\n\r\n"), false).0),
        (
            3,
            store(
                Answers::Raw("HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n{"),
                false,
            )
            .0,
        ),
    ] {
        let config = direct_config(&addr, "direct-refused");
        let (filter, _) = arrive(config, n, &format!("d-refused-{n}"));
        let event = handed_over();
        run(n, filter, event);
        assert_eq!(
            fake::with(|f| f.continued_on.last().copied()),
            Some(envoy(n) as usize)
        );
        assert!(
            decision().contains("decided=fallback"),
            "{addr}: {}",
            decision()
        );
        end(n, filter);
        envoy_dynamic_module_on_http_filter_config_destroy(config);
        // The next connect waits out the pause after a refused one.
        std::thread::sleep(direct::RECONNECT_PAUSE);
    }
    assert_eq!(direct::outstanding(), (0, 0));
}

#[test]
fn a_stream_gone_before_its_answer_is_not_touched_and_its_scheduler_goes() {
    let _serial = begin();
    let (addr, requests, release) = store(Answers::Ok(OK), true);
    let config = direct_config(&addr, "direct-gone");
    let (filter, _) = arrive(config, 1, "d-gone");
    requests.recv_timeout(Duration::from_secs(10)).unwrap();
    end(1, filter);
    assert_eq!(direct::outstanding(), (0, 0), "its call forgotten");
    assert_eq!(
        fake::with(|f| (f.schedulers_made, f.schedulers_deleted)),
        (2, 1),
        "its scheduler deleted with it (the configuration's stays)"
    );
    // The store answers now: nothing is handed to the stream that's gone,
    // and the connection carries the next hook.
    release.send(()).unwrap();
    let (filter, _) = arrive(config, 2, "d-after");
    requests.recv_timeout(Duration::from_secs(10)).unwrap();
    release.send(()).unwrap();
    let event = handed_over();
    run(2, filter, event);
    assert!(decision().contains("decided=store"), "{}", decision());
    assert_eq!(
        fake::with(|f| f.continued_on.clone()),
        [envoy(2) as usize],
        "only the live stream went on"
    );
    end(2, filter);
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}
