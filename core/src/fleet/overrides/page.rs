//! The override list as edges read it: the changes since a version.
//!
//! The store numbers every change of an override (a PUT, a DELETE, an
//! expiry) with the next value of one counter, its *version*, under an
//! *epoch* (named when the store's list state was first created, so a
//! flushed or replaced Redis is never mistaken for the one an edge knew).
//! `GET /v1/overrides?since=V&epoch=E&limit=N` ([`ListQuery`]) answers an
//! [`OverridePage`]: the overrides changed after `V` and the tenants whose
//! override went away, oldest change first, at most `N` of them, with the
//! version to ask from next. `since=0` (or none) is the whole list, paged
//! the same way. When the store can't say what changed since `V` (another
//! epoch, a version it never gave, or deletions it no longer remembers) it
//! answers `gap`, and the edge lists the whole again.

use super::Override;
use crate::wire::{WireError, OVERRIDES_PATH};
use serde::{Deserialize, Serialize};

/// The most changes one page carries (and the default): about 60 KB of the
/// largest overrides, well within the edge's 1 MiB read, and a page the
/// store answers well within a 10 ms budget with 100 000 stored.
pub const PAGE_MAX: usize = 250;

/// The longest epoch accepted in a query.
pub const MAX_EPOCH_LEN: usize = 64;

/// What `GET /v1/overrides` was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListQuery {
    /// The version the caller holds; 0: none, the whole list.
    pub since: u64,
    /// The epoch of that version; None: not checked.
    pub epoch: Option<String>,
    /// At most this many changes, 1 to [`PAGE_MAX`].
    pub limit: usize,
}

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery {
            since: 0,
            epoch: None,
            limit: PAGE_MAX,
        }
    }
}

fn invalid(field: &str, problem: String) -> WireError {
    WireError {
        field: field.into(),
        problem,
    }
}

fn is_valid_epoch(epoch: &str) -> bool {
    !epoch.is_empty()
        && epoch.len() <= MAX_EPOCH_LEN
        && epoch.bytes().all(|b| b.is_ascii_alphanumeric())
}

impl ListQuery {
    /// Reads the query string of `GET /v1/overrides` (None: no `?`). Every
    /// error names the parameter and the value.
    pub fn parse(query: Option<&str>) -> Result<ListQuery, WireError> {
        let mut q = ListQuery::default();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            match name {
                "since" => {
                    q.since = value.parse().map_err(|_| {
                        invalid("since", format!("{value:?} is not a whole version number"))
                    })?
                }
                "epoch" => {
                    if !is_valid_epoch(value) {
                        return Err(invalid(
                            "epoch",
                            format!("{value:?} is not 1 to {MAX_EPOCH_LEN} letters and digits"),
                        ));
                    }
                    q.epoch = Some(value.to_string());
                }
                "limit" => {
                    q.limit = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=PAGE_MAX).contains(n))
                        .ok_or_else(|| {
                            invalid(
                                "limit",
                                format!("must be between 1 and {PAGE_MAX}, got {value:?}"),
                            )
                        })?
                }
                other => {
                    return Err(invalid(
                        other,
                        "is not a parameter of /v1/overrides (since, epoch, limit)".into(),
                    ))
                }
            }
        }
        Ok(q)
    }

    /// The path an edge asks.
    pub fn path(&self) -> String {
        let mut path = format!("{OVERRIDES_PATH}?since={}&limit={}", self.since, self.limit);
        if let Some(epoch) = &self.epoch {
            path.push_str("&epoch=");
            path.push_str(epoch);
        }
        path
    }
}

/// The answer of `GET /v1/overrides`.
#[derive(Serialize, Deserialize, Clone, PartialEq, Eq, Debug, Default)]
pub struct OverridePage {
    /// Absent (with `version`) in a store from before the change log, whose
    /// answer is the whole list every time: read as a whole listing.
    #[serde(default)]
    pub epoch: String,
    /// The version to ask from next: the last change on this page when
    /// `more`, else the store's current version.
    #[serde(default)]
    pub version: u64,
    /// The store can't answer since the version asked: list the whole.
    #[serde(default, skip_serializing_if = "is_false")]
    pub gap: bool,
    /// More changes follow: ask again from `version` at once.
    #[serde(default, skip_serializing_if = "is_false")]
    pub more: bool,
    /// Overrides set (or changed) since the version asked (always present:
    /// an object without it is no list answer).
    pub overrides: Vec<Override>,
    /// Tenants whose override was deleted or expired since then.
    #[serde(default)]
    pub deleted: Vec<String>,
    /// How many overrides the store holds now (expired ones not yet swept
    /// included), so an edge knows how many it leaves out.
    #[serde(default)]
    pub total: u64,
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn a_query_is_read_and_written_back() {
        assert_eq!(ListQuery::parse(None), Ok(ListQuery::default()));
        let q = ListQuery::parse(Some("since=42&epoch=ab12&limit=7")).unwrap();
        assert_eq!(
            q,
            ListQuery {
                since: 42,
                epoch: Some("ab12".into()),
                limit: 7
            }
        );
        assert_eq!(q.path(), "/v1/overrides?since=42&limit=7&epoch=ab12");
        assert_eq!(ListQuery::parse(Some(&q.path()[14..])), Ok(q));
        assert_eq!(
            ListQuery::default().path(),
            "/v1/overrides?since=0&limit=250"
        );
    }

    #[test]
    fn a_bad_query_names_the_parameter_and_the_value() {
        let e = |q: &str| ListQuery::parse(Some(q)).unwrap_err().to_string();
        assert_eq!(e("since=-1"), "since: \"-1\" is not a whole version number");
        assert_eq!(e("limit=0"), "limit: must be between 1 and 250, got \"0\"");
        assert_eq!(
            e("limit=251"),
            "limit: must be between 1 and 250, got \"251\""
        );
        assert_eq!(
            e("epoch=a-b"),
            "epoch: \"a-b\" is not 1 to 64 letters and digits"
        );
        assert_eq!(
            e("after=x"),
            "after: is not a parameter of /v1/overrides (since, epoch, limit)"
        );
    }

    #[test]
    fn a_page_reads_without_its_optional_fields() {
        let p: OverridePage =
            serde_json::from_str(r#"{"epoch":"e1","version":3,"overrides":[]}"#).unwrap();
        assert_eq!(
            (p.gap, p.more, p.overrides.len(), p.total),
            (false, false, 0, 0)
        );
        let text = serde_json::to_string(&OverridePage {
            epoch: "e1".into(),
            version: 3,
            gap: true,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            text,
            r#"{"epoch":"e1","version":3,"gap":true,"overrides":[],"deleted":[],"total":0}"#
        );
    }
}
