//! The one-callout floor: for every request, one `dispatch_http_call` (a GET
//! of `path` on `cluster`, from the plugin configuration) and the request
//! held until its answer comes back, then resumed whatever the answer. What
//! one store round trip per hook costs Envoy with no decision around it, the
//! floor for fleet scopes in `scripts/bench-edge.sh`. Built like the Ankusa
//! filter (`cargo build -p ankusa-bench-callout --target wasm32-wasip1 --release`).
//!
//! Configuration: `cluster path` on one line, or that text as a JSON string
//! (default `ankusa_store /healthz`). With the path `/v1/hit` the callout is
//! a real store call instead ([`hit`]): a POST of a fresh hit with the edge
//! token from the VM environment, its answer's status and body read.
//! Counters: `bench_callout_calls_total` (dispatched), `bench_callout_answers_total`
//! (answered; for `/v1/hit`, with a 200), `bench_callout_not_ok_total`
//! (a `/v1/hit` answered otherwise, or reset) and
//! `bench_callout_failures_total` (refused at dispatch; the request then
//! passes at once).

mod hit;

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, ContextType, LogLevel, MetricType};
use std::rc::Rc;
use std::time::Duration;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(Root { target: Rc::new(Target::default()) })
    });
}}

const DEFAULT_CLUSTER: &str = "ankusa_store";
const DEFAULT_PATH: &str = "/healthz";
/// Longest wait for the callout's answer.
const TIMEOUT: Duration = Duration::from_secs(5);

/// Where the callout goes, and the counters; shared by every request.
struct Target {
    cluster: String,
    path: String,
    /// The real store call's sender, when the path asks for it.
    hits: Option<hit::Hits>,
    calls: Option<u32>,
    answers: Option<u32>,
    not_ok: Option<u32>,
    failures: Option<u32>,
}

impl Default for Target {
    fn default() -> Self {
        Target {
            cluster: DEFAULT_CLUSTER.to_string(),
            path: DEFAULT_PATH.to_string(),
            hits: None,
            calls: None,
            answers: None,
            not_ok: None,
            failures: None,
        }
    }
}

/// `cluster path` → the pair; either may be left out for its default. The
/// text may come as a JSON string (`"cluster path"`, as the edge template
/// renders a configuration): its quotes are dropped.
fn parse(text: &str) -> (String, String) {
    let mut words = text.trim().trim_matches('"').split_whitespace();
    let cluster = words.next().unwrap_or(DEFAULT_CLUSTER).to_string();
    let path = words.next().unwrap_or(DEFAULT_PATH).to_string();
    (cluster, path)
}

fn count(metric: Option<u32>) {
    if let Some(id) = metric {
        let _ = hostcalls::increment_metric(id, 1);
    }
}

struct Root {
    target: Rc<Target>,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let text = self
            .get_plugin_configuration()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let (cluster, path) = parse(&text);
        let hits = if hit::wanted(&path) {
            // Keeps this VM's claims apart from every other run's.
            let run = hostcalls::get_current_time()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as u64);
            match hit::Hits::from_env(run) {
                Ok(hits) => Some(hits),
                Err(e) => {
                    let _ = hostcalls::log(LogLevel::Error, &format!("callout floor: {e}"));
                    return false;
                }
            }
        } else {
            None
        };
        let metric = |name: &str| hostcalls::define_metric(MetricType::Counter, name).ok();
        self.target = Rc::new(Target {
            cluster,
            path,
            hits,
            calls: metric("bench_callout_calls_total"),
            answers: metric("bench_callout_answers_total"),
            not_ok: metric("bench_callout_not_ok_total"),
            failures: metric("bench_callout_failures_total"),
        });
        true
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Hold {
            target: self.target.clone(),
            waiting: false,
        }))
    }
}

struct Hold {
    target: Rc<Target>,
    /// A callout is out: the body waits with the headers.
    waiting: bool,
}

impl Context for Hold {
    fn on_http_call_response(
        &mut self,
        _token: u32,
        _headers: usize,
        body_size: usize,
        _trailers: usize,
    ) {
        if self.target.hits.is_some() {
            // Read as any client of the store must, then dropped.
            let status = self.get_http_call_response_header(":status");
            let body = self.get_http_call_response_body(0, body_size);
            let ok = status.as_deref() == Some("200") && body.is_some();
            count(if ok {
                self.target.answers
            } else {
                self.target.not_ok
            });
        } else {
            count(self.target.answers);
        }
        self.waiting = false;
        self.resume_http_request();
    }
}

impl HttpContext for Hold {
    fn on_http_request_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        let t = &self.target;
        let mut headers = vec![
            (":method", "GET"),
            (":path", t.path.as_str()),
            (":authority", t.cluster.as_str()),
        ];
        let body = t.hits.as_ref().map(|hits| {
            headers[0].1 = "POST";
            headers.extend(hits.headers());
            hits.next_body()
        });
        let sent = self.dispatch_http_call(&t.cluster, headers, body.as_deref(), vec![], TIMEOUT);
        match sent {
            Ok(_) => {
                count(t.calls);
                self.waiting = true;
                Action::Pause
            }
            Err(status) => {
                count(t.failures);
                let _ = hostcalls::log(
                    LogLevel::Warn,
                    &format!("callout to {} {} refused: {status:?}", t.cluster, t.path),
                );
                Action::Continue
            }
        }
    }

    fn on_http_request_body(&mut self, _size: usize, _end_of_stream: bool) -> Action {
        if self.waiting {
            Action::Pause
        } else {
            Action::Continue
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_names_cluster_then_path() {
        assert_eq!(
            parse("store /ping"),
            ("store".to_string(), "/ping".to_string())
        );
        assert_eq!(
            parse("  echo "),
            ("echo".to_string(), DEFAULT_PATH.to_string())
        );
        assert_eq!(
            parse(r#""store /ping""#),
            ("store".to_string(), "/ping".to_string())
        );
        assert_eq!(
            parse(""),
            (DEFAULT_CLUSTER.to_string(), DEFAULT_PATH.to_string())
        );
    }
}
