//! `Stripe-Signature: t=1700000000,v1=<hex>[,v1=<hex>…][,v0=…]`: an HMAC-SHA256
//! (hex) of `"{t}.{body}"`, keyed by the endpoint secret's bytes. Any `v1`
//! may match (Stripe sends one per active secret while one is rolled);
//! other schemes (`v0`) are ignored.

use super::mac;
use super::{encoding, timestamp, Refusal};

/// Most `v1` entries read from one header (Stripe sends one or two).
const MAX_SIGNATURES: usize = 8;

pub fn verify(
    keys: &[Vec<u8>],
    value: Option<&str>,
    body: &[u8],
    now_s: u64,
    tolerance_s: u64,
) -> Result<(), Refusal> {
    let value = value.ok_or(Refusal::BadSignature)?;
    let mut t = None;
    let mut signatures = Vec::new();
    for item in value.split(',') {
        match item.trim().split_once('=') {
            Some(("t", v)) if t.is_none() => t = Some(v),
            Some(("v1", v)) if signatures.len() < MAX_SIGNATURES => {
                if let Some(sig) = encoding::hex(v.as_bytes()) {
                    signatures.push(sig);
                }
            }
            _ => {}
        }
    }
    let t_text = t.ok_or(Refusal::BadSignature)?;
    let signed = timestamp::parse(t_text).ok_or(Refusal::BadSignature)?;
    let parts: [&[u8]; 3] = [t_text.as_bytes(), b".", body];
    let mut ok = false;
    for sig in &signatures {
        ok |= mac::matches_any(keys, &parts, sig);
    }
    if !ok {
        return Err(Refusal::BadSignature);
    }
    if !timestamp::fresh(signed, now_s, tolerance_s) {
        return Err(Refusal::StaleTimestamp);
    }
    Ok(())
}

/// The header value Stripe would send for `body` at `t` under `secret`.
pub fn sign(secret: &[u8], t: u64, body: &[u8]) -> String {
    let t = t.to_string();
    let mac = mac::sign(secret, &[t.as_bytes(), b".", body]);
    format!("t={t},v1={}", encoding::to_hex(&mac))
}
