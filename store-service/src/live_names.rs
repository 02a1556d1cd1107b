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

/// When Redis last admitted each name, by scope (looked up by `&str`: a hit
/// allocates nothing here).
type Admitted = HashMap<Arc<Scope>, HashMap<String, Instant>>;

pub struct LiveNames {
    admitted: Mutex<Admitted>,
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
            .get(scope)
            .and_then(|names| names.get(name))
            .is_some_and(|at| at.elapsed() < self.ttl)
    }

    /// Redis admitted `name` for `scope` now.
    pub fn confirm(&self, scope: &Arc<Scope>, name: &str) {
        let mut admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
        let entries = |a: &Admitted| a.values().map(HashMap::len).sum::<usize>();
        if entries(&admitted) >= MAX_ENTRIES {
            let ttl = self.ttl;
            for names in admitted.values_mut() {
                names.retain(|_, at| at.elapsed() < ttl);
            }
            admitted.retain(|_, names| !names.is_empty());
            if entries(&admitted) >= MAX_ENTRIES {
                admitted.clear();
            }
        }
        let names = admitted.entry(Arc::clone(scope)).or_default();
        match names.get_mut(name) {
            Some(at) => *at = Instant::now(),
            None => {
                names.insert(name.to_string(), Instant::now());
            }
        }
    }

    /// Redis refused `name` for `scope`: the next hit asks it again.
    pub fn forget(&self, scope: &Arc<Scope>, name: &str) {
        let mut admitted = self.admitted.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(names) = admitted.get_mut(scope) {
            names.remove(name);
        }
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
