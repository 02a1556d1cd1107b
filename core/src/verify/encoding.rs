//! Hex and base64 as signatures and secrets write them.

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use base64::engine::DecodePaddingMode;
use base64::Engine;

/// Standard base64 read with or without its `=` padding.
const PADDING_OPTIONAL: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Lower- or upper-case hex; None if any byte isn't a hex digit or the length is odd.
pub fn hex(text: &[u8]) -> Option<Vec<u8>> {
    hex::decode(text).ok()
}

/// Standard base64 with padding, as Shopify and Standard Webhooks write it.
pub fn base64(text: &[u8]) -> Option<Vec<u8>> {
    STANDARD.decode(text).ok()
}

/// Standard base64 with its padding or without it, as the Standard Webhooks
/// and Svix libraries read a `whsec_` secret (and sign identically with
/// either form).
pub fn base64_padding_optional(text: &[u8]) -> Option<Vec<u8>> {
    PADDING_OPTIONAL.decode(text).ok()
}

/// Lower-case hex of `bytes` (for signing in tests and the mock provider).
pub fn to_hex(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

/// Standard base64 of `bytes`.
pub fn to_base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn hex_round_trips_and_refuses_bad_digits() {
        assert_eq!(hex(b"00ffA0"), Some(vec![0, 255, 160]));
        assert_eq!(to_hex(&[0, 255, 160]), "00ffa0");
        assert_eq!(hex(b"0"), None);
        assert_eq!(hex(b"zz"), None);
        assert_eq!(hex(b""), Some(vec![]));
    }

    #[test]
    fn base64_round_trips_and_refuses_garbage() {
        assert_eq!(base64(b"AAH/"), Some(vec![0, 1, 255]));
        assert_eq!(to_base64(&[0, 1, 255]), "AAH/");
        assert_eq!(base64(b"!!!!"), None);
        assert_eq!(base64(b"AAE"), None, "padding is required");
        assert_eq!(base64_padding_optional(b"AAE"), Some(vec![0, 1]));
        assert_eq!(base64_padding_optional(b"AAE="), Some(vec![0, 1]));
        assert_eq!(base64_padding_optional(b"AAE=="), None);
        assert_eq!(base64_padding_optional(b"!!!!"), None);
    }
}
