//! Deadlines in shared data that survive a wall-clock step.
//!
//! Node state stamps wall-clock times (the breaker's open time, the settle
//! lease, the degraded-warning stamp) because every worker must read the same
//! clock. A backward NTP step of Δ would leave those stamps Δ in the future
//! and hold the breaker open, stop the settle drain or silence the warning
//! for Δ. So a deadline further ahead than the longest wait that could have
//! set it is stale: it was set by a clock that has since stepped back, and
//! counts as reached. A forward step only makes deadlines come sooner.

/// Whether `deadline` has come at `now`: it has passed, or it lies more than
/// `max_ahead` beyond `now` (stale). Any unit, as long as all three agree.
pub fn reached(deadline: u64, now: u64, max_ahead: u64) -> bool {
    now >= deadline || deadline - now > max_ahead
}

/// The settle lease: a batch may leave when the lease time `next_ms` has
/// come. Taking it sets the lease `interval_ms` ahead of the taker's clock;
/// one taken at a time more than an interval in the future (further ahead
/// than two intervals) is stale. Workers reading their clocks a moment apart
/// still share one lease.
pub fn lease_due(next_ms: u64, now_ms: u64, interval_ms: u64) -> bool {
    reached(next_ms, now_ms, interval_ms.saturating_mul(2))
}

/// A once-every-`every` event last done at `last`: due once `every` has
/// passed, or when `last` lies in the future (the clock stepped back).
pub fn every_due(last: u64, now: u64, every: u64) -> bool {
    reached(last.saturating_add(every), now, every)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const NOW: u64 = 1_796_000_000_000;
    const HOUR: u64 = 3_600_000;

    #[test]
    fn a_deadline_is_reached_when_it_passes_or_is_stale() {
        assert!(!reached(NOW + 5, NOW, 5));
        assert!(reached(NOW + 5, NOW + 5, 5));
        // Further ahead than anything could have set it: the clock stepped back.
        assert!(reached(NOW + 6, NOW, 5));
        assert!(reached(NOW + HOUR, NOW, 5));
    }

    #[test]
    fn the_settle_lease_keeps_draining_across_a_backward_step() {
        let interval = 5;
        // Taken at NOW: the next batch at NOW + 5.
        let next = NOW + interval;
        assert!(!lease_due(next, NOW + 4, interval));
        assert!(lease_due(next, NOW + 5, interval));
        // A worker whose clock reads a little behind waits for the interval.
        assert!(!lease_due(next, NOW - 5, interval));
        assert!(lease_due(next, NOW - 6, interval));
        // The clock steps back an hour: the lease is stale, the drain goes on.
        assert!(lease_due(next, NOW - HOUR, interval));
        // A forward step only makes it due.
        assert!(lease_due(next, NOW + HOUR, interval));
    }

    #[test]
    fn the_once_a_minute_warning_warns_again_after_a_backward_step() {
        let minute = 60_000;
        assert!(!every_due(NOW, NOW + minute - 1, minute));
        assert!(every_due(NOW, NOW + minute, minute));
        assert!(!every_due(NOW, NOW, minute));
        // Stamped in the future: the clock stepped back; warn now, not in an hour.
        assert!(every_due(NOW, NOW - HOUR, minute));
        assert!(every_due(NOW, NOW - 1, minute));
        assert!(every_due(NOW, NOW + HOUR, minute));
        // Never warned (0) is due.
        assert!(every_due(0, NOW, minute));
    }
}
