//! The subset of Envoy's dynamic-module ABI this module uses, bound by hand
//! from the published header of the Envoy we pin (1.40.0,
//! `source/extensions/dynamic_modules/abi/abi.h`): its types and the
//! callbacks we call, behind safe handles ([`Envoy`], [`EnvoyConfig`]). The
//! event hooks we export are [`crate::hooks`]; these two files are the ABI
//! layer, the only ones with `unsafe`.
//!
//! The callbacks Envoy exports are resolved when the `.so` is loaded (it is
//! linked with `-z now`, see `build.rs`): an Envoy that lacks one refuses the
//! module at start naming the symbol, rather than failing on first use.
//! `native::every_callback_the_module_calls_is_exported_by_the_pinned_envoy`
//! (tests/e2e) checks every callback the built `.so` imports against the
//! binary's dynamic symbols.
//!
//! Under `cfg(test)` the callbacks are a fake Envoy in memory (`abi/fake.rs`),
//! so the hooks' unit tests run the real exported functions without Envoy.

use std::ffi::c_void;

/// The ABI version this module was written against, returned by
/// `envoy_dynamic_module_on_program_init`. Envoy 1.40.0 logs "Dynamic module
/// ABI version … matched." when it is its own; see docs/deploy.md for
/// matching versions.
pub const ABI_VERSION: &[u8] = b"v0.2.0\0";

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

    pub(crate) fn of(bytes: &[u8]) -> Buffer {
        Buffer {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
        }
    }

    /// The bytes Envoy lent for the current hook.
    ///
    /// # Safety
    /// `ptr` is null or points at `len` readable bytes for the hook's length.
    pub(crate) unsafe fn bytes<'a>(self) -> &'a [u8] {
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
        pub fn envoy_dynamic_module_callback_http_filter_http_callout(
            filter: *mut c_void,
            callout_id: *mut u64,
            cluster: Buffer,
            headers: *mut Header,
            headers_len: usize,
            body: Buffer,
            timeout_ms: u64,
        ) -> u32;
        pub fn envoy_dynamic_module_callback_http_filter_config_http_callout(
            config: *mut c_void,
            callout_id: *mut u64,
            cluster: Buffer,
            headers: *mut Header,
            headers_len: usize,
            body: Buffer,
            timeout_ms: u64,
        ) -> u32;
        pub fn envoy_dynamic_module_callback_http_filter_scheduler_new(
            filter: *mut c_void,
        ) -> *mut c_void;
        pub fn envoy_dynamic_module_callback_http_filter_scheduler_commit(
            scheduler: *mut c_void,
            event_id: u64,
        );
        pub fn envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler: *mut c_void);
        pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_new(
            config: *mut c_void,
        ) -> *mut c_void;
        pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_commit(
            scheduler: *mut c_void,
            event_id: u64,
        );
        pub fn envoy_dynamic_module_callback_http_filter_config_scheduler_delete(
            scheduler: *mut c_void,
        );
    }
}

#[cfg(test)]
pub mod fake;
#[cfg(test)]
use fake as sys;

/// What Envoy fills into an array the module sizes: `size` items of
/// `empty`, handed to `fill` (false or none: nothing).
///
/// # Safety
/// `fill` writes at most the count `size` returned.
unsafe fn filled<T: Clone>(
    empty: T,
    size: impl FnOnce() -> usize,
    fill: impl FnOnce(*mut T) -> bool,
) -> Vec<T> {
    let n = size();
    let mut out = vec![empty; n];
    if n == 0 || !fill(out.as_mut_ptr()) {
        return Vec::new();
    }
    out
}

/// Logs on Envoy's `dynamic_modules` logger.
pub fn log(level: u32, message: &str) {
    // SAFETY: the message buffer lives for the call.
    unsafe { sys::envoy_dynamic_module_callback_log(level, Buffer::of(message.as_bytes())) }
}

/// What a `…_new` hook hands Envoy: `value` boxed, or null for None.
pub fn into_ptr<T>(value: Option<T>) -> *const c_void {
    value.map_or(std::ptr::null(), |v| {
        Box::into_raw(Box::new(v)) as *const c_void
    })
}

/// Drops what [`into_ptr`] made of a `T` (null: nothing).
///
/// # Safety
/// `ptr` is null or came from `into_ptr::<T>` and is not dropped yet.
pub unsafe fn drop_ptr<T>(ptr: *const c_void) {
    if !ptr.is_null() {
        drop(Box::from_raw(ptr as *mut T));
    }
}

/// The filter configuration's bytes that a `config_new` hook was handed,
/// made into the module's configuration by `make` (None: refused, null).
///
/// # Safety
/// `config` is the buffer Envoy lent the `config_new` hook, called from it.
pub unsafe fn new_config<T>(
    config_envoy: *mut c_void,
    config: Buffer,
    make: impl FnOnce(EnvoyConfig, &[u8]) -> Option<T>,
) -> *const c_void {
    into_ptr(make(EnvoyConfig(config_envoy), config.bytes()))
}

/// One HTTP stream's filter on Envoy's side (`filter_envoy_ptr`), valid for
/// the hook it was handed to. A [`crate::filter::Filter`] keeps the latest one: Envoy hands
/// the same pointer to every hook of the stream, and the module calls back
/// only from within those hooks.
#[derive(Clone, Copy, Debug)]
pub struct Envoy(pub(crate) *mut c_void);

impl Envoy {
    /// Every header of `kind` as Envoy holds it: two calls (the count, then
    /// the headers), the buffers lent for the current hook and not copied.
    pub fn header_buffers(self, kind: u32) -> Vec<Header> {
        let empty = Header {
            key: Buffer::EMPTY,
            value: Buffer::EMPTY,
        };
        // SAFETY: `filled` gives Envoy room for the count it reported.
        unsafe {
            filled(
                empty,
                || sys::envoy_dynamic_module_callback_http_get_headers_size(self.0, kind),
                |out| sys::envoy_dynamic_module_callback_http_get_headers(self.0, kind, out),
            )
        }
    }

    /// Every header of `kind` as (name, value bytes).
    pub fn headers(self, kind: u32) -> Vec<(String, Vec<u8>)> {
        self.header_buffers(kind)
            .iter()
            .map(|h| {
                // SAFETY: Envoy lent the buffers for the current hook, and
                // they are copied before any setter runs.
                let (key, value) = unsafe { (h.key.bytes(), h.value.bytes()) };
                (String::from_utf8_lossy(key).into_owned(), value.to_vec())
            })
            .collect()
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

    /// The request body's length so far (as [`Envoy::request_body`] would
    /// read it), without copying it.
    pub fn request_body_len(self, received: bool) -> usize {
        let mut len = self.chunks_len(BUFFERED_REQUEST_BODY);
        // SAFETY: a plain query on the live filter.
        let same = unsafe {
            sys::envoy_dynamic_module_callback_http_received_buffered_request_body(self.0)
        };
        if received && !same {
            len += self.chunks_len(RECEIVED_REQUEST_BODY);
        }
        len
    }

    fn chunks_len(self, kind: u32) -> usize {
        self.chunk_buffers(kind).iter().map(|b| b.len).sum()
    }

    fn chunks(self, kind: u32) -> Vec<u8> {
        let buffers = self.chunk_buffers(kind);
        let mut body = Vec::with_capacity(buffers.iter().map(|b| b.len).sum());
        for chunk in &buffers {
            // SAFETY: Envoy lent the chunks for the current hook; copied now.
            body.extend_from_slice(unsafe { chunk.bytes() });
        }
        body
    }

    /// The body of `kind` as Envoy holds it: its chunks, lent for the current hook.
    fn chunk_buffers(self, kind: u32) -> Vec<Buffer> {
        // SAFETY: `filled` gives Envoy room for the count it reported.
        unsafe {
            filled(
                Buffer::EMPTY,
                || sys::envoy_dynamic_module_callback_http_get_body_chunks_size(self.0, kind),
                |out| sys::envoy_dynamic_module_callback_http_get_body_chunks(self.0, kind, out),
            )
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

    /// Sends an HTTP callout from this stream (answered on the stream's
    /// worker by `on_http_filter_http_callout_done`; cancelled, unanswered,
    /// when the stream is destroyed first). Its id, or None when Envoy
    /// refused it at once (no such cluster, a required header missing).
    pub fn callout(self, call: &Call<'_>) -> Option<u64> {
        call.send(|id, cluster, headers, len, body, timeout| {
            // SAFETY: `Call::send` passes buffers and headers that live for the call.
            unsafe {
                sys::envoy_dynamic_module_callback_http_filter_http_callout(
                    self.0, id, cluster, headers, len, body, timeout,
                )
            }
        })
    }

    /// A scheduler on this stream's worker: an event committed on it runs
    /// `on_http_filter_scheduled` one event-loop turn later, if the stream
    /// still lives. The module deletes it ([`Scheduler::delete`]).
    pub fn scheduler(self) -> Scheduler {
        // SAFETY: a plain call on the live filter.
        let ptr = unsafe { sys::envoy_dynamic_module_callback_http_filter_scheduler_new(self.0) };
        Scheduler { ptr, config: false }
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

/// `envoy_dynamic_module_type_http_callout_init_result_Success`.
const CALLOUT_INIT_SUCCESS: u32 = 0;
/// `envoy_dynamic_module_type_http_callout_result_Success` (then Reset,
/// ExceedResponseBufferLimit). A timeout is a success: Envoy's own 504.
pub const CALLOUT_SUCCESS: u32 = 0;

/// An HTTP callout: where it goes, what it carries, how long it may take.
pub struct Call<'a> {
    pub cluster: &'a str,
    /// `:method`, `:path`, `:authority` and the rest, in order.
    pub headers: Vec<(&'a str, &'a str)>,
    pub body: &'a [u8],
    pub timeout_ms: u64,
}

impl Call<'_> {
    /// Hands the call to Envoy's callout function `send`: its id, or None
    /// when Envoy refused it at once.
    fn send(
        &self,
        send: impl FnOnce(*mut u64, Buffer, *mut Header, usize, Buffer, u64) -> u32,
    ) -> Option<u64> {
        let mut id = 0u64;
        let mut headers: Vec<Header> = self
            .headers
            .iter()
            .map(|(k, v)| Header {
                key: Buffer::of(k.as_bytes()),
                value: Buffer::of(v.as_bytes()),
            })
            .collect();
        let result = send(
            &mut id,
            Buffer::of(self.cluster.as_bytes()),
            headers.as_mut_ptr(),
            headers.len(),
            Buffer::of(self.body),
            self.timeout_ms,
        );
        (result == CALLOUT_INIT_SUCCESS).then_some(id)
    }
}

/// A callout's answer as Envoy handed it to a `…_http_callout_done` hook:
/// `:status` (None: reset, or the answer was too large) and the body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    pub status: Option<String>,
    pub body: Vec<u8>,
}

impl Answer {
    /// Copies the answer out of what Envoy lent the hook.
    ///
    /// # Safety
    /// `headers` and `body` are null or point at `headers_len` headers and
    /// `body_len` buffers, valid for the hook.
    pub unsafe fn read(
        result: u32,
        headers: *const Header,
        headers_len: usize,
        body: *const Buffer,
        body_len: usize,
    ) -> Answer {
        if result != CALLOUT_SUCCESS {
            return Answer::default();
        }
        let headers = if headers.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(headers, headers_len)
        };
        let status = headers
            .iter()
            .find(|h| h.key.bytes() == b":status")
            .and_then(|h| std::str::from_utf8(h.value.bytes()).ok())
            .map(str::to_string);
        let mut bytes = Vec::new();
        if !body.is_null() {
            for chunk in std::slice::from_raw_parts(body, body_len) {
                bytes.extend_from_slice(chunk.bytes());
            }
        }
        Answer {
            status,
            body: bytes,
        }
    }
}

/// A scheduler Envoy made for the module (a stream's, or a configuration's
/// on the main thread); the module deletes it once.
#[derive(Debug)]
pub struct Scheduler {
    ptr: *mut c_void,
    /// A configuration's (`…_config_scheduler_*`), not a stream's.
    config: bool,
}

impl Scheduler {
    /// Runs the scheduler's hook with `event` one event-loop turn later
    /// (Envoy posts it to the dispatcher, which any thread may do).
    pub fn commit(&self, event: u64) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: a scheduler Envoy made and the module has not deleted.
        unsafe {
            if self.config {
                sys::envoy_dynamic_module_callback_http_filter_config_scheduler_commit(
                    self.ptr, event,
                )
            } else {
                sys::envoy_dynamic_module_callback_http_filter_scheduler_commit(self.ptr, event)
            }
        }
    }

    pub fn delete(self) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: deleted once: `self` is consumed.
        unsafe {
            if self.config {
                sys::envoy_dynamic_module_callback_http_filter_config_scheduler_delete(self.ptr)
            } else {
                sys::envoy_dynamic_module_callback_http_filter_scheduler_delete(self.ptr)
            }
        }
    }
}

/// A stream's scheduler shared with the module's own threads (the direct
/// store connection, [`crate::direct`]): committed from any thread, deleted
/// once, when its last holder lets it go. An event committed after the
/// stream is gone is dropped by Envoy (the scheduler holds the filter weakly).
#[derive(Debug)]
pub struct SharedScheduler(Scheduler);

// SAFETY: Envoy's scheduler posts a commit to the worker's dispatcher, which
// any thread may do; the module deletes it once (`Drop`), after every commit
// made through it (each holder commits through its own `Arc`).
unsafe impl Send for SharedScheduler {}
// SAFETY: as above: `commit` takes `&self` and is thread-safe on Envoy's side.
unsafe impl Sync for SharedScheduler {}

impl SharedScheduler {
    pub fn new(scheduler: Scheduler) -> SharedScheduler {
        SharedScheduler(scheduler)
    }

    pub fn commit(&self, event: u64) {
        self.0.commit(event);
    }
}

impl Drop for SharedScheduler {
    fn drop(&mut self) {
        let null = Scheduler {
            ptr: std::ptr::null_mut(),
            config: false,
        };
        std::mem::replace(&mut self.0, null).delete();
    }
}

/// A configuration's scheduler: its events run on Envoy's main thread
/// (`on_http_filter_config_scheduled`), committed from any thread.
#[derive(Debug)]
pub struct ConfigScheduler(Scheduler);

// SAFETY: committing posts to Envoy's main dispatcher, which is thread-safe;
// the module deletes it once, after the last commit (see `crate::node`).
unsafe impl Send for ConfigScheduler {}

impl ConfigScheduler {
    pub fn commit(&self, event: u64) {
        self.0.commit(event);
    }

    pub fn delete(self) {
        self.0.delete();
    }
}

/// `envoy_dynamic_module_type_metrics_result_Success`.
const METRICS_SUCCESS: u32 = 0;

/// A filter configuration on Envoy's side (`filter_config_envoy_ptr`),
/// alive as long as the module's configuration made from it: stats are
/// defined on it (on Envoy's main thread) and written through it from any
/// worker (Envoy's stats are atomic).
#[derive(Clone, Copy, Debug)]
pub struct EnvoyConfig(pub(crate) *mut c_void);

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

    /// Sends an HTTP callout from the configuration (on Envoy's main
    /// thread, answered there by `on_http_filter_config_http_callout_done`).
    /// Its id, or None when Envoy refused it at once.
    pub fn callout(self, call: &Call<'_>) -> Option<u64> {
        call.send(|id, cluster, headers, len, body, timeout| {
            // SAFETY: `Call::send` passes buffers and headers that live for the call.
            unsafe {
                sys::envoy_dynamic_module_callback_http_filter_config_http_callout(
                    self.0, id, cluster, headers, len, body, timeout,
                )
            }
        })
    }

    /// A scheduler whose events run on Envoy's main thread.
    pub fn scheduler(self) -> ConfigScheduler {
        // SAFETY: a plain call on the live configuration.
        let ptr =
            unsafe { sys::envoy_dynamic_module_callback_http_filter_config_scheduler_new(self.0) };
        ConfigScheduler(Scheduler { ptr, config: true })
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
