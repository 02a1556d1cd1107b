//! The event hooks this module exports to Envoy (`envoy_dynamic_module_on_*`,
//! from the pinned ABI header), mapped onto the module's [`Filter`] and
//! [`ModuleConfig`]. With [`crate::abi`], the ABI layer: the only files
//! with `unsafe`.
//!
//! Every exported hook catches a panic ([`std::panic::catch_unwind`]; the
//! `.so` is built with `panic = "unwind"`, profile `release-native`) and
//! fails closed: the request is answered 500 and never forwarded, as a
//! crashed wasm VM leaves it. No panic crosses the FFI boundary.
//
// The exported hooks take Envoy's pointers as the ABI defines them; Envoy
// calls them, never Rust code (bar the unit tests), so they can't be `unsafe fn`.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use crate::abi::{self, Answer, Buffer, Envoy, Header, LOG_ERROR};
use crate::filter::{Filter, ModuleConfig};
use ankusa_core::hook::machine::Flow;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// `…_request_headers_status`: Continue, StopIteration.
const HEADERS_CONTINUE: u32 = 0;
const HEADERS_STOP: u32 = 1;
/// `…_request_body_status`: Continue, StopIterationAndBuffer.
const BODY_CONTINUE: u32 = 0;
const BODY_STOP_AND_BUFFER: u32 = 1;
/// `…_request_trailers_status` (and the response's): Continue, StopIteration.
const TRAILERS_CONTINUE: u32 = 0;
const TRAILERS_STOP: u32 = 1;
/// `…_local_reply_status`: Continue.
const LOCAL_REPLY_CONTINUE: u32 = 0;

/// Runs a hook's body; a panic is caught, logged, and becomes `failed`.
fn guarded<R>(hook: &str, failed: impl FnOnce() -> R, body: impl FnOnce() -> R) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            abi::log(
                LOG_ERROR,
                &format!("ankusa: panic in {hook}, failing closed: {what}"),
            );
            failed()
        }
    }
}

/// The in-module filter behind `filter_module_ptr`.
///
/// # Safety
/// `ptr` came from `envoy_dynamic_module_on_http_filter_new` and is not destroyed yet.
unsafe fn filter<'a>(ptr: *const c_void) -> &'a mut Filter {
    &mut *(ptr as *mut Filter)
}

/// A request hook's panic: answered 500 once, never forwarded.
fn fail_closed(envoy: Envoy, module: *const c_void) {
    // SAFETY: the hook's own filter pointer.
    let filter = unsafe { filter(module) };
    filter.fail_closed(envoy);
}

/// The filter's configuration: parsed by the core's own parser; a bad one
/// is refused (null), the field named in Envoy's log.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    config_envoy: *mut c_void,
    _name: Buffer,
    config: Buffer,
) -> *const c_void {
    guarded("config_new", std::ptr::null, || {
        // SAFETY: called from config_new with the buffer Envoy lent it.
        unsafe {
            abi::new_config(config_envoy, config, |envoy, bytes| {
                ModuleConfig::new(bytes, envoy)
                    .map_err(|message| {
                        abi::log(
                            LOG_ERROR,
                            &format!("ankusa: configuration refused: {message}"),
                        )
                    })
                    .ok()
            })
        }
    })
}

/// Drops what a `new` hook made with [`abi::into_ptr`] (Envoy destroys each once).
fn destroy<T>(hook: &str, ptr: *const c_void) {
    guarded(
        hook,
        || (),
        // SAFETY: made by the matching `new` hook's `into_ptr`, destroyed once.
        || unsafe { abi::drop_ptr::<T>(ptr) },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void) {
    destroy::<ModuleConfig>("config_destroy", config);
}

/// Per-route configuration isn't used: a route that sets one is refused.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_new(
    _name: Buffer,
    _config: Buffer,
) -> *const c_void {
    abi::log(
        LOG_ERROR,
        "ankusa: per-route configuration is not supported; configure the filter itself",
    );
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_destroy(
    _config: *const c_void,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(
    config: *const c_void,
    _envoy: *mut c_void,
) -> *const c_void {
    guarded("filter_new", std::ptr::null, || {
        if config.is_null() {
            return std::ptr::null();
        }
        // SAFETY: config_new's pointer, alive while Envoy makes filters from it.
        let config = unsafe { &*(config as *const ModuleConfig) };
        abi::into_ptr(Some(Filter::new(config)))
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(module: *const c_void) {
    destroy::<Filter>("filter_destroy", module);
}

fn headers_status(flow: Flow) -> u32 {
    match flow {
        Flow::Continue => HEADERS_CONTINUE,
        Flow::Pause => HEADERS_STOP,
    }
}

/// A request hook of filter `module`: `run` on it, or on a panic the
/// request failed closed and held (`stop`).
fn request_hook(
    hook: &str,
    envoy: *mut c_void,
    module: *const c_void,
    stop: u32,
    run: impl FnOnce(&mut Filter, Envoy) -> u32,
) -> u32 {
    let envoy = Envoy(envoy);
    guarded(
        hook,
        || {
            fail_closed(envoy, module);
            stop
        },
        || {
            // SAFETY: the hook's own filter pointer.
            let filter = unsafe { filter(module) };
            run(filter, envoy)
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    envoy: *mut c_void,
    module: *const c_void,
    end_of_stream: bool,
) -> u32 {
    request_hook("request_headers", envoy, module, HEADERS_STOP, |f, e| {
        headers_status(f.request_headers(e, end_of_stream))
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    envoy: *mut c_void,
    module: *const c_void,
    end_of_stream: bool,
) -> u32 {
    request_hook(
        "request_body",
        envoy,
        module,
        BODY_STOP_AND_BUFFER,
        |f, e| match f.request_body(e, end_of_stream) {
            Flow::Continue => BODY_CONTINUE,
            Flow::Pause => BODY_STOP_AND_BUFFER,
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    envoy: *mut c_void,
    module: *const c_void,
) -> u32 {
    request_hook(
        "request_trailers",
        envoy,
        module,
        TRAILERS_STOP,
        |f, e| match f.request_trailers(e) {
            Flow::Continue => TRAILERS_CONTINUE,
            Flow::Pause => TRAILERS_STOP,
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    envoy: *mut c_void,
    module: *const c_void,
    _end_of_stream: bool,
) -> u32 {
    let envoy = Envoy(envoy);
    guarded(
        "response_headers",
        || HEADERS_CONTINUE,
        || {
            // SAFETY: the hook's own filter pointer.
            let filter = unsafe { filter(module) };
            filter.response_headers(envoy);
            HEADERS_CONTINUE
        },
    )
}

/// A response exists only for a request already decided: it goes on.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    _envoy: *mut c_void,
    _module: *const c_void,
    _end_of_stream: bool,
) -> u32 {
    BODY_CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(
    _envoy: *mut c_void,
    _module: *const c_void,
) -> u32 {
    TRAILERS_CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(
    envoy: *mut c_void,
    module: *const c_void,
) {
    let envoy = Envoy(envoy);
    guarded(
        "stream_complete",
        || (),
        || {
            // SAFETY: the hook's own filter pointer.
            let filter = unsafe { filter(module) };
            filter.stream_complete(envoy);
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_local_reply(
    _envoy: *mut c_void,
    _module: *const c_void,
    _status: u32,
    _details: Buffer,
    _reset_imminent: bool,
) -> u32 {
    LOCAL_REPLY_CONTINUE
}

/// A store call's answer to a stream: its own hit call, or a batched call it
/// carries. A panic fails the stream closed, as in a request hook.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    envoy: *mut c_void,
    module: *const c_void,
    callout_id: u64,
    result: u32,
    headers: *mut Header,
    headers_len: usize,
    body: *mut Buffer,
    body_len: usize,
) {
    // Fails closed on a panic, as a request hook does (the status is unused).
    request_hook("http_callout_done", envoy, module, 0, |f, e| {
        // SAFETY: Envoy lends the answer for this hook; copied now.
        let answer = unsafe { Answer::read(result, headers, headers_len, body, body_len) };
        f.callout_done(e, callout_id, answer);
        0
    });
}

/// An event of a stream's scheduler (the worker's batching woken).
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
    envoy: *mut c_void,
    module: *const c_void,
    event_id: u64,
) {
    request_hook("scheduled", envoy, module, 0, |f, e| {
        f.scheduled(e, event_id);
        0
    });
}

/// The configuration in force behind `config_module_ptr` (None: refused).
///
/// # Safety
/// `ptr` came from `envoy_dynamic_module_on_http_filter_config_new` and is not destroyed yet.
unsafe fn module_config<'a>(ptr: *const c_void) -> Option<&'a ModuleConfig> {
    (ptr as *const ModuleConfig).as_ref()
}

/// The node's tick, on Envoy's main thread (see [`crate::node`]).
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_scheduled(
    _config_envoy: *mut c_void,
    config: *const c_void,
    _event_id: u64,
) {
    guarded(
        "config_scheduled",
        || (),
        || {
            // SAFETY: config_new's pointer, alive until config_destroy.
            if let Some(config) = unsafe { module_config(config) } {
                config.tick();
            }
        },
    )
}

/// The answer to a node-wide call (a settle batch, an override poll).
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_callout_done(
    _config_envoy: *mut c_void,
    config: *const c_void,
    callout_id: u64,
    result: u32,
    headers: *mut Header,
    headers_len: usize,
    body: *mut Buffer,
    body_len: usize,
) {
    guarded(
        "config_http_callout_done",
        || (),
        || {
            // SAFETY: Envoy lends the answer for this hook; copied now.
            let answer = unsafe { Answer::read(result, headers, headers_len, body, body_len) };
            // SAFETY: config_new's pointer, alive until config_destroy.
            if let Some(config) = unsafe { module_config(config) } {
                config.callout_done(callout_id, answer);
            }
        },
    )
}

/// Exports hooks that do nothing, each with its C signature's parameter types.
macro_rules! ignored_hooks {
    ($($name:ident($($ty:ty),*);)*) => {
        $(
            #[no_mangle]
            pub extern "C" fn $name($(_: $ty),*) {}
        )*
    };
}

// The hooks below belong to features the module doesn't use (streamed
// callouts, watermarks): they are exported because Envoy resolves them when
// it loads a filter configuration, and do nothing.
ignored_hooks! {
    envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(
        *mut c_void, *const c_void);
    envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(
        *mut c_void, *const c_void);
    envoy_dynamic_module_on_http_filter_http_stream_headers(
        *mut c_void, *const c_void, u64, *mut Header, usize, bool);
    envoy_dynamic_module_on_http_filter_http_stream_data(
        *mut c_void, *const c_void, u64, *const Buffer, usize, bool);
    envoy_dynamic_module_on_http_filter_http_stream_trailers(
        *mut c_void, *const c_void, u64, *mut Header, usize);
    envoy_dynamic_module_on_http_filter_http_stream_complete(*mut c_void, *const c_void, u64);
    envoy_dynamic_module_on_http_filter_http_stream_reset(*mut c_void, *const c_void, u64, u32);
    envoy_dynamic_module_on_http_filter_config_http_stream_headers(
        *mut c_void, *const c_void, u64, *mut Header, usize, bool);
    envoy_dynamic_module_on_http_filter_config_http_stream_data(
        *mut c_void, *const c_void, u64, *const Buffer, usize, bool);
    envoy_dynamic_module_on_http_filter_config_http_stream_trailers(
        *mut c_void, *const c_void, u64, *mut Header, usize);
    envoy_dynamic_module_on_http_filter_config_http_stream_complete(
        *mut c_void, *const c_void, u64);
    envoy_dynamic_module_on_http_filter_config_http_stream_reset(
        *mut c_void, *const c_void, u64, u32);
}

#[cfg(test)]
mod direct_tests;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod tests;
