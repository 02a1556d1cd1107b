//! The host behind the core's seams: proxy-wasm shared data as a
//! [`CasStore`], and the host's clock. The compare-and-swap loops built on
//! it are the core's ([`ankusa_core::node::cas`]).
//!
//! The SDK's `Context` helpers unwrap host errors; these call `hostcalls`
//! directly so an odd status is a failed write, not a panic.

use ankusa_core::node::cas::CasStore;
use proxy_wasm::hostcalls;
use std::time::{SystemTime, UNIX_EPOCH};

/// Envoy's shared-data map for this plugin's `vm_id`, shared by every worker.
#[derive(Clone, Copy, Default, Debug)]
pub struct SharedData;

impl CasStore for SharedData {
    fn get(&self, key: &str) -> (Vec<u8>, u32) {
        match hostcalls::get_shared_data(key) {
            Ok((value, cas)) => (value.unwrap_or_default(), cas.unwrap_or(0)),
            Err(_) => (Vec::new(), 0),
        }
    }

    fn compare_and_set(&self, key: &str, value: &[u8], version: u32) -> bool {
        let cas = (version != 0).then_some(version);
        hostcalls::set_shared_data(key, Some(value), cas).is_ok()
    }
}

/// µs since the unix epoch on the host's wall clock: every worker (and, to
/// within NTP, every edge) reads the same clock, so one node bucket is exact
/// whichever worker charges it.
pub fn now_us() -> u64 {
    let now = hostcalls::get_current_time().unwrap_or(UNIX_EPOCH);
    since_epoch_us(now)
}

fn since_epoch_us(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
