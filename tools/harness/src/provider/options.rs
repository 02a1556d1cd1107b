//! What a run delivers: where, how many, how fast, how often again.

use super::profile::Profile;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Options {
    /// Edge base URLs (`http://host:port`).
    pub edges: Vec<String>,
    pub events: usize,
    /// First deliveries per second.
    pub rate: f64,
    pub profile: Profile,
    pub tenant: String,
    pub source: String,
    /// Share of events delivered a second time, to another edge (0..=1).
    pub redeliver: f64,
    /// Share of those redeliveries sent alongside the first delivery rather
    /// than after it was acknowledged (0..=1).
    pub concurrent: f64,
    /// No attempt starts after this long from the start of the run.
    pub deadline: Duration,
    /// Requests in flight at once.
    pub concurrency: usize,
    pub seed: u64,
    /// Print a progress line on stderr every second.
    pub progress: bool,
    /// The secret real deliveries are signed with.
    pub secret: String,
    /// Share of events (0..=1) that also get one forged delivery (same event
    /// id and body, wrong secret, stale timestamp or no signature) sent at
    /// the same moment to an edge; never retried, every one must be 401.
    pub forge: f64,
}

impl Options {
    pub fn path(&self) -> String {
        format!("/webhooks/{}/{}", self.tenant, self.source)
    }
}
