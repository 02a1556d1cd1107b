//! Hook ids: UUIDv7 (RFC 9562), so ids sort by arrival and carry their time.
//!
//! Layout (big-endian): 48 bits unix ms, version `7`, 12 random bits, variant
//! `10`, 62 random bits — 74 of the 80 random bits given are used.

/// Random bytes one id consumes.
pub const RANDOM_BYTES: usize = 10;

const HEX: &[u8; 16] = b"0123456789abcdef";
/// Where the text form has a hyphen.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];
const TEXT_LEN: usize = 36;
/// Unix ms past 2^48 (year 10889) wrap; the id stays well-formed.
const MS_MASK: u64 = (1 << 48) - 1;

/// A UUIDv7 in lowercase 8-4-4-4-12 form.
pub fn hook_id(unix_ms: u64, random: [u8; RANDOM_BYTES]) -> String {
    let ms = (unix_ms & MS_MASK).to_be_bytes();
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&ms[2..]);
    bytes[6] = 0x70 | (random[0] & 0x0f);
    bytes[7] = random[1];
    bytes[8] = 0x80 | (random[2] & 0x3f);
    bytes[9..].copy_from_slice(&random[3..]);
    let mut text = String::with_capacity(TEXT_LEN);
    for (i, byte) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            text.push('-');
        }
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    text
}

/// The unix ms a UUIDv7 was made at; None unless `id` is a well-formed
/// version-7, variant-10 UUID (either case — an upstream may echo it back uppercased).
pub fn unix_ms_of(id: &str) -> Option<u64> {
    let text = id.as_bytes();
    if text.len() != TEXT_LEN {
        return None;
    }
    let mut digits = Vec::with_capacity(32);
    for (i, &c) in text.iter().enumerate() {
        if HYPHENS.contains(&i) {
            if c != b'-' {
                return None;
            }
        } else {
            digits.push(char::from(c).to_digit(16)?);
        }
    }
    // Digit 12 is the version nibble; digit 16's top two bits are the variant.
    if digits[12] != 7 || digits[16] >> 2 != 0b10 {
        return None;
    }
    Some(
        digits[..12]
            .iter()
            .fold(0u64, |ms, &d| (ms << 4) | u64::from(d)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn layout_matches_rfc_9562() {
        // 0x017F22E279B0 = 1645557742000 ms, the RFC 9562 appendix example's time.
        let id = hook_id(
            1_645_557_742_000,
            [0xc, 0xc3, 0x18, 0xc4, 0xdc, 0x0c, 0x0c, 0x07, 0x39, 0x8f],
        );
        assert_eq!(id, "017f22e2-79b0-7cc3-98c4-dc0c0c07398f");
    }

    #[test]
    fn version_and_variant_bits_are_forced_whatever_the_randomness() {
        for random in [[0x00; RANDOM_BYTES], [0xff; RANDOM_BYTES]] {
            let id = hook_id(1, random);
            assert_eq!(id.len(), TEXT_LEN);
            assert_eq!(&id[14..15], "7");
            assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
            assert!(id.bytes().all(|b| b == b'-' || HEX.contains(&b)));
        }
        assert_eq!(
            hook_id(0, [0xff; RANDOM_BYTES]),
            "00000000-0000-7fff-bfff-ffffffffffff"
        );
    }

    #[test]
    fn ids_sort_by_time() {
        let early = hook_id(1_700_000_000_000, [0xff; RANDOM_BYTES]);
        let late = hook_id(1_700_000_000_001, [0x00; RANDOM_BYTES]);
        assert!(early < late);
    }

    #[test]
    fn unix_ms_round_trips_and_wraps_past_48_bits() {
        for ms in [0, 1, 1_764_466_000_000, MS_MASK] {
            assert_eq!(unix_ms_of(&hook_id(ms, [7; RANDOM_BYTES])), Some(ms));
        }
        assert_eq!(
            unix_ms_of(&hook_id(MS_MASK + 5, [7; RANDOM_BYTES])),
            Some(4)
        );
    }

    #[test]
    fn unix_ms_of_accepts_uppercase() {
        let id = hook_id(1_764_466_000_000, [0xab; RANDOM_BYTES]).to_ascii_uppercase();
        assert_eq!(unix_ms_of(&id), Some(1_764_466_000_000));
    }

    #[test]
    fn unix_ms_of_refuses_anything_but_a_uuid_v7() {
        let good = hook_id(1_764_466_000_000, [0x11; RANDOM_BYTES]);
        let v4 = good.replacen("-7", "-4", 1);
        let bad_variant = format!("{}c{}", &good[..19], &good[20..]);
        let no_hyphens = good.replace('-', "");
        let shifted = format!("{}-{}", &good[..7], &good[8..]);
        for bad in [
            "",
            "not-a-uuid",
            &v4,
            &bad_variant,
            &no_hyphens,
            &shifted,
            &format!("{good}0"),
        ] {
            assert_eq!(unix_ms_of(bad), None, "{bad:?}");
        }
        let non_hex = format!("g{}", &good[1..]);
        assert_eq!(unix_ms_of(&non_hex), None);
        assert_eq!(unix_ms_of(&"é".repeat(18)), None);
    }
}
