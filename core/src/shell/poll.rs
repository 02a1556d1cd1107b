//! The override-list poll a root sends from its tick: one per node per
//! interval (the lease), or at once while a listing has pages left,
//! answered into the node's shared data. When a poll is due, what it asks,
//! what an answer means, what the node keeps and how long a list is applied
//! are [`crate::fleet::overrides::node_list`]'s and
//! [`crate::fleet::overrides::node_sync`]'s; here are the call, the metrics
//! and the log lines, for every shell ([`Background`]).

use crate::fleet::overrides::node_list::{parse_page, poll_due, MAX_OVERRIDES};
use crate::fleet::overrides::node_sync::{
    apply_page, configured_tenants, describe_cut, next_query,
};
use crate::fleet::overrides::page::ListQuery;
use crate::hook::machine::Level;
use crate::node::clock::every_due;
use crate::shell::background::Background;

/// A failed poll, or overrides left out past the cap, are logged at most
/// this often per root (ms).
const WARN_EVERY_MS: u64 = 60_000;

/// A root's poll in flight, if any.
#[derive(Default, Debug)]
pub struct Poller {
    /// The call's token and what it asked.
    inflight: Option<(u64, ListQuery)>,
    /// When a failed poll was last logged (ms).
    warned_ms: u64,
    /// When overrides left out were last logged (ms).
    cut_warned_ms: u64,
}

impl Poller {
    /// One tick: a poll leaves if this root took the node's lease.
    pub fn tick<B: Background>(&mut self, host: &B) {
        let fleet = &host.config().fleet;
        let in_flight = self.inflight.is_some();
        if !poll_due(
            host.store(),
            in_flight,
            fleet.breaker,
            host.now_us() / 1_000,
        ) {
            return;
        }
        let query = next_query(host.store(), &configured_tenants(host.config()));
        match host.call(&query.path(), None, fleet.timeout_ms) {
            Ok(token) => self.inflight = Some((token, query)),
            Err(why) => self.failed(host, &format!("the store cluster took no call ({why})")),
        }
    }

    /// Whether `token` is this root's poll.
    pub fn owns(&self, token: u64) -> bool {
        self.inflight.as_ref().is_some_and(|(t, _)| *t == token)
    }

    /// The store's answer to the poll: `:status` (None: a reset), the
    /// body's size, and how to read the body.
    pub fn answered<B: Background>(
        &mut self,
        host: &B,
        status: Option<&str>,
        body_size: usize,
        read: impl FnOnce() -> Option<Vec<u8>>,
    ) {
        let Some((_, asked)) = self.inflight.take() else {
            return;
        };
        let page = match parse_page(status, body_size, read) {
            Ok(page) => page,
            Err(e) => return self.failed(host, &e.to_string()),
        };
        let now_ms = host.now_us() / 1_000;
        let tenants = configured_tenants(host.config());
        let applied = apply_page(host.store(), &asked, page, &tenants, now_ms);
        if applied.gap {
            host.log(
                Level::Info,
                &format!(
                    "ankusa: the store can't list the override changes since version {}: \
                     reading the whole list",
                    asked.since
                ),
            );
        }
        if !applied.cut.is_empty() && every_due(self.cut_warned_ms, now_ms, WARN_EVERY_MS) {
            self.cut_warned_ms = now_ms;
            host.log(
                Level::Warn,
                &format!(
                    "ankusa: {} overrides left out past the cap of {MAX_OVERRIDES} (the \
                     configured tenants' first, then the most recently changed): {}",
                    applied.cut.len(),
                    describe_cut(&applied.cut)
                ),
            );
        }
        if applied.changed {
            if let Some((held, _)) = applied.listed {
                host.log(
                    Level::Info,
                    &format!("ankusa: fleet overrides changed: {held} in force"),
                );
            }
        }
        host.metrics()
            .override_poll(Some((applied.cut.len(), applied.listed)));
    }

    fn failed<B: Background>(&mut self, host: &B, why: &str) {
        host.metrics().override_poll(None);
        let now_ms = host.now_us() / 1_000;
        if every_due(self.warned_ms, now_ms, WARN_EVERY_MS) {
            self.warned_ms = now_ms;
            host.log(
                Level::Warn,
                &format!(
                    "ankusa: override list poll failed, the last good list stays until stale: {why}"
                ),
            );
        }
    }
}
