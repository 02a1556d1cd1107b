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
}
