//! Ids and randomness for the sample services: UUIDv7 hook ids and a small
//! seedable generator, so a provider run can be replayed with `--seed`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// SplitMix64: tiny, fast and good enough for ids and jitter (not for secrets).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A generator seeded from the clock, the PID and a process-wide counter,
    /// so two generators made in the same nanosecond still differ.
    pub fn from_entropy() -> Rng {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut r = Rng(nanos
            ^ (u64::from(std::process::id()) << 32)
            ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n); 0 when n is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// `len` characters from `[0-9A-Za-z]`.
    pub fn alnum(&mut self, len: usize) -> String {
        const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len() as u64) as usize] as char)
            .collect()
    }

    /// A random (version 4) UUID, as GitHub and Shopify send in their id headers.
    pub fn uuid_v4(&mut self) -> String {
        let hi = (self.next_u64() & !0xF000) | 0x4000;
        let lo = (self.next_u64() & !(0b11 << 62)) | (0b10 << 62);
        format_uuid(hi, lo)
    }

    /// A UUIDv7: 48 bits of Unix ms, then random bits, so ids sort by time.
    pub fn uuid_v7(&mut self, unix_ms: u64) -> String {
        let hi = ((unix_ms & 0xFFFF_FFFF_FFFF) << 16) | 0x7000 | (self.next_u64() & 0x0FFF);
        let lo = (self.next_u64() & !(0b11 << 62)) | (0b10 << 62);
        format_uuid(hi, lo)
    }
}

fn format_uuid(hi: u64, lo: u64) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xFFFF,
        hi & 0xFFFF,
        lo >> 48,
        lo & 0xFFFF_FFFF_FFFF
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_v7_carries_the_time_and_version() {
        let id = Rng::new(7).uuid_v7(0x0123_4567_89AB);
        assert_eq!(&id[..13], "01234567-89ab");
        assert_eq!(id.as_bytes()[14], b'7');
        assert!(
            matches!(id.as_bytes()[19], b'8' | b'9' | b'a' | b'b'),
            "variant bits in {id}"
        );
        assert_eq!(id.len(), 36);
    }

    #[test]
    fn same_seed_same_sequence() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        assert_eq!(a.alnum(24), b.alnum(24));
        assert_ne!(
            Rng::from_entropy().next_u64(),
            Rng::from_entropy().next_u64()
        );
    }
}
