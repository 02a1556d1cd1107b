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
//!   `bench_callout_calls_total` and `bench_callout_answers_total`.
//!
//! The wasm floors (`bench/noop-filter`, `bench/callout-floor`) count under
//! the same names. Every hook here is too simple to panic.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use crate::abi::{Buffer, Call, Envoy, EnvoyConfig, Header, StatId, ABI_VERSION};
use std::ffi::c_void;

/// Continue; StopIteration (headers, trailers) and StopIterationAndBuffer (body) are both 1.
const CONTINUE: u32 = 0;
const STOP: u32 = 1;

struct Floor {
    envoy: EnvoyConfig,
    /// Where the callout goes (None: the no-op).
    callout: Option<(String, String)>,
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

/// `cluster path` from the configuration (a JSON string or plain text);
/// None for anything else: the no-op.
fn target(config: &[u8]) -> Option<(String, String)> {
    let text = String::from_utf8_lossy(config);
    let text = text.trim().trim_matches('"');
    let mut words = text.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some(cluster), Some(path), None) => Some((cluster.to_string(), path.to_string())),
        _ => None,
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const u8 {
    ABI_VERSION.as_ptr()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    config_envoy: *mut c_void,
    _name: Buffer,
    config: Buffer,
) -> *const c_void {
    let envoy = EnvoyConfig(config_envoy);
    // SAFETY: Envoy lends the config bytes for this call.
    let callout = target(unsafe { config.bytes() });
    let floor = Floor {
        envoy,
        requests: envoy.define(0, "bench_noop_requests_total"),
        calls: envoy.define(0, "bench_callout_calls_total"),
        answers: envoy.define(0, "bench_callout_answers_total"),
        callout,
    };
    Box::into_raw(Box::new(floor)) as *const c_void
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void) {
    if !config.is_null() {
        // SAFETY: config_new's Box, destroyed once.
        drop(unsafe { Box::from_raw(config as *mut Floor) });
    }
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
    let stream = Stream {
        floor: config as *const Floor,
        waiting: false,
    };
    Box::into_raw(Box::new(stream)) as *const c_void
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(module: *const c_void) {
    if !module.is_null() {
        // SAFETY: filter_new's Box, destroyed once.
        drop(unsafe { Box::from_raw(module as *mut Stream) });
    }
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
    let Some((cluster, path)) = &floor.callout else {
        floor.count(floor.requests);
        return CONTINUE;
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
    envoy_dynamic_module_on_http_filter_response_headers(*mut c_void, *const c_void, bool) -> u32 = CONTINUE;
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
