//! The degraded gauges: which limiters a fall-back leaves answered by this
//! node alone, and which an answer from the store restores.
//!
//! Only a fleet-scoped limiter can degrade: a node-scoped one never asks the
//! store, so a failed call says nothing about it.

use crate::config::{Config, Scope};
use crate::hook::outcome::Kind;

/// The limiters whose gauge a store failure raises and a store answer lowers.
pub fn fleet_kinds(config: &Config) -> Vec<Kind> {
    let mut kinds = Vec::with_capacity(2);
    if config.rate_limits.scope == Scope::Fleet {
        kinds.push(Kind::RateLimit);
    }
    if config.dedupe.scope == Scope::Fleet {
        kinds.push(Kind::Dedupe);
    }
    kinds
}

/// A worker writes a degraded gauge once in this many hooks that find it
/// unchanged (see [`GaugeWrites`]).
pub const REASSERT_EVERY: u32 = 64;

/// Which of a worker's degraded-gauge values reach the host. Every hook that
/// asked the store has a value for each gauge, but writing it is a host call:
/// a worker writes a value that differs from the one it wrote last, and an
/// unchanged one every [`REASSERT_EVERY`] hooks. The gauges are Envoy's, one
/// per process: the re-writes let a healthy worker's value replace a value
/// another worker left, within that many of its hooks.
#[derive(Clone, Debug, Default)]
pub struct GaugeWrites {
    /// Per kind (rate limit, dedupe): the value written last, and the
    /// unchanged values seen since.
    last: [Option<(bool, u32)>; 2],
}

impl GaugeWrites {
    /// Whether `kind`'s gauge is written with `on` now.
    pub fn due(&mut self, kind: Kind, on: bool) -> bool {
        let slot = &mut self.last[match kind {
            Kind::RateLimit => 0,
            Kind::Dedupe => 1,
        }];
        match slot {
            Some((last, unchanged)) if *last == on && *unchanged + 1 < REASSERT_EVERY => {
                *unchanged += 1;
                false
            }
            _ => {
                *slot = Some((on, 0));
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn config(rate: &str, dedupe: &str) -> Config {
        let json = format!(
            r#"{{"sources":{{"gh":{{"tenant":"acme","dedupe":"github"}}}},
                "rate_limits":{{"scope":"{rate}","default":{{"rate":1,"burst":1}}}},
                "dedupe":{{"scope":"{dedupe}"}}}}"#
        );
        Config::parse(json.as_bytes()).unwrap()
    }

    #[test]
    fn only_fleet_scoped_limiters_degrade() {
        assert_eq!(fleet_kinds(&config("node", "node")), []);
        assert_eq!(fleet_kinds(&config("fleet", "node")), [Kind::RateLimit]);
        assert_eq!(fleet_kinds(&config("node", "fleet")), [Kind::Dedupe]);
        assert_eq!(
            fleet_kinds(&config("fleet", "fleet")),
            [Kind::RateLimit, Kind::Dedupe]
        );
    }

    #[test]
    fn a_change_is_written_at_once_and_an_unchanged_value_every_reassert_hooks() {
        let mut writes = GaugeWrites::default();
        assert!(
            writes.due(Kind::RateLimit, false),
            "the first value is written"
        );
        let rewrites = (0..REASSERT_EVERY * 3)
            .filter(|_| writes.due(Kind::RateLimit, false))
            .count();
        assert_eq!(rewrites, 3);
        assert!(
            writes.due(Kind::RateLimit, true),
            "a change is written at once"
        );
        assert!(writes.due(Kind::RateLimit, false));
        // Each kind keeps its own account.
        assert!(writes.due(Kind::Dedupe, false));
        assert!(!writes.due(Kind::Dedupe, false));
        assert!(!writes.due(Kind::RateLimit, false));
    }
}
