//! Standard Webhooks (and Svix, its origin, with `svix-` header names):
//! `webhook-signature: v1,<base64> [v1,<base64>…]`, each an HMAC-SHA256 of
//! `"{webhook-id}.{webhook-timestamp}.{body}"` keyed by the base64 after a
//! `whsec_` secret's prefix. Space-separated signatures, any may match;
//! other versions (`v1a,…`) are ignored.

use super::mac;
use super::{encoding, timestamp, Refusal};

/// Most `v1` signatures read from one header.
const MAX_SIGNATURES: usize = 8;

/// The three headers, as found.
pub struct Headers<'a> {
    pub id: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub signature: Option<&'a str>,
}

pub fn verify(
    keys: &[Vec<u8>],
    headers: Headers<'_>,
    body: &[u8],
    now_s: u64,
    tolerance_s: u64,
) -> Result<(), Refusal> {
    let (Some(id), Some(ts_text), Some(signature)) =
        (headers.id, headers.timestamp, headers.signature)
    else {
        return Err(Refusal::BadSignature);
    };
    let signed = timestamp::parse(ts_text).ok_or(Refusal::BadSignature)?;
    let parts: [&[u8]; 5] = [id.as_bytes(), b".", ts_text.as_bytes(), b".", body];
    let mut ok = false;
    for sig in signature
        .split(' ')
        .filter_map(|s| s.strip_prefix("v1,"))
        .take(MAX_SIGNATURES)
        .filter_map(|s| encoding::base64(s.as_bytes()))
    {
        ok |= mac::matches_any(keys, &parts, &sig);
    }
    if !ok {
        return Err(Refusal::BadSignature);
    }
    if !timestamp::fresh(signed, now_s, tolerance_s) {
        return Err(Refusal::StaleTimestamp);
    }
    Ok(())
}

/// The signature header a sender would write (`v1,<base64>`) under `key`
/// (the decoded secret, see [`super::Scheme::key`]).
pub fn sign(key: &[u8], id: &str, t: u64, body: &[u8]) -> String {
    let t = t.to_string();
    let mac = mac::sign(key, &[id.as_bytes(), b".", t.as_bytes(), b".", body]);
    format!("v1,{}", encoding::to_base64(&mac))
}
