use super::*;

#[test]
fn every_placeholder_takes_the_counter() {
    let t = Template::new("d-{i}/{i}");
    assert_eq!(t.render(7), "d-7/7");
    assert_eq!(Template::new("plain").render(3), "plain");
    assert_eq!(Template::new("{i}").render(0), "0");
}

#[test]
fn headers_split_at_the_first_colon() {
    assert_eq!(
        parse_header("x-github-delivery: b-{i}").unwrap(),
        ("x-github-delivery".to_string(), "b-{i}".to_string())
    );
    assert_eq!(
        parse_header("x-t:a:b").unwrap(),
        ("x-t".to_string(), "a:b".to_string())
    );
    let err = parse_header("no-colon").unwrap_err();
    assert!(err.contains("no-colon"), "{err}");
    let err = parse_header("bad name:1").unwrap_err();
    assert!(err.contains("bad name"), "{err}");
}

#[test]
fn percentiles_read_the_sorted_latencies() {
    let r = Report {
        latencies_us: (1..=100).map(|ms| ms * 1000).collect(),
        ..Report::default()
    };
    assert_eq!(r.percentile_ms(0.50), 50.0);
    assert_eq!(r.percentile_ms(0.99), 99.0);
    assert_eq!(Report::default().percentile_ms(0.99), 0.0);
}

#[test]
fn reconnects_exclude_each_clients_first_connection() {
    let r = Report {
        connects: 35,
        clients: 32,
        ..Report::default()
    };
    assert_eq!(r.reconnects(), 3);
}

/// A server that answers every request with 201 `ok` and, with
/// `close_half`, closes every second connection after its answer, like
/// Envoy after a local reply. Its port.
fn serve_201(close_half: bool) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap();
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0u8; length];
                    std::io::Read::read_exact(&mut reader, &mut body).unwrap();
                    let close = close_half && n % 2 == 1;
                    let head = if close { "connection: close\r\n" } else { "" };
                    let _ = stream.write_all(
                        format!("HTTP/1.1 201 Created\r\ncontent-length: 2\r\n{head}\r\nok")
                            .as_bytes(),
                    );
                    if close {
                        return;
                    }
                }
            });
        }
    });
    port
}

fn spec(port: u16, clients: usize, duration: Duration) -> LoadSpec {
    LoadSpec {
        url: format!("http://127.0.0.1:{port}/hooks"),
        method: "POST".to_string(),
        headers: vec![("x-id".to_string(), "{i}".to_string())],
        body: "{}".to_string(),
        clients,
        duration,
        expect_body: Some("ok".to_string()),
        timeout: Duration::from_secs(5),
        rate: None,
        max_requests: None,
    }
}

#[test]
fn a_closed_connection_is_reopened_and_counted() {
    let port = serve_201(true);
    let report = run(&spec(port, 2, Duration::from_millis(300))).unwrap();
    assert!(report.ok > 0, "{}", report.line());
    assert_eq!(
        (report.non_2xx, report.bad_body),
        (0, 0),
        "{}",
        report.line()
    );
    assert!(report.reconnects() > 0, "{}", report.line());
}

#[test]
fn a_run_stops_after_max_requests() {
    let port = serve_201(false);
    let mut spec = spec(port, 4, Duration::from_secs(30));
    spec.max_requests = Some(50);
    let report = run(&spec).unwrap();
    assert_eq!(report.ok, 50, "{}", report.line());
    assert!(
        report.elapsed < Duration::from_secs(30),
        "{}",
        report.line()
    );
}

#[test]
fn a_paced_run_never_sends_faster_than_its_rate() {
    let port = serve_201(false);
    let mut spec = spec(port, 4, Duration::from_millis(1_000));
    spec.rate = Some(100.0);
    let report = run(&spec).unwrap();
    // Client k of n first sends at k/n of its period, then once a period:
    // at most 100 in the second, and at least one.
    assert!(report.ok >= 1 && report.ok <= 100, "{}", report.line());
    spec.rate = Some(0.0);
    let err = run(&spec).err().unwrap();
    assert!(err.contains("--rate") && err.contains('0'), "{err}");
}
