//! Provider signatures, checked before a hook is charged or claimed.
//!
//! [`verify`] takes a source's [`Scheme`], the signing keys of its secrets,
//! a header lookup, the body and now (unix seconds), and says whether the
//! delivery was signed by one of those secrets within the timestamp
//! tolerance. MACs are compared in constant time and every key is tried.
//!
//! - [`rule`]: the `verify` configuration types and presets.
//! - [`mac`]: HMAC-SHA256 and the constant-time check.
//! - [`encoding`]: hex and base64.
//! - [`body_mac`]: one header holding the MAC of the body (GitHub, Shopify, generic).
//! - [`stripe`]: the `Stripe-Signature` header.
//! - [`standard`]: Standard Webhooks and Svix.
//! - [`timestamp`]: the tolerance check.
//! - [`keys`]: each verifying source's signing keys, read through an environment.
//! - [`replay`]: the replay guard's claim on a signed body.

pub mod body_mac;
pub mod encoding;
pub mod keys;
pub mod mac;
pub mod replay;
pub mod rule;
pub mod standard;
pub mod stripe;
pub mod timestamp;

pub use keys::Keys;
pub use rule::{Encoding, Family, Scheme, VerifyRule, DEFAULT_TOLERANCE_S};

/// Why a delivery was refused. Both are answered 401.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Refusal {
    /// No signature header, an unreadable one, or none made with a configured secret.
    BadSignature,
    /// Signed by a configured secret, but the signed timestamp is outside the tolerance.
    StaleTimestamp,
}

impl Refusal {
    /// The `error` of the 401 body.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::BadSignature => "bad_signature",
            Refusal::StaleTimestamp => "stale_timestamp",
        }
    }
}

/// Checks one delivery. `header` answers a lower-case header name's first
/// value; `keys` are the signing keys of the source's secrets
/// ([`Scheme::key`]); `now_s` is unix seconds.
pub fn verify(
    scheme: &Scheme,
    keys: &[Vec<u8>],
    header: impl Fn(&str) -> Option<String>,
    body: &[u8],
    now_s: u64,
) -> Result<(), Refusal> {
    match scheme {
        Scheme::BodyMac {
            header: name,
            prefix,
            encoding,
        } => body_mac::verify(keys, header(name).as_deref(), prefix, *encoding, body),
        Scheme::Stripe { tolerance_s } => stripe::verify(
            keys,
            header("stripe-signature").as_deref(),
            body,
            now_s,
            *tolerance_s,
        ),
        Scheme::StandardWebhooks {
            family,
            tolerance_s,
        } => {
            let p = family.prefix();
            let (id, timestamp, signature) = (
                header(&format!("{p}id")),
                header(&format!("{p}timestamp")),
                header(&format!("{p}signature")),
            );
            standard::verify(
                keys,
                standard::Headers {
                    id: id.as_deref(),
                    timestamp: timestamp.as_deref(),
                    signature: signature.as_deref(),
                },
                body,
                now_s,
                *tolerance_s,
            )
        }
    }
}

#[cfg(test)]
mod tests;
