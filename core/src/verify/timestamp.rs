//! How far a signed timestamp may be from now.

/// Whether `signed` (unix seconds) is within `tolerance_s` of `now_s`, either
/// way: a replay is old, and a clock far ahead is refused as well.
pub fn fresh(signed: u64, now_s: u64, tolerance_s: u64) -> bool {
    signed.abs_diff(now_s) <= tolerance_s
}

/// A timestamp as the schemes write it: decimal unix seconds, nothing else.
pub fn parse(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 20 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn tolerance_is_inclusive_both_ways() {
        assert!(fresh(1_000, 1_300, 300));
        assert!(!fresh(1_000, 1_301, 300));
        assert!(fresh(1_300, 1_000, 300));
        assert!(!fresh(1_301, 1_000, 300));
        assert!(fresh(0, u64::MAX, u64::MAX));
    }

    #[test]
    fn only_plain_decimal_parses() {
        assert_eq!(parse("1614265330"), Some(1_614_265_330));
        for bad in ["", "+1", "-1", "1.5", " 1", "99999999999999999999999"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }

    /// 20 digits is the bound (u64's width): leading zeros up to it parse,
    /// one digit more is refused before any arithmetic.
    #[test]
    fn twenty_digits_at_most() {
        assert_eq!(parse("00000000001614265330"), Some(1_614_265_330));
        assert_eq!(parse("000000000001614265330"), None);
    }
}
