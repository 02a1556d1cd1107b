//! Keeping the node's override list in step with the store's change log.
//!
//! The node holds a [`Cursor`] in shared data: the store's epoch and the
//! version its list is at. Each poll asks for the changes since that version
//! ([`next_query`]) and [`apply_page`] merges them into the node's list. At
//! start, after a gap, or when the configuration names other tenants, the
//! cursor is reset and the whole list is read, page after page, into a
//! staging copy that replaces the node's list only with the last page, so a
//! half-read listing is never applied. While pages remain, the next poll is
//! due at once.
//!
//! The node keeps at most [`MAX_OVERRIDES`] ([`select`]): the tenants its
//! configuration names first, then the most recently changed, whatever
//! their names; the tenants left out are named in the result, for the
//! filter to count and log.

use super::node_list::{held, held_count, store_list, touch_stamp, Polled, MAX_OVERRIDES};
use super::page::{ListQuery, OverridePage, PAGE_MAX};
use super::{Override, OverrideList};
use crate::config::Config;
use crate::node::cas::CasStore;
use crate::node::edge_keys::{LIST_CURSOR_KEY, LIST_LEASE_KEY, LIST_STAGING_KEY};
use crate::node::node_buckets::fnv1a;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// How many left-out tenants a log line names.
pub const NAMED_IN_LOG: usize = 10;

/// Where the node is in the store's change log.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    pub epoch: String,
    pub version: u64,
    /// A whole listing is under way: its pages go to staging.
    pub full: bool,
    /// The hash of the configured tenants the node's list was chosen for.
    #[serde(default)]
    pub configured: u64,
}

impl Cursor {
    /// Nothing known: list the whole.
    fn start(configured: u64) -> Cursor {
        Cursor {
            epoch: String::new(),
            version: 0,
            full: true,
            configured,
        }
    }
}

/// The tenants the edge's configuration names (a source's tenant, or a
/// tenant's limits): their overrides are kept first.
pub fn configured_tenants(config: &Config) -> BTreeSet<String> {
    config
        .rate_limits
        .tenants
        .keys()
        .cloned()
        .chain(config.sources.values().filter_map(|s| s.tenant.clone()))
        .collect()
}

fn hash_of(configured: &BTreeSet<String>) -> u64 {
    let joined: Vec<&str> = configured.iter().map(String::as_str).collect();
    fnv1a(joined.join("\n").as_bytes())
}

fn read_cursor<S: CasStore>(store: &S) -> (Option<Cursor>, u32) {
    let (bytes, version) = store.get(LIST_CURSOR_KEY);
    (serde_json::from_slice(&bytes).ok(), version)
}

fn write<S: CasStore, T: Serialize>(store: &S, key: &str, value: &T, version: u32) -> bool {
    serde_json::to_vec(value).is_ok_and(|bytes| store.compare_and_set(key, &bytes, version))
}

/// What the next poll asks: the changes since the node's version, or the
/// whole list when the node knows none or its configuration named other
/// tenants than the list was chosen for (the cursor is reset then).
pub fn next_query<S: CasStore>(store: &S, configured: &BTreeSet<String>) -> ListQuery {
    let hash = hash_of(configured);
    let (cursor, version) = read_cursor(store);
    let cursor = match cursor {
        Some(c) if c.configured == hash => c,
        _ => {
            let fresh = Cursor::start(hash);
            write(store, LIST_CURSOR_KEY, &fresh, version);
            fresh
        }
    };
    ListQuery {
        since: cursor.version,
        epoch: (cursor.version > 0).then_some(cursor.epoch),
        limit: PAGE_MAX,
    }
}

/// What a page did to the node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    /// The node's list changed.
    pub changed: bool,
    /// Tenants left out past [`MAX_OVERRIDES`] by this page.
    pub cut: Vec<String>,
    /// Once a list is applied: how many it holds, and how many of the
    /// store's overrides it leaves out.
    pub listed: Option<(usize, u64)>,
    /// The store could not answer since the node's version: the whole list
    /// is read from the next poll on.
    pub gap: bool,
    /// The page answered a version the node had already moved past (another
    /// worker's poll took it): nothing was done.
    pub stale: bool,
}

/// Merges `page`, the answer to `asked`, into the node's list (or the
/// staging copy of a whole listing) at `now_ms`; when more pages follow or
/// a gap was answered, the next poll is made due at once.
pub fn apply_page<S: CasStore>(
    store: &S,
    asked: &ListQuery,
    page: OverridePage,
    configured: &BTreeSet<String>,
    now_ms: u64,
) -> Applied {
    let (cursor, version) = read_cursor(store);
    let Some(cursor) = cursor.filter(|c| c.version == asked.since) else {
        return Applied {
            stale: true,
            ..Applied::default()
        };
    };
    if page.gap || (asked.since > 0 && page.epoch != cursor.epoch) {
        let restart = Cursor::start(cursor.configured);
        if !write(store, LIST_CURSOR_KEY, &restart, version) {
            return Applied {
                stale: true,
                ..Applied::default()
            };
        }
        poll_again(store, now_ms);
        return Applied {
            gap: true,
            ..Applied::default()
        };
    }
    // `since=0` is a whole listing whatever the cursor said (a store from
    // before the change log answers every poll so, version 0).
    let listing = cursor.full || asked.since == 0;
    let next = Cursor {
        epoch: page.epoch.clone(),
        version: page.version,
        full: listing && page.more,
        configured: cursor.configured,
    };
    let more = page.more;
    let applied = if !listing && page.overrides.is_empty() && page.deleted.is_empty() {
        touch_stamp(store, now_ms);
        Applied {
            listed: Some(listed(held_count(store), page.total)),
            ..Applied::default()
        }
    } else {
        merge_into(
            store,
            asked,
            page,
            configured,
            now_ms,
            cursor.full,
            next.full,
        )
    };
    // The cursor moves only once the page's overrides are written, so the
    // next page (whichever worker asks it) merges into them. Two workers
    // answered the same page write the same list; one of them moves the
    // cursor, and the other counts nothing.
    if !write(store, LIST_CURSOR_KEY, &next, version) {
        return Applied {
            stale: true,
            ..Applied::default()
        };
    }
    if more {
        poll_again(store, now_ms);
    }
    applied
}

/// Writes the page's changes into the staging copy (`to_staging`: the
/// listing goes on) or the node's list.
fn merge_into<S: CasStore>(
    store: &S,
    asked: &ListQuery,
    page: OverridePage,
    configured: &BTreeSet<String>,
    now_ms: u64,
    from_staging: bool,
    to_staging: bool,
) -> Applied {
    let base = match (asked.since, from_staging) {
        (0, _) => Vec::new(),
        (_, true) => staging(store),
        (_, false) => held(store),
    };
    let total = page.total;
    let (kept, cut) = select(merge(base, page), configured, now_ms, MAX_OVERRIDES);
    if to_staging {
        set_staging(store, kept);
        return Applied {
            cut,
            ..Applied::default()
        };
    }
    if from_staging && asked.since > 0 {
        set_staging(store, Vec::new());
    }
    let counts = listed(kept.len(), total);
    let polled = Polled {
        cut: cut.len(),
        overrides: kept,
    };
    Applied {
        changed: store_list(store, &polled, now_ms),
        cut,
        listed: Some(counts),
        ..Applied::default()
    }
}

fn listed(kept: usize, total: u64) -> (usize, u64) {
    (kept, total.saturating_sub(kept as u64))
}

/// Makes the next poll due now, on whichever worker ticks first.
fn poll_again<S: CasStore>(store: &S, now_ms: u64) {
    let (_, version) = store.get(LIST_LEASE_KEY);
    store.compare_and_set(LIST_LEASE_KEY, &now_ms.to_le_bytes(), version);
}

fn staging<S: CasStore>(store: &S) -> Vec<Override> {
    let (bytes, _) = store.get(LIST_STAGING_KEY);
    serde_json::from_slice::<OverrideList>(&bytes)
        .map(|l| l.overrides)
        .unwrap_or_default()
}

fn set_staging<S: CasStore>(store: &S, overrides: Vec<Override>) {
    let (_, version) = store.get(LIST_STAGING_KEY);
    write(
        store,
        LIST_STAGING_KEY,
        &OverrideList { overrides },
        version,
    );
}

/// `base` with the page's changes: its overrides replace the tenant's, its
/// deleted tenants leave.
pub fn merge(base: Vec<Override>, page: OverridePage) -> Vec<Override> {
    let mut by_tenant: BTreeMap<String, Override> =
        base.into_iter().map(|o| (o.tenant.clone(), o)).collect();
    for o in page.overrides {
        by_tenant.insert(o.tenant.clone(), o);
    }
    for tenant in &page.deleted {
        by_tenant.remove(tenant);
    }
    by_tenant.into_values().collect()
}

/// The overrides in force at `now_ms` that a node keeps, at most `cap`:
/// the `configured` tenants' first, then the most recently changed
/// (highest version), the tenant name deciding only between equals; sorted
/// by tenant. And the tenants left out, in the order they were ranked.
/// Expired overrides are dropped, not counted as left out.
pub fn select(
    list: Vec<Override>,
    configured: &BTreeSet<String>,
    now_ms: u64,
    cap: usize,
) -> (Vec<Override>, Vec<String>) {
    let mut live: Vec<Override> = list.into_iter().filter(|o| o.in_force(now_ms)).collect();
    live.sort_by(|a, b| {
        configured
            .contains(&b.tenant)
            .cmp(&configured.contains(&a.tenant))
            .then(b.version.cmp(&a.version))
            .then(a.tenant.cmp(&b.tenant))
    });
    let cut = live
        .split_off(cap.min(live.len()))
        .into_iter()
        .map(|o| o.tenant)
        .collect();
    live.sort_by(|a, b| a.tenant.cmp(&b.tenant));
    (live, cut)
}

/// The left-out tenants as a log line names them: the first
/// [`NAMED_IN_LOG`], then how many more.
pub fn describe_cut(cut: &[String]) -> String {
    let named = cut
        .iter()
        .take(NAMED_IN_LOG)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    match cut.len().saturating_sub(NAMED_IN_LOG) {
        0 => named,
        more => format!("{named} and {more} more"),
    }
}

#[cfg(test)]
mod tests;
