//! The replay guard: a fleet-wide claim on the digest of a signed body.
//!
//! GitHub, Shopify and the generic rule sign the body alone, not the
//! delivery id the edge dedupes on, so a captured delivery would be admitted
//! again under any fresh id. A source with `replay_guard` claims the body's
//! SHA-256 besides the event key, in the same store hit and with the same
//! two-phase life (pending until the upstream's 2xx, then committed for the
//! window; released otherwise): a second delivery of the same body within the
//! window is answered as a duplicate of the first hook.
//!
//! The claim lives in a namespace of its own: its source id is
//! [`CLAIM_SOURCE`], which holds a `.` that no configured source id may
//! (see [`crate::config::is_valid_id`]), so no event key of any source can
//! name a body claim, and its key is `<source id>:sha256:<hex>`.

use super::encoding::to_hex;
use crate::wire::Claim;
use sha2::{Digest, Sha256};

/// The claim source id of every body claim (a wire rule: see
/// [`crate::wire::BODY_CLAIM_SOURCE`]).
pub use crate::wire::BODY_CLAIM_SOURCE as CLAIM_SOURCE;

/// The body claim's key for a delivery of `source_id` with `body`.
pub fn body_key(source_id: &str, body: &[u8]) -> String {
    format!("{source_id}:sha256:{}", to_hex(&Sha256::digest(body)))
}

/// Whether `claim` is a body claim (not an event key's).
pub fn is_body_claim(claim: &Claim) -> bool {
    claim.is_body_claim()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn only_a_claim_in_the_body_namespace_is_a_body_claim() {
        let claim = |source_id: &str| Claim {
            tenant: "acme".into(),
            source_id: source_id.into(),
            key: "k".into(),
            hook_id: "h".into(),
            node: "edge-1".into(),
            ttl_ms: 1_000,
            pending_ttl_ms: 1_000,
        };
        assert!(is_body_claim(&claim(CLAIM_SOURCE)));
        assert!(!is_body_claim(&claim("gh")));
    }

    #[test]
    fn the_key_is_the_sources_sha256_of_the_body_and_fits_the_wire() {
        let key = body_key("gh", b"abc");
        assert_eq!(
            key,
            "gh:sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_ne!(body_key("gh2", b"abc"), key, "one namespace per source");
        let claim = Claim {
            tenant: "acme".into(),
            source_id: CLAIM_SOURCE.into(),
            key: body_key(&"s".repeat(crate::config::MAX_ID_LEN), b"{}"),
            hook_id: "h".into(),
            node: "edge-1".into(),
            ttl_ms: crate::verify::rule::DEFAULT_REPLAY_WINDOW_MS,
            pending_ttl_ms: 30_000,
        };
        assert_eq!(claim.validate("claim"), Ok(()));
        assert!(is_body_claim(&claim));
        assert!(
            !crate::config::is_valid_id(CLAIM_SOURCE),
            "no configured source can share the body claims' namespace"
        );
    }
}
