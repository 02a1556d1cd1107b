//! The commits a node made without a verified receipt, for an operator
//! cleaning up after a leaked edge token: `GET /v1/commits?node=N[&from=MS]
//! [&to=MS][&tenant=T][&cursor=C]` lists them a bounded step of `SCAN` at a
//! time (the same parameters as `/v1/claims`), and `POST
//! /v1/commits/release` removes those listed, each only while its event is
//! still committed under the same hook id, so the real delivery's retry is
//! admitted and stored.
//!
//! A promote applied without a verified receipt (receipts off, or
//! `--receipts accept-missing` and none sent) is also recorded, by the same
//! settle script call that commits it, in its node's index: a hash
//! `ankusa:{tenant}:unproven:<node>:<ttl_ms>:<minute>` per minute of commit
//! time ([`INDEX_MINUTE_MS`]), field the event's digest, value `<commit
//! ms>:<hook id>:<source>:<event key>`, expiring with the partition of the
//! committed layout its entries were written to ([`crate::committed`]), so
//! no hash grows past a minute's commits. A receipt-verified commit is not recorded:
//! with receipts `required` (the default) the index holds nothing. Pure
//! logic, no I/O.

use crate::claims::{check_fields, check_items, ClaimsQuery};
use crate::committed::{self, partition_ms};
use ankusa_core::limit::limits::TTL_MS;
use serde::{Deserialize, Serialize};

/// The time bucket of a node's index: a minute (`60000` in the settle script).
pub const INDEX_MINUTE_MS: u64 = 60_000;

/// The prefix of a node's index for one series (the settle script appends
/// `:<minute>`): `ankusa:{tenant}:unproven:<node>:<ttl_ms>`, the tenant's hash tag.
pub fn index_series(tenant: &str, node: &str, ttl_ms: u64) -> String {
    format!("ankusa:{{{tenant}}}:unproven:{node}:{ttl_ms}")
}

/// The `SCAN` pattern of the node's index hashes: every tenant's, or one's.
/// Node names and tenants hold none of `*?[]\`, so they match as written.
pub fn pattern(q: &ClaimsQuery) -> String {
    let tenant = q.tenant.as_deref().unwrap_or("*");
    format!("ankusa:{{{tenant}}}:unproven:{}:*", q.node)
}

/// Whether `commit` is one `q` lists: its node, committed within the range.
pub fn lists(q: &ClaimsQuery, commit: &Unproven) -> bool {
    commit.node == q.node && q.from_ms <= commit.at_ms && commit.at_ms <= q.to_ms
}

/// One unproven commit, as listed and as named in a release.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Unproven {
    pub tenant: String,
    pub node: String,
    pub source_id: String,
    pub key: String,
    /// The hook id the event is committed under.
    pub hook_id: String,
    /// When it was committed (unix ms, Redis's clock).
    pub at_ms: u64,
    /// Its dedupe window: the series it was committed in.
    pub ttl_ms: u64,
}

impl Unproven {
    /// The commits one index hash holds, from its key and `HGETALL` value
    /// (field, value pairs); entries that don't parse are left out.
    pub fn all_of(redis_key: &str, pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<Unproven> {
        let Some((tenant, node, ttl_ms)) = parse_index_key(redis_key) else {
            return Vec::new();
        };
        pairs
            .iter()
            .filter_map(|(_, value)| {
                let value = std::str::from_utf8(value).ok()?;
                let mut parts = value.splitn(4, ':');
                let at_ms = parts.next()?.parse().ok()?;
                let hook_id = parts.next()?.to_string();
                let source_id = parts.next()?.to_string();
                let key = parts.next()?.to_string();
                Some(Unproven {
                    tenant: tenant.to_string(),
                    node: node.to_string(),
                    source_id,
                    key,
                    hook_id,
                    at_ms,
                    ttl_ms,
                })
            })
            .collect()
    }

    /// The partition of the committed layout it was written to.
    pub fn partition(&self) -> u64 {
        self.at_ms / partition_ms(self.ttl_ms)
    }

    /// The index hash that lists it: its minute's.
    pub fn index_key(&self) -> String {
        format!(
            "{}:{}",
            index_series(&self.tenant, &self.node, self.ttl_ms),
            self.at_ms / INDEX_MINUTE_MS
        )
    }

    /// The old layout's key of its event (written too under `--committed-layout dual`).
    pub fn claim_key(&self) -> String {
        format!(
            "ankusa:{{{}}}:claim:{}:{}",
            self.tenant, self.source_id, self.key
        )
    }

    /// The release script's keys (the index hash, the old layout's key) and
    /// arguments (the series, the partition, the event's digest, the hook id).
    pub fn release_call(&self) -> ([String; 2], [Vec<u8>; 4]) {
        let series = format!("ankusa:{{{}}}:committed:{}", self.tenant, self.ttl_ms);
        (
            [self.index_key(), self.claim_key()],
            [
                series.into_bytes(),
                self.partition().to_string().into_bytes(),
                committed::digest_of(&self.source_id, &self.key).to_vec(),
                self.hook_id.clone().into_bytes(),
            ],
        )
    }

    /// Checks a commit named in a release; errors name the item, field and value.
    pub fn check(&self, i: usize) -> Result<(), String> {
        check_fields(
            &format!("commits[{i}]"),
            [
                &self.tenant,
                &self.source_id,
                &self.key,
                &self.hook_id,
                &self.node,
            ],
        )?;
        if !(TTL_MS.min..=TTL_MS.max).contains(&self.ttl_ms) {
            return Err(format!(
                "commits[{i}].ttl_ms: {} is outside {}..={}",
                self.ttl_ms, TTL_MS.min, TTL_MS.max
            ));
        }
        Ok(())
    }
}

/// `ankusa:{<tenant>}:unproven:<node>:<ttl_ms>:<minute>` → tenant, node, ttl_ms.
fn parse_index_key(redis_key: &str) -> Option<(&str, &str, u64)> {
    let rest = redis_key.strip_prefix("ankusa:{")?;
    let (tenant, rest) = rest.split_once("}:unproven:")?;
    let mut parts = rest.split(':');
    let (node, ttl, p) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || p.parse::<u64>().is_err() {
        return None;
    }
    Some((tenant, node, ttl.parse().ok()?))
}

/// `POST /v1/commits/release`: the commits to remove, as listed.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ReleaseRequest {
    pub commits: Vec<Unproven>,
}

impl ReleaseRequest {
    pub fn check(&self) -> Result<(), String> {
        check_items("commits", &self.commits, Unproven::check)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOOK: &str = "0190b6f5-7c1a-7def-8abc-0123456789ab";

    fn listed() -> Unproven {
        let key = "ankusa:{acme}:unproven:edge-a:600000:30000000";
        let value = format!("1800000000123:{HOOK}:gh:evt:1 with: colons");
        let all = Unproven::all_of(key, &[(vec![1; 14], value.into_bytes())]);
        assert_eq!(all.len(), 1, "{all:?}");
        all[0].clone()
    }

    #[test]
    fn an_index_entry_gives_its_commit_and_a_release_its_keys() {
        let c = listed();
        assert_eq!(
            (c.tenant.as_str(), c.node.as_str(), c.ttl_ms, c.at_ms),
            ("acme", "edge-a", 600_000, 1_800_000_000_123)
        );
        assert_eq!(
            (c.hook_id.as_str(), c.source_id.as_str(), c.key.as_str()),
            (HOOK, "gh", "evt:1 with: colons")
        );
        assert_eq!(c.partition(), 1_800_000_000_123 / 300_000);
        assert_eq!(
            c.index_key(),
            "ankusa:{acme}:unproven:edge-a:600000:30000000"
        );
        let (keys, args) = c.release_call();
        assert_eq!(keys[1], "ankusa:{acme}:claim:gh:evt:1 with: colons");
        assert_eq!(args[0], b"ankusa:{acme}:committed:600000");
        assert_eq!(args[2].len(), committed::DIGEST_LEN);
        assert_eq!(args[3], HOOK.as_bytes());
        for key in [
            "ankusa:{acme}:unproven:edge-a:600000",
            "ankusa:{acme}:unproven:edge-a:x:1",
            "ankusa:{acme}:claim:gh:k",
        ] {
            assert!(Unproven::all_of(key, &[(vec![], b"1:h:gh:k".to_vec())]).is_empty());
        }
        let bad = Unproven::all_of(
            "ankusa:{acme}:unproven:edge-a:600000:1",
            &[(vec![], b"soon:h:gh:k".to_vec())],
        );
        assert!(bad.is_empty());
    }

    #[test]
    fn a_query_lists_its_nodes_commits_in_range() {
        let c = listed();
        let q = |query: &str| ClaimsQuery::parse(Some(query)).unwrap();
        assert!(lists(&q("node=edge-a"), &c));
        assert!(lists(
            &q("node=edge-a&from=1800000000123&to=1800000000123"),
            &c
        ));
        assert!(!lists(&q("node=edge-a&from=1800000000124"), &c));
        assert!(!lists(&q("node=edge-b"), &c));
        assert_eq!(
            pattern(&q("node=edge-a&tenant=acme")),
            "ankusa:{acme}:unproven:edge-a:*"
        );
        assert_eq!(pattern(&q("node=edge-a")), "ankusa:{*}:unproven:edge-a:*");
    }

    #[test]
    fn a_release_names_a_bad_item_and_field() {
        let good = listed();
        for (field, change) in [
            (
                "node",
                (|c: &mut Unproven| c.node = "edge a".into()) as fn(&mut Unproven),
            ),
            ("hook_id", |c| c.hook_id = "a:b".into()),
            ("tenant", |c| c.tenant = "a.b".into()),
            ("ttl_ms", |c| c.ttl_ms = 0),
        ] {
            let mut bad = good.clone();
            change(&mut bad);
            let err = ReleaseRequest {
                commits: vec![good.clone(), bad],
            }
            .check()
            .unwrap_err();
            assert!(err.contains(&format!("commits[1].{field}")), "{err}");
        }
        let many = ReleaseRequest {
            commits: vec![good; crate::claims::MAX_RELEASE + 1],
        };
        assert!(many.check().unwrap_err().contains("at most 1000"));
    }
}
