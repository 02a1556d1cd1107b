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

use uuid::{Builder, Uuid, Variant};

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
    Builder::from_unix_timestamp_millis(unix_ms & MS_MASK, &random)
        .into_uuid()
        .hyphenated()
        .to_string()
}

/// The unix ms a UUIDv7 was made at; None unless `id` is a well-formed
/// version-7, variant-10 UUID in 8-4-4-4-12 form (either case — an upstream
/// may echo it back uppercased).
pub fn unix_ms_of(id: &str) -> Option<u64> {
    // 36 characters is the hyphenated form alone (simple is 32, braced 38).
    if id.len() != TEXT_LEN {
        return None;
    }
    let uuid = Uuid::try_parse(id).ok()?;
    if uuid.get_version_num() != 7 || uuid.get_variant() != Variant::RFC4122 {
        return None;
    }
    let (secs, nanos) = uuid.get_timestamp()?.to_unix();
    Some(secs * 1_000 + u64::from(nanos) / 1_000_000)
}

#[cfg(test)]
mod tests;
