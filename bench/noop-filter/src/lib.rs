//! The no-op wasm filter: passes every request untouched and counts it in
//! `bench_noop_requests_total`. What a proxy-wasm filter costs Envoy before it
//! does anything (the VM call per hook), the floor for node scopes in
//! `scripts/bench-edge.sh`. Built like the Ankusa filter
//! (`cargo build -p ankusa-bench-noop --target wasm32-wasip1 --release`).
//!
//! Configured with the text `node host calls` ([`calls::MODE`]), it also
//! makes every host call a node-scope hook of the Ankusa filter makes, with
//! fixed values ([`calls`]): the host-call floor, (k) in `bench-edge`. Any
//! other configuration is the plain no-op.

mod calls;
mod node_values;

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel, MetricType};

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Warn);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> {
        Box::new(Root { requests: None, calls: false })
    });
}}

/// The counter every request increments.
pub const REQUESTS: &str = "bench_noop_requests_total";

struct Root {
    /// Defined on VM start; `None` if the host refused it (then nothing is counted).
    requests: Option<u32>,
    /// Each request makes a node hook's host calls ([`calls`]).
    calls: bool,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_vm_start(&mut self, _size: usize) -> bool {
        self.requests = hostcalls::define_metric(MetricType::Counter, REQUESTS).ok();
        true
    }

    fn on_configure(&mut self, size: usize) -> bool {
        let text = hostcalls::get_buffer(BufferType::PluginConfiguration, 0, size)
            .ok()
            .flatten()
            .unwrap_or_default();
        self.calls = calls::selected(&text);
        // Without its shared-data key the floor would not make the calls it names.
        !self.calls || calls::configure()
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Pass {
            requests: self.requests,
            calls: self.calls,
        }))
    }
}

struct Pass {
    requests: Option<u32>,
    calls: bool,
}

impl Context for Pass {}

impl HttpContext for Pass {
    fn on_http_request_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        if self.calls {
            calls::on_request();
        }
        if let Some(id) = self.requests {
            let _ = hostcalls::increment_metric(id, 1);
        }
        Action::Continue
    }

    fn on_http_response_headers(&mut self, _headers: usize, _end_of_stream: bool) -> Action {
        if self.calls {
            calls::on_response();
        }
        Action::Continue
    }

    fn on_log(&mut self) {
        if self.calls {
            calls::on_log();
        }
    }
}
