//! Every shape a request can arrive in gets exactly the decision the plain
//! request gets, through real Envoy, a real store and Redis, for each
//! outcome: a bad signature 401, over quota 429, a duplicate answered 201 by
//! the edge itself, a pending key 409, admitted 201 and stored once (signed
//! or not, the sender's own `x-ankusa-*` headers removed), too large 413.
//! Each decided request moves `ankusa_admissions_total` by one, under the
//! same outcome as the plain request. A shape with no body (end of stream on
//! the headers) gets what the plain request with an empty body gets.

pub(crate) mod shapes_support;

use ankusa_core::verify::{body_mac, Encoding};
use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::redis::Redis;
use ankusa_testkit::store::Store;
use ankusa_tests::edge_support::{eventually, store_call};
use serde_json::{json, Value};
use shapes_support::{Answer, Framing, H2Body, Request, Sent};
use std::collections::BTreeMap;
use std::time::Duration;

/// The `signed` source's secret, in the VM environment as `ANKUSA_T_SHAPES`.
pub(crate) const SECRET: &str = "shapes-signing-secret";
const MAX_BODY: usize = 256;
/// The tenant `spent` may send 250 body bytes, refilled at 1 byte/s: once
/// spent, a 200-byte body waits 200 s.
pub(crate) const SPENT_BURST: usize = 250;
const DUPLICATE: &str = "shape-dup";
const PENDING: &str = "shape-pending";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    BadSignature,
    OverQuota,
    Duplicate,
    Pending,
    Admitted,
    AdmittedSigned,
    TooLarge,
}

const OUTCOMES: [Outcome; 7] = [
    Outcome::BadSignature,
    Outcome::OverQuota,
    Outcome::Duplicate,
    Outcome::Pending,
    Outcome::Admitted,
    Outcome::AdmittedSigned,
    Outcome::TooLarge,
];

impl Outcome {
    /// The plain request's answer: status, and the error or duplicate mark.
    fn expected(self) -> &'static str {
        match self {
            Outcome::BadSignature => "401 bad_signature from the edge",
            Outcome::OverQuota => "429 rate_limited from the edge",
            Outcome::Duplicate => "201 duplicate from the edge",
            Outcome::Pending => "409 dedupe_pending from the edge",
            Outcome::Admitted | Outcome::AdmittedSigned => FORWARDED,
            Outcome::TooLarge => "413 too_large from the edge",
        }
    }
}

/// Sources `signed` (GitHub signatures), `plain` and `spent` (its tenant out
/// of body bytes once it sent [`SPENT_BURST`]), fleet scopes.
pub(crate) fn config() -> Value {
    json!({
        "max_body_bytes": MAX_BODY,
        "sources": {
            "signed": {"tenant": "acme", "dedupe": "github",
                       "verify": {"scheme": "github", "secret_env": "ANKUSA_T_SHAPES"}},
            "plain": {"tenant": "acme", "dedupe": "github"},
            "spent": {"tenant": "spent", "dedupe": "github"}
        },
        "rate_limits": {
            "scope": "fleet",
            "default": {"rate": 1000, "burst": 1000},
            "tenants": {"spent": {"rate": 1000, "burst": 1000,
                                  "bytes_rate": 1, "bytes_burst": SPENT_BURST}}
        },
        "dedupe": {"scope": "fleet"},
        "fleet": {"cluster": "ankusa_store", "timeout_ms": 1000, "settle_interval_ms": 5}
    })
}

/// One fleet for the whole matrix, and fresh delivery ids.
struct World {
    edge: Edge,
    intake: Intake,
    store: Store,
    _redis: Redis,
    next_id: u64,
    /// Every fresh delivery id sent, and whether its hook was to be stored.
    sent: Vec<(String, bool)>,
}

impl World {
    fn start() -> World {
        let redis = Redis::start();
        let store = Store::start(&redis.url());
        let intake = Intake::start();
        let mut spec = EdgeSpec::new("edge-shapes", intake.port, store.port, config());
        spec.vm_env = vec![("ANKUSA_T_SHAPES".into(), SECRET.into())];
        let edge = Edge::start(spec);
        World {
            edge,
            intake,
            store,
            _redis: redis,
            next_id: 0,
            sent: Vec::new(),
        }
    }

    fn port(&self) -> u16 {
        self.edge.spec.listen_port
    }

    /// A request for `outcome` with a body of `len` bytes (0: none).
    fn request(&mut self, outcome: Outcome, len: usize) -> Request {
        let len = match outcome {
            _ if len == 0 => 0,
            Outcome::OverQuota => 200,
            Outcome::TooLarge => MAX_BODY + 44,
            _ => len,
        };
        let id = match outcome {
            Outcome::Duplicate => DUPLICATE.to_string(),
            Outcome::Pending => PENDING.to_string(),
            _ => {
                self.next_id += 1;
                format!("shape-{}", self.next_id)
            }
        };
        let source = match outcome {
            Outcome::BadSignature | Outcome::AdmittedSigned => "signed",
            Outcome::OverQuota => "spent",
            _ => "plain",
        };
        build(source, &id, outcome == Outcome::BadSignature, len)
    }

    /// Every `ankusa_admissions_total` series (its labels) and its count.
    fn admissions(&self) -> BTreeMap<String, f64> {
        let text = self.edge.scraped();
        text.lines()
            .filter_map(|l| l.strip_prefix("ankusa_admissions_total{"))
            .filter_map(|l| l.rsplit_once(' '))
            .filter_map(|(labels, v)| {
                Some((labels.trim_end_matches('}').to_string(), v.parse().ok()?))
            })
            .collect()
    }
}

/// A POST to `source` with delivery `id` and a JSON body of `len` bytes,
/// signed with the source's secret (or, `forged`, another). It also carries
/// `x-ankusa-*` headers of the sender's own, which the edge removes: the
/// intake refuses (400) a hook carrying one the edge doesn't set, so an
/// admitted hook is stored only if they were removed (before, only the four
/// the edge sets were, and every admitted shape got the intake's 400).
pub(crate) fn build(source: &str, id: &str, forged: bool, len: usize) -> Request {
    let body = if len == 0 {
        Vec::new()
    } else {
        let mut body = format!(r#"{{"id":"{id}","pad":""#).into_bytes();
        body.resize(len.saturating_sub(2), b'x');
        body.extend_from_slice(b"\"}");
        body
    };
    let secret = if forged { "not-the-secret" } else { SECRET };
    let signature = body_mac::sign(secret.as_bytes(), "sha256=", Encoding::Hex, &body);
    Request {
        path: format!("/webhooks/{source}"),
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("x-github-delivery".into(), id.into()),
            ("x-hub-signature-256".into(), signature),
            ("x-ankusa-budget-ms".into(), "1".into()),
            ("x-ankusa-foo".into(), "from-the-sender".into()),
        ],
        body,
    }
}

/// What an answer decided: its status, the error or duplicate mark, and
/// whether the edge answered it or the upstream did. The edge's own answers
/// are its refusals and its duplicate; the intake answers a hook it stored
/// (`{"status":"accepted","id":…}`) or a copy its own index caught (marked
/// duplicate, with `x-ankusa-hook-id`). (Envoy's `x-envoy-upstream-service-time`
/// can't tell: it is left out when the upstream answers before the router
/// has seen the end of the sender's stream, as with trailers still on the way.)
fn decision(sent: &Sent) -> String {
    let answer: &Answer = match sent {
        Ok(answer) => answer,
        Err(e) => return format!("no answer ({e})"),
    };
    let body: Value = serde_json::from_str(&answer.body).unwrap_or(Value::Null);
    let (mark, by) = match (body["error"].as_str(), body["duplicate"].as_bool()) {
        (Some(error), _) => (format!(" {error}"), "the edge"),
        (None, Some(true)) if answer.header("x-ankusa-hook-id").is_none() => {
            (" duplicate".to_string(), "the edge")
        }
        (None, Some(true)) => (" duplicate".to_string(), "the upstream"),
        _ if body["status"] == "accepted" => (String::new(), "the upstream"),
        _ => (String::new(), "the edge"),
    };
    format!("{}{mark} from {by}", answer.status)
}

/// A matrix cell: the answers' decisions, shortened, once if all agree.
fn cell(decisions: &[String]) -> String {
    let short: Vec<String> = decisions
        .iter()
        .map(|d| {
            d.replace(" from the edge", "")
                .replace(" from the upstream", " forwarded")
        })
        .collect();
    if short.windows(2).all(|w| w[0] == w[1]) {
        short.first().cloned().unwrap_or_default()
    } else {
        short.join(" / ")
    }
}

/// How one shape sends `reqs` (one each, or several for a pipelined shape).
struct Shape {
    name: &'static str,
    /// Requests sent at once.
    count: usize,
    /// Its body is empty (end of stream on the headers, or trailers alone).
    empty: bool,
    send: fn(u16, &[Request]) -> Vec<Sent>,
}

const BODY: usize = 120;

fn one(f: impl Fn(&Request) -> Sent, reqs: &[Request]) -> Vec<Sent> {
    reqs.iter().map(f).collect()
}

fn h1_framed(port: u16, reqs: &[Request], framing: Framing) -> Vec<Sent> {
    one(|r| shapes_support::h1(port, r, "HTTP/1.1", framing), reqs)
}

fn h2_framed(port: u16, reqs: &[Request], body: H2Body) -> Vec<Sent> {
    one(|r| shapes_support::h2(port, r, body), reqs)
}

const PLAIN: fn(u16, &[Request]) -> Vec<Sent> = |port, reqs| h1_framed(port, reqs, Framing::Length);

fn chunked(chunk: usize, trailers: bool) -> Framing {
    Framing::Chunked { chunk, trailers }
}

fn h2(frame: usize, trailers: bool, declared: bool) -> H2Body {
    H2Body {
        frame,
        trailers,
        declared,
    }
}

fn shapes() -> Vec<Shape> {
    vec![
        Shape {
            name: "HTTP/1.1 content-length",
            count: 1,
            empty: false,
            send: PLAIN,
        },
        Shape {
            name: "HTTP/1.1 chunked",
            count: 1,
            empty: false,
            send: |p, r| h1_framed(p, r, chunked(BODY, false)),
        },
        Shape {
            name: "HTTP/1.1 chunked with trailers",
            count: 1,
            empty: false,
            send: |p, r| h1_framed(p, r, chunked(BODY, true)),
        },
        Shape {
            name: "HTTP/1.1 chunked in 8-byte chunks",
            count: 1,
            empty: false,
            send: |p, r| h1_framed(p, r, chunked(8, false)),
        },
        Shape {
            name: "HTTP/1.0",
            count: 1,
            empty: false,
            send: |p, r| one(|r| shapes_support::h1(p, r, "HTTP/1.0", Framing::Length), r),
        },
        Shape {
            name: "Expect: 100-continue",
            count: 1,
            empty: false,
            send: |p, r| one(|r| shapes_support::expect_continue(p, r), r),
        },
        Shape {
            name: "2 pipelined on one connection",
            count: 2,
            empty: false,
            send: shapes_support::pipelined,
        },
        Shape {
            name: "h2c",
            count: 1,
            empty: false,
            send: |p, r| h2_framed(p, r, h2(BODY, false, true)),
        },
        Shape {
            name: "h2c with trailers",
            count: 1,
            empty: false,
            send: |p, r| h2_framed(p, r, h2(BODY, true, true)),
        },
        Shape {
            name: "h2c in 8-byte frames with trailers, no length",
            count: 1,
            empty: false,
            send: |p, r| h2_framed(p, r, h2(8, true, false)),
        },
        Shape {
            name: "h2c headers only",
            count: 1,
            empty: true,
            send: |p, r| h2_framed(p, r, h2(BODY, false, false)),
        },
        Shape {
            name: "h2c headers then trailers",
            count: 1,
            empty: true,
            send: |p, r| h2_framed(p, r, h2(BODY, true, false)),
        },
    ]
}

/// The duplicate's first copy, stored and committed; a claim pending
/// elsewhere; the tenant `spent` out of body bytes.
fn seed(w: &mut World) {
    let first = build("plain", DUPLICATE, false, BODY);
    let stored = PLAIN(w.port(), std::slice::from_ref(&first));
    assert_eq!(decision(&stored[0]), "201 from the upstream", "{stored:?}");
    w.sent.push((DUPLICATE.to_string(), true));
    let committed = eventually(Duration::from_secs(10), || {
        let again = PLAIN(w.port(), std::slice::from_ref(&first));
        decision(&again[0]) == "201 duplicate from the edge"
    });
    assert!(committed, "the first copy's claim was never committed");
    let hit = json!({"charges": [], "claim": {
        "tenant": "acme", "source_id": "plain", "key": PENDING,
        "hook_id": "0190f1a2-0000-7000-8000-00000000000a", "node": "elsewhere",
        "ttl_ms": 60_000, "pending_ttl_ms": 600_000}});
    let taken = store_call(&w.store, "POST", "/v1/hit", &hit.to_string());
    assert_eq!(taken.json()["result"], "ok", "{}", taken.text());
    w.sent.push((PENDING.to_string(), false));
    let spend = build("spent", "shape-spend", false, SPENT_BURST);
    w.sent.push(("shape-spend".to_string(), true));
    let spent = PLAIN(w.port(), std::slice::from_ref(&spend));
    assert_eq!(decision(&spent[0]), "201 from the upstream", "{spent:?}");
}

/// What the counters moved by: the series that changed, and by how much.
fn moved(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> String {
    let changed: Vec<String> = after
        .iter()
        .filter(|(k, v)| before.get(*k).copied().unwrap_or(0.0) != **v)
        .map(|(k, v)| format!("{k} +{}", v - before.get(k).copied().unwrap_or(0.0)))
        .collect();
    changed.join(", ")
}

/// Sends `count` requests for `outcome` the way `send` does; each answer's
/// decision, and what the admission counters moved by. A fresh delivery id
/// is to be stored when `to_store` says so of its decision (None: its own).
fn run(
    w: &mut World,
    outcome: Outcome,
    count: usize,
    empty: bool,
    send: fn(u16, &[Request]) -> Vec<Sent>,
    to_store: Option<&str>,
) -> (Vec<String>, String) {
    let len = if empty { 0 } else { BODY };
    let reqs: Vec<Request> = (0..count).map(|_| w.request(outcome, len)).collect();
    let before = w.admissions();
    let answers = send(w.port(), &reqs);
    let after = w.admissions();
    let decisions: Vec<String> = answers.iter().map(decision).collect();
    if !matches!(outcome, Outcome::Duplicate | Outcome::Pending) {
        for (req, got) in reqs.iter().zip(&decisions) {
            let id = delivery(req);
            let expected = to_store.unwrap_or(got);
            w.sent.push((id, expected == FORWARDED));
        }
    }
    (decisions, moved(&before, &after))
}

/// The decision of a hook the edge let through and the intake stored.
const FORWARDED: &str = "201 from the upstream";

fn delivery(req: &Request) -> String {
    req.headers
        .iter()
        .find(|(k, _)| k == "x-github-delivery")
        .map(|(_, v)| v.clone())
        .unwrap_or_default()
}

#[test]
fn every_request_shape_gets_the_plain_requests_decision() {
    let mut w = World::start();
    seed(&mut w);
    let mut wrong = Vec::new();
    // shape → the answers per outcome, for RELIABILITY.md's matrix.
    let mut table: Vec<(&str, Vec<String>)> =
        shapes().iter().map(|s| (s.name, Vec::new())).collect();
    for outcome in OUTCOMES {
        // The plain request, with a body and with none: the reference.
        let (full, full_moved) = run(&mut w, outcome, 1, false, PLAIN, None);
        assert_eq!(full, [outcome.expected()], "{outcome:?}: the plain request");
        let (empty, empty_moved) = run(&mut w, outcome, 1, true, PLAIN, None);
        for (row, shape) in shapes().into_iter().enumerate() {
            let (want, want_moved) = if shape.empty {
                (&empty[0], &empty_moved)
            } else {
                (&full[0], &full_moved)
            };
            let (got, got_moved) = run(
                &mut w,
                outcome,
                shape.count,
                shape.empty,
                shape.send,
                Some(want.as_str()),
            );
            table[row].1.push(cell(&got));
            for (i, answer) in got.iter().enumerate() {
                if answer != want {
                    wrong.push(format!(
                        "{} / {outcome:?} (request {}): {answer}, the plain request got {want}",
                        shape.name,
                        i + 1
                    ));
                }
            }
            // One count per request, under the plain request's outcome.
            let per_request = want_moved.replace(" +1", "");
            let want_moved = format!("{per_request} +{}", shape.count);
            if got_moved != want_moved {
                wrong.push(format!(
                    "{} / {outcome:?}: ankusa_admissions_total moved {got_moved:?}, not {want_moved:?}",
                    shape.name
                ));
            }
        }
    }
    behind_two_refusals(&mut w, &mut wrong);
    // Stored once each: what was admitted, and nothing else.
    let settled = eventually(Duration::from_secs(5), || {
        w.intake.hooks().len() >= w.sent.iter().filter(|(_, s)| *s).count()
    });
    let hooks = w.intake.hooks();
    let mut stored: BTreeMap<String, usize> = BTreeMap::new();
    for hook in &hooks {
        let key = hook["event_key"].as_str().unwrap_or("(no event key)");
        *stored.entry(key.to_string()).or_default() += 1;
    }
    for (id, to_store) in &w.sent {
        let copies = stored.get(id).copied().unwrap_or(0);
        if copies != usize::from(*to_store) {
            wrong.push(format!("delivery {id} stored {copies} times"));
        }
    }
    let expected: usize = w.sent.iter().filter(|(_, s)| *s).count();
    let stats = ankusa_testkit::http::get(&format!("{}/stats", w.intake.url()))
        .map(|r| r.json())
        .unwrap_or(Value::Null);
    if !settled || hooks.len() != expected || stats["duplicates_caught"] != 0 {
        wrong.push(format!(
            "the intake holds {} hooks ({stats}), {expected} were admitted",
            hooks.len()
        ));
    }
    println!(
        "| shape | {} |",
        OUTCOMES.map(|o| format!("{o:?}")).join(" | ")
    );
    println!("|---|{}", "---|".repeat(OUTCOMES.len()));
    for (shape, cells) in &table {
        println!("| {shape} | {} |", cells.join(" | "));
    }
    assert!(
        wrong.is_empty(),
        "{} of the matrix differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// Three pipelined requests the edge refuses as it reads them (forged
/// signatures): Envoy's HTTP/1 codec holds at most two answers not yet
/// written to the socket, so it stops reading at the third and closes the
/// connection ("Too many responses queued"). The third gets no answer and is
/// neither forwarded nor counted: its sender retries it. (Answers decided by
/// the store, or by the upstream, leave later and never reach that bound.)
fn behind_two_refusals(w: &mut World, wrong: &mut Vec<String>) {
    let pipelined = shapes_support::pipelined;
    let (got, moved) = run(w, Outcome::BadSignature, 3, false, pipelined, None);
    let refused = "401 bad_signature from the edge";
    let closed = got.get(2).is_some_and(|d| d.starts_with("no answer"));
    if got[..2] != [refused, refused] || !closed || moved != "outcome=\"unverified\" +2" {
        wrong.push(format!(
            "3 pipelined forgeries: {got:?}, ankusa_admissions_total moved {moved:?}"
        ));
    }
}
