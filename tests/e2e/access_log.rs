//! Each edge decision shows in Envoy's access log, in the shipped format:
//! an admitted hook, a rate-limited one (429), a duplicate the edge answers
//! itself, a forged one (401) and one answered from the node because the
//! store can't be reached, each sent as HTTP/1.1 with a content-length, as
//! chunked HTTP/1.1 and as h2c. Every request carries its own `traceparent`,
//! which the filter prints (`trace=`): that is how a request finds its line.
//! And what a sender controls (a `traceparent`, an event key, the path and
//! the tenant in it) forges no field of its line, read by the testkit's
//! parser or by the reader docs/observing.md gives.

use crate::edge_shapes::shapes_support::{self, Framing, H2Body, Request, Sent};
use crate::edge_shapes::{self, config, SECRET, SPENT_BURST};
use ankusa_testkit::access_log::{self, decision, field};
use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::ports::free_port;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::eventually;
use std::time::Duration;

const DUPLICATE: &str = "access-log-dup";

/// What a request's line must say.
#[derive(Clone, Copy, Debug)]
struct Expect {
    status: u16,
    outcome: &'static str,
    decided: &'static str,
}

/// The decisions the log must show; [`World::send`] says how each is made.
#[derive(Clone, Copy, Debug)]
enum Case {
    Admitted,
    RateLimited,
    Duplicate,
    Forged,
    FallenBack,
}

const CASES: [Case; 5] = [
    Case::Admitted,
    Case::RateLimited,
    Case::Duplicate,
    Case::Forged,
    Case::FallenBack,
];

impl Case {
    fn expect(self) -> Expect {
        let (status, outcome, decided) = match self {
            Case::Admitted => (201, "admitted", "store"),
            Case::RateLimited => (429, "rate_limited", "store"),
            Case::Duplicate => (201, "duplicate", "store"),
            Case::Forged => (401, "unverified", "node"),
            Case::FallenBack => (201, "admitted", "fallback"),
        };
        Expect {
            status,
            outcome,
            decided,
        }
    }
}

/// A shape a request is sent in.
type Send = fn(u16, &Request) -> Sent;

const SHAPES: [(&str, Send); 3] = [
    ("HTTP/1.1", |p, r| {
        shapes_support::h1(p, r, "HTTP/1.1", Framing::Length)
    }),
    ("HTTP/1.1 chunked", |p, r| {
        let framing = Framing::Chunked {
            chunk: 32,
            trailers: false,
        };
        shapes_support::h1(p, r, "HTTP/1.1", framing)
    }),
    ("h2c", |p, r| {
        let body = H2Body {
            frame: 64,
            trailers: false,
            declared: true,
        };
        shapes_support::h2(p, r, body)
    }),
];

/// The shapes test's request for `source` (see [`edge_shapes::build`]),
/// carrying `traceparent`.
fn build(source: &str, delivery: &str, len: usize, forged: bool, traceparent: &str) -> Request {
    let mut request = edge_shapes::build(source, delivery, forged, len);
    request
        .headers
        .push(("traceparent".into(), traceparent.into()));
    request
}

/// A sampled traceparent unique to request `n`.
fn traceparent(n: u64) -> String {
    format!("00-{n:032x}-{:016x}-01", n + 1)
}

struct World {
    _redis: Redis,
    _store: Store,
    _intake: Intake,
    /// With its store, and with a store port nothing listens on.
    edges: [Edge; 2],
    next: u64,
}

impl World {
    fn start() -> World {
        let redis = Redis::start();
        let store = Store::start(&redis.url());
        let intake = Intake::start();
        let edge = |node: &str, store_port: u16| {
            let mut spec = EdgeSpec::new(node, intake.port, store_port, config());
            spec.concurrency = 1;
            spec.vm_env = vec![("ANKUSA_T_SHAPES".into(), SECRET.into())];
            Edge::start_lds_logged(spec)
        };
        let edges = [
            edge("edge-logged", store.port),
            edge("edge-alone", free_port()),
        ];
        World {
            _redis: redis,
            _store: store,
            _intake: intake,
            edges,
            next: 0,
        }
    }

    /// Sends a request for `case` the way `send` does: its answer, its traceparent.
    fn send(&mut self, case: Case, send: Send) -> (Sent, String, usize) {
        self.next += 1;
        let trace = traceparent(self.next);
        let fresh = format!("access-log-{}", self.next);
        let (edge, request) = match case {
            Case::Admitted => (0, build("plain", &fresh, 120, false, &trace)),
            Case::RateLimited => (0, build("spent", &fresh, 200, false, &trace)),
            Case::Duplicate => (0, build("plain", DUPLICATE, 120, false, &trace)),
            Case::Forged => (0, build("signed", &fresh, 120, true, &trace)),
            Case::FallenBack => (1, build("plain", &fresh, 120, false, &trace)),
        };
        let answer = send(self.edges[edge].spec.listen_port, &request);
        (answer, trace, edge)
    }

    /// Both edges' access log lines, once the request of every one of `sent`
    /// and the one that carried `last` are in them (at most 30 s: Envoy
    /// writes its access logs out every 10 s by default).
    fn lines(&self, sent: &[(&str, Case, String, usize)], last: &str) -> Vec<String> {
        let read = || -> Vec<String> {
            self.edges
                .iter()
                .filter_map(|e| e.access_log.as_deref())
                .flat_map(access_log::lines)
                .collect()
        };
        let mut lines = Vec::new();
        eventually(Duration::from_secs(30), || {
            lines = read();
            let has = |trace: &str| lines.iter().any(|l| l.contains(trace));
            has(last) && sent.iter().all(|(_, _, trace, _)| has(trace))
        });
        lines
    }

    /// The duplicate's first copy, stored and committed; `spent` out of body bytes.
    fn seed(&mut self) {
        let plain = SHAPES[0].1;
        self.next += 1;
        let first = build("plain", DUPLICATE, 120, false, &traceparent(self.next));
        let stored = plain(self.edges[0].spec.listen_port, &first);
        assert_eq!(
            stored.as_ref().map(|a| a.status).ok(),
            Some(201),
            "{stored:?}"
        );
        let committed = eventually(Duration::from_secs(10), || {
            let (answer, _, _) = self.send(Case::Duplicate, plain);
            answer.is_ok_and(|a| a.body.contains("\"duplicate\":true"))
        });
        assert!(committed, "the first copy's claim was never committed");
        self.next += 1;
        let spend = build(
            "spent",
            "access-log-spend",
            SPENT_BURST,
            false,
            &traceparent(self.next),
        );
        let spent = plain(self.edges[0].spec.listen_port, &spend);
        assert_eq!(
            spent.as_ref().map(|a| a.status).ok(),
            Some(201),
            "{spent:?}"
        );
    }
}

#[test]
fn every_decision_shows_in_its_access_log_line_over_each_shape() {
    let mut w = World::start();
    w.seed();
    let mut wrong = Vec::new();
    // Everything is sent first: Envoy writes its access log out every few
    // seconds, so the lines are looked for once, all together.
    let mut sent = Vec::new();
    for (shape, send) in SHAPES {
        for case in CASES {
            let want = case.expect();
            let (answer, trace, edge) = w.send(case, send);
            let status = answer.as_ref().map(|a| a.status).ok();
            if status == Some(want.status) {
                sent.push((shape, case, trace, edge));
            } else {
                wrong.push(format!("{shape} / {case:?}: answered {answer:?}"));
            }
        }
    }
    // A sender's URL may carry a credential in its query: the line leaves it out.
    w.next += 1;
    let trace = traceparent(w.next);
    let mut request = build(
        "plain",
        &format!("access-log-{}", w.next),
        120,
        false,
        &trace,
    );
    request.path.push_str("?token=query-secret");
    let answer = SHAPES[0].1(w.edges[0].spec.listen_port, &request);
    assert_eq!(
        answer.as_ref().map(|a| a.status).ok(),
        Some(201),
        "{answer:?}"
    );
    let lines = w.lines(&sent, &trace);
    let queried = lines.iter().find(|l| l.contains(&trace));
    assert!(
        queried.is_some_and(
            |l| l.contains("\"POST /webhooks/plain HTTP/1.1\"") && !l.contains("query-secret")
        ),
        "{queried:?}"
    );
    for (shape, case, trace, _) in &sent {
        let want = case.expect();
        let Some(line) = lines.iter().find(|l| l.contains(trace.as_str())) else {
            wrong.push(format!("{shape} / {case:?}: no access log line"));
            continue;
        };
        let parsed = access_log::parse_line(line).map(|h| h.status);
        let decided = decision(line).unwrap_or_default();
        let got = (
            parsed,
            field(decided, "outcome"),
            field(decided, "decided"),
            field(decided, "tenant").is_some_and(|t| t != "-"),
        );
        // The store's answer took a measured wait; a hook decided on the
        // node alone waited for none (a fall-back did, unless the breaker
        // kept it from calling).
        let waited = field(decided, "store_us").map(|us| us.parse::<u64>().is_ok());
        let wait_ok = match want.decided {
            "store" => waited == Some(true),
            "node" => waited == Some(false),
            _ => waited.is_some(),
        };
        let expected = (
            Some(want.status),
            Some(want.outcome),
            Some(want.decided),
            true,
        );
        if got != expected || !wait_ok {
            wrong.push(format!("{shape} / {case:?}: {line}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn every_shipped_edge_config_logs_in_the_same_format() {
    let root = ankusa_testkit::paths::workspace_root();
    let shipped = access_log::format_line(access_log::SHIPPED);
    assert!(shipped.is_some_and(|f| f.contains("%FILTER_STATE(wasm.ankusa:PLAIN)%")));
    for file in [
        "envoy/edge-remote.yaml",
        "deploy/kubernetes/base/edge-bootstrap.yaml",
    ] {
        let text = std::fs::read_to_string(root.join(file)).expect(file);
        assert_eq!(access_log::format_line(&text), shipped, "{file}");
    }
}

/// A request a sender shaped to forge its line, and what the line must say.
struct Forgery {
    what: &'static str,
    request: Request,
    /// How the line is found (a fresh delivery id or path marker in it).
    marker: String,
    outcome: &'static str,
    tenant: &'static str,
}

/// Through real Envoy, over each shape: a `traceparent` holding a whole
/// forged decision, an event key with spaces holding forged fields, a path
/// holding `"` and `outcome=` (HTTP/1.1 only: HTTP/2's URIs refuse `"`),
/// and a path tenant that is not one. Each line's decision, read from its
/// end by the testkit and by the `awk` reader of docs/observing.md, is the
/// edge's. Before, the format printed the raw `traceparent` ahead of the
/// decision (the testkit took its `outcome=admitted`) and a key's spaces as
/// they were (a reader splitting on spaces took the key's `decided=`).
#[test]
fn a_sender_forges_no_field_of_its_line() {
    let mut w = World::start();
    w.seed();
    let mut forgeries = Vec::new();
    for (shape, send) in SHAPES {
        w.next += 1;
        let n = w.next;
        let id = format!("forged-trace-{n}");
        let mut request = edge_shapes::build("spent", &id, false, 200);
        request.headers.push((
            "traceparent".into(),
            r#"x" outcome=admitted shadow=false tenant=victim decided=fallback"#.into(),
        ));
        forgeries.push((
            send,
            Forgery {
                what: "a forged traceparent",
                request,
                marker: format!("key={id} "),
                outcome: "rate_limited",
                tenant: "spent",
            },
        ));
        let id = format!("forged-key-{n}\" outcome=admitted tenant=victim decided=fallback");
        forgeries.push((
            send,
            Forgery {
                what: "an event key with spaces",
                request: edge_shapes::build("spent", &id, false, 200),
                marker: format!("key=\"forged-key-{n}\\\""),
                outcome: "rate_limited",
                tenant: "spent",
            },
        ));
        let mut request = edge_shapes::build("plain", &format!("forged-tenant-{n}"), false, 120);
        request.path = format!("/webhooks/v{n}%20outcome=admitted/plain");
        forgeries.push((
            send,
            Forgery {
                what: "a path tenant that is not one",
                request,
                marker: format!("/webhooks/v{n}%20outcome=admitted/plain "),
                outcome: "not_found",
                tenant: "-",
            },
        ));
        if shape.starts_with("HTTP/1.1") {
            let mut request = edge_shapes::build("plain", &format!("forged-path-{n}"), false, 120);
            request.path = format!("/webhooks/p{n}\"_outcome=admitted_tenant=victim");
            forgeries.push((
                send,
                Forgery {
                    what: "a path holding a quote",
                    request,
                    marker: format!("/webhooks/p{n}\""),
                    outcome: "not_found",
                    tenant: "-",
                },
            ));
        }
    }
    let mut wrong = Vec::new();
    for (send, f) in &forgeries {
        let answer = send(w.edges[0].spec.listen_port, &f.request);
        if answer.is_err() {
            wrong.push(format!("{}: no answer: {answer:?}", f.what));
        }
    }
    let log = w.edges[0].access_log.clone().expect("an access log");
    let mut lines = Vec::new();
    eventually(Duration::from_secs(30), || {
        lines = access_log::lines(&log);
        forgeries
            .iter()
            .all(|(_, f)| lines.iter().any(|l| l.contains(&f.marker)))
    });
    let reader = docs_reader(&log);
    for (_, f) in &forgeries {
        let Some(line) = lines.iter().find(|l| l.contains(&f.marker)) else {
            wrong.push(format!("{}: no line holds {:?}", f.what, f.marker));
            continue;
        };
        let decided = decision(line).unwrap_or_default();
        let parsed = [field(decided, "outcome"), field(decided, "tenant")];
        if parsed != [Some(f.outcome), Some(f.tenant)] {
            wrong.push(format!("{}: the testkit read {parsed:?} in {line}", f.what));
        }
        let want = format!("outcome={} tenant={}", f.outcome, f.tenant);
        let read = reader
            .iter()
            .find(|(l, _)| l == line)
            .map(|(_, r)| r.as_str());
        if !read.is_some_and(|r| r.starts_with(&want)) {
            wrong.push(format!(
                "{}: the docs' reader read {read:?} in {line}",
                f.what
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The reader docs/observing.md gives (its `awk` line after `<!-- reader -->`)
/// run over the access log at `log`: each line it printed for, with what it
/// printed.
fn docs_reader(log: &std::path::Path) -> Vec<(String, String)> {
    let root = ankusa_testkit::paths::workspace_root();
    let doc = std::fs::read_to_string(root.join("docs/observing.md")).expect("docs/observing.md");
    let after = doc
        .split_once("<!-- reader -->")
        .map(|(_, rest)| rest)
        .expect("docs/observing.md marks its reader");
    let command = after
        .lines()
        .find(|l| l.starts_with("awk "))
        .and_then(|l| l.split("     #").next())
        .expect("the reader is an awk line");
    let program = command
        .strip_suffix(" access.log")
        .expect("the reader reads access.log");
    // The awk line, each input line tagged so its output can be matched to it.
    let tagged = format!("{program} | cat");
    let lines = access_log::lines(log);
    let mut out = Vec::new();
    for line in lines {
        let run = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\n' \"$1\" | {tagged}"))
            .arg("sh")
            .arg(&line)
            .output()
            .expect("sh");
        let printed = String::from_utf8_lossy(&run.stdout).trim().to_string();
        out.push((line, printed));
    }
    out
}
