//! The exported hooks over the fake Envoy: configuration through the core's
//! parser, a whole hook's life, local replies, the published decision, and a
//! panic caught at the boundary and failed closed.

use super::*;
use crate::abi::fake::{self, Fake};
use crate::init::envoy_dynamic_module_on_program_init;
use std::ffi::CStr;

const NODE: &str = r#"{"node":"edge-1",
    "sources":{"gh":{"tenant":"acme","dedupe":"github"}},
    "rate_limits":{"default":{"rate":1,"burst":1}}}"#;

/// Stands for Envoy's filter pointer: the fake ignores it.
pub(super) const ENVOY: *mut c_void = 8 as *mut c_void;

pub(super) fn config(json: &str) -> *const c_void {
    envoy_dynamic_module_on_http_filter_config_new(
        std::ptr::null_mut(),
        Buffer::of(b"ankusa"),
        Buffer::of(json.as_bytes()),
    )
}

pub(super) fn reset(request: &[(&str, &str)]) {
    fake::with(|f| {
        // The stats defined with the configuration stay.
        let stats = std::mem::take(&mut f.stats);
        *f = Fake {
            stats,
            ..Fake::default()
        };
        f.request = request
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    });
}

pub(super) fn post(delivery: &str) -> Vec<(&'static str, String)> {
    vec![
        (":path", "/webhooks/gh".into()),
        (":method", "POST".into()),
        ("content-length", "0".into()),
        ("x-github-delivery", delivery.into()),
    ]
}

pub(super) fn as_refs<'a>(pairs: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    pairs.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

pub(super) fn decision() -> String {
    fake::with(|f| {
        let (key, value) = f.filter_state.last().cloned().unwrap_or_default();
        assert_eq!(key, "wasm.ankusa");
        String::from_utf8(value).unwrap()
    })
}

#[test]
fn program_init_returns_the_abi_version_as_a_c_string() {
    let version = envoy_dynamic_module_on_program_init();
    // SAFETY: a static NUL-terminated string.
    let version = unsafe { CStr::from_ptr(version.cast()) };
    assert_eq!(version.to_str().unwrap(), "v0.2.0");
}

#[test]
fn a_bad_configuration_is_refused_with_the_field_named() {
    reset(&[]);
    let refused = config(r#"{"sources":{"gh":{"tenant":"acme","dedupe":"nope"}}}"#);
    assert!(refused.is_null());
    let logs = fake::with(|f| f.logs.clone());
    assert!(
        logs.iter().any(|(level, line)| *level == LOG_ERROR
            && line.contains("configuration refused")
            && line.contains("dedupe")),
        "{logs:?}"
    );
}

#[test]
fn node_hooks_are_admitted_then_rate_limited_with_the_decision_published() {
    let config = config(NODE);
    assert!(!config.is_null());

    let first = post("d-1");
    reset(&as_refs(&first));
    let filter = envoy_dynamic_module_on_http_filter_new(config, ENVOY);
    let status = envoy_dynamic_module_on_http_filter_request_headers(ENVOY, filter, true);
    assert_eq!(
        status,
        HEADERS_CONTINUE,
        "{:?}",
        fake::with(|f| f.sent.clone())
    );
    assert!(decision().starts_with("outcome=admitted"), "{}", decision());
    // The hook id reaches the upstream; the sender's x-ankusa-* don't.
    let request = fake::with(|f| f.request.clone());
    assert!(
        request.iter().any(|(k, _)| k == "x-ankusa-hook-id"),
        "{request:?}"
    );
    envoy_dynamic_module_on_http_filter_stream_complete(ENVOY, filter);
    envoy_dynamic_module_on_http_filter_destroy(filter);

    // A burst of 1: the next hook is refused 429 with Retry-After, locally.
    let second = post("d-2");
    reset(&as_refs(&second));
    let filter = envoy_dynamic_module_on_http_filter_new(config, ENVOY);
    let status = envoy_dynamic_module_on_http_filter_request_headers(ENVOY, filter, true);
    assert_eq!(status, HEADERS_STOP);
    let sent = fake::with(|f| f.sent.clone());
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, 429);
    assert!(
        sent[0].1.iter().any(|(k, _)| k == "retry-after"),
        "{sent:?}"
    );
    assert!(
        decision().starts_with("outcome=rate_limited"),
        "{}",
        decision()
    );
    assert_eq!(fake::with(|f| f.continued), 0);
    envoy_dynamic_module_on_http_filter_stream_complete(ENVOY, filter);
    envoy_dynamic_module_on_http_filter_destroy(filter);
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}

#[test]
fn a_get_is_answered_405_and_never_forwarded() {
    let config = config(NODE);
    reset(&[(":path", "/webhooks/gh"), (":method", "GET")]);
    let filter = envoy_dynamic_module_on_http_filter_new(config, ENVOY);
    let status = envoy_dynamic_module_on_http_filter_request_headers(ENVOY, filter, true);
    assert_eq!(status, HEADERS_STOP);
    assert_eq!(
        fake::with(|f| f.sent.iter().map(|s| s.0).collect::<Vec<_>>()),
        [405]
    );
    envoy_dynamic_module_on_http_filter_destroy(filter);
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}

#[test]
fn a_panic_in_a_hook_is_caught_and_fails_the_request_closed() {
    let config = config(NODE);
    let request = post("d-panic");
    reset(&as_refs(&request));
    fake::with(|f| f.panic_on_headers = true);
    let filter = envoy_dynamic_module_on_http_filter_new(config, ENVOY);
    let status = envoy_dynamic_module_on_http_filter_request_headers(ENVOY, filter, false);
    assert_eq!(status, HEADERS_STOP, "the request is held, not forwarded");
    let sent = fake::with(|f| f.sent.clone());
    assert_eq!(
        sent.iter().map(|s| s.0).collect::<Vec<_>>(),
        [500],
        "{sent:?}"
    );
    let logs = fake::with(|f| f.logs.clone());
    assert!(
        logs.iter()
            .any(|(level, line)| *level == LOG_ERROR && line.contains("panic in request_headers")),
        "{logs:?}"
    );
    // The rest of the stream does nothing more and never lets it through.
    fake::with(|f| f.received = b"{}".to_vec());
    let body = envoy_dynamic_module_on_http_filter_request_body(ENVOY, filter, true);
    assert_eq!(body, BODY_STOP_AND_BUFFER);
    assert_eq!(fake::with(|f| (f.sent.len(), f.continued)), (1, 0));
    envoy_dynamic_module_on_http_filter_stream_complete(ENVOY, filter);
    envoy_dynamic_module_on_http_filter_destroy(filter);
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}

#[test]
fn a_body_arriving_in_chunks_is_read_whole_buffered_and_received() {
    let config = config(
        // A tenant of its own: the node's buckets are process-wide, shared
        // with the other tests' hooks.
        r#"{"sources":{"stripe":{"tenant":"chunked","dedupe":{"json":"id"}}},
            "rate_limits":{"default":{"rate":100,"burst":100}}}"#,
    );
    assert!(!config.is_null());
    reset(&[
        (":path", "/webhooks/stripe"),
        (":method", "POST"),
        ("content-type", "application/json"),
    ]);
    let filter = envoy_dynamic_module_on_http_filter_new(config, ENVOY);
    // The event key is in the body: the headers wait for it.
    let status = envoy_dynamic_module_on_http_filter_request_headers(ENVOY, filter, false);
    assert_eq!(status, HEADERS_STOP);
    fake::with(|f| f.received = br#"{"id":"evt_"#.to_vec());
    let first = envoy_dynamic_module_on_http_filter_request_body(ENVOY, filter, false);
    assert_eq!(first, BODY_STOP_AND_BUFFER, "held until the body is all in");
    // Envoy buffered the first chunk; the last one arrives.
    fake::with(|f| {
        f.buffered = std::mem::take(&mut f.received);
        f.received = br#"1"}"#.to_vec();
    });
    let last = envoy_dynamic_module_on_http_filter_request_body(ENVOY, filter, true);
    assert_eq!(last, BODY_CONTINUE, "{:?}", fake::with(|f| f.sent.clone()));
    let decision = decision();
    assert!(
        decision.starts_with("outcome=admitted") && decision.contains("key=evt_1"),
        "{decision}"
    );
    envoy_dynamic_module_on_http_filter_stream_complete(ENVOY, filter);
    envoy_dynamic_module_on_http_filter_destroy(filter);
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}

/// A node hook as bench-edge's (N) sends it: its host calls, in order.
fn node_hook_calls() -> Vec<&'static str> {
    let config = config(
        r#"{"sources":{"gh":{"tenant":"counted","dedupe":"github"}},
            "rate_limits":{"scope":"node","default":{"rate":1000000,"burst":1000000}},
            "dedupe":{"scope":"node"}}"#,
    );
    assert!(!config.is_null());
    reset(&[
        (":authority", "edge"),
        (":path", "/webhooks/gh"),
        (":method", "POST"),
        ("content-type", "application/json"),
        ("content-length", "40"),
        ("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        ("x-intake-status", "201"),
    ]);
    let filter = envoy_dynamic_module_on_http_filter_new(config, ENVOY);
    let headers = envoy_dynamic_module_on_http_filter_request_headers(ENVOY, filter, false);
    fake::with(|f| f.received = br#"{"zen":"Design for failure.","n":100000}"#.to_vec());
    let body = envoy_dynamic_module_on_http_filter_request_body(ENVOY, filter, true);
    assert_eq!((headers, body), (HEADERS_CONTINUE, BODY_CONTINUE));
    fake::with(|f| f.response = vec![(":status".into(), "201".into())]);
    envoy_dynamic_module_on_http_filter_response_headers(ENVOY, filter, false);
    envoy_dynamic_module_on_http_filter_stream_complete(ENVOY, filter);
    envoy_dynamic_module_on_http_filter_destroy(filter);
    assert!(decision().starts_with("outcome=admitted"), "{}", decision());
    let calls = fake::with(|f| f.calls.clone());
    envoy_dynamic_module_on_http_filter_config_destroy(config);
    calls
}

/// The body of a hook decided on its headers is never read, nor its length
/// asked for: a node hook makes the host-call floor's calls and no others.
#[test]
fn a_node_hook_makes_only_the_host_calls_it_needs() {
    assert_eq!(node_hook_calls(), fake::NODE_HOOK_CALLS);
}
