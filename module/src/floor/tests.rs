//! The native floors over the fake Envoy (`cargo test -p ankusa-module
//! --features floor`): each configuration selects its floor, and the
//! host-call floor makes a node hook's host calls, no more and no fewer.

use super::*;
use crate::abi::fake::{self, Fake, NODE_HOOK_CALLS};

const ENVOY: *mut c_void = 8 as *mut c_void;

#[test]
fn each_configuration_selects_its_floor() {
    assert_eq!(mode(b""), Mode::Noop);
    assert_eq!(mode(b"\"node host calls\""), Mode::NodeCalls);
    assert_eq!(mode(b"node host calls"), Mode::NodeCalls);
    assert_eq!(
        mode(b"\"ankusa_store /healthz\""),
        Mode::Callout("ankusa_store".into(), "/healthz".into())
    );
}

#[test]
fn the_host_call_floor_makes_a_node_hooks_host_calls_and_counts_the_request() {
    let config = envoy_dynamic_module_on_http_filter_config_new(
        std::ptr::null_mut(),
        Buffer::of(b"floor"),
        Buffer::of(b"\"node host calls\""),
    );
    assert!(!config.is_null());
    fake::with(|f| {
        let stats = std::mem::take(&mut f.stats);
        *f = Fake {
            stats,
            request: vec![(":path".into(), "/webhooks/gh".into())],
            ..Fake::default()
        };
    });
    let filter = envoy_dynamic_module_on_http_filter_new(config, ENVOY);
    let headers = envoy_dynamic_module_on_http_filter_request_headers(ENVOY, filter, false);
    let body = envoy_dynamic_module_on_http_filter_request_body(ENVOY, filter, true);
    envoy_dynamic_module_on_http_filter_response_headers(ENVOY, filter, false);
    envoy_dynamic_module_on_http_filter_stream_complete(ENVOY, filter);
    envoy_dynamic_module_on_http_filter_destroy(filter);
    assert_eq!((headers, body), (CONTINUE, CONTINUE));
    let fake = fake::with(std::mem::take);
    assert_eq!(fake.calls, NODE_HOOK_CALLS);
    assert_eq!(fake.stat("bench_noop_requests_total"), Some(1));
    assert!(fake.request.iter().any(|(k, _)| k == "x-ankusa-hook-id"));
    assert!(fake.response.iter().any(|(k, _)| k == "ratelimit-policy"));
    assert_eq!(fake.filter_state[0].0, "wasm.ankusa");
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}
