//! Store calls through the exported hooks over the fake Envoy: a hook's hit
//! call as a stream's callout (answered, reset, timed out, refused), the
//! worker's batched call woken through a stream's scheduler, and the node's
//! settle batch from the configuration's tick on the main thread.

use super::tests::{as_refs, config, decision, post, reset};
use super::*;
use crate::abi::fake::{self, Callout};
use crate::abi::CALLOUT_SUCCESS;
use crate::node::TICK_EVENT;
use crate::root::WAKE_QUEUE;
use std::sync::Mutex;

/// The node's breaker and settle queue are process-wide: these tests run one at a time.
pub(super) static SERIAL: Mutex<()> = Mutex::new(());

/// Rate limits in the store, for a tenant of these tests' own.
const FLEET_RATE: &str = r#"{"node":"edge-1",
    "fleet":{"timeout_ms":40},
    "sources":{"gh":{"tenant":"callouts","dedupe":"github"}},
    "rate_limits":{"scope":"fleet","default":{"rate":100,"burst":100}}}"#;

const RESET: u32 = 1;
pub(super) const OK: &str = r#"{"result":"ok"}"#;

/// Stands for the filter pointer of stream `n`.
pub(super) fn envoy(n: usize) -> *mut c_void {
    (0x100 * n) as *mut c_void
}

fn callouts() -> Vec<Callout> {
    fake::with(|f| f.callouts.clone())
}

/// Envoy hands stream `n`'s filter the answer to callout `id`.
fn answer(n: usize, filter: *const c_void, id: u64, result: u32, status: &str, body: &str) {
    let mut headers = [Header {
        key: Buffer::of(b":status"),
        value: Buffer::of(status.as_bytes()),
    }];
    let mut chunks = [Buffer::of(body.as_bytes())];
    envoy_dynamic_module_on_http_filter_http_callout_done(
        envoy(n),
        filter,
        id,
        result,
        headers.as_mut_ptr(),
        headers.len(),
        chunks.as_mut_ptr(),
        chunks.len(),
    );
}

pub(super) fn fallbacks() -> u64 {
    fake::with(|f| f.stat("ankusa_fleet_fallback_total").unwrap_or(0))
}

/// A hook arrives on stream `n`: its filter and the headers hook's status.
pub(super) fn arrive(config: *const c_void, n: usize, delivery: &str) -> (*const c_void, u32) {
    let request = post(delivery);
    fake::with(|f| {
        f.request = as_refs(&request)
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    });
    let filter = envoy_dynamic_module_on_http_filter_new(config, envoy(n));
    let status = envoy_dynamic_module_on_http_filter_request_headers(envoy(n), filter, true);
    (filter, status)
}

pub(super) fn end(n: usize, filter: *const c_void) {
    envoy_dynamic_module_on_http_filter_stream_complete(envoy(n), filter);
    envoy_dynamic_module_on_http_filter_destroy(filter);
}

#[test]
fn a_fleet_hook_calls_the_store_with_its_budget_and_goes_on_when_it_admits() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    reset(&[]);
    let config = config(FLEET_RATE);
    assert!(!config.is_null(), "{:?}", fake::with(|f| f.logs.clone()));
    let (filter, status) = arrive(config, 1, "c-1");
    assert_eq!(status, HEADERS_STOP, "held for the store's answer");
    let sent = callouts();
    assert_eq!(sent.len(), 1, "{sent:?}");
    let call = &sent[0];
    assert_eq!(call.cluster, "ankusa_store");
    assert_eq!(call.header(":method"), Some("POST"));
    assert_eq!(call.header(":path"), Some("/v1/hit"));
    assert_eq!(call.header("x-ankusa-budget-ms"), Some("40"));
    assert_eq!(call.timeout_ms, 40, "Envoy's timeout is the budget");
    let body: serde_json::Value = serde_json::from_slice(&call.body).unwrap();
    assert_eq!(body["charges"].as_array().map(Vec::len), Some(1));
    assert_eq!(fake::with(|f| f.continued), 0);

    answer(1, filter, call.id, CALLOUT_SUCCESS, "200", OK);
    assert_eq!(fake::with(|f| f.continued_on.clone()), [envoy(1) as usize]);
    let line = decision();
    assert!(
        line.starts_with("outcome=admitted") && line.contains("decided=store"),
        "{line}"
    );
    end(1, filter);
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}

#[test]
fn a_reset_a_timeout_and_a_refused_callout_fall_back_to_the_node() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    reset(&[]);
    let config = config(FLEET_RATE);
    let before = fallbacks();

    // Reset: no status, no body.
    let (filter, _) = arrive(config, 1, "c-reset");
    let id = callouts()[0].id;
    answer(1, filter, id, RESET, "", "");
    assert_eq!(fake::with(|f| f.continued), 1, "let through from the node");
    assert!(decision().contains("decided=fallback"), "{}", decision());
    end(1, filter);

    // Past its budget Envoy answers the callout itself: a 504.
    let (filter, _) = arrive(config, 2, "c-timeout");
    let id = callouts().last().map(|c| c.id).unwrap_or_default();
    answer(
        2,
        filter,
        id,
        CALLOUT_SUCCESS,
        "504",
        "upstream request timeout",
    );
    assert_eq!(fake::with(|f| f.continued), 2);
    assert!(decision().contains("decided=fallback"), "{}", decision());
    end(2, filter);

    // No such cluster: Envoy refuses the callout at once.
    fake::with(|f| f.refuse_callouts = true);
    let (filter, status) = arrive(config, 3, "c-refused");
    assert_eq!(status, HEADERS_CONTINUE, "answered from the node at once");
    assert!(decision().contains("decided=fallback"), "{}", decision());
    end(3, filter);
    fake::with(|f| f.refuse_callouts = false);

    assert_eq!(fallbacks() - before, 3);
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}

#[test]
fn hooks_behind_a_call_in_flight_leave_as_one_batch_woken_through_a_scheduler() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    reset(&[]);
    let config = config(FLEET_RATE);
    let (first, _) = arrive(config, 1, "b-1");
    let (second, status) = arrive(config, 2, "b-2");
    assert_eq!(status, HEADERS_STOP);
    let (third, _) = arrive(config, 3, "b-3");
    assert_eq!(callouts().len(), 1, "hooks behind a call in flight wait");

    // The first call's answer wakes the worker's batching one turn later.
    let id = callouts()[0].id;
    answer(1, first, id, CALLOUT_SUCCESS, "200", OK);
    assert_eq!(fake::with(|f| f.commits.clone()), [u64::from(WAKE_QUEUE)]);
    assert_eq!(callouts().len(), 1, "nothing leaves within the answer");

    // Envoy runs the wake on the stream that committed it.
    envoy_dynamic_module_on_http_filter_scheduled(envoy(1), first, u64::from(WAKE_QUEUE));
    let sent = callouts();
    assert_eq!(sent.len(), 2, "{sent:?}");
    let batch = &sent[1];
    assert_eq!(batch.header(":path"), Some("/v1/hits"));
    let body: serde_json::Value = serde_json::from_slice(&batch.body).unwrap();
    assert_eq!(body["hits"].as_array().map(Vec::len), Some(2), "{body}");

    // Sent from the first waiting hook's stream, answered there to both.
    let results = r#"{"results":[{"result":"ok"},{"result":"ok"}]}"#;
    answer(2, second, batch.id, CALLOUT_SUCCESS, "200", results);
    let continued = fake::with(|f| f.continued_on.clone());
    assert_eq!(
        continued,
        [envoy(1) as usize, envoy(2) as usize, envoy(3) as usize],
        "each hook let through on its own stream"
    );
    end(1, first);
    end(2, second);
    end(3, third);
    assert_eq!(
        fake::with(|f| f.schedulers_deleted),
        1,
        "the scheduler goes with its stream"
    );
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}

#[test]
fn a_batch_whose_carrying_stream_ends_is_answered_to_the_others_as_reset() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    reset(&[]);
    let config = config(FLEET_RATE);
    let (first, _) = arrive(config, 1, "e-1");
    let (second, _) = arrive(config, 2, "e-2");
    let (third, _) = arrive(config, 3, "e-3");
    answer(1, first, callouts()[0].id, CALLOUT_SUCCESS, "200", OK);
    // Its stream ends before the wake runs: the wake runs as it ends.
    end(1, first);
    assert_eq!(callouts().len(), 2, "the batch left as the waker ended");
    // The carrier (the second hook's stream) goes away: Envoy cancels its
    // callout, and the third hook is answered from the node.
    end(2, second);
    assert_eq!(
        fake::with(|f| f.continued_on.clone()),
        [envoy(1) as usize, envoy(3) as usize]
    );
    assert!(decision().contains("decided=fallback"), "{}", decision());
    end(3, third);
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}

#[test]
fn the_nodes_tick_sends_queued_settles_from_the_main_thread() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    reset(&[]);
    let config = config(
        r#"{"node":"edge-1","fleet":{"settle_interval_ms":1},
            "sources":{"gh":{"tenant":"settles","dedupe":"github"}},
            "rate_limits":{"default":{"rate":100,"burst":100}},
            "dedupe":{"scope":"fleet"}}"#,
    );
    assert!(!config.is_null());
    // A claim taken, then the sender gone before the upstream answered: a release.
    let (filter, _) = arrive(config, 1, "s-1");
    answer(1, filter, callouts()[0].id, CALLOUT_SUCCESS, "200", OK);
    end(1, filter);
    std::thread::sleep(std::time::Duration::from_millis(3));

    envoy_dynamic_module_on_http_filter_config_scheduled(std::ptr::null_mut(), config, TICK_EVENT);
    let sent = fake::with(|f| f.config_callouts.clone());
    let settle = sent
        .iter()
        .find(|c| c.header(":path") == Some("/v1/settle"))
        .unwrap_or_else(|| panic!("no settle batch: {sent:?}"));
    assert!(
        String::from_utf8_lossy(&settle.body).contains("s-1"),
        "{}",
        String::from_utf8_lossy(&settle.body)
    );
    let mut headers = [Header {
        key: Buffer::of(b":status"),
        value: Buffer::of(b"200"),
    }];
    envoy_dynamic_module_on_http_filter_config_http_callout_done(
        std::ptr::null_mut(),
        config,
        settle.id,
        CALLOUT_SUCCESS,
        headers.as_mut_ptr(),
        1,
        std::ptr::null_mut(),
        0,
    );
    assert_eq!(
        fake::with(|f| f.stat("ankusa_fleet_settle_batches_total_result=.=ok;.;")),
        Some(1)
    );
    envoy_dynamic_module_on_http_filter_config_destroy(config);
}
