//! The subset of Envoy's dynamic-module ABI this module uses, bound by hand
//! from the published header of the Envoy we pin (1.40.0,
//! `source/extensions/dynamic_modules/abi/abi.h`): its types, the callbacks
//! we call, and the event hooks we export. The only file with `unsafe`.
//!
//! Every exported hook catches a panic ([`std::panic::catch_unwind`]; the
//! `.so` is built with `panic = "unwind"`, profile `release-native`) and
//! fails closed: the request is answered 500 and never forwarded, as a
//! crashed wasm VM leaves it. No panic crosses the FFI boundary.
//!
//! The callbacks Envoy exports are resolved when the `.so` is loaded (it is
//! linked with `-z now`, see `build.rs`): an Envoy that lacks one refuses the
//! module at start naming the symbol, rather than failing on first use.
//! `abi_symbols_exist_in_the_pinned_envoy` (tests/e2e) checks every name
//! below against the binary's dynamic symbols.
//!
//! Under `cfg(test)` the callbacks are a fake Envoy in memory ([`fake`]),
//! so the hooks' unit tests run the real exported functions without Envoy.
//
// The exported hooks take Envoy's pointers as the ABI defines them; Envoy
// calls them, never Rust code (bar the unit tests), so they can't be `unsafe fn`.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use crate::filter::{Filter, ModuleConfig};
use ankusa_core::hook::machine::Flow;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The ABI version this module was written against, returned by
/// `envoy_dynamic_module_on_program_init`. Envoy 1.40.0 logs "Dynamic module
/// ABI version … matched." when it is its own; see docs/deploy.md for
/// matching versions.
pub const ABI_VERSION: &[u8] = b"v0.2.0\0";

/// Every callback the module calls: checked against the pinned Envoy's
/// dynamic symbols by the end-to-end suite.
pub const CALLBACKS: &[&str] = &[
    "envoy_dynamic_module_callback_log",
    "envoy_dynamic_module_callback_http_get_headers_size",
    "envoy_dynamic_module_callback_http_get_headers",
    "envoy_dynamic_module_callback_http_set_header",
    "envoy_dynamic_module_callback_http_add_header",
    "envoy_dynamic_module_callback_http_send_response",
    "envoy_dynamic_module_callback_http_get_body_chunks_size",
    "envoy_dynamic_module_callback_http_get_body_chunks",
    "envoy_dynamic_module_callback_http_received_buffered_request_body",
    "envoy_dynamic_module_callback_http_filter_continue_decoding",
    "envoy_dynamic_module_callback_http_set_filter_state_bytes",
    "envoy_dynamic_module_callback_http_filter_config_define_counter",
    "envoy_dynamic_module_callback_http_filter_config_define_gauge",
    "envoy_dynamic_module_callback_http_filter_config_define_histogram",
    "envoy_dynamic_module_callback_http_filter_config_increment_counter",
    "envoy_dynamic_module_callback_http_filter_config_set_gauge",
    "envoy_dynamic_module_callback_http_filter_config_record_histogram_value",
];

/// `envoy_dynamic_module_type_envoy_buffer` / `_module_buffer`: bytes and their length.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Buffer {
    pub ptr: *const u8,
    pub len: usize,
}

impl Buffer {
    const EMPTY: Buffer = Buffer {
        ptr: std::ptr::null(),
        len: 0,
    };

    fn of(bytes: &[u8]) -> Buffer {
        Buffer {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
        }
    }

    /// The bytes Envoy lent for the current hook.
    ///
    /// # Safety
    /// `ptr` is null or points at `len` readable bytes for the hook's length.
    unsafe fn bytes<'a>(self) -> &'a [u8] {
        if self.ptr.is_null() || self.len == 0 {
            return &[];
        }
        std::slice::from_raw_parts(self.ptr, self.len)
    }
}

/// `envoy_dynamic_module_type_envoy_http_header` / `_module_http_header`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Header {
    pub key: Buffer,
    pub value: Buffer,
}

/// `envoy_dynamic_module_type_http_header_type`.
pub const REQUEST_HEADER: u32 = 0;
pub const RESPONSE_HEADER: u32 = 2;
/// `envoy_dynamic_module_type_http_body_type`.
const RECEIVED_REQUEST_BODY: u32 = 0;
const BUFFERED_REQUEST_BODY: u32 = 1;
/// `envoy_dynamic_module_type_log_level`.
pub const LOG_INFO: u32 = 2;
pub const LOG_WARN: u32 = 3;
pub const LOG_ERROR: u32 = 4;
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

#[cfg(not(test))]
mod sys {
    use super::{Buffer, Header};
    use std::ffi::c_void;

    extern "C" {
        pub fn envoy_dynamic_module_callback_log(level: u32, message: Buffer);
        pub fn envoy_dynamic_module_callback_http_get_headers_size(
            filter: *mut c_void,
            kind: u32,
        ) -> usize;
        pub fn envoy_dynamic_module_callback_http_get_headers(
            filter: *mut c_void,
            kind: u32,
            out: *mut Header,
        ) -> bool;
        pub fn envoy_dynamic_module_callback_http_set_header(
            filter: *mut c_void,
            kind: u32,
            key: Buffer,
            value: Buffer,
        ) -> bool;
        pub fn envoy_dynamic_module_callback_http_add_header(
            filter: *mut c_void,
            kind: u32,
            key: Buffer,
            value: Buffer,
        ) -> bool;
        pub fn envoy_dynamic_module_callback_http_send_response(
            filter: *mut c_void,
            status: u32,
            headers: *mut Header,
            headers_len: usize,
            body: Buffer,
            details: Buffer,
        );
        pub fn envoy_dynamic_module_callback_http_get_body_chunks_size(
            filter: *mut c_void,
            kind: u32,
        ) -> usize;
        pub fn envoy_dynamic_module_callback_http_get_body_chunks(
            filter: *mut c_void,
            kind: u32,
            out: *mut Buffer,
        ) -> bool;
        pub fn envoy_dynamic_module_callback_http_received_buffered_request_body(
            filter: *mut c_void,
        ) -> bool;
        pub fn envoy_dynamic_module_callback_http_filter_continue_decoding(filter: *mut c_void);
        pub fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
            filter: *mut c_void,
            key: Buffer,
            value: Buffer,
        ) -> bool;
        pub fn envoy_dynamic_module_callback_http_filter_config_define_counter(
            config: *mut c_void,
            name: Buffer,
            label_names: *mut Buffer,
            label_names_len: usize,
            id: *mut usize,
        ) -> u32;
        pub fn envoy_dynamic_module_callback_http_filter_config_define_gauge(
            config: *mut c_void,
            name: Buffer,
            label_names: *mut Buffer,
            label_names_len: usize,
            id: *mut usize,
        ) -> u32;
        pub fn envoy_dynamic_module_callback_http_filter_config_define_histogram(
            config: *mut c_void,
            name: Buffer,
            label_names: *mut Buffer,
            label_names_len: usize,
            id: *mut usize,
        ) -> u32;
        pub fn envoy_dynamic_module_callback_http_filter_config_increment_counter(
            config: *mut c_void,
            id: usize,
            label_values: *mut Buffer,
            label_values_len: usize,
            value: u64,
        ) -> u32;
        pub fn envoy_dynamic_module_callback_http_filter_config_set_gauge(
            config: *mut c_void,
            id: usize,
            label_values: *mut Buffer,
            label_values_len: usize,
            value: u64,
        ) -> u32;
        pub fn envoy_dynamic_module_callback_http_filter_config_record_histogram_value(
            config: *mut c_void,
            id: usize,
            label_values: *mut Buffer,
            label_values_len: usize,
            value: u64,
        ) -> u32;
    }
}

#[cfg(test)]
pub mod fake;
#[cfg(test)]
use fake as sys;

/// Logs on Envoy's `dynamic_modules` logger.
pub fn log(level: u32, message: &str) {
    // SAFETY: the message buffer lives for the call.
    unsafe { sys::envoy_dynamic_module_callback_log(level, Buffer::of(message.as_bytes())) }
}

/// One HTTP stream's filter on Envoy's side (`filter_envoy_ptr`), valid for
/// the hook it was handed to. A [`Filter`] keeps the latest one: Envoy hands
/// the same pointer to every hook of the stream, and the module calls back
/// only from within those hooks.
#[derive(Clone, Copy, Debug)]
pub struct Envoy(*mut c_void);

impl Envoy {
    /// Every header of `kind` as (name, value bytes).
    pub fn headers(self, kind: u32) -> Vec<(String, Vec<u8>)> {
        // SAFETY: `out` has room for the count Envoy reported; the buffers
        // are read before any setter runs.
        unsafe {
            let n = sys::envoy_dynamic_module_callback_http_get_headers_size(self.0, kind);
            let mut out = vec![
                Header {
                    key: Buffer::EMPTY,
                    value: Buffer::EMPTY,
                };
                n
            ];
            if n == 0
                || !sys::envoy_dynamic_module_callback_http_get_headers(
                    self.0,
                    kind,
                    out.as_mut_ptr(),
                )
            {
                return Vec::new();
            }
            out.iter()
                .map(|h| {
                    (
                        String::from_utf8_lossy(h.key.bytes()).into_owned(),
                        h.value.bytes().to_vec(),
                    )
                })
                .collect()
        }
    }

    /// Sets header `name` of `kind` (every copy replaced); None removes it.
    pub fn set_header(self, kind: u32, name: &str, value: Option<&str>) -> bool {
        let value = value.map_or(Buffer::EMPTY, |v| Buffer::of(v.as_bytes()));
        // SAFETY: both buffers live for the call.
        unsafe {
            sys::envoy_dynamic_module_callback_http_set_header(
                self.0,
                kind,
                Buffer::of(name.as_bytes()),
                value,
            )
        }
    }

    /// Adds a value of header `name` of `kind`.
    pub fn add_header(self, kind: u32, name: &str, value: &str) -> bool {
        // SAFETY: both buffers live for the call.
        unsafe {
            sys::envoy_dynamic_module_callback_http_add_header(
                self.0,
                kind,
                Buffer::of(name.as_bytes()),
                Buffer::of(value.as_bytes()),
            )
        }
    }

    /// The request body so far: what Envoy buffered, and, within a body
    /// hook (`received`), the chunk it is handing over now.
    pub fn request_body(self, received: bool) -> Vec<u8> {
        let mut body = self.chunks(BUFFERED_REQUEST_BODY);
        // SAFETY: a plain query on the live filter.
        let same = unsafe {
            sys::envoy_dynamic_module_callback_http_received_buffered_request_body(self.0)
        };
        if received && !same {
            body.extend(self.chunks(RECEIVED_REQUEST_BODY));
        }
        body
    }

    fn chunks(self, kind: u32) -> Vec<u8> {
        // SAFETY: `out` has room for the count Envoy reported.
        unsafe {
            let n = sys::envoy_dynamic_module_callback_http_get_body_chunks_size(self.0, kind);
            let mut out = vec![Buffer::EMPTY; n];
            if n == 0
                || !sys::envoy_dynamic_module_callback_http_get_body_chunks(
                    self.0,
                    kind,
                    out.as_mut_ptr(),
                )
            {
                return Vec::new();
            }
            let mut body = Vec::with_capacity(out.iter().map(|b| b.len).sum());
            for chunk in &out {
                body.extend_from_slice(chunk.bytes());
            }
            body
        }
    }

    /// Answers the request locally.
    pub fn send_response(self, status: u32, headers: &[(&str, &str)], body: &[u8], details: &str) {
        let mut headers: Vec<Header> = headers
            .iter()
            .map(|(k, v)| Header {
                key: Buffer::of(k.as_bytes()),
                value: Buffer::of(v.as_bytes()),
            })
            .collect();
        // SAFETY: the header array and buffers live for the call.
        unsafe {
            sys::envoy_dynamic_module_callback_http_send_response(
                self.0,
                status,
                headers.as_mut_ptr(),
                headers.len(),
                Buffer::of(body),
                Buffer::of(details.as_bytes()),
            )
        }
    }

    /// Lets a paused request go on.
    pub fn continue_decoding(self) {
        // SAFETY: a plain call on the live filter.
        unsafe { sys::envoy_dynamic_module_callback_http_filter_continue_decoding(self.0) }
    }

    /// Writes the stream's filter state `key` (bytes, printed by `%FILTER_STATE(key:PLAIN)%`).
    pub fn set_filter_state(self, key: &str, value: &[u8]) -> bool {
        // SAFETY: both buffers live for the call.
        unsafe {
            sys::envoy_dynamic_module_callback_http_set_filter_state_bytes(
                self.0,
                Buffer::of(key.as_bytes()),
                Buffer::of(value),
            )
        }
    }
}

/// `envoy_dynamic_module_type_metrics_result_Success`.
const METRICS_SUCCESS: u32 = 0;

/// A filter configuration on Envoy's side (`filter_config_envoy_ptr`),
/// alive as long as the module's configuration made from it: stats are
/// defined on it (on Envoy's main thread) and written through it from any
/// worker (Envoy's stats are atomic).
#[derive(Clone, Copy, Debug)]
pub struct EnvoyConfig(*mut c_void);

// SAFETY: Envoy's filter configuration outlives every filter made from it,
// and the stat calls made through it are thread-safe on Envoy's side.
unsafe impl Send for EnvoyConfig {}
// SAFETY: as above.
unsafe impl Sync for EnvoyConfig {}

/// A stat defined on an [`EnvoyConfig`]: its kind and Envoy's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatId {
    Counter(usize),
    Gauge(usize),
    Histogram(usize),
}

impl EnvoyConfig {
    /// Defines a counter (`kind` 0), gauge (1) or histogram (2) named `name`, without labels.
    pub fn define(self, kind: u8, name: &str) -> Option<StatId> {
        let mut id = 0usize;
        let name = Buffer::of(name.as_bytes());
        let none = std::ptr::null_mut();
        // SAFETY: the name lives for the call; no labels; `id` is writable.
        let result = unsafe {
            match kind {
                0 => sys::envoy_dynamic_module_callback_http_filter_config_define_counter(
                    self.0, name, none, 0, &mut id,
                ),
                1 => sys::envoy_dynamic_module_callback_http_filter_config_define_gauge(
                    self.0, name, none, 0, &mut id,
                ),
                _ => sys::envoy_dynamic_module_callback_http_filter_config_define_histogram(
                    self.0, name, none, 0, &mut id,
                ),
            }
        };
        (result == METRICS_SUCCESS).then_some(match kind {
            0 => StatId::Counter(id),
            1 => StatId::Gauge(id),
            _ => StatId::Histogram(id),
        })
    }

    /// Adds to a counter, sets a gauge or records a histogram value.
    pub fn write(self, id: StatId, value: u64) {
        let none = std::ptr::null_mut();
        // SAFETY: an id this configuration handed out; no labels.
        let _ = unsafe {
            match id {
                StatId::Counter(id) => {
                    sys::envoy_dynamic_module_callback_http_filter_config_increment_counter(
                        self.0, id, none, 0, value,
                    )
                }
                StatId::Gauge(id) => {
                    sys::envoy_dynamic_module_callback_http_filter_config_set_gauge(
                        self.0, id, none, 0, value,
                    )
                }
                StatId::Histogram(id) => {
                    sys::envoy_dynamic_module_callback_http_filter_config_record_histogram_value(
                        self.0, id, none, 0, value,
                    )
                }
            }
        };
    }
}

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
            log(
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

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const u8 {
    ABI_VERSION.as_ptr()
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
        // SAFETY: Envoy lends the config bytes for this call.
        let bytes = unsafe { config.bytes() };
        match ModuleConfig::new(bytes, EnvoyConfig(config_envoy)) {
            Ok(config) => Box::into_raw(Box::new(config)) as *const c_void,
            Err(message) => {
                log(
                    LOG_ERROR,
                    &format!("ankusa: configuration refused: {message}"),
                );
                std::ptr::null()
            }
        }
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void) {
    guarded(
        "config_destroy",
        || (),
        || {
            if !config.is_null() {
                // SAFETY: made by config_new's Box::into_raw, destroyed once.
                drop(unsafe { Box::from_raw(config as *mut ModuleConfig) });
            }
        },
    )
}

/// Per-route configuration isn't used: a route that sets one is refused.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_new(
    _name: Buffer,
    _config: Buffer,
) -> *const c_void {
    log(
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
        Box::into_raw(Box::new(Filter::new(config))) as *const c_void
    })
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(module: *const c_void) {
    guarded(
        "filter_destroy",
        || (),
        || {
            if !module.is_null() {
                // SAFETY: made by filter_new's Box::into_raw, destroyed once.
                drop(unsafe { Box::from_raw(module as *mut Filter) });
            }
        },
    )
}

fn headers_status(flow: Flow) -> u32 {
    match flow {
        Flow::Continue => HEADERS_CONTINUE,
        Flow::Pause => HEADERS_STOP,
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    envoy: *mut c_void,
    module: *const c_void,
    end_of_stream: bool,
) -> u32 {
    let envoy = Envoy(envoy);
    guarded(
        "request_headers",
        || {
            fail_closed(envoy, module);
            HEADERS_STOP
        },
        || {
            // SAFETY: the hook's own filter pointer.
            let filter = unsafe { filter(module) };
            headers_status(filter.request_headers(envoy, end_of_stream))
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    envoy: *mut c_void,
    module: *const c_void,
    end_of_stream: bool,
) -> u32 {
    let envoy = Envoy(envoy);
    guarded(
        "request_body",
        || {
            fail_closed(envoy, module);
            BODY_STOP_AND_BUFFER
        },
        || {
            // SAFETY: the hook's own filter pointer.
            let filter = unsafe { filter(module) };
            match filter.request_body(envoy, end_of_stream) {
                Flow::Continue => BODY_CONTINUE,
                Flow::Pause => BODY_STOP_AND_BUFFER,
            }
        },
    )
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    envoy: *mut c_void,
    module: *const c_void,
) -> u32 {
    let envoy = Envoy(envoy);
    guarded(
        "request_trailers",
        || {
            fail_closed(envoy, module);
            TRAILERS_STOP
        },
        || {
            // SAFETY: the hook's own filter pointer.
            let filter = unsafe { filter(module) };
            match filter.request_trailers(envoy) {
                Flow::Continue => TRAILERS_CONTINUE,
                Flow::Pause => TRAILERS_STOP,
            }
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

// The hooks below belong to features the module doesn't use (store calls
// are refused at configuration, see `filter.rs`): they are exported so an
// Envoy that looks them up finds them, and do nothing.

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    _envoy: *mut c_void,
    _module: *const c_void,
    _callout_id: u64,
    _result: u32,
    _headers: *mut Header,
    _headers_len: usize,
    _body: *mut Buffer,
    _body_len: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
    _envoy: *mut c_void,
    _module: *const c_void,
    _event_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_scheduled(
    _config_envoy: *mut c_void,
    _config: *const c_void,
    _event_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(
    _envoy: *mut c_void,
    _module: *const c_void,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(
    _envoy: *mut c_void,
    _module: *const c_void,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_headers(
    _envoy: *mut c_void,
    _module: *const c_void,
    _stream_id: u64,
    _headers: *mut Header,
    _headers_len: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_data(
    _envoy: *mut c_void,
    _module: *const c_void,
    _stream_id: u64,
    _data: *const Buffer,
    _data_len: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
    _envoy: *mut c_void,
    _module: *const c_void,
    _stream_id: u64,
    _trailers: *mut Header,
    _trailers_len: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(
    _envoy: *mut c_void,
    _module: *const c_void,
    _stream_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(
    _envoy: *mut c_void,
    _module: *const c_void,
    _stream_id: u64,
    _reason: u32,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_callout_done(
    _config_envoy: *mut c_void,
    _config: *const c_void,
    _callout_id: u64,
    _result: u32,
    _headers: *mut Header,
    _headers_len: usize,
    _body: *mut Buffer,
    _body_len: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_headers(
    _config_envoy: *mut c_void,
    _config: *const c_void,
    _stream_id: u64,
    _headers: *mut Header,
    _headers_len: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_data(
    _config_envoy: *mut c_void,
    _config: *const c_void,
    _stream_id: u64,
    _data: *const Buffer,
    _data_len: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_trailers(
    _config_envoy: *mut c_void,
    _config: *const c_void,
    _stream_id: u64,
    _trailers: *mut Header,
    _trailers_len: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_complete(
    _config_envoy: *mut c_void,
    _config: *const c_void,
    _stream_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_reset(
    _config_envoy: *mut c_void,
    _config: *const c_void,
    _stream_id: u64,
    _reason: u32,
) {
}

#[cfg(test)]
mod tests;
