//! One header holding `prefix` + the HMAC-SHA256 of the body (GitHub,
//! Shopify, and the generic `hmac_sha256` rule).

use super::encoding;
use super::mac;
use super::rule::Encoding;
use super::Refusal;

pub fn verify(
    keys: &[Vec<u8>],
    value: Option<&str>,
    prefix: &str,
    encoding: Encoding,
    body: &[u8],
) -> Result<(), Refusal> {
    let claimed = value
        .map(str::trim)
        .and_then(|v| v.strip_prefix(prefix))
        .and_then(|text| match encoding {
            Encoding::Hex => encoding::hex(text.as_bytes()),
            Encoding::Base64 => encoding::base64(text.as_bytes()),
        })
        .ok_or(Refusal::BadSignature)?;
    if mac::matches_any(keys, &[body], &claimed) {
        Ok(())
    } else {
        Err(Refusal::BadSignature)
    }
}

/// The header value a sender would write for `body` under `key`.
pub fn sign(key: &[u8], prefix: &str, encoding: Encoding, body: &[u8]) -> String {
    let mac = mac::sign(key, &[body]);
    let text = match encoding {
        Encoding::Hex => encoding::to_hex(&mac),
        Encoding::Base64 => encoding::to_base64(&mac),
    };
    format!("{prefix}{text}")
}
