//! HMAC-SHA256, and the constant-time check of a claimed MAC against each secret.

use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA256 of the concatenated `parts` under `key`.
pub fn sign(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    keyed(key, parts).finalize().into_bytes().into()
}

fn keyed(key: &[u8], parts: &[&[u8]]) -> HmacSha256 {
    // HMAC takes a key of any length; `new_from_slice` can't fail for it.
    let mut mac = match HmacSha256::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable_key(),
    };
    for part in parts {
        mac.update(part);
    }
    mac
}

#[cold]
fn unreachable_key() -> HmacSha256 {
    // Hmac<Sha256> accepts every key length; this path is never taken, but
    // the core never panics, so it falls back to an all-zero key.
    <HmacSha256 as hmac::digest::KeyInit>::new(&Default::default())
}

/// Whether `claimed` is the MAC of `parts` under any of `keys`. Each
/// comparison is of MACs in constant time (`subtle`, through `hmac`), and
/// every key is tried, so the time says nothing about which one matched.
pub fn matches_any(keys: &[Vec<u8>], parts: &[&[u8]], claimed: &[u8]) -> bool {
    let mut ok = false;
    for key in keys {
        ok |= keyed(key, parts).verify_slice(claimed).is_ok();
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn rfc4231_case_2() {
        // RFC 4231, test case 2.
        let mac = sign(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            super::super::encoding::to_hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn any_key_may_match_and_a_short_mac_never_does() {
        let keys = vec![b"old".to_vec(), b"new".to_vec()];
        let mac = sign(b"new", &[b"body"]);
        assert!(matches_any(&keys, &[b"body"], &mac));
        assert!(!matches_any(&keys, &[b"bodY"], &mac));
        assert!(!matches_any(&keys, &[b"body"], &mac[..16]));
        assert!(!matches_any(&[], &[b"body"], &mac));
    }
}
