//! The benchmark's native floors, a separate build of this crate (`cargo
//! build -p ankusa-module --profile release-floor --features floor`): the
//! same ABI layer ([`crate::abi`]), and in place of the Ankusa hooks
//! ([`crate::hooks`]) ones that decide nothing, so bench-edge measures what
//! the dynamic-module host alone costs Envoy per request:
//!
//! - the no-op (an empty configuration): every request passes at once,
//!   counted in `bench_noop_requests_total`;
//! - the one-callout floor (the configuration `cluster path`, e.g.
//!   `ankusa_store /healthz`): one GET callout per request, the request held
//!   until its answer and then let through whatever it says, counted in
//!   `bench_callout_calls_total` and `bench_callout_answers_total`;
//! - the host-call floor (the configuration `node host calls`): the no-op
//!   making every host call a node hook of the module makes, with fixed
//!   values and nothing decided ([`node_calls`]).
//!
//! The wasm floors (`bench/noop-filter`, `bench/callout-floor`) count under
//! the same names. Every hook here is too simple to panic.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use crate::abi::{self, Buffer, Call, Envoy, EnvoyConfig, Header, StatId};
use std::ffi::c_void;

mod node_calls;
#[cfg(test)]
mod tests;

/// Continue; StopIteration (headers, trailers) and StopIterationAndBuffer (body) are both 1.
const CONTINUE: u32 = 0;
const STOP: u32 = 1;

/// What a floor does per request, beside counting.
#[derive(Debug, PartialEq, Eq)]
enum Mode {
    Noop,
    /// The host-call floor ([`node_calls`]).
    NodeCalls,
    /// One callout to (cluster, path).
    Callout(String, String),
}

struct Floor {
    envoy: EnvoyConfig,
    mode: Mode,
    requests: Option<StatId>,
    calls: Option<StatId>,
    answers: Option<StatId>,
}

impl Floor {
    fn count(&self, id: Option<StatId>) {
        if let Some(id) = id {
            self.envoy.write(id, 1);
        }
    }
}

/// The floor a configuration (a JSON string or plain text) selects:
/// [`node_calls::MODE`], `cluster path`, or anything else the no-op.
fn mode(config: &[u8]) -> Mode {
    let text = String::from_utf8_lossy(config);
    let text = text.trim().trim_matches('"');
    if text == node_calls::MODE {
        return Mode::NodeCalls;
    }
    let mut words = text.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some(cluster), Some(path), None) => Mode::Callout(cluster.to_string(), path.to_string()),
        _ => Mode::Noop,
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    config_envoy: *mut c_void,
    _name: Buffer,
    config: Buffer,
) -> *const c_void {
    // SAFETY: called from config_new with the buffer Envoy lent it.
    unsafe {
        abi::new_config(config_envoy, config, |envoy, bytes| {
            Some(Floor {
                envoy,
                mode: mode(bytes),
                requests: envoy.define(0, "bench_noop_requests_total"),
                calls: envoy.define(0, "bench_callout_calls_total"),
                answers: envoy.define(0, "bench_callout_answers_total"),
            })
        })
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void) {
    // SAFETY: config_new's pointer, destroyed once.
    unsafe { abi::drop_ptr::<Floor>(config) }
}

/// One stream: its floor, and whether its callout is still unanswered
/// (the request's body and trailers wait for it too).
struct Stream {
    floor: *const Floor,
    waiting: bool,
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(
    config: *const c_void,
    _envoy: *mut c_void,
) -> *const c_void {
    abi::into_ptr(Some(Stream {
        floor: config as *const Floor,
        waiting: false,
    }))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(module: *const c_void) {
    // SAFETY: filter_new's pointer, destroyed once.
    unsafe { abi::drop_ptr::<Stream>(module) }
}

/// The stream behind `module`.
///
/// # Safety
/// `module` is filter_new's pointer, not destroyed yet.
unsafe fn stream<'a>(module: *const c_void) -> Option<&'a mut Stream> {
    (module as *mut Stream).as_mut()
}

/// The stream's floor configuration.
///
/// # Safety
/// `module` is filter_new's pointer, not destroyed yet; its floor outlives it.
unsafe fn floor<'a>(module: *const c_void) -> Option<&'a Floor> {
    stream(module).and_then(|s| s.floor.as_ref())
}

/// Stop while the stream's callout is still unanswered, else go on.
fn hold(module: *const c_void) -> u32 {
    // SAFETY: the stream's filter pointer.
    if unsafe { stream(module) }.is_some_and(|s| s.waiting) {
        STOP
    } else {
        CONTINUE
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    envoy: *mut c_void,
    module: *const c_void,
    _end_of_stream: bool,
) -> u32 {
    // SAFETY: the stream's filter pointer.
    let Some(floor) = (unsafe { floor(module) }) else {
        return CONTINUE;
    };
    let (cluster, path) = match &floor.mode {
        Mode::Callout(cluster, path) => (cluster, path),
        Mode::NodeCalls => {
            node_calls::on_request(Envoy(envoy));
            floor.count(floor.requests);
            return CONTINUE;
        }
        Mode::Noop => {
            floor.count(floor.requests);
            return CONTINUE;
        }
    };
    let call = Call {
        cluster,
        headers: vec![(":method", "GET"), (":path", path), (":authority", cluster)],
        body: &[],
        timeout_ms: 5_000,
    };
    if Envoy(envoy).callout(&call).is_some() {
        floor.count(floor.calls);
        // SAFETY: the stream's filter pointer.
        if let Some(stream) = unsafe { stream(module) } {
            stream.waiting = true;
        }
        STOP
    } else {
        CONTINUE
    }
}

/// The body waits, buffered, for the callout's answer.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    _envoy: *mut c_void,
    module: *const c_void,
    _end_of_stream: bool,
) -> u32 {
    hold(module)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    _envoy: *mut c_void,
    module: *const c_void,
) -> u32 {
    hold(module)
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    envoy: *mut c_void,
    module: *const c_void,
    _callout_id: u64,
    _result: u32,
    _headers: *mut Header,
    _headers_len: usize,
    _body: *mut Buffer,
    _body_len: usize,
) {
    // SAFETY: the stream's filter pointer.
    if let Some(stream) = unsafe { stream(module) } {
        stream.waiting = false;
    }
    // SAFETY: the stream's filter pointer.
    if let Some(floor) = unsafe { floor(module) } {
        floor.count(floor.answers);
    }
    Envoy(envoy).continue_decoding();
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_new(
    _name: Buffer,
    _config: Buffer,
) -> *const c_void {
    std::ptr::null()
}

/// The host-call floor's RateLimit headers; the others' response goes on untouched.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    envoy: *mut c_void,
    module: *const c_void,
    _end_of_stream: bool,
) -> u32 {
    // SAFETY: the stream's filter pointer.
    if unsafe { floor(module) }.is_some_and(|f| f.mode == Mode::NodeCalls) {
        node_calls::on_response(Envoy(envoy));
    }
    CONTINUE
}

/// Exports hooks that return `$ret`, each with its C signature's parameter types.
macro_rules! trivial_hooks {
    ($($name:ident($($ty:ty),*) -> $ret:ty = $value:expr;)*) => {
        $(
            #[no_mangle]
            pub extern "C" fn $name($(_: $ty),*) -> $ret { $value }
        )*
    };
}

trivial_hooks! {
    envoy_dynamic_module_on_http_filter_per_route_config_destroy(*const c_void) -> () = ();
    envoy_dynamic_module_on_http_filter_response_body(*mut c_void, *const c_void, bool) -> u32 = CONTINUE;
    envoy_dynamic_module_on_http_filter_response_trailers(*mut c_void, *const c_void) -> u32 = CONTINUE;
    envoy_dynamic_module_on_http_filter_stream_complete(*mut c_void, *const c_void) -> () = ();
    envoy_dynamic_module_on_http_filter_local_reply(*mut c_void, *const c_void, u32, Buffer, bool) -> u32 = CONTINUE;
    envoy_dynamic_module_on_http_filter_scheduled(*mut c_void, *const c_void, u64) -> () = ();
    envoy_dynamic_module_on_http_filter_config_scheduled(*mut c_void, *const c_void, u64) -> () = ();
    envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(*mut c_void, *const c_void) -> () = ();
    envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(*mut c_void, *const c_void) -> () = ();
    envoy_dynamic_module_on_http_filter_http_stream_headers(*mut c_void, *const c_void, u64, *mut Header, usize, bool) -> () = ();
    envoy_dynamic_module_on_http_filter_http_stream_data(*mut c_void, *const c_void, u64, *const Buffer, usize, bool) -> () = ();
    envoy_dynamic_module_on_http_filter_http_stream_trailers(*mut c_void, *const c_void, u64, *mut Header, usize) -> () = ();
    envoy_dynamic_module_on_http_filter_http_stream_complete(*mut c_void, *const c_void, u64) -> () = ();
    envoy_dynamic_module_on_http_filter_http_stream_reset(*mut c_void, *const c_void, u64, u32) -> () = ();
    envoy_dynamic_module_on_http_filter_config_http_callout_done(*mut c_void, *const c_void, u64, u32, *mut Header, usize, *mut Buffer, usize) -> () = ();
    envoy_dynamic_module_on_http_filter_config_http_stream_headers(*mut c_void, *const c_void, u64, *mut Header, usize, bool) -> () = ();
    envoy_dynamic_module_on_http_filter_config_http_stream_data(*mut c_void, *const c_void, u64, *const Buffer, usize, bool) -> () = ();
    envoy_dynamic_module_on_http_filter_config_http_stream_trailers(*mut c_void, *const c_void, u64, *mut Header, usize) -> () = ();
    envoy_dynamic_module_on_http_filter_config_http_stream_complete(*mut c_void, *const c_void, u64) -> () = ();
    envoy_dynamic_module_on_http_filter_config_http_stream_reset(*mut c_void, *const c_void, u64, u32) -> () = ();
}
