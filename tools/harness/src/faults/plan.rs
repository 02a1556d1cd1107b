//! A row's timeline: when deliveries start, when the fault is injected and
//! healed, how often the gauges are read.

use std::time::Duration;

/// Attempts started this early are left out of the baseline p99: the first
/// calls pay for connections and the store's first script load.
pub const WARM_UP: Duration = Duration::from_millis(500);
/// How often the edges' gauges are read.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// When deliveries start, break and heal, from the start of the run.
#[derive(Clone, Debug)]
pub struct Plan {
    pub events: usize,
    /// First deliveries per second.
    pub rate: f64,
    pub fault_at: Duration,
    pub heal_at: Duration,
    /// No delivery attempt starts after this.
    pub deadline: Duration,
}

impl Plan {
    /// Fast: 8 s of traffic, the fault from 2 s to 4.5 s. Full: 16 s, 4 s to 9 s.
    pub fn default_for(fast: bool) -> Plan {
        if fast {
            Plan {
                events: 320,
                rate: 40.0,
                fault_at: Duration::from_secs(2),
                heal_at: Duration::from_millis(4500),
                deadline: Duration::from_secs(60),
            }
        } else {
            Plan {
                events: 960,
                rate: 60.0,
                fault_at: Duration::from_secs(4),
                heal_at: Duration::from_secs(9),
                deadline: Duration::from_secs(60),
            }
        }
    }
}
