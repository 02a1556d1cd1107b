//! A node's share of a fleet quota while it answers alone.
//!
//! While a fleet-scope charge is answered node-local (a failed call, the
//! breaker open), each of N live edges spends from `1/N` of the tenant's
//! quota: `rate × share` and `burst × share`, never less than one charge of
//! burst, so the fleet as a whole stays within its quota through an outage.
//!
//! The arithmetic is [`crate::limit::gcra`]'s, exact: rather than scale the rate
//! and the burst (a rate of 50/s over 3 edges is not a whole number), a unit
//! is priced at `10⁶ / share` micro-units against the quota's own capacity and
//! drain, rounded up, so a shared bucket admits at most
//! `max(burst × share, one charge) + rate × share × t`, never more.
//!
//! Which share: `fleet.degraded_share` when the configuration pins one, else
//! `1 / live edges` as the store last told this node (see [`crate::fleet::edges`]),
//! else `1 / fleet.nodes` (default 1: the whole quota, each node alone).

use crate::limit::gcra::{Priced, MICRO};
use crate::limit::limits::{EDGES, SHARE_PPM};
use crate::wire::Charge;

/// Parts per million of a whole quota.
pub const PPM: u64 = 1_000_000;

/// A share `num / den` of a quota, `1/1000 ≤ share ≤ 1`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Share {
    num: u64,
    den: u64,
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl Share {
    /// The whole quota: a node-scope charge, or a lone node.
    pub const WHOLE: Share = Share { num: 1, den: 1 };

    /// One of `edges` live edges' share (clamped to [`EDGES`]).
    pub fn of_edges(edges: u64) -> Share {
        Share {
            num: 1,
            den: edges.clamp(EDGES.min, EDGES.max),
        }
    }

    /// A share in parts per million (clamped to [`SHARE_PPM`]).
    pub fn from_ppm(ppm: u64) -> Share {
        let ppm = ppm.clamp(SHARE_PPM.min, SHARE_PPM.max);
        let g = gcd(ppm, PPM);
        Share {
            num: ppm / g,
            den: PPM / g,
        }
    }

    /// The share in parts per million, rounded down (what the gauge shows).
    pub fn ppm(&self) -> u64 {
        self.num * PPM / self.den
    }

    /// The micro-units `units` cost under this share: `units × 10⁶ / share`,
    /// rounded up (so rounding never admits more than the share).
    pub fn cost(&self, units: u64) -> u64 {
        let exact = u128::from(units) * u128::from(MICRO) * u128::from(self.den);
        u64::try_from(exact.div_ceil(u128::from(self.num))).unwrap_or(u64::MAX)
    }

    /// `charge` priced under this share: the quota's own drain and capacity,
    /// the capacity raised to one charge when the share of the burst is
    /// smaller, so a hook the whole quota admits is never refused forever.
    pub fn price(&self, charge: &Charge) -> Priced {
        let cost = self.cost(charge.units);
        let whole = Priced::whole(charge);
        Priced {
            cost,
            cap: whole.cap.max(cost),
            ..whole
        }
    }

    /// Whole units of `burst` this share holds at once: `burst × share`
    /// rounded down, at least 1 (what a RateLimit policy's `q` says).
    pub fn burst(&self, burst: u64) -> u64 {
        let units = u128::from(burst) * u128::from(self.num) / u128::from(self.den);
        u64::try_from(units).unwrap_or(u64::MAX).max(1)
    }
}

/// The share a node applies to a fleet quota it answers alone: `pinned`
/// (`fleet.degraded_share`, ppm) when set, else one of the live `edges` the
/// store last reported (0: never heard), else one of `configured`
/// (`fleet.nodes`).
pub fn resolve(pinned: Option<u64>, edges: u64, configured: u64) -> Share {
    match (pinned, edges) {
        (Some(ppm), _) => Share::from_ppm(ppm),
        (None, 0) => Share::of_edges(configured),
        (None, n) => Share::of_edges(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ChargeKind;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn hooks(rate: u64, burst: u64) -> Charge {
        Charge {
            kind: ChargeKind::Hooks,
            tenant: "acme".into(),
            units: 1,
            rate,
            burst,
        }
    }

    #[test]
    fn a_share_prices_a_unit_above_a_million_and_keeps_the_drain() {
        let p = Share::of_edges(3).price(&hooks(50, 50));
        assert_eq!((p.cost, p.rate, p.cap), (3 * MICRO, 50, 50 * MICRO));
        assert_eq!(
            Share::WHOLE.price(&hooks(50, 50)),
            Priced::whole(&hooks(50, 50))
        );
    }

    #[test]
    fn the_share_of_a_small_burst_is_never_below_one_charge() {
        let share = Share::of_edges(4);
        let p = share.price(&hooks(1, 2));
        assert_eq!((p.cost, p.cap), (4 * MICRO, 4 * MICRO));
        assert_eq!(share.burst(2), 1);
        assert_eq!(share.burst(10), 2);
    }

    #[test]
    fn a_pinned_share_of_a_burst_is_burst_times_the_share() {
        // 750 000 ppm is 3/4: the numerator counts, not only the denominator.
        let share = Share::from_ppm(750_000);
        assert_eq!(share.burst(20), 15);
        assert_eq!(share.burst(3), 2);
        assert_eq!(Share::from_ppm(600_000).burst(100), 60);
    }

    #[test]
    fn which_share_applies() {
        assert_eq!(resolve(None, 0, 1), Share::WHOLE);
        assert_eq!(resolve(None, 0, 4), Share::of_edges(4));
        assert_eq!(resolve(None, 2, 4), Share::of_edges(2));
        assert_eq!(resolve(Some(250_000), 2, 4), Share::of_edges(4));
        assert_eq!(Share::of_edges(0), Share::WHOLE);
        assert_eq!(Share::of_edges(5_000), Share::of_edges(1_000));
    }

    #[test]
    fn ppm_rounds_down_and_costs_round_up() {
        assert_eq!(Share::of_edges(3).ppm(), 333_333);
        assert_eq!(Share::from_ppm(333_333).cost(1), 3_000_004);
        assert_eq!(Share::from_ppm(1).ppm(), 1_000);
        assert_eq!(
            Share::of_edges(1_000).cost(1 << 32),
            (1 << 32) * MICRO * 1_000
        );
    }
}
