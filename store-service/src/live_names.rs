//! The node names this store process has seen Redis admit for each
//! edge-token scope, so a hit from a known name pays no extra round trip.
//! Redis holds the authoritative count (`edges.lua`, one set per scope, see
//! [`crate::keys::live_names`]): a name missing here is checked there, and
//! every live-edges refresh checks again each name heard, dropping here
//! what Redis refused. An entry is trusted for the live-edges TTL after
//! Redis last admitted it. Pure bookkeeping, no I/O.

use crate::scope::Scope;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Most entries kept; past it the stale ones are dropped first, then all
/// (Redis is asked again). Only names Redis admitted enter, so this is
/// reached only with allowances adding up to more.
pub const MAX_ENTRIES: usize = 20_000;

pub struct LiveNames {
    admitted: Mutex<HashMap<(Arc<Scope>, String), Instant>>,
    ttl: Duration,
}

impl LiveNames {
    pub fn new(ttl: Duration) -> LiveNames {
        LiveNames {
            admitted: Mutex::new(HashMap::new()),
            ttl,
        }
    }

    /// Whether Redis admitted `name` for `scope` within the TTL.
    pub fn is_live(&self, scope: &Arc<Scope>, name: &str) -> bool {
        let admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
        admitted
            .get(&(Arc::clone(scope), name.to_string()))
            .is_some_and(|at| at.elapsed() < self.ttl)
    }

    /// Redis admitted `name` for `scope` now.
    pub fn confirm(&self, scope: &Arc<Scope>, name: &str) {
        let mut admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
        if admitted.len() >= MAX_ENTRIES {
            let ttl = self.ttl;
            admitted.retain(|_, at| at.elapsed() < ttl);
            if admitted.len() >= MAX_ENTRIES {
                admitted.clear();
            }
        }
        admitted.insert((Arc::clone(scope), name.to_string()), Instant::now());
    }

    /// Redis refused `name` for `scope`: the next hit asks it again.
    pub fn forget(&self, scope: &Arc<Scope>, name: &str) {
        let mut admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
        admitted.remove(&(Arc::clone(scope), name.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(text: &str) -> Arc<Scope> {
        Arc::new(Scope::parse(text.split_whitespace()).unwrap())
    }

    #[test]
    fn a_name_is_live_for_its_scope_only_once_confirmed_and_until_forgotten() {
        let names = LiveNames::new(Duration::from_secs(60));
        let (a, b) = (scope("nodes=edge-* live=2"), scope("nodes=edge-a"));
        assert!(!names.is_live(&a, "edge-a"));
        names.confirm(&a, "edge-a");
        assert!(names.is_live(&a, "edge-a"));
        assert!(
            !names.is_live(&b, "edge-a"),
            "another scope asks Redis itself"
        );
        assert!(!names.is_live(&a, "edge-b"));
        names.forget(&a, "edge-a");
        assert!(!names.is_live(&a, "edge-a"));
    }

    #[test]
    fn an_entry_older_than_the_ttl_is_asked_again() {
        let names = LiveNames::new(Duration::from_millis(1));
        let a = scope("nodes=edge-a");
        names.confirm(&a, "edge-a");
        std::thread::sleep(Duration::from_millis(5));
        assert!(!names.is_live(&a, "edge-a"));
    }
}
