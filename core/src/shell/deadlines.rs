//! The hard budgets of calls in flight on a connection a shell owns: which
//! call is due when, so the shell's timer answers each one at its deadline
//! whatever its connection does, and once only (an answer that came first
//! takes the call out). Pure bookkeeping: the shell brings the clock.

use std::collections::{BTreeSet, HashMap};

/// Calls in flight by id, each with its deadline (µs).
#[derive(Debug, Default)]
pub struct Deadlines {
    due: BTreeSet<(u64, u64)>,
    by_id: HashMap<u64, u64>,
}

impl Deadlines {
    pub fn new() -> Deadlines {
        Deadlines::default()
    }

    /// Call `id` must be answered by `deadline_us`.
    pub fn insert(&mut self, id: u64, deadline_us: u64) {
        if let Some(old) = self.by_id.insert(id, deadline_us) {
            self.due.remove(&(old, id));
        }
        self.due.insert((deadline_us, id));
    }

    /// Call `id` is answered (or its hook is gone): true if it was still in flight.
    pub fn remove(&mut self, id: u64) -> bool {
        match self.by_id.remove(&id) {
            Some(deadline) => self.due.remove(&(deadline, id)),
            None => false,
        }
    }

    /// Whether call `id` is still in flight.
    pub fn contains(&self, id: u64) -> bool {
        self.by_id.contains_key(&id)
    }

    /// The calls whose deadline is `now_us` or past, taken out, earliest first.
    pub fn take_due(&mut self, now_us: u64) -> Vec<u64> {
        let mut due = Vec::new();
        while let Some(&(deadline, id)) = self.due.first() {
            if deadline > now_us {
                break;
            }
            self.due.pop_first();
            self.by_id.remove(&id);
            due.push(id);
        }
        due
    }

    /// The earliest deadline still ahead (None: nothing in flight).
    pub fn next(&self) -> Option<u64> {
        self.due.first().map(|(deadline, _)| *deadline)
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_fall_due_at_their_deadline_earliest_first_and_once() {
        let mut d = Deadlines::new();
        d.insert(1, 300);
        d.insert(2, 100);
        d.insert(3, 200);
        assert_eq!(d.next(), Some(100));
        assert!(d.take_due(99).is_empty());
        assert_eq!(d.take_due(200), vec![2, 3]);
        assert_eq!(d.len(), 1);
        assert!(d.take_due(200).is_empty(), "taken once");
        assert_eq!(d.next(), Some(300));
    }

    #[test]
    fn an_answered_call_never_falls_due() {
        let mut d = Deadlines::new();
        d.insert(1, 100);
        d.insert(2, 100);
        assert!(d.remove(1));
        assert!(!d.remove(1), "answered once");
        assert!(!d.contains(1));
        assert_eq!(d.take_due(1_000), vec![2]);
        assert!(d.is_empty());
        assert_eq!(d.next(), None);
    }
}
