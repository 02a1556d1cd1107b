//! A small blocking HTTP/1.1 client: one request per connection, every status
//! returned as a value (a 429 is an answer to look at, not an error).
//!
//! An answer is read by its framing (`content-length` or chunked), as real
//! webhook senders do. Reading to EOF instead costs a second per local reply:
//! Envoy answers a refusal before it has read the request body, then holds the
//! connection for its `delayed_close_timeout` (1 s) waiting for the client to
//! close first.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics naming the body if it isn't.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {} body is not JSON ({e}): {}",
                self.status,
                self.text()
            )
        })
    }
}

/// Sends one request on a fresh connection and reads one answer.
pub fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<Response> {
    let headers: Vec<(&str, &[u8])> = headers.iter().map(|(k, v)| (*k, v.as_bytes())).collect();
    request_bytes(method, url, &headers, body, timeout)
}

/// [`request`] with header values sent as raw bytes, exactly as given: HTTP
/// allows obs-text (0x80–0xff) in a value, and a test may need a value that
/// isn't UTF-8.
pub fn request_bytes(
    method: &str,
    url: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<Response> {
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| bad(format!("not an http:// URL: {url}")))?;
    let (authority, path) = rest
        .find('/')
        .map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    let addr: SocketAddr = authority
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| bad(format!("cannot resolve {authority}")))?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    let mut out = format!(
        "{method} {path} HTTP/1.1\r\nhost: {authority}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    )
    .into_bytes();
    for (k, v) in headers {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    stream.write_all(&out)?;
    read_answer(&mut stream, method == "HEAD")
}

pub fn get(url: &str) -> std::io::Result<Response> {
    request("GET", url, &[], b"", Duration::from_secs(30))
}

pub fn post_json(url: &str, body: &serde_json::Value) -> std::io::Result<Response> {
    request(
        "POST",
        url,
        &[("content-type", "application/json")],
        body.to_string().as_bytes(),
        Duration::from_secs(30),
    )
}

fn read_answer(stream: &mut impl Read, head_only: bool) -> std::io::Result<Response> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut raw = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16 * 1024];
    let split = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(bad("connection closed before the end of the headers"));
        }
        raw.extend_from_slice(&chunk[..n]);
    };
    // A value may carry obs-text bytes; a test reads it as U+FFFD, not as an error.
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let mut body = raw.split_off(split + 4);
    let no_body = head_only || status == 204 || status == 304 || (100..200).contains(&status);
    if no_body {
        body.clear();
    } else if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            if let Some(decoded) = dechunk(&body) {
                body = decoded;
                break;
            }
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Err(bad("connection closed inside a chunked body"));
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(length) = find("content-length") {
        let length: usize = length.parse().map_err(|_| bad("bad content-length"))?;
        while body.len() < length {
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Err(bad("connection closed inside the body"));
            }
            body.extend_from_slice(&chunk[..n]);
        }
        body.truncate(length);
    } else {
        stream.read_to_end(&mut body)?;
    }
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// The decoded body once every chunk is in; `None` while more is needed.
fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that fails if asked for more than it was given, like a
    /// connection the peer holds open.
    struct Held(std::io::Cursor<Vec<u8>>);

    impl Read for Held {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.read(buf)? {
                0 => Err(std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    "read past the answer",
                )),
                n => Ok(n),
            }
        }
    }

    fn held(text: &[u8]) -> Held {
        Held(std::io::Cursor::new(text.to_vec()))
    }

    #[test]
    fn header_values_go_out_as_the_given_bytes() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).unwrap();
                assert!(n > 0, "closed before the end of the head");
                got.extend_from_slice(&buf[..n]);
            }
            c.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
                .unwrap();
            got
        });
        let url = format!("http://127.0.0.1:{port}/x");
        let value: &[u8] = &[b'd', 0xff, 0xfe, b'1'];
        let answer = request_bytes(
            "POST",
            &url,
            &[("x-id", value)],
            b"",
            Duration::from_secs(5),
        )
        .expect("answer");
        assert_eq!(answer.status, 204);
        let sent = server.join().unwrap();
        let line: Vec<u8> = [&b"\r\nx-id: "[..], value, b"\r\n"].concat();
        assert!(
            sent.windows(line.len()).any(|w| w == line),
            "{}",
            String::from_utf8_lossy(&sent)
        );
    }

    #[test]
    fn stops_at_the_end_of_the_answer_without_waiting_for_close() {
        let a = read_answer(
            &mut held(b"HTTP/1.1 429 Too Many\r\nretry-after: 1\r\ncontent-length: 2\r\n\r\nhi"),
            false,
        )
        .expect("answer");
        assert_eq!(
            (a.status, a.header("retry-after"), a.text().as_str()),
            (429, Some("1"), "hi")
        );
        let c = read_answer(
            &mut held(
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            ),
            false,
        )
        .expect("chunked");
        assert_eq!(c.text(), "abc");
        let empty = read_answer(&mut held(b"HTTP/1.1 204 No Content\r\n\r\n"), false).expect("204");
        assert!(empty.body.is_empty());
    }
}
