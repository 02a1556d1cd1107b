//! The seam to proxy-wasm shared data: a process-wide map of versioned byte
//! values updated by compare-and-swap.
//!
//! Envoy keeps one such map per `vm_id`, shared by every worker, behind one
//! mutex. Nothing here holds a lock across calls: a writer reads a value and
//! its version, computes, and writes back only if the version is unchanged,
//! re-reading on a conflict. [`MapStore`] is the same contract over a
//! `HashMap`, for tests of everything built on it.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// proxy-wasm shared data: one process-wide map; keys can't be deleted.
pub trait CasStore {
    /// The bytes under `key` (empty if never written) and its version (0 if never written).
    fn get(&self, key: &str) -> (Vec<u8>, u32);
    /// Writes `value` only if `key` is still at `version`; false on a conflict (re-read and retry).
    /// Version 0 means "no check" (the host's semantics), so the filter pre-creates every key it will use in on_configure.
    fn compare_and_set(&self, key: &str, value: &[u8], version: u32) -> bool;
}

/// Writes an empty value under every key that has never been written, so
/// later compare-and-swaps carry a real version: at version 0 the host
/// writes unconditionally and two workers racing on a fresh key would lose
/// an update. Keys that already hold something are left alone, so calling
/// this again (every worker's `on_configure`) keeps the state.
pub fn ensure_keys<S: CasStore + ?Sized>(store: &S, keys: impl IntoIterator<Item = String>) {
    for key in keys {
        let (_, version) = store.get(&key);
        if version == 0 {
            store.compare_and_set(&key, &[], 0);
        }
    }
}

/// Reads a u64 counter stored little-endian under `key` (0 when empty).
pub fn read_u64<S: CasStore + ?Sized>(store: &S, key: &str) -> (u64, u32) {
    let (bytes, version) = store.get(key);
    (decode_u64(&bytes), version)
}

/// A little-endian u64 from the first 8 bytes (0 when shorter).
pub fn decode_u64(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    if let Some(src) = bytes.get(..8) {
        buf.copy_from_slice(src);
    }
    u64::from_le_bytes(buf)
}

/// Compare-and-swap attempts per update before giving up. Each conflict
/// means another worker's write landed, so 32 in a row only happens under a
/// storm; giving up then (each caller says what that means for it) beats
/// spinning on the request path.
pub const MAX_TRIES: u32 = 32;

/// What one attempt of [`update`] decided about the bytes it read.
pub enum Cas<T> {
    /// Leave the value alone: `T` is the answer.
    Keep(T),
    /// Write these bytes if the value is unchanged since the read: `T` is
    /// the answer once the write lands.
    Write(Vec<u8>, T),
}

/// Runs `attempt` until it gives an answer, at most [`MAX_TRIES`] times;
/// `None` after that many conflicts. An attempt reads what it needs,
/// decides, and returns `None` when its compare-and-swap lost a race.
pub fn retry<T>(mut attempt: impl FnMut() -> Option<T>) -> Option<T> {
    (0..MAX_TRIES).find_map(|_| attempt())
}

/// Reads the bytes under `key`, lets `f` decide, and writes its bytes back
/// by compare-and-swap, re-reading on a conflict (see [`retry`]).
pub fn update<S: CasStore + ?Sized, T>(
    store: &S,
    key: &str,
    mut f: impl FnMut(&[u8]) -> Cas<T>,
) -> Option<T> {
    retry(|| {
        let (current, version) = store.get(key);
        match f(&current) {
            Cas::Keep(answer) => Some(answer),
            Cas::Write(next, answer) => {
                store.compare_and_set(key, &next, version).then_some(answer)
            }
        }
    })
}

/// Applies `f` to the u64 under `key` by compare-and-swap; `f` returning
/// `None` leaves it alone. Returns the value written (or the one that made `f`
/// say no); `None` after [`MAX_TRIES`] conflicts.
pub fn update_u64<S: CasStore + ?Sized>(
    store: &S,
    key: &str,
    f: impl Fn(u64) -> Option<u64>,
) -> Option<Result<u64, u64>> {
    update(store, key, |bytes| {
        let current = decode_u64(bytes);
        match f(current) {
            None => Cas::Keep(Err(current)),
            Some(next) => Cas::Write(next.to_le_bytes().to_vec(), Ok(next)),
        }
    })
}

/// Replaces the bytes under `key` with `f(current)` by compare-and-swap;
/// `None` from `f` leaves them alone. False after [`MAX_TRIES`] conflicts.
pub fn update_bytes<S: CasStore + ?Sized>(
    store: &S,
    key: &str,
    f: impl Fn(&[u8]) -> Option<Vec<u8>>,
) -> bool {
    update(store, key, |current| match f(current) {
        None => Cas::Keep(false),
        Some(next) => Cas::Write(next, true),
    })
    .unwrap_or(false)
}

/// A [`CasStore`] in memory with the host's semantics, for tests.
///
/// Every write bumps the key's version; version 0 is never handed out for a
/// written key, so it keeps meaning "never written".
#[derive(Default, Debug)]
pub struct MapStore {
    map: Mutex<HashMap<String, (Vec<u8>, u32)>>,
}

impl MapStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// A poisoned lock only means another test thread panicked mid-call; the
    /// map itself is never left half-written, so keep using it.
    fn lock(&self) -> MutexGuard<'_, HashMap<String, (Vec<u8>, u32)>> {
        self.map
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every key ever written, sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.lock().keys().cloned().collect();
        keys.sort();
        keys
    }

    /// How many keys were ever written.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

impl Clone for MapStore {
    /// An independent copy of every key, value and version: lets a test ask
    /// "what if" without disturbing the original.
    fn clone(&self) -> Self {
        MapStore {
            map: Mutex::new(self.lock().clone()),
        }
    }
}

impl PartialEq for MapStore {
    /// Same keys, same bytes, same versions.
    fn eq(&self, other: &Self) -> bool {
        *self.lock() == *other.lock()
    }
}

impl CasStore for MapStore {
    fn get(&self, key: &str) -> (Vec<u8>, u32) {
        self.lock().get(key).cloned().unwrap_or_default()
    }

    fn compare_and_set(&self, key: &str, value: &[u8], version: u32) -> bool {
        let mut map = self.lock();
        let current = map.get(key).map_or(0, |(_, v)| *v);
        if version != 0 && version != current {
            return false;
        }
        let next = match current.wrapping_add(1) {
            0 => 1,
            n => n,
        };
        map.insert(key.to_string(), (value.to_vec(), next));
        true
    }
}

#[cfg(test)]
mod tests;
