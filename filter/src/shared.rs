//! The host behind the core's seams: proxy-wasm shared data as a
//! [`CasStore`], and the host's clock.
//!
//! The SDK's `Context` helpers unwrap host errors; these call `hostcalls`
//! directly so an odd status is a failed write, not a panic.

use ankusa_core::cas::CasStore;
use proxy_wasm::hostcalls;
use std::time::{SystemTime, UNIX_EPOCH};

/// Envoy's shared-data map for this plugin's `vm_id`, shared by every worker.
#[derive(Clone, Copy, Default, Debug)]
pub struct HostStore;

impl CasStore for HostStore {
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

/// Reads a u64 counter stored little-endian under `key` (0 when empty).
pub fn read_u64(store: &impl CasStore, key: &str) -> (u64, u32) {
    let (bytes, version) = store.get(key);
    (decode_u64(&bytes), version)
}

pub fn decode_u64(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    if let Some(src) = bytes.get(..8) {
        buf.copy_from_slice(src);
    }
    u64::from_le_bytes(buf)
}

/// Applies `f` to the u64 under `key` by compare-and-swap; `f` returning
/// `None` leaves it alone. Returns the value written (or the one that made `f`
/// say no), after a bounded number of conflicts gives up with `None`.
pub fn update_u64(
    store: &impl CasStore,
    key: &str,
    f: impl Fn(u64) -> Option<u64>,
) -> Option<Result<u64, u64>> {
    // Workers rarely collide on one key twice in a row; 16 tries is plenty and
    // keeps a pathological storm from spinning a request forever.
    for _ in 0..16 {
        let (current, version) = read_u64(store, key);
        match f(current) {
            None => return Some(Err(current)),
            Some(next) => {
                if store.compare_and_set(key, &next.to_le_bytes(), version) {
                    return Some(Ok(next));
                }
            }
        }
    }
    None
}

/// Replaces the bytes under `key` with `f(current)` by compare-and-swap;
/// `None` from `f` leaves them alone. False after a bounded number of conflicts.
pub fn update_bytes(
    store: &impl CasStore,
    key: &str,
    f: impl Fn(&[u8]) -> Option<Vec<u8>>,
) -> bool {
    for _ in 0..16 {
        let (current, version) = store.get(key);
        match f(&current) {
            None => return false,
            Some(next) => {
                if store.compare_and_set(key, &next, version) {
                    return true;
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use ankusa_core::cas::MapStore;

    #[test]
    fn update_u64_counts_and_refuses_past_a_cap() {
        let store = MapStore::new();
        ankusa_core::cas::ensure_keys(&store, ["n".to_string()]);
        let inc_below_2 = |n: u64| (n < 2).then_some(n + 1);
        assert_eq!(update_u64(&store, "n", inc_below_2), Some(Ok(1)));
        assert_eq!(update_u64(&store, "n", inc_below_2), Some(Ok(2)));
        assert_eq!(update_u64(&store, "n", inc_below_2), Some(Err(2)));
        assert_eq!(read_u64(&store, "n").0, 2);
    }

    #[test]
    fn short_values_decode_as_zero() {
        assert_eq!(decode_u64(&[]), 0);
        assert_eq!(decode_u64(&[1, 2]), 0);
        assert_eq!(decode_u64(&7u64.to_le_bytes()), 7);
    }
}
