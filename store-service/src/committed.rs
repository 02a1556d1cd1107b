//! The compact layout of committed claims.
//!
//! A claim committed by the old layout (0.2.0 and earlier) is one Redis
//! string per event, `ankusa:{tenant}:claim:<source>:<key>` → `c:<hook id>`,
//! with its own TTL: about 213 bytes of `used_memory` each. The compact
//! layout keeps the same promise in about a fifth of that:
//!
//! - the field is the first [`DIGEST_LEN`] bytes of SHA-256 over the source
//!   and the event key ([`digest`]), not the raw key;
//! - the value is the hook id as 16 bytes when it is a UUID, else its text ([`hook_value`]);
//! - entries live in time-partitioned hashes: series
//!   `ankusa:{tenant}:committed:<ttl_ms>`, partitions of
//!   [`partition_ms`] = ⌈ttl_ms / 2⌉, each a counter `<series>:<p>` and
//!   bucket hashes `<series>:<p>:<b>`, all expiring together at
//!   [`expiry_ms`] (after the last entry the partition can hold has had its
//!   `ttl_ms`). The count addresses about [`BUCKET_FILL`] entries a bucket,
//!   so every hash stays in Redis's compact listpack encoding (≤ 128
//!   entries of ≤ 64 bytes) at any volume. A partition starts with as many
//!   buckets as the one before it needed (created by their first write), so
//!   a steady flow of commits fills it without moving an entry; past that it
//!   grows by linear hashing (a split moves about half of one bucket's
//!   entries to a new one), its events kept in `<series>:<p>:n`.
//!
//! The hit script looks an event up in the few partitions its window spans,
//! in its one call, under the tenant's one hash tag (`scripts/claims.lua`).
//! Pending claims keep their own key and TTL, as before.

use ankusa_core::wire::Claim;
use sha2::{Digest, Sha256};

/// Bytes of SHA-256 kept per event: 112 bits. Two different events of one
/// tenant's window share a field with probability about n² / 2¹¹³: for
/// n = 10¹² events, 10²⁴ / 1.04·10³⁴ ≈ 10⁻¹⁰.
pub const DIGEST_LEN: usize = 14;

/// The average entries a bucket hash is grown for (`COMMITTED_FILL` in
/// claims.lua). Under linear hashing a bucket not yet split this round holds
/// up to twice the average, so 40 keeps even those (≈ 80, Poisson) well
/// under Redis's listpack limit of 128.
pub const BUCKET_FILL: u64 = 40;

/// Where committed claims are written (`--committed-layout`); both read both.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Layout {
    /// Writes the compact layout only (the default, once no store of 0.2.0
    /// shares the Redis).
    #[default]
    Compact,
    /// Writes both layouts, for the upgrade while stores of 0.2.0, which
    /// read only the old one, share the Redis.
    Dual,
}

impl Layout {
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Compact => "compact",
            Layout::Dual => "dual",
        }
    }
}

/// The field of `claim`'s event: SHA-256 of the source's length (4 bytes,
/// big-endian), the source and the event key, cut to [`DIGEST_LEN`].
pub fn digest(claim: &Claim) -> [u8; DIGEST_LEN] {
    digest_of(&claim.source_id, &claim.key)
}

/// [`digest`] of an event named by its source and key.
pub fn digest_of(source: &str, key: &str) -> [u8; DIGEST_LEN] {
    let mut sha = Sha256::new();
    sha.update((source.len() as u32).to_be_bytes());
    sha.update(source.as_bytes());
    sha.update(key.as_bytes());
    let full = sha.finalize();
    let mut out = [0u8; DIGEST_LEN];
    out.copy_from_slice(&full[..DIGEST_LEN]);
    out
}

/// `ankusa:{tenant}:committed:<ttl_ms>`: the series the claim's partitions
/// are named after (same hash tag as every key of the tenant).
pub fn series(claim: &Claim) -> String {
    format!("ankusa:{{{}}}:committed:{}", claim.tenant, claim.ttl_ms)
}

/// A partition's length for `ttl_ms`: ⌈ttl_ms / 2⌉.
pub fn partition_ms(ttl_ms: u64) -> u64 {
    ttl_ms.div_ceil(2)
}

/// When (unix ms, Redis's clock) an entry committed at `commit_ms` is gone:
/// its partition's end plus `ttl_ms`. Present through this ms and absent
/// after it, so a duplicate for more than `ttl_ms` and at most
/// `ttl_ms + partition_ms(ttl_ms)` after the commit.
pub fn expiry_ms(commit_ms: u64, ttl_ms: u64) -> u64 {
    let part = partition_ms(ttl_ms);
    (commit_ms / part + 1) * part + ttl_ms
}

/// The hook id as stored: a UUID in canonical form (lowercase, hyphenated)
/// as its 16 bytes; any other id as its text, after `=` when it is 16
/// characters long (hook ids hold no `=`). At most 64 bytes either way
/// (`MAX_HOOK_ID_LEN`), so a bucket stays within Redis's listpack values.
pub fn hook_value(hook_id: &str) -> Vec<u8> {
    if let Some(bytes) = uuid_bytes(hook_id) {
        return bytes.to_vec();
    }
    if hook_id.len() == 16 {
        return format!("={hook_id}").into_bytes();
    }
    hook_id.as_bytes().to_vec()
}

/// The hook id a stored value holds (the inverse of [`hook_value`]).
pub fn hook_id_of(value: &[u8]) -> Option<String> {
    if value.len() == 16 {
        let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
        return Some(format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        ));
    }
    let text = std::str::from_utf8(value).ok()?;
    Some(text.trim_start_matches('=').to_string())
}

fn uuid_bytes(id: &str) -> Option<[u8; 16]> {
    let b = id.as_bytes();
    if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
        return None;
    }
    let hex: Vec<u8> = b.iter().copied().filter(|&c| c != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

/// The hit script's arguments for one claim's compact lookup, and the
/// settle script's for its commit: series, `ttl_ms`, digest.
pub fn lookup_args(claim: &Claim) -> [Vec<u8>; 3] {
    [
        series(claim).into_bytes(),
        claim.ttl_ms.to_string().into_bytes(),
        digest(claim).to_vec(),
    ]
}

/// The partitions the hit script's lookup of `claim` reads, named on the
/// store's clock (`now_ms`, unix ms), so the script need not build their
/// names: the partition p that `now_ms` falls in, then the counters of
/// p + 1, p, p − 1 and p − 2 (one ahead, for a clock that stepped back).
/// Redis's clock decides: the script uses them only when it finds itself in
/// p too, and builds the names itself otherwise (`committed_spans_sent` in
/// claims.lua).
pub fn partitions_sent(claim: &Claim, now_ms: u64) -> [Vec<u8>; 5] {
    let series = series(claim);
    let p = now_ms / partition_ms(claim.ttl_ms);
    let counter = |q: u64| format!("{series}:{q}").into_bytes();
    [
        p.to_string().into_bytes(),
        counter(p + 1),
        counter(p),
        counter(p.saturating_sub(1)),
        counter(p.saturating_sub(2)),
    ]
}

/// A script (one `EVAL`, one key) that reads what a claim key
/// `ankusa:{t}:claim:<source>:<event key>` holds in either layout, and its
/// arguments: the key's own value (`p:…`, or `c:<hook id>` of the old
/// layout), else `c:<hook id>` from the compact layout, else "". It scans
/// the tenant's keys (`KEYS`): for tests and an operator's look, never the
/// hot path.
pub fn read_either(claim_key: &str) -> Option<[String; 2]> {
    let (_, rest) = claim_key.split_once(":claim:")?;
    let (source, key) = rest.split_once(':')?;
    let hex: String = digest_of(source, key)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let script = format!(
        "{}\n{}",
        crate::scripts::CLAIMS_LUA,
        include_str!("scripts/claim_read.lua")
    );
    Some([script, hex])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(source: &str, key: &str) -> Claim {
        Claim {
            tenant: "acme".into(),
            source_id: source.into(),
            key: key.into(),
            hook_id: "h".into(),
            node: "n".into(),
            ttl_ms: 1000,
            pending_ttl_ms: 100,
        }
    }

    #[test]
    fn a_uuid_is_kept_as_16_bytes_and_any_other_id_as_its_text() {
        let uuid = "01a22a58-b525-7a36-ac16-fe50dd6137bd";
        let v = hook_value(uuid);
        assert_eq!(v.len(), 16);
        assert_eq!(hook_id_of(&v).as_deref(), Some(uuid));
        // Not canonical (uppercase), 15, 16 and 64 characters, short: kept
        // as text (never 16 bytes, never over 64), read back.
        let longest = "h".repeat(ankusa_core::limit::limits::MAX_HOOK_ID_LEN);
        for id in [
            "01A22A58-B525-7A36-AC16-FE50DD6137BD",
            "h-123456789abcd",
            "h-123456789abcde",
            "x",
            longest.as_str(),
        ] {
            let v = hook_value(id);
            assert_ne!(v.len(), 16, "{id}");
            assert!(v.len() <= 64, "{id}");
            assert_eq!(hook_id_of(&v).as_deref(), Some(id));
        }
    }

    #[test]
    fn the_source_and_the_key_cannot_trade_characters() {
        assert_ne!(digest(&claim("a:b", "c")), digest(&claim("a", "b:c")));
        assert_ne!(digest(&claim("gh", "k1")), digest(&claim("gh", "k2")));
        assert_eq!(digest(&claim("gh", "k1")), digest(&claim("gh", "k1")));
    }

    #[test]
    fn an_entry_lives_more_than_its_ttl_and_at_most_one_partition_more() {
        for ttl in [1, 2, 3, 1000, 1001, 259_200_000] {
            let part = partition_ms(ttl);
            for commit in [0, 1, part - 1, part, part + 1, 1_764_000_000_123] {
                let e = expiry_ms(commit, ttl);
                assert!(e > commit + ttl, "{ttl} {commit}");
                assert!(e <= commit + ttl + part, "{ttl} {commit}");
            }
        }
    }
}
