//! The HTTP/1.1 framing of a store call on the module's own connection:
//! the request written from the same [`Call`] a callout would carry (its
//! pseudo-headers become the request line and `host`), and the answer read
//! back (`content-length` or chunked), with bounds on what a store may send.
//! Anything else (a short read, a malformed line, a body past the bound) is
//! an error: the call is answered as reset and the connection dropped.
#![deny(unsafe_code)]

use crate::abi::{Answer, Call};
use std::io::{self, BufRead, Read};

/// The longest status line or header line read.
const MAX_LINE: usize = 8 * 1024;
/// Header lines at most.
const MAX_HEADERS: usize = 64;
/// The largest answer body read (a batched answer of `MAX_BATCH` hooks is far less).
pub const MAX_BODY: usize = 4 * 1024 * 1024;

/// The request's bytes: `:method` `:path` HTTP/1.1, `host` from
/// `:authority`, the other headers in order, and `content-length`.
pub fn request(call: &Call<'_>) -> Vec<u8> {
    let pseudo = |name: &str| {
        call.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map_or("", |(_, v)| *v)
    };
    let mut out = Vec::with_capacity(256 + call.body.len());
    let line = format!(
        "{} {} HTTP/1.1\r\nhost: {}\r\n",
        pseudo(":method"),
        pseudo(":path"),
        pseudo(":authority")
    );
    out.extend_from_slice(line.as_bytes());
    for (name, value) in call.headers.iter().filter(|(k, _)| !k.starts_with(':')) {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(format!("content-length: {}\r\n\r\n", call.body.len()).as_bytes());
    out.extend_from_slice(call.body);
    out
}

/// An answer read off the connection, and whether the connection may carry the next call.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    pub answer: Answer,
    pub keep_alive: bool,
}

fn invalid(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.into())
}

/// One CRLF-terminated line, without its end, at most [`MAX_LINE`] bytes.
fn line(r: &mut impl BufRead) -> io::Result<String> {
    let mut buf = Vec::new();
    let n = r.take(MAX_LINE as u64 + 2).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the store closed the connection",
        ));
    }
    if !buf.ends_with(b"\n") {
        return Err(invalid("a line too long or cut short"));
    }
    buf.pop();
    if buf.ends_with(b"\r") {
        buf.pop();
    }
    String::from_utf8(buf).map_err(|_| invalid("a line that is not UTF-8"))
}

/// Reads one response: its status, its body, and whether the connection stays open.
pub fn response(r: &mut impl BufRead) -> io::Result<Response> {
    let status_line = line(r)?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let status = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") || status.len() != 3 || status.parse::<u16>().is_err() {
        return Err(invalid(format!(
            "not an HTTP/1.1 status line: {status_line:?}"
        )));
    }
    let mut length: Option<usize> = None;
    let mut chunked = false;
    let mut keep_alive = version == "HTTP/1.1";
    for n in 0.. {
        if n > MAX_HEADERS {
            return Err(invalid("too many header lines"));
        }
        let header = line(r)?;
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            return Err(invalid(format!("a header line without ':': {header:?}")));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let n = value
                .parse::<usize>()
                .map_err(|_| invalid(format!("content-length {value:?}")))?;
            length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        } else if name.eq_ignore_ascii_case("connection") {
            keep_alive = !value.eq_ignore_ascii_case("close");
        }
    }
    let body = if chunked {
        chunks(r)?
    } else if let Some(n) = length {
        if n > MAX_BODY {
            return Err(invalid(format!("a body of {n} bytes")));
        }
        let mut body = vec![0; n];
        r.read_exact(&mut body)?;
        body
    } else {
        // Neither: the body runs to the connection's end.
        keep_alive = false;
        let mut body = Vec::new();
        r.take(MAX_BODY as u64 + 1).read_to_end(&mut body)?;
        if body.len() > MAX_BODY {
            return Err(invalid("a body past the bound"));
        }
        body
    };
    Ok(Response {
        answer: Answer {
            status: Some(status.to_string()),
            body,
        },
        keep_alive,
    })
}

/// A chunked body, its trailers skipped.
fn chunks(r: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let size_line = line(r)?;
        let size = size_line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| invalid(format!("a chunk size {size_line:?}")))?;
        if size == 0 {
            while !line(r)?.is_empty() {}
            return Ok(body);
        }
        if body.len() + size > MAX_BODY {
            return Err(invalid("a body past the bound"));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])?;
        if !line(r)?.is_empty() {
            return Err(invalid("a chunk longer than its size"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &str) -> io::Result<Response> {
        response(&mut io::BufReader::new(bytes.as_bytes()))
    }

    #[test]
    fn the_request_carries_the_calls_headers_and_body() {
        let call = Call {
            cluster: "ankusa_store",
            headers: vec![
                (":method", "POST"),
                (":path", "/v1/hits"),
                (":authority", "ankusa-store"),
                ("x-ankusa-budget-ms", "25"),
                ("authorization", "Bearer t"),
            ],
            body: b"{}",
            timeout_ms: 25,
        };
        assert_eq!(
            String::from_utf8(request(&call)).unwrap(),
            "POST /v1/hits HTTP/1.1\r\nhost: ankusa-store\r\nx-ankusa-budget-ms: 25\r\n\
             authorization: Bearer t\r\ncontent-length: 2\r\n\r\n{}"
        );
    }

    #[test]
    fn an_answer_is_read_by_length_or_chunks_and_says_whether_the_connection_stays() {
        let r = read("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}extra").unwrap();
        assert_eq!(r.answer.status.as_deref(), Some("200"));
        assert_eq!(r.answer.body, b"{}");
        assert!(r.keep_alive);
        let r = read("HTTP/1.1 503 x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\nab\r\n1;x\r\nc\r\n0\r\n\r\n").unwrap();
        assert_eq!(
            (r.answer.status.as_deref(), r.answer.body.as_slice()),
            (Some("503"), &b"abc"[..])
        );
        assert!(!r.keep_alive);
        let r = read("HTTP/1.0 200 OK\r\n\r\nto the end").unwrap();
        assert_eq!(r.answer.body, b"to the end");
        assert!(!r.keep_alive);
    }

    #[test]
    fn garbage_a_cut_answer_or_an_oversized_body_is_an_error() {
        for bad in [
            "",
            "SSH-2.0-OpenSSH\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",
            "HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 99999999999\r\n\r\n",
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        ] {
            assert!(read(bad).is_err(), "{bad:?}");
        }
    }
}
