//! An OTLP/HTTP trace receiver in the test's process: it takes the
//! protobuf `ExportTraceServiceRequest`s an exporter posts to
//! `/v1/traces`, answers 200, and keeps every span it decoded, so a test can
//! look at what the store exported without a collector.

use crate::ports::free_port;
use crate::store::Store;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One exported span, ids in lower-case hex.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub name: String,
    /// Its attributes, values as text.
    pub attributes: Vec<(String, String)>,
    /// The exporting service's `service.name`.
    pub service: String,
}

impl Span {
    /// An attribute's value as text.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The receiver, listening on 127.0.0.1 until the test ends.
pub struct Receiver {
    pub port: u16,
    spans: Arc<Mutex<Vec<Span>>>,
}

impl Receiver {
    /// Listens on a port the kernel picks; each connection gets a thread.
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the OTLP receiver");
        let port = listener.local_addr().expect("receiver address").port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&spans);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let kept = Arc::clone(&kept);
                std::thread::spawn(move || serve(stream, &kept));
            }
        });
        Receiver { port, spans }
    }

    /// The base URL an exporter is given (`--otlp-endpoint`).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The store on a free port against `redis_url`, exporting its spans
    /// here, once Redis answers through it.
    pub fn store(&self, redis_url: &str) -> Store {
        let endpoint = self.endpoint();
        let store = Store::start_on(free_port(), redis_url, &["--otlp-endpoint", &endpoint]);
        assert!(
            store.wait_ready(Duration::from_secs(20)),
            "the store never reached Redis:\n{}",
            store.proc.log_tail()
        );
        store
    }

    /// Stops `store` gracefully (it exports the spans its batch processor
    /// still holds before it exits), then every span received.
    pub fn spans_after_stopping(&self, mut store: Store) -> Vec<Span> {
        let code = store.proc.stop(Duration::from_secs(20));
        assert_eq!(code, Some(0), "{}", store.proc.log_tail());
        self.spans()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Waits up to `timeout` for a span `wanted` accepts; the spans received by then.
    pub fn wait_for(&self, timeout: Duration, wanted: impl Fn(&Span) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if spans.iter().any(&wanted) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Answers every request on one keep-alive connection until it closes.
fn serve(stream: TcpStream, kept: &Mutex<Vec<Span>>) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        // The request line, then headers up to the blank line.
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if let Ok(request) = ExportTraceServiceRequest::decode(body.as_slice()) {
            if let Ok(mut spans) = kept.lock() {
                spans.extend(decode(&request));
            }
        }
        let answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer).is_err() {
            return;
        }
    }
}

fn decode(request: &ExportTraceServiceRequest) -> Vec<Span> {
    let mut out = Vec::new();
    for resource in &request.resource_spans {
        let service = resource
            .resource
            .as_ref()
            .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
            .map(|a| text(a.value.as_ref().and_then(|v| v.value.as_ref())))
            .unwrap_or_default();
        for scope in &resource.scope_spans {
            for span in &scope.spans {
                out.push(Span {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name.clone(),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|a| {
                            let value = text(a.value.as_ref().and_then(|v| v.value.as_ref()));
                            (a.key.clone(), value)
                        })
                        .collect(),
                    service: service.clone(),
                });
            }
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(value: Option<&Value>) -> String {
    match value {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}
