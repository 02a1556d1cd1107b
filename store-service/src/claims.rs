//! The pending claims a node made, for an operator cleaning up after a
//! leaked edge token: `GET /v1/claims?node=N[&from=MS][&to=MS][&tenant=T]
//! [&cursor=C]` lists them a bounded step of `SCAN` at a time, and `POST
//! /v1/claims/release` releases those listed, each only while it is still
//! pending under the same hook and node. A pending value is
//! `p:<hook_id>:<node>` and hook ids are UUIDv7, so each carries the node and
//! the time it was made; a hook id that carries no time (an edge makes only
//! UUIDv7s; a made-up one may not) is listed whatever the range.
//! Committed claims are not listed: with receipts required an edge token
//! commits nothing the intake didn't store. Pure logic, no I/O.

use crate::backend::ScanAt;
use ankusa_core::hook::hook_id::unix_ms_of;
use ankusa_core::limit::limits::{is_valid_id, is_valid_name, MAX_HOOK_ID_LEN, MAX_KEY_LEN};
use ankusa_core::wire::BODY_CLAIM_SOURCE;
use serde::{Deserialize, Serialize};

/// Keys a step of `SCAN` looks at (a hint to Redis, `COUNT`).
pub const SCAN_COUNT: u32 = 1_000;
/// Most claims one release call names.
pub const MAX_RELEASE: usize = 1_000;

/// What `GET /v1/claims` asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimsQuery {
    pub node: String,
    pub from_ms: u64,
    pub to_ms: u64,
    pub tenant: Option<String>,
    pub at: ScanAt,
}

impl ClaimsQuery {
    /// Reads the query string; errors name the parameter and its value.
    pub fn parse(query: Option<&str>) -> Result<ClaimsQuery, String> {
        let mut node = None;
        let mut q = ClaimsQuery {
            node: String::new(),
            from_ms: 0,
            to_ms: u64::MAX,
            tenant: None,
            at: ScanAt {
                target: 0,
                cursor: 0,
            },
        };
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let bad = |what: &str| format!("{name}={value:?}: {what}");
            let ms = || value.parse::<u64>().map_err(|_| bad("not unix ms"));
            match name {
                "node" if is_valid_name(value) => node = Some(value.to_string()),
                "node" => return Err(bad("not a node name ([A-Za-z0-9_.-], 1 to 64)")),
                "from" => q.from_ms = ms()?,
                "to" => q.to_ms = ms()?,
                "tenant" if is_valid_id(value) => q.tenant = Some(value.to_string()),
                "tenant" => return Err(bad("not a tenant ([A-Za-z0-9_-], 1 to 64)")),
                "cursor" => {
                    q.at = parse_cursor(value).ok_or_else(|| bad("not a cursor this store gave"))?
                }
                _ => {
                    return Err(format!(
                        "{:?}: unknown parameter (node, from, to, tenant, cursor)",
                        name.chars().take(64).collect::<String>()
                    ))
                }
            }
        }
        q.node = node.ok_or("node: missing; say which node's (node=NAME)")?;
        if q.from_ms > q.to_ms {
            return Err(format!("from={} is after to={}", q.from_ms, q.to_ms));
        }
        Ok(q)
    }

    /// The `SCAN` pattern: every claim, or the tenant's.
    pub fn pattern(&self) -> String {
        match &self.tenant {
            Some(t) => format!("ankusa:{{{t}}}:claim:*"),
            None => "ankusa:{*}:claim:*".to_string(),
        }
    }

    /// Whether `claim` is one this query lists.
    pub fn lists(&self, claim: &Pending) -> bool {
        claim.node == self.node
            && claim
                .at_ms
                .is_none_or(|at| self.from_ms <= at && at <= self.to_ms)
    }
}

/// A cursor as the answer gives it: `<key space>-<SCAN cursor>`.
pub fn cursor_text(at: ScanAt) -> String {
    format!("{}-{}", at.target, at.cursor)
}

fn parse_cursor(text: &str) -> Option<ScanAt> {
    let (target, cursor) = text.split_once('-')?;
    Some(ScanAt {
        target: target.parse().ok()?,
        cursor: cursor.parse().ok()?,
    })
}

/// One pending claim, as listed and as named in a release.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Pending {
    pub tenant: String,
    pub source_id: String,
    pub key: String,
    pub hook_id: String,
    pub node: String,
    /// When its hook id says it was made (unix ms); None when it says nothing.
    #[serde(default)]
    pub at_ms: Option<u64>,
}

impl Pending {
    /// The claim a key and its value hold, when pending.
    pub fn of(redis_key: &str, value: &str) -> Option<Pending> {
        let rest = redis_key.strip_prefix("ankusa:{")?;
        let (tenant, rest) = rest.split_once("}:claim:")?;
        let (source_id, key) = rest.split_once(':')?;
        let (hook_id, node) = value.strip_prefix("p:")?.split_once(':')?;
        Some(Pending {
            tenant: tenant.to_string(),
            source_id: source_id.to_string(),
            key: key.to_string(),
            hook_id: hook_id.to_string(),
            node: node.to_string(),
            at_ms: unix_ms_of(hook_id),
        })
    }

    /// Its Redis key.
    pub fn redis_key(&self) -> String {
        format!(
            "ankusa:{{{}}}:claim:{}:{}",
            self.tenant, self.source_id, self.key
        )
    }

    /// The value it holds while pending: what a release compares, whole.
    pub fn value(&self) -> String {
        format!("p:{}:{}", self.hook_id, self.node)
    }

    /// Checks a claim named in a release; errors name the item and field.
    pub fn check(&self, i: usize) -> Result<(), String> {
        check_fields(
            &format!("claims[{i}]"),
            [
                &self.tenant,
                &self.source_id,
                &self.key,
                &self.hook_id,
                &self.node,
            ],
        )
    }
}

/// Checks what a released claim or commit names, `[tenant, source_id, key,
/// hook_id, node]`, as item `item` of the body; errors name the item, the
/// field and its value (cut to 64 characters).
pub fn check_fields(
    item: &str,
    [tenant, source_id, key, hook_id, node]: [&str; 5],
) -> Result<(), String> {
    let bad = |field: &str, value: &str| {
        Err(format!(
            "{item}.{field}: {:?} is not a valid {field}",
            value.chars().take(64).collect::<String>()
        ))
    };
    if !is_valid_id(tenant) {
        return bad("tenant", tenant);
    }
    if !is_source(source_id) {
        return bad("source_id", source_id);
    }
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return bad("key", key);
    }
    if !is_hook_id(hook_id) {
        return bad("hook_id", hook_id);
    }
    if !is_valid_name(node) {
        return bad("node", node);
    }
    Ok(())
}

/// Whether `id` is a claim's source as the wire takes one: a source id, or
/// the replay guard's body claims' own ([`BODY_CLAIM_SOURCE`]).
pub fn is_source(id: &str) -> bool {
    id == BODY_CLAIM_SOURCE || is_valid_id(id)
}

/// Whether `id` is a hook id as the wire takes one: 1 to
/// [`MAX_HOOK_ID_LEN`] characters of `[A-Za-z0-9_-]`.
pub fn is_hook_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_HOOK_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `POST /v1/claims/release`: the claims to release, as listed.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    pub claims: Vec<Pending>,
}

impl ReleaseRequest {
    pub fn check(&self) -> Result<(), String> {
        check_items("claims", &self.claims, Pending::check)
    }
}

/// Checks the items of a release body's array `field`: at most
/// [`MAX_RELEASE`], each by `check` (given its index, for the error).
pub fn check_items<T>(
    field: &str,
    items: &[T],
    check: impl Fn(&T, usize) -> Result<(), String>,
) -> Result<(), String> {
    if items.len() > MAX_RELEASE {
        return Err(format!(
            "{field}: {} items, at most {MAX_RELEASE} a call",
            items.len()
        ));
    }
    items
        .iter()
        .enumerate()
        .try_for_each(|(i, item)| check(item, i))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOOK: &str = "0190b6f5-7c1a-7def-8abc-0123456789ab";

    #[test]
    fn a_query_needs_a_node_and_names_a_bad_parameter() {
        let q =
            ClaimsQuery::parse(Some("node=edge-a&from=10&to=20&tenant=acme&cursor=1-77")).unwrap();
        assert_eq!((q.node.as_str(), q.from_ms, q.to_ms), ("edge-a", 10, 20));
        assert_eq!(
            q.at,
            ScanAt {
                target: 1,
                cursor: 77
            }
        );
        assert_eq!(q.pattern(), "ankusa:{acme}:claim:*");
        let all = ClaimsQuery::parse(Some("node=edge-a")).unwrap();
        assert_eq!(
            (all.from_ms, all.to_ms, all.pattern().as_str()),
            (0, u64::MAX, "ankusa:{*}:claim:*")
        );
        for (query, expected) in [
            ("", "node: missing"),
            ("node=a b", "node=\"a b\""),
            ("node=a&from=x", "from=\"x\""),
            ("node=a&from=5&to=4", "from=5 is after to=4"),
            ("node=a&cursor=zz", "cursor=\"zz\""),
            ("node=a&tenant=a.b", "tenant=\"a.b\""),
            ("node=a&limit=3", "\"limit\": unknown parameter"),
        ] {
            let err = ClaimsQuery::parse(Some(query)).unwrap_err();
            assert!(err.contains(expected), "{query}: {err}");
        }
    }

    #[test]
    fn a_pending_value_gives_its_node_and_time_and_a_committed_one_nothing() {
        let p = Pending::of("ankusa:{acme}:claim:gh:evt:1", &format!("p:{HOOK}:edge-a")).unwrap();
        assert_eq!(
            (p.tenant.as_str(), p.source_id.as_str(), p.key.as_str()),
            ("acme", "gh", "evt:1")
        );
        assert_eq!((p.hook_id.as_str(), p.node.as_str()), (HOOK, "edge-a"));
        assert_eq!(p.at_ms, unix_ms_of(HOOK));
        assert!(p.at_ms.is_some());
        assert_eq!(p.redis_key(), "ankusa:{acme}:claim:gh:evt:1");
        assert_eq!(p.value(), format!("p:{HOOK}:edge-a"));
        assert_eq!(
            Pending::of("ankusa:{acme}:claim:gh:k", &format!("c:{HOOK}")),
            None
        );
        assert_eq!(Pending::of("ankusa:{acme}:rl:hooks", "p:h:n"), None);
    }

    #[test]
    fn a_query_lists_its_nodes_claims_in_range_and_those_with_no_time() {
        let at = unix_ms_of(HOOK).unwrap();
        let claim = |hook: &str, node: &str| {
            Pending::of("ankusa:{acme}:claim:gh:k", &format!("p:{hook}:{node}")).unwrap()
        };
        let q = |from: u64, to: u64| ClaimsQuery {
            from_ms: from,
            to_ms: to,
            ..ClaimsQuery::parse(Some("node=edge-a")).unwrap()
        };
        assert!(q(at, at).lists(&claim(HOOK, "edge-a")));
        assert!(!q(at + 1, at + 5).lists(&claim(HOOK, "edge-a")));
        assert!(!q(0, u64::MAX).lists(&claim(HOOK, "edge-b")));
        assert!(
            q(at + 1, at + 5).lists(&claim("forged", "edge-a")),
            "no time: listed"
        );
    }

    #[test]
    fn a_release_names_a_bad_item_and_field() {
        let good = Pending::of("ankusa:{acme}:claim:gh:k", "p:h1:edge-a").unwrap();
        let mut bad = good.clone();
        bad.node = "edge a".into();
        let mut body = good.clone();
        body.source_id = BODY_CLAIM_SOURCE.into();
        assert_eq!(body.check(0), Ok(()), "the replay guard's body claims too");
        let req = ReleaseRequest {
            claims: vec![good, bad],
        };
        let err = req.check().unwrap_err();
        assert!(
            err.contains("claims[1].node") && err.contains("edge a"),
            "{err}"
        );
    }
}
