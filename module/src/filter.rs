//! The module's filter: Envoy's HTTP filter hooks mapped onto the core's
//! [`Stream`], exactly as the proxy-wasm filter maps its callbacks. Nothing
//! here decides anything about admission.
//!
//! Envoy builds one [`ModuleConfig`] per filter configuration on its main
//! thread and makes filters from it on every worker; the core's
//! [`Worker`](ankusa_core::hook::worker::Worker) is one worker's state, so
//! each worker thread builds its own [`Runtime`] from the configuration on
//! first use, as each wasm VM does in `on_configure`.
#![deny(unsafe_code)]

use crate::abi::{self, Envoy, EnvoyConfig, StatId};
use crate::host::{send_reply, NativeHost, NativeStats, Runtime};
use ankusa_core::config::Config;
use ankusa_core::hook::machine::Flow;
use ankusa_core::hook::reply::{self, LocalReply};
use ankusa_core::shell::hook::Stream;
use ankusa_core::shell::metrics::MetricIds;
use ankusa_core::shell::native;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Configurations made so far: each gets its own id, so a worker's runtime
/// for an old one is never mistaken for a new one's.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The filter's configuration as Envoy handed it over, checked once, and
/// the stats defined on Envoy's configuration for it.
pub struct ModuleConfig {
    id: u64,
    bytes: Vec<u8>,
    stats: NativeStats,
    ids: MetricIds<StatId>,
}

impl ModuleConfig {
    /// Checks the configuration with the core's own parser (and the signing
    /// secrets it names in the environment) and keeps it for the workers.
    /// Fleet scopes need the store, which this module doesn't call yet: a
    /// configuration that uses it is refused, saying so, rather than run
    /// degraded ([`native::serves`]).
    ///
    /// Called on Envoy's main thread, where stats may be defined: every
    /// metric is defined here, under the wasm filter's names.
    pub fn new(bytes: &[u8], envoy: EnvoyConfig) -> Result<ModuleConfig, String> {
        // What the module serves is checked before the runtime touches the
        // node's buckets (a reload resets the changed tenants').
        let config = Config::parse(bytes).map_err(|e| e.to_string())?;
        native::serves(&config)?;
        let stats = NativeStats(envoy);
        let ids = MetricIds::define(&stats);
        Runtime::configure(bytes, stats, ids.clone())?;
        Ok(ModuleConfig {
            id: GENERATION.fetch_add(1, Ordering::Relaxed),
            bytes: bytes.to_vec(),
            stats,
            ids,
        })
    }
}

thread_local! {
    /// This worker's runtime per configuration id.
    static RUNTIMES: RefCell<HashMap<u64, Rc<Runtime>>> = RefCell::new(HashMap::new());
}

/// This worker's runtime for `config`, built on first use (None: the
/// configuration no longer holds here, e.g. a secret left the environment).
fn runtime(config: &ModuleConfig) -> Option<Rc<Runtime>> {
    RUNTIMES.with(|r| {
        if let Some(rt) = r.borrow().get(&config.id) {
            return Some(Rc::clone(rt));
        }
        match Runtime::configure(&config.bytes, config.stats, config.ids.clone()) {
            Ok(rt) => {
                let rt = Rc::new(rt);
                let mut r = r.borrow_mut();
                // One configuration in force per worker: an old one's runtime goes.
                r.retain(|id, _| *id > config.id);
                r.insert(config.id, Rc::clone(&rt));
                Some(rt)
            }
            Err(message) => {
                abi::log(
                    abi::LOG_ERROR,
                    &format!("ankusa: configuration refused on this worker: {message}"),
                );
                None
            }
        }
    })
}

/// Stream ids on this worker (the batching seam keys parked hooks by them).
static STREAMS: AtomicU64 = AtomicU64::new(1);

/// One HTTP stream's filter.
pub struct Filter {
    /// None: the configuration didn't hold on this worker; every request is
    /// answered 503 (not configured), as the wasm filter answers without one.
    stream: Option<Stream<NativeHost>>,
    /// A hook panicked: the request was answered 500 and nothing more is done.
    failed: bool,
}

impl Filter {
    pub fn new(config: &ModuleConfig) -> Filter {
        let id = u32::try_from(STREAMS.fetch_add(1, Ordering::Relaxed) % u64::from(u32::MAX))
            .unwrap_or(0);
        let stream =
            runtime(config).map(|rt| Stream::new(Some(NativeHost::new(rt))).in_context(id));
        Filter {
            stream,
            failed: false,
        }
    }

    /// The stream's host, pointed at the hook's Envoy filter.
    fn enter(&mut self, envoy: Envoy, in_body: bool) -> Option<&mut Stream<NativeHost>> {
        if self.failed {
            return None;
        }
        let stream = self.stream.as_mut()?;
        if let Some(host) = stream.host() {
            host.enter(envoy, in_body);
        }
        Some(stream)
    }

    pub fn request_headers(&mut self, envoy: Envoy, end_of_stream: bool) -> Flow {
        if self.stream.is_none() && !self.failed {
            send_reply(envoy, &reply::not_configured());
            return Flow::Pause;
        }
        match self.enter(envoy, false) {
            Some(stream) => stream.on_request_headers(end_of_stream),
            None => Flow::Pause,
        }
    }

    pub fn request_body(&mut self, envoy: Envoy, end_of_stream: bool) -> Flow {
        match self.enter(envoy, true) {
            Some(stream) => {
                let size = stream.host().map_or(0, NativeHost::body_len);
                stream.on_request_body(size, end_of_stream)
            }
            None => Flow::Pause,
        }
    }

    pub fn request_trailers(&mut self, envoy: Envoy) -> Flow {
        match self.enter(envoy, false) {
            Some(stream) => stream.on_request_trailers(),
            None => Flow::Pause,
        }
    }

    pub fn response_headers(&mut self, envoy: Envoy) {
        if let Some(stream) = self.enter(envoy, false) {
            stream.on_response_headers();
        }
    }

    pub fn stream_complete(&mut self, envoy: Envoy) {
        if let Some(stream) = self.enter(envoy, false) {
            stream.on_stream_end();
        }
    }

    /// A hook panicked: the request is answered 500 (once) and never
    /// forwarded; the stream's state is dropped with what it held.
    pub fn fail_closed(&mut self, envoy: Envoy) {
        if self.failed {
            return;
        }
        self.failed = true;
        self.stream = None;
        send_reply(
            envoy,
            &LocalReply {
                status: 500,
                body: r#"{"error":"internal"}"#.into(),
                retry_after: Some(1),
                headers: Vec::new(),
            },
        );
    }
}
