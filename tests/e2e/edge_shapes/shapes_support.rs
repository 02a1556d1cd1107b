//! Senders of one request in each shape a webhook can arrive in: raw HTTP/1
//! written on a `TcpStream` (content-length, chunked with or without a
//! trailer section, HTTP/1.0, `Expect: 100-continue`, pipelined, a body in
//! many small chunks) and HTTP/2 with prior knowledge through hyper (a body
//! in one or many DATA frames, a trailers frame after it, or none at all).

use bytes::Bytes;
use hyper::body::{Body, Frame};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// What a sender got back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An answer, or why there was none.
pub type Sent = Result<Answer, String>;

/// One request: path, headers (no framing headers), body.
#[derive(Clone, Debug)]
pub struct Request {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// How the body travels on HTTP/1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// `content-length`.
    Length,
    /// `transfer-encoding: chunked`, chunks of this many bytes, each written
    /// on its own after a short pause; with a trailer section or without.
    Chunked { chunk: usize, trailers: bool },
}

const TIMEOUT: Duration = Duration::from_secs(10);
/// Between two chunks or frames written on their own, so the edge reads
/// them apart.
const GAP: Duration = Duration::from_millis(2);

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the edge");
    stream.set_read_timeout(Some(TIMEOUT)).expect("timeout");
    stream.set_write_timeout(Some(TIMEOUT)).expect("timeout");
    stream.set_nodelay(true).expect("nodelay");
    stream
}

/// The request line and headers of `req` as `version` with `framing`.
fn head(req: &Request, version: &str, framing: Framing, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut out = format!("POST {} {version}\r\nhost: edge\r\n", req.path);
    for (k, v) in req.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())) {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    for (k, v) in extra {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    match framing {
        Framing::Length => out.push_str(&format!("content-length: {}\r\n", req.body.len())),
        Framing::Chunked { trailers, .. } => {
            out.push_str("transfer-encoding: chunked\r\n");
            if trailers {
                out.push_str("trailer: x-body-digest\r\n");
            }
        }
    }
    out.push_str("\r\n");
    out.into_bytes()
}

/// Writes `req`'s body as `framing` says.
fn write_body(stream: &mut TcpStream, req: &Request, framing: Framing) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("writing the body: {e}");
    match framing {
        Framing::Length => stream.write_all(&req.body).map_err(fail),
        Framing::Chunked { chunk, trailers } => {
            for piece in req.body.chunks(chunk.max(1)) {
                let mut out = format!("{:x}\r\n", piece.len()).into_bytes();
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
                stream.write_all(&out).map_err(fail)?;
                std::thread::sleep(GAP);
            }
            let end: &[u8] = if trailers {
                b"0\r\nx-body-digest: sent-after-the-body\r\n\r\n"
            } else {
                b"0\r\n\r\n"
            };
            stream.write_all(end).map_err(fail)
        }
    }
}

/// One HTTP/1.1 (or `version`) request on a fresh connection.
pub fn h1(port: u16, req: &Request, version: &str, framing: Framing) -> Sent {
    let mut stream = connect(port);
    let mut out = head(req, version, framing, &[("connection", "close")]);
    if framing == Framing::Length {
        out.extend_from_slice(&req.body);
        stream.write_all(&out).map_err(|e| e.to_string())?;
    } else {
        stream.write_all(&out).map_err(|e| e.to_string())?;
        // An edge that refuses a body mid-upload answers before its end and
        // closes: the answer is read even when the rest can't be written.
        if let Err(e) = write_body(&mut stream, req, framing) {
            return read_answer(&mut BufReader::new(stream)).map_err(|r| format!("{e}; {r}"));
        }
    }
    read_answer(&mut BufReader::new(stream)).map_err(|e| e.to_string())
}

/// `Expect: 100-continue`: the head, then the body once the edge says to go
/// on (or its final answer, if it gives one first).
pub fn expect_continue(port: u16, req: &Request) -> Sent {
    let mut stream = connect(port);
    let out = head(
        req,
        "HTTP/1.1",
        Framing::Length,
        &[("connection", "close"), ("expect", "100-continue")],
    );
    let io = |e: std::io::Error| e.to_string();
    stream.write_all(&out).map_err(io)?;
    let mut reader = BufReader::new(stream.try_clone().map_err(io)?);
    let first = read_head(&mut reader).map_err(io)?;
    if first.0 != 100 {
        return finish(&mut reader, first).map_err(io);
    }
    stream.write_all(&req.body).map_err(io)?;
    read_answer(&mut reader).map_err(io)
}

/// `reqs` written back to back on one keep-alive connection before any
/// answer is read; their answers in order.
pub fn pipelined(port: u16, reqs: &[Request]) -> Vec<Sent> {
    let mut stream = connect(port);
    let mut out = Vec::new();
    for req in reqs {
        out.extend(head(req, "HTTP/1.1", Framing::Length, &[]));
        out.extend_from_slice(&req.body);
    }
    if let Err(e) = stream.write_all(&out) {
        return vec![Err(e.to_string()); reqs.len()];
    }
    let mut reader = BufReader::new(stream);
    reqs.iter()
        .map(|_| read_answer(&mut reader).map_err(|e| e.to_string()))
        .collect()
}

/// Reads one final answer, skipping interim (1xx) ones.
fn read_answer(reader: &mut impl BufRead) -> std::io::Result<Answer> {
    loop {
        let head = read_head(reader)?;
        if !(100..200).contains(&head.0) {
            return finish(reader, head);
        }
    }
}

type Head = (u16, Vec<(String, String)>);

fn read_head(reader: &mut impl BufRead) -> std::io::Result<Head> {
    let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(bad("closed before an answer".into()));
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            return Ok((status, headers));
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
}

/// The body of an answer whose head was read.
fn finish(reader: &mut impl BufRead, (status, headers): Head) -> std::io::Result<Answer> {
    let find = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut body = Vec::new();
    if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = find("content-length") {
        body.resize(length.parse().unwrap_or(0), 0);
        reader.read_exact(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
    }
    Ok(Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// How an HTTP/2 request's body travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct H2Body {
    /// DATA frames of at most this many bytes, each sent after a short pause.
    pub frame: usize,
    /// A trailers frame ends the stream.
    pub trailers: bool,
    /// A `content-length` header declares the body's size.
    pub declared: bool,
}

/// A body of frames, given one at a time with a pause between them.
struct Frames {
    frames: VecDeque<Frame<Bytes>>,
    gap: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(gap) = self.gap.as_mut() {
            if gap.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        let next = self.frames.pop_front();
        self.gap = (!self.frames.is_empty()).then(|| Box::pin(tokio::time::sleep(GAP)));
        Poll::Ready(next.map(Ok))
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty()
    }
}

/// One HTTP/2 request (cleartext, prior knowledge) on a fresh connection.
pub fn h2(port: u16, req: &Request, shape: H2Body) -> Sent {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        tokio::time::timeout(TIMEOUT, h2_send(port, req, shape))
            .await
            .unwrap_or_else(|_| Err(format!("no HTTP/2 answer within {TIMEOUT:?}")))
    })
}

async fn h2_send(port: u16, req: &Request, shape: H2Body) -> Sent {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    tokio::spawn(connection);
    let mut frames: VecDeque<Frame<Bytes>> = req
        .body
        .chunks(shape.frame.max(1))
        .map(|piece| Frame::data(Bytes::copy_from_slice(piece)))
        .collect();
    if shape.trailers {
        let mut trailers = hyper::HeaderMap::new();
        trailers.insert(
            "x-body-digest",
            hyper::header::HeaderValue::from_static("sent-after-the-body"),
        );
        frames.push_back(Frame::trailers(trailers));
    }
    let mut builder = hyper::Request::post(format!("http://127.0.0.1:{port}{}", req.path));
    for (k, v) in &req.headers {
        builder = builder.header(k, v);
    }
    if shape.declared {
        builder = builder.header("content-length", req.body.len());
    }
    let request = builder
        .body(Frames { frames, gap: None })
        .expect("a request");
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("HTTP/2 request: {e}"))?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(k, v)| {
            let value = String::from_utf8_lossy(v.as_bytes()).into_owned();
            (k.as_str().to_string(), value)
        })
        .collect();
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .map_err(|e| format!("HTTP/2 answer's body: {e}"))?
        .to_bytes();
    Ok(Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
