//! One slot's bytes: a tenant's name with its hooks and bytes buckets and the
//! guests that shared the slot (the layout is in the parent module's docs).

use crate::limit::gcra::Bucket;
use crate::wire::ChargeKind;

/// Format 2: a bucket is (stamp, level, empty_at); format 1 held one TAT.
const FORMAT: u8 = 2;
const HEADER_LEN: usize = 57;

/// One bucket as a slot holds it.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(super) struct Held {
    pub bucket: Bucket,
    /// µs at which `bucket` is empty at its tenant's rate.
    pub empty_at: u64,
}

/// A tenant's hooks and bytes buckets at one slot.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(super) struct Pair {
    pub hooks: Held,
    pub bytes: Held,
}

impl Pair {
    pub fn get(&self, kind: ChargeKind) -> Held {
        match kind {
            ChargeKind::Hooks => self.hooks,
            ChargeKind::Bytes => self.bytes,
        }
    }

    /// Sets a bucket; a kind charged twice keeps the later-emptying one.
    pub fn raise(&mut self, kind: ChargeKind, held: Held) {
        let field = match kind {
            ChargeKind::Hooks => &mut self.hooks,
            ChargeKind::Bytes => &mut self.bytes,
        };
        if held.empty_at >= field.empty_at {
            *field = held;
        }
    }

    /// Every bucket is idle at `now_us`: a charge sees the same as a fresh one.
    pub fn idle_at(&self, now_us: u64) -> bool {
        self.hooks.empty_at <= now_us && self.bytes.empty_at <= now_us
    }
}

/// A decoded slot value.
pub(super) enum Slot<'v> {
    /// Never written (or pre-created empty).
    Empty,
    /// Not in [`FORMAT`]: treated as free, never as a tenant's state.
    Unreadable,
    Held {
        tenant: &'v [u8],
        tats: Pair,
        guests: u64,
    },
}

pub(super) fn decode(value: &[u8]) -> Slot<'_> {
    if value.is_empty() {
        return Slot::Empty;
    }
    if value.len() < HEADER_LEN || value[0] != FORMAT {
        return Slot::Unreadable;
    }
    let word = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&value[at..at + 8]);
        u64::from_le_bytes(b)
    };
    let held = |at: usize| Held {
        bucket: Bucket {
            stamp_us: word(at),
            level: word(at + 8),
        },
        empty_at: word(at + 16),
    };
    Slot::Held {
        tenant: &value[HEADER_LEN..],
        tats: Pair {
            hooks: held(1),
            bytes: held(25),
        },
        guests: word(49),
    }
}

pub(super) fn encode(tenant: &[u8], tats: Pair, guests: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + tenant.len());
    out.push(FORMAT);
    for held in [tats.hooks, tats.bytes] {
        out.extend_from_slice(&held.bucket.stamp_us.to_le_bytes());
        out.extend_from_slice(&held.bucket.level.to_le_bytes());
        out.extend_from_slice(&held.empty_at.to_le_bytes());
    }
    out.extend_from_slice(&guests.to_le_bytes());
    out.extend_from_slice(tenant);
    out
}

/// A tenant's bit in a slot's guest mask. The top six hash bits, because the
/// low ones pick the home slot and would be the same for every guest of it.
pub(super) fn guest_bit(tenant: &[u8]) -> u64 {
    1 << (fnv1a(tenant) >> 58)
}

/// 64-bit FNV-1a: tiny, and the same in every process and every worker, which
/// std's randomly seeded hasher is not (workers must agree on a tenant's slot).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}
