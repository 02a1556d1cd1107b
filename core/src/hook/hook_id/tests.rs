use super::*;

const HEX: &[u8] = b"0123456789abcdef";
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
