//! A fake Envoy for the ABI layer's unit tests: the callbacks the module
//! calls, over one in-memory HTTP stream per test thread. It records what
//! the module did (local replies, headers set, continues, filter state,
//! logs) and can be told to panic inside a callback. Each function keeps
//! the contract of the Envoy callback it stands for (abi.h).
#![allow(clippy::missing_safety_doc)]

use super::{Buffer, Header, RECEIVED_REQUEST_BODY, REQUEST_HEADER};
use std::cell::RefCell;
use std::ffi::c_void;

/// A local reply: (status, headers, body).
pub type Sent = (u32, Vec<(String, String)>, Vec<u8>);

#[derive(Default)]
pub struct Fake {
    pub request: Vec<(String, String)>,
    pub response: Vec<(String, String)>,
    pub buffered: Vec<u8>,
    pub received: Vec<u8>,
    /// Local replies: (status, headers, body).
    pub sent: Vec<Sent>,
    pub continued: u32,
    /// The filters continued, in order.
    pub continued_on: Vec<usize>,
    pub filter_state: Vec<(String, Vec<u8>)>,
    pub logs: Vec<(u32, String)>,
    /// The next header read panics.
    pub panic_on_headers: bool,
    /// Stats defined: (kind 0 counter / 1 gauge / 2 histogram, name, value
    /// now: a counter's sum, a gauge's or histogram's last value).
    pub stats: Vec<(u8, String, u64)>,
    /// Callouts sent from a stream, in order.
    pub callouts: Vec<Callout>,
    /// Callouts sent from the configuration (Envoy's main thread).
    pub config_callouts: Vec<Callout>,
    /// Envoy refuses the next callouts at once (no such cluster).
    pub refuse_callouts: bool,
    /// Events committed on a stream's scheduler, and on a configuration's.
    pub commits: Vec<u64>,
    pub config_commits: Vec<u64>,
    /// Schedulers made and deleted.
    pub schedulers_made: u32,
    pub schedulers_deleted: u32,
    /// Every callback the module made into the fake, by name (without
    /// `envoy_dynamic_module_callback_`), in order.
    pub calls: Vec<&'static str>,
}

/// A callout as the module sent it.
#[derive(Clone, Debug)]
pub struct Callout {
    pub id: u64,
    pub cluster: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub timeout_ms: u64,
}

impl Callout {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Fake {
    /// A stat's value by name (None: never defined).
    pub fn stat(&self, name: &str) -> Option<u64> {
        self.stats.iter().find(|s| s.1 == name).map(|s| s.2)
    }
}

thread_local! {
    pub static FAKE: RefCell<Fake> = RefCell::new(Fake::default());
}

/// Runs `f` on this thread's fake Envoy.
pub fn with<R>(f: impl FnOnce(&mut Fake) -> R) -> R {
    FAKE.with(|fake| f(&mut fake.borrow_mut()))
}

/// The host calls of a node hook forwarded on its headers (a bench-edge
/// hook: headers, a body, the upstream's answer), in order: what the
/// module's hook makes and what the host-call floor ((K), `floor.rs`) makes
/// in its place.
pub const NODE_HOOK_CALLS: [&str; 10] = [
    "http_get_headers_size",
    "http_get_headers",
    "http_set_filter_state_bytes",
    "http_add_header",
    "http_add_header",
    "http_add_header",
    "http_add_header",
    "http_filter_config_increment_counter",
    "http_set_header",
    "http_set_header",
];

/// Notes a callback the module made.
fn called(name: &'static str) {
    with(|f| f.calls.push(name));
}

fn text(b: Buffer) -> String {
    // SAFETY: the module passes buffers that live for the call.
    String::from_utf8_lossy(unsafe { b.bytes() }).into_owned()
}

pub unsafe fn envoy_dynamic_module_callback_log(level: u32, message: Buffer) {
    called("log");
    let message = text(message);
    with(|f| f.logs.push((level, message)));
}

fn map(f: &mut Fake, kind: u32) -> &mut Vec<(String, String)> {
    if kind == REQUEST_HEADER {
        &mut f.request
    } else {
        &mut f.response
    }
}

pub unsafe fn envoy_dynamic_module_callback_http_get_headers_size(
    _filter: *mut c_void,
    kind: u32,
) -> usize {
    called("http_get_headers_size");
    let panic = with(|f| std::mem::take(&mut f.panic_on_headers));
    if panic {
        panic!("the fake envoy panics on reading headers");
    }
    with(|f| map(f, kind).len())
}

pub unsafe fn envoy_dynamic_module_callback_http_get_headers(
    _filter: *mut c_void,
    kind: u32,
    out: *mut Header,
) -> bool {
    called("http_get_headers");
    FAKE.with(|fake| {
        let mut fake = fake.borrow_mut();
        for (i, (k, v)) in map(&mut fake, kind).iter().enumerate() {
            *out.add(i) = Header {
                key: Buffer::of(k.as_bytes()),
                value: Buffer::of(v.as_bytes()),
            };
        }
    });
    true
}

fn set(kind: u32, key: Buffer, value: Buffer, replace: bool) -> bool {
    let (key, remove) = (text(key), value.ptr.is_null());
    let value = text(value);
    with(|f| {
        let headers = map(f, kind);
        if replace || remove {
            headers.retain(|(k, _)| *k != key);
        }
        if !remove {
            headers.push((key, value));
        }
    });
    true
}

pub unsafe fn envoy_dynamic_module_callback_http_set_header(
    _filter: *mut c_void,
    kind: u32,
    key: Buffer,
    value: Buffer,
) -> bool {
    called("http_set_header");
    set(kind, key, value, true)
}

pub unsafe fn envoy_dynamic_module_callback_http_add_header(
    _filter: *mut c_void,
    kind: u32,
    key: Buffer,
    value: Buffer,
) -> bool {
    called("http_add_header");
    set(kind, key, value, false)
}

pub unsafe fn envoy_dynamic_module_callback_http_send_response(
    _filter: *mut c_void,
    status: u32,
    headers: *mut Header,
    headers_len: usize,
    body: Buffer,
    _details: Buffer,
) {
    called("http_send_response");
    let headers = std::slice::from_raw_parts(headers, headers_len)
        .iter()
        .map(|h| (text(h.key), text(h.value)))
        .collect();
    let body = body.bytes().to_vec();
    with(|f| f.sent.push((status, headers, body)));
}

fn body_of(f: &Fake, kind: u32) -> &[u8] {
    if kind == RECEIVED_REQUEST_BODY {
        &f.received
    } else {
        &f.buffered
    }
}

pub unsafe fn envoy_dynamic_module_callback_http_get_body_chunks_size(
    _filter: *mut c_void,
    kind: u32,
) -> usize {
    called("http_get_body_chunks_size");
    with(|f| usize::from(!body_of(f, kind).is_empty()))
}

pub unsafe fn envoy_dynamic_module_callback_http_get_body_chunks(
    _filter: *mut c_void,
    kind: u32,
    out: *mut Buffer,
) -> bool {
    called("http_get_body_chunks");
    FAKE.with(|fake| {
        let fake = fake.borrow();
        *out = Buffer::of(body_of(&fake, kind));
    });
    true
}

pub unsafe fn envoy_dynamic_module_callback_http_received_buffered_request_body(
    _filter: *mut c_void,
) -> bool {
    called("http_received_buffered_request_body");
    false
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_continue_decoding(filter: *mut c_void) {
    called("http_filter_continue_decoding");
    with(|f| {
        f.continued += 1;
        f.continued_on.push(filter as usize);
    });
}

pub unsafe fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
    _filter: *mut c_void,
    key: Buffer,
    value: Buffer,
) -> bool {
    called("http_set_filter_state_bytes");
    let (key, value) = (text(key), value.bytes().to_vec());
    with(|f| f.filter_state.push((key, value)));
    true
}

fn define(kind: u8, name: Buffer, id: *mut usize) -> u32 {
    let name = text(name);
    let n = with(|f| {
        f.stats.push((kind, name, 0));
        f.stats.len() - 1
    });
    // SAFETY: the module passes a writable id.
    unsafe { *id = n };
    0
}

fn write(id: usize, value: u64, add: bool) -> u32 {
    with(|f| match f.stats.get_mut(id) {
        Some(stat) => {
            stat.2 = if add { stat.2 + value } else { value };
            0
        }
        None => 1,
    })
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_config_define_counter(
    _config: *mut c_void,
    name: Buffer,
    _labels: *mut Buffer,
    _labels_len: usize,
    id: *mut usize,
) -> u32 {
    called("http_filter_config_define_counter");
    define(0, name, id)
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_config_define_gauge(
    _config: *mut c_void,
    name: Buffer,
    _labels: *mut Buffer,
    _labels_len: usize,
    id: *mut usize,
) -> u32 {
    called("http_filter_config_define_gauge");
    define(1, name, id)
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_config_define_histogram(
    _config: *mut c_void,
    name: Buffer,
    _labels: *mut Buffer,
    _labels_len: usize,
    id: *mut usize,
) -> u32 {
    called("http_filter_config_define_histogram");
    define(2, name, id)
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_config_increment_counter(
    _config: *mut c_void,
    id: usize,
    _labels: *mut Buffer,
    _labels_len: usize,
    value: u64,
) -> u32 {
    called("http_filter_config_increment_counter");
    write(id, value, true)
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_config_set_gauge(
    _config: *mut c_void,
    id: usize,
    _labels: *mut Buffer,
    _labels_len: usize,
    value: u64,
) -> u32 {
    called("http_filter_config_set_gauge");
    write(id, value, false)
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_config_record_histogram_value(
    _config: *mut c_void,
    id: usize,
    _labels: *mut Buffer,
    _labels_len: usize,
    value: u64,
) -> u32 {
    called("http_filter_config_record_histogram_value");
    write(id, value, false)
}

/// Callout ids, unique per test thread (Envoy's are per stream or configuration).
fn next_id() -> u64 {
    with(|f| (f.callouts.len() + f.config_callouts.len()) as u64 + 1)
}

unsafe fn callout(
    config: bool,
    id: *mut u64,
    cluster: Buffer,
    headers: *mut Header,
    headers_len: usize,
    body: Buffer,
    timeout_ms: u64,
) -> u32 {
    if with(|f| f.refuse_callouts) {
        return 2; // ClusterNotFound
    }
    let headers = std::slice::from_raw_parts(headers, headers_len)
        .iter()
        .map(|h| (text(h.key), text(h.value)))
        .collect();
    let n = next_id();
    let sent = Callout {
        id: n,
        cluster: text(cluster),
        headers,
        body: body.bytes().to_vec(),
        timeout_ms,
    };
    with(|f| {
        if config {
            f.config_callouts.push(sent)
        } else {
            f.callouts.push(sent)
        }
    });
    *id = n;
    0
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_http_callout(
    _filter: *mut c_void,
    id: *mut u64,
    cluster: Buffer,
    headers: *mut Header,
    headers_len: usize,
    body: Buffer,
    timeout_ms: u64,
) -> u32 {
    called("http_filter_http_callout");
    callout(false, id, cluster, headers, headers_len, body, timeout_ms)
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_config_http_callout(
    _config: *mut c_void,
    id: *mut u64,
    cluster: Buffer,
    headers: *mut Header,
    headers_len: usize,
    body: Buffer,
    timeout_ms: u64,
) -> u32 {
    called("http_filter_config_http_callout");
    callout(true, id, cluster, headers, headers_len, body, timeout_ms)
}

/// Stands for a scheduler Envoy made.
const SCHEDULER: *mut c_void = 16 as *mut c_void;

pub unsafe fn envoy_dynamic_module_callback_http_filter_scheduler_new(
    _filter: *mut c_void,
) -> *mut c_void {
    called("http_filter_scheduler_new");
    with(|f| f.schedulers_made += 1);
    SCHEDULER
}

/// Events committed on a stream's scheduler from any thread (the direct
/// store connection's threads commit from their own), in order.
pub static COMMITS_ANY_THREAD: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());

pub unsafe fn envoy_dynamic_module_callback_http_filter_scheduler_commit(
    _scheduler: *mut c_void,
    event: u64,
) {
    called("http_filter_scheduler_commit");
    with(|f| f.commits.push(event));
    COMMITS_ANY_THREAD
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(event);
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_scheduler_delete(_scheduler: *mut c_void) {
    called("http_filter_scheduler_delete");
    with(|f| f.schedulers_deleted += 1);
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_config_scheduler_new(
    _config: *mut c_void,
) -> *mut c_void {
    called("http_filter_config_scheduler_new");
    with(|f| f.schedulers_made += 1);
    SCHEDULER
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_config_scheduler_commit(
    _scheduler: *mut c_void,
    event: u64,
) {
    called("http_filter_config_scheduler_commit");
    // The background ticker commits from its own thread: this thread's fake
    // doesn't see those (the tests run the tick themselves).
    with(|f| f.config_commits.push(event));
}

pub unsafe fn envoy_dynamic_module_callback_http_filter_config_scheduler_delete(
    _scheduler: *mut c_void,
) {
    called("http_filter_config_scheduler_delete");
    with(|f| f.schedulers_deleted += 1);
}
