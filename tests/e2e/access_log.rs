//! Each edge decision shows in Envoy's access log, in the shipped format:
//! an admitted hook, a rate-limited one (429), a duplicate the edge answers
//! itself, a forged one (401) and one answered from the node because the
//! store can't be reached, each sent as HTTP/1.1 with a content-length, as
//! chunked HTTP/1.1 and as h2c. Every request carries its own `traceparent`,
//! which the format prints: that is how a request finds its line.

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
