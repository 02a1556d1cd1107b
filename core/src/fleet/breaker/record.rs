//! The breaker's one shared-data value: its state, when it entered it, and
//! the sliding window's ring of sub-buckets, little-endian:
//!
//! ```text
//! [FORMAT][state: u8][since µs: u64][BUCKETS × (epoch: u64, calls: u32, failures: u32)]
//! ```

use super::{BreakerState, BUCKETS};

const FORMAT: u8 = 1;
const BUCKET_LEN: usize = 16;
pub(super) const VALUE_LEN: usize = 10 + BUCKETS * BUCKET_LEN;

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(super) struct Bucket {
    pub epoch: u64,
    pub calls: u32,
    pub failures: u32,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Record {
    pub state: BreakerState,
    pub since_us: u64,
    pub ring: [Bucket; BUCKETS],
}

impl Record {
    pub fn closed() -> Self {
        Record {
            state: BreakerState::Closed,
            since_us: 0,
            ring: [Bucket::default(); BUCKETS],
        }
    }

    /// An empty or unreadable value is a closed breaker with an empty window:
    /// the worst it costs is calls to a store that may be down, each bounded
    /// by the call budget, until the window fills and opens it.
    pub fn decode(value: &[u8]) -> Self {
        if value.len() != VALUE_LEN || value[0] != FORMAT {
            return Record::closed();
        }
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&value[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let u32_at = |at: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&value[at..at + 4]);
            u32::from_le_bytes(b)
        };
        let state = match value[1] {
            1 => BreakerState::Open,
            2 => BreakerState::Probing,
            _ => BreakerState::Closed,
        };
        let mut ring = [Bucket::default(); BUCKETS];
        for (i, bucket) in ring.iter_mut().enumerate() {
            let at = 10 + i * BUCKET_LEN;
            *bucket = Bucket {
                epoch: u64_at(at),
                calls: u32_at(at + 8),
                failures: u32_at(at + 12),
            };
        }
        Record {
            state,
            since_us: u64_at(2),
            ring,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(VALUE_LEN);
        out.push(FORMAT);
        out.push(match self.state {
            BreakerState::Closed => 0,
            BreakerState::Open => 1,
            BreakerState::Probing => 2,
        });
        out.extend_from_slice(&self.since_us.to_le_bytes());
        for b in &self.ring {
            out.extend_from_slice(&b.epoch.to_le_bytes());
            out.extend_from_slice(&b.calls.to_le_bytes());
            out.extend_from_slice(&b.failures.to_le_bytes());
        }
        out
    }
}
