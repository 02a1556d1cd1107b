//! The node's copy of the fleet override list, for node-scope admission and
//! every node-local answer.
//!
//! A fleet-scope hook learns its tenant's override from the store's hit
//! answer; a node-scope hook makes no store call. So one worker per node
//! (whichever takes the [`LIST_LEASE_KEY`] lease on its root tick) asks the
//! store for the changes since the version the node holds every
//! [`POLL_INTERVAL_MS`] (the whole list, page after page, only at start or
//! after a gap: see [`super::node_sync`]), and the list is kept in shared
//! data, stamped with when it was fetched. Every worker's node-local charge
//! reads it ([`lookup`]): an override in force for the tenant replaces the
//! configuration's pairs and shadow (see [`super::effective`]). A failed poll
//! (no answer, a non-200, an unreadable or invalid page) keeps the last good
//! list; a list not refreshed for [`STALE_AFTER_MS`] is no longer applied, so
//! an edge cut off from the store falls back to its configuration within a
//! bounded time.

use super::page::OverridePage;
use super::{pair, Override, OverrideList};
use crate::config::BreakerPolicy;
use crate::fleet::breaker::{Breaker, BreakerState};
use crate::limit::limits::{is_valid_name, MAX_NAME_LEN};
use crate::node::cas::{decode_u64, CasStore};
use crate::node::edge_keys::{BREAKER_KEY, LIST_KEY, LIST_LEASE_KEY, LIST_STAMP_KEY};
use crate::node::node_buckets::fnv1a;
use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

/// How often one worker per node polls the store (ms): a change on the
/// store applies on every edge within two intervals.
pub const POLL_INTERVAL_MS: u64 = 1_000;
/// How long a list is applied after it was last fetched (ms): ten polls
/// missed in a row, then the configuration alone.
pub const STALE_AFTER_MS: u64 = 10_000;
/// The most overrides a node keeps: past it the list is cut, keeping the
/// tenants the edge's configuration names first, then the most recently
/// changed (see [`super::node_sync::select`]), and the cut is counted.
pub const MAX_OVERRIDES: usize = 1_000;
/// The largest list answer read (bytes); a larger one is refused whole.
pub const MAX_LIST_BYTES: usize = 1 << 20;

/// Why a poll's answer was not taken: the last good list stays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListError {
    /// The call was reset or never answered (no `:status`).
    NoStatus,
    /// Any status but 200 (401: a missing or stale token; 5xx: store or Redis down).
    Status(String),
    /// An answer over [`MAX_LIST_BYTES`].
    TooLarge(usize),
    /// A 200 whose body is not an [`OverridePage`].
    Unparsable(String),
    /// An entry that the store would never have written.
    Invalid {
        index: usize,
        field: String,
        problem: String,
    },
    /// A deleted tenant that is no tenant name.
    InvalidDeleted { index: usize, tenant: String },
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListError::NoStatus => write!(f, "the override list call was reset"),
            ListError::Status(s) => write!(f, "the store answered {s} to the override list"),
            ListError::TooLarge(n) => write!(
                f,
                "the override list is {n} bytes, over the limit of {MAX_LIST_BYTES}"
            ),
            ListError::Unparsable(e) => write!(f, "the override list is not readable: {e}"),
            ListError::Invalid {
                index,
                field,
                problem,
            } => write!(f, "overrides[{index}].{field}: {problem}"),
            ListError::InvalidDeleted { index, tenant } => write!(
                f,
                "deleted[{index}]: {tenant:?} is not 1 to {MAX_NAME_LEN} characters of [A-Za-z0-9_.-]"
            ),
        }
    }
}

/// A list answer that was taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Polled {
    /// Sorted by tenant, at most [`MAX_OVERRIDES`].
    pub overrides: Vec<Override>,
    /// Entries past [`MAX_OVERRIDES`] that were left out.
    pub cut: usize,
}

fn check(index: usize, o: &Override) -> Result<(), ListError> {
    let invalid = |field: &str, problem: String| ListError::Invalid {
        index,
        field: field.into(),
        problem,
    };
    if !is_valid_name(&o.tenant) {
        return Err(invalid(
            "tenant",
            format!(
                "{:?} is not 1 to {MAX_NAME_LEN} characters of [A-Za-z0-9_.-]",
                o.tenant
            ),
        ));
    }
    for (names, values) in [
        (("rate", "burst"), (o.rate, o.burst)),
        (("bytes_rate", "bytes_burst"), (o.bytes_rate, o.bytes_burst)),
    ] {
        pair(names, values).map_err(|e| invalid(&e.field, e.problem))?;
    }
    Ok(())
}

/// Reads the store's answer to `GET /v1/overrides`: its `:status` (None: a
/// reset), the body's size and the body (read only when within bounds).
/// Every entry is checked as the store checks a PUT; one bad entry refuses
/// the whole answer, naming its index, field and value.
pub fn parse_page(
    status: Option<&str>,
    body_size: usize,
    body: impl FnOnce() -> Option<Vec<u8>>,
) -> Result<OverridePage, ListError> {
    match status {
        None => return Err(ListError::NoStatus),
        Some("200") => {}
        Some(other) => return Err(ListError::Status(other.to_string())),
    }
    if body_size > MAX_LIST_BYTES {
        return Err(ListError::TooLarge(body_size));
    }
    let bytes = body().unwrap_or_default();
    let page: OverridePage =
        serde_json::from_slice(&bytes).map_err(|e| ListError::Unparsable(e.to_string()))?;
    for (index, o) in page.overrides.iter().enumerate() {
        check(index, o)?;
    }
    if let Some((index, tenant)) = page
        .deleted
        .iter()
        .enumerate()
        .find(|(_, t)| !is_valid_name(t))
    {
        return Err(ListError::InvalidDeleted {
            index,
            tenant: tenant.clone(),
        });
    }
    Ok(page)
}

/// Whether this worker polls now: none of its polls is in flight, the
/// node's breaker is not open (a store the hits found sick is left alone,
/// like the settle drain, until a hit's probe finds it back; the list goes
/// stale if that takes longer than [`STALE_AFTER_MS`]), and it took
/// the node-wide lease (one poll per node per [`POLL_INTERVAL_MS`]; a lease
/// from the future, the clock having stepped back, is taken).
pub fn poll_due<S: CasStore>(
    store: &S,
    in_flight: bool,
    breaker: BreakerPolicy,
    now_ms: u64,
) -> bool {
    if in_flight {
        return false;
    }
    let now_us = now_ms.saturating_mul(1_000);
    if Breaker::new(store, BREAKER_KEY, breaker).state(now_us) == BreakerState::Open {
        return false;
    }
    let (bytes, version) = store.get(LIST_LEASE_KEY);
    crate::node::clock::lease_due(decode_u64(&bytes), now_ms, POLL_INTERVAL_MS)
        && store.compare_and_set(
            LIST_LEASE_KEY,
            &(now_ms + POLL_INTERVAL_MS).to_le_bytes(),
            version,
        )
}

/// Whether a list fetched at `fetched_ms` is still applied at `now_ms`:
/// never fetched (0), older than [`STALE_AFTER_MS`], or stamped further in the
/// future than that (a clock that stepped back) is stale.
pub fn is_fresh(fetched_ms: u64, now_ms: u64) -> bool {
    fetched_ms != 0
        && !crate::node::clock::reached(
            fetched_ms.saturating_add(STALE_AFTER_MS),
            now_ms,
            STALE_AFTER_MS.saturating_mul(2),
        )
}

/// The stamp: when the list was fetched (ms), how many it holds, and the
/// FNV-1a hash of the list's bytes.
struct Stamp {
    fetched_ms: u64,
    count: u64,
    hash: u64,
}

fn stamp(store: &impl CasStore) -> Stamp {
    let (bytes, _) = store.get(LIST_STAMP_KEY);
    let at = |i: usize| bytes.get(i..).map_or(0, decode_u64);
    Stamp {
        fetched_ms: at(0),
        count: at(8),
        hash: at(16),
    }
}

/// Keeps a taken list, fetched at `now_ms`: the list is rewritten only when
/// it changed, then the stamp. Whether the list changed.
pub fn store_list<S: CasStore>(store: &S, polled: &Polled, now_ms: u64) -> bool {
    let list = OverrideList {
        overrides: polled.overrides.clone(),
    };
    let bytes = serde_json::to_vec(&list).unwrap_or_default();
    let (current, version) = store.get(LIST_KEY);
    let changed = current != bytes;
    if changed {
        store.compare_and_set(LIST_KEY, &bytes, version);
    }
    let mut value = now_ms.to_le_bytes().to_vec();
    value.extend_from_slice(&(polled.overrides.len() as u64).to_le_bytes());
    value.extend_from_slice(&fnv1a(&bytes).to_le_bytes());
    let (_, version) = store.get(LIST_STAMP_KEY);
    store.compare_and_set(LIST_STAMP_KEY, &value, version);
    changed
}

/// Marks the node's list as fetched at `now_ms`, unchanged (a page that
/// changed nothing).
pub fn touch_stamp<S: CasStore>(store: &S, now_ms: u64) {
    let (mut value, version) = store.get(LIST_STAMP_KEY);
    if value.len() < 24 {
        return;
    }
    value[..8].copy_from_slice(&now_ms.to_le_bytes());
    store.compare_and_set(LIST_STAMP_KEY, &value, version);
}

/// How many overrides the node's list holds.
pub fn held_count<S: CasStore>(store: &S) -> usize {
    stamp(store).count as usize
}

/// The overrides the node's list holds (empty when none was kept).
pub fn held<S: CasStore>(store: &S) -> Vec<Override> {
    let (bytes, _) = store.get(LIST_KEY);
    serde_json::from_slice::<OverrideList>(&bytes)
        .map(|l| l.overrides)
        .unwrap_or_default()
}

thread_local! {
    /// This worker's parsed copy of the list, under the hash of its bytes:
    /// a hook reads the small stamp, and the list only when it changed.
    static PARSED: RefCell<Option<(u64, Rc<Vec<Override>>)>> = const { RefCell::new(None) };
}

/// The list under `hash`: this worker's parsed copy, or read and parsed anew.
fn parsed<S: CasStore>(store: &S, hash: u64) -> Option<Rc<Vec<Override>>> {
    let cached = PARSED.with(|p| {
        p.borrow()
            .as_ref()
            .filter(|(h, _)| *h == hash)
            .map(|(_, list)| Rc::clone(list))
    });
    if cached.is_some() {
        return cached;
    }
    let (bytes, _) = store.get(LIST_KEY);
    let list: OverrideList = serde_json::from_slice(&bytes).ok()?;
    let list = Rc::new(list.overrides);
    PARSED.with(|p| *p.borrow_mut() = Some((fnv1a(&bytes), Rc::clone(&list))));
    Some(list)
}

/// The override the node's list holds for `tenant` and in force at
/// `now_ms`; None when there is none, it expired, or the list is stale. An
/// empty list costs one small read, an unchanged one no parse.
pub fn lookup<S: CasStore>(store: &S, tenant: &str, now_ms: u64) -> Option<Override> {
    let stamp = stamp(store);
    if stamp.count == 0 || !is_fresh(stamp.fetched_ms, now_ms) {
        return None;
    }
    parsed(store, stamp.hash)?
        .iter()
        .find(|o| o.tenant == tenant)
        .filter(|o| o.in_force(now_ms))
        .cloned()
}

#[cfg(test)]
mod tests;
