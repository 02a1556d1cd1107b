//! The soak's faults: a random schedule drawn from a seed, one fault at a
//! time, each with a random start and length, so a run can be replayed.

use crate::faults::Fault;
use crate::ids::Rng;
use serde::Serialize;
use std::time::Duration;

/// The faults of [`Fault::ALL`] the soak leaves out, and why.
pub const EXCLUDED: [(Fault, &str); 6] = [
    (
        Fault::RedisKilled,
        "single Redis only: the soak runs on a Cluster (its Cluster counterpart, a master killed, is drawn)",
    ),
    (
        Fault::RedisKilledAof,
        "single Redis only: the soak runs on a Cluster (its Cluster counterpart, a master killed, is drawn)",
    ),
    (
        Fault::RedisFrozen,
        "single Redis only: the soak runs on a Cluster",
    ),
    (
        Fault::RedisFlushall,
        "single Redis only: the soak runs on a Cluster",
    ),
    (
        Fault::ConfigReload,
        "it has no heal: the fleet would run other rates for the rest of the soak, so the 80 % load \
         and the quota bounds after it would be of another configuration",
    ),
    (
        Fault::SettleOverflow,
        "it needs fleet.settle_queue_max 8 for the whole run; its injection is store-blackholed's, \
         which is drawn",
    ),
];

/// A fault drawn at most once a run: the killed master isn't brought back,
/// so a second draw could kill a master left with no replica.
const ONCE: [Fault; 1] = [Fault::ClusterFailover];

/// Shortest and longest fault, and shortest and longest quiet gap before one.
pub const LENGTH: (Duration, Duration) = (Duration::from_secs(5), Duration::from_secs(45));
pub const GAP: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(40));

/// One fault of the schedule, from the start of traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Slot {
    #[serde(serialize_with = "fault_name")]
    pub fault: Fault,
    #[serde(serialize_with = "seconds")]
    pub start: Duration,
    #[serde(serialize_with = "seconds")]
    pub length: Duration,
}

impl Slot {
    pub fn end(&self) -> Duration {
        self.start + self.length
    }
}

fn fault_name<S: serde::Serializer>(f: &Fault, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(f.name())
}

pub(super) fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 10.0).round() / 10.0)
}

/// The faults the soak draws from: [`Fault::ALL`] less [`EXCLUDED`].
pub fn drawn_from() -> Vec<Fault> {
    Fault::ALL
        .into_iter()
        .filter(|f| EXCLUDED.iter().all(|(x, _)| x != f))
        .collect()
}

/// The schedule of `seed`: faults one after another within `[from, to)`,
/// each after a quiet gap, none running past `to`.
pub fn draw(seed: u64, from: Duration, to: Duration) -> Vec<Slot> {
    let mut rng = Rng::new(seed);
    let mut pool = drawn_from();
    let mut slots = Vec::new();
    let mut at = from;
    loop {
        let start = at + between(&mut rng, GAP);
        let length = between(&mut rng, LENGTH);
        if pool.is_empty() || start + length > to {
            return slots;
        }
        let fault = pool[rng.below(pool.len() as u64) as usize];
        if ONCE.contains(&fault) {
            pool.retain(|f| *f != fault);
        }
        slots.push(Slot {
            fault,
            start,
            length,
        });
        at = start + length;
    }
}

/// Uniform within `[lo, hi]`, whole tenths of a second.
fn between(rng: &mut Rng, (lo, hi): (Duration, Duration)) -> Duration {
    let tenths = (hi.saturating_sub(lo).as_millis() / 100) as u64;
    lo + Duration::from_millis(100 * rng.below(tenths + 1))
}

/// The schedule as one line per fault, for the run's start and summary.
pub fn render(slots: &[Slot]) -> String {
    slots
        .iter()
        .map(|s| {
            format!(
                "  {:>7.1}s – {:>7.1}s  {}",
                s.start.as_secs_f64(),
                s.end().as_secs_f64(),
                s.fault.name()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const FROM: Duration = Duration::from_secs(180);
    const TO: Duration = Duration::from_secs(1785);

    #[test]
    fn a_seed_draws_the_same_schedule_again() {
        assert_eq!(draw(42, FROM, TO), draw(42, FROM, TO));
        assert_ne!(draw(42, FROM, TO), draw(43, FROM, TO));
    }

    #[test]
    fn faults_come_one_at_a_time_within_the_window_from_the_pool() {
        for seed in 0..200 {
            let slots = draw(seed, FROM, TO);
            assert!(slots.len() > 10, "seed {seed}: only {} faults", slots.len());
            let mut at = FROM;
            for s in &slots {
                assert!(
                    s.start >= at + GAP.0,
                    "seed {seed}: {s:?} overlaps or has no gap"
                );
                assert!(s.length >= LENGTH.0 && s.length <= LENGTH.1, "{s:?}");
                assert!(s.end() <= TO, "{s:?} runs past the end");
                assert!(drawn_from().contains(&s.fault), "{s:?} is excluded");
                at = s.end();
            }
            let failovers = slots
                .iter()
                .filter(|s| s.fault == Fault::ClusterFailover)
                .count();
            assert!(failovers <= 1, "seed {seed}: {failovers} failovers");
        }
    }

    #[test]
    fn the_pool_leaves_out_the_single_redis_rows_and_the_ones_without_a_heal() {
        let pool = drawn_from();
        assert_eq!(pool.len(), Fault::ALL.len() - EXCLUDED.len());
        for f in [
            Fault::RedisKilled,
            Fault::ConfigReload,
            Fault::SettleOverflow,
        ] {
            assert!(!pool.contains(&f));
        }
        for f in [
            Fault::ClusterFailover,
            Fault::EdgeKilled,
            Fault::StoreKilled,
        ] {
            assert!(pool.contains(&f));
        }
    }

    #[test]
    fn a_window_too_short_for_one_fault_draws_none() {
        assert!(draw(1, FROM, FROM + GAP.0).is_empty());
    }
}
