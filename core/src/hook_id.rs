//! Hook ids: UUIDv7 (RFC 9562), so ids sort by arrival and carry their time.
//!
//! Layout (big-endian): 48 bits unix ms, version `7`, 12 random bits, variant
//! `10`, 62 random bits — 74 of the 80 random bits given are used.
//!
//! The random bits come from [`IdBits`]: one draw of the host's randomness
//! per VM, expanded per hook by a keyed bijection of a counter, so a hook
//! costs no call to the host's random source and a VM never repeats itself.

/// Random bytes one id consumes.
pub const RANDOM_BYTES: usize = 10;

const HEX: &[u8; 16] = b"0123456789abcdef";
/// Where the text form has a hyphen.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];
const TEXT_LEN: usize = 36;
/// Unix ms past 2^48 (year 10889) wrap; the id stays well-formed.
const MS_MASK: u64 = (1 << 48) - 1;

/// The random bits of a VM's hook ids, from one seed.
///
/// Each id's bits are the seed's two leading bytes (10 used bits) and a
/// keyed permutation of a 64-bit counter spread over the 64 bits the id
/// uses fully. A permutation never maps two counters to one value, so one VM
/// (one seed) hands out 2^64 distinct bit patterns before any repeats, in
/// any millisecond; two VMs (workers, or a restart) have independent seeds,
/// so their ids collide no more often than ids drawn at random. Not a
/// secret: a hook id names a hook, it guards nothing.
#[derive(Clone, Debug)]
pub struct IdBits {
    seed: [u8; RANDOM_BYTES],
    key: u64,
    counter: u64,
}

impl IdBits {
    /// Bits from `seed`: the host's randomness, drawn once per VM.
    pub fn new(seed: [u8; RANDOM_BYTES]) -> IdBits {
        let mut key = [0u8; 8];
        key.copy_from_slice(&seed[2..]);
        IdBits {
            seed,
            key: u64::from_le_bytes(key),
            counter: 0,
        }
    }

    /// The random bytes of the next id.
    pub fn next_bits(&mut self) -> [u8; RANDOM_BYTES] {
        self.counter = self.counter.wrapping_add(1);
        let mixed = permute(self.counter, self.key).to_be_bytes();
        let mut out = self.seed;
        // Bytes 1 and 3..10 are used whole by `hook_id`; 0 and 2 in part.
        out[1] = mixed[0];
        out[3..].copy_from_slice(&mixed[1..]);
        out
    }
}

/// A bijection of u64 keyed by `key`: adding the key, xor-shifts and
/// multiplications by odd constants are each invertible (SplitMix64's
/// finaliser), so distinct inputs give distinct outputs.
fn permute(x: u64, key: u64) -> u64 {
    let mut z = x.wrapping_add(key);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

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
    fn one_seed_never_repeats_and_seeds_differ() {
        let mut a = IdBits::new([1; RANDOM_BYTES]);
        let mut b = IdBits::new([2; RANDOM_BYTES]);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..20_000 {
            // Same millisecond throughout: only the random bits tell ids apart.
            assert!(seen.insert(hook_id(1_764_466_000_000, a.next_bits())));
            assert!(seen.insert(hook_id(1_764_466_000_000, b.next_bits())));
        }
        // A counter step changes about half the bits, not only the low ones.
        let mut c = IdBits::new([0; RANDOM_BYTES]);
        let (x, y) = (c.next_bits(), c.next_bits());
        let differing: u32 = x.iter().zip(&y).map(|(p, q)| (p ^ q).count_ones()).sum();
        assert!(differing > 16, "{x:?} {y:?}");
    }

    #[test]
    fn the_permutation_is_invertible() {
        // Undo each step of `permute`: distinct counters can't collide.
        fn unshift(mut z: u64, s: u32) -> u64 {
            let mut out = z;
            for _ in 0..64 / s {
                z >>= s;
                out ^= z;
            }
            out
        }
        fn inverse_odd(m: u64) -> u64 {
            let mut inv = m;
            for _ in 0..6 {
                inv = inv.wrapping_mul(2u64.wrapping_sub(m.wrapping_mul(inv)));
            }
            inv
        }
        let key = 0x0123_4567_89ab_cdef;
        for x in [0, 1, 2, u64::MAX, 1 << 63, 0xdead_beef] {
            let mut z = unshift(permute(x, key), 31);
            z = unshift(z.wrapping_mul(inverse_odd(0x94d0_49bb_1331_11eb)), 27);
            z = unshift(z.wrapping_mul(inverse_odd(0xbf58_476d_1ce4_e5b9)), 30);
            assert_eq!(z.wrapping_sub(key), x);
        }
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
