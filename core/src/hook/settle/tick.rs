//! How often a root context ticks.
//!
//! A tick is a timer that wakes the worker's event loop and enters its VM:
//! about 35 µs of Envoy's CPU when the loop was idle (BENCHMARKS.md, "Fleet
//! hooks at 1, 4 and 32 clients"), and every root context (the main
//! thread's and each worker's) has one. At 200 ticks a second that cost
//! more than a light load's hooks, for ticks with nothing to do. So a root
//! ticks only as often as what waits on it needs:
//!
//! - a configuration that calls no store and polls nothing: never;
//! - settle work waiting (operations this worker holds, operations in the
//!   node's queue, a settle batch of this root in flight): every
//!   `settle_interval_ms` (1 to [`MAX_TICK_MS`]), as before;
//! - otherwise every [`IDLE_TICK_MS`]: to notice work that arrives (a hook
//!   holds a settle, another worker queues one) and to poll overrides,
//!   whose own lease paces them far slower.
//!
//! An idle root notices new settle work at its next idle tick, so a settle
//! made on an idle worker may leave up to [`IDLE_TICK_MS`] later than
//! before. A promote made late only turns a very early redelivery of the
//! same event into a 409 `dedupe_pending` the sender retries.

use crate::config::Config;

/// The longest wait between two ticks of a root context that ticks (ms).
pub const MAX_TICK_MS: u64 = 50;

/// The tick of a root with nothing waiting on it (ms).
pub const IDLE_TICK_MS: u64 = MAX_TICK_MS;

/// The tick period while settle work waits (ms): the lease paces batches
/// to `settle_interval_ms` node-wide.
pub fn tick_ms(settle_interval_ms: u64) -> u64 {
    settle_interval_ms.clamp(1, MAX_TICK_MS)
}

/// What waits on a root's ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Waiting {
    /// Settle operations this worker holds.
    pub held: bool,
    /// Settle operations in the node's queue, as this root last read it.
    pub queued: bool,
    /// A settle batch of this root in flight.
    pub in_flight: bool,
}

impl Waiting {
    fn any(self) -> bool {
        self.held || self.queued || self.in_flight
    }
}

/// The tick period (ms) a root under `config` wants with `waiting`; 0: no tick.
pub fn period(config: &Config, waiting: Waiting) -> u64 {
    if !config.uses_store() && !config.polls_overrides() {
        return 0;
    }
    if config.uses_store() && waiting.any() {
        tick_ms(config.fleet.settle_interval_ms)
    } else {
        IDLE_TICK_MS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn config(text: &str) -> Config {
        Config::parse(text.as_bytes()).unwrap()
    }

    const NODE: &str = r#"{"sources":{"gh":{"tenant":"acme","dedupe":"github"}},
        "rate_limits":{"default":{"rate":10,"burst":20}}}"#;
    const FLEET: &str = r#"{"sources":{"gh":{"tenant":"acme","dedupe":"github"}},
        "rate_limits":{"scope":"fleet","default":{"rate":10,"burst":20}},"dedupe":{"scope":"fleet"},
        "fleet":{"settle_interval_ms":7}}"#;

    #[test]
    fn a_node_only_configuration_never_ticks() {
        let node = config(NODE);
        assert!(!node.uses_store() && !node.polls_overrides());
        let all = Waiting {
            held: true,
            queued: true,
            in_flight: true,
        };
        assert_eq!(period(&node, Waiting::default()), 0);
        assert_eq!(period(&node, all), 0);
    }

    #[test]
    fn a_fleet_root_ticks_fast_only_while_settle_work_waits() {
        let fleet = config(FLEET);
        assert_eq!(period(&fleet, Waiting::default()), IDLE_TICK_MS);
        for waiting in [
            Waiting {
                held: true,
                ..Waiting::default()
            },
            Waiting {
                queued: true,
                ..Waiting::default()
            },
            Waiting {
                in_flight: true,
                ..Waiting::default()
            },
        ] {
            assert_eq!(period(&fleet, waiting), 7, "{waiting:?}");
        }
    }

    #[test]
    fn a_root_that_only_polls_overrides_ticks_idly() {
        let polling = config(
            r#"{"sources":{"gh":{"tenant":"acme","dedupe":"github"}},"fleet":{"cluster":"s"},
                "rate_limits":{"default":{"rate":10,"burst":20}}}"#,
        );
        assert!(!polling.uses_store() && polling.polls_overrides());
        let held = Waiting {
            held: true,
            ..Waiting::default()
        };
        assert_eq!(period(&polling, held), IDLE_TICK_MS);
    }
}
