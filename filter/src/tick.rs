//! A root context's tick over proxy-wasm: the core's [`Ticker`] sets the
//! period the core wants ([`ankusa_core::hook::settle::tick`]) only when it
//! changes (Envoy starts a root with no tick).

pub use ankusa_core::shell::tick::{Ticker, Ticks};
use proxy_wasm::hostcalls;
use std::time::Duration;

/// Envoy, through proxy-wasm.
pub struct ProxyTicks;

impl Ticks for ProxyTicks {
    fn set_tick_period(&self, ms: u64) {
        let _ = hostcalls::set_tick_period(Duration::from_millis(ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::MockHost;
    use ankusa_core::hook::settle::tick::Waiting;
    use ankusa_core::hook::settle::tick::IDLE_TICK_MS;
    use ankusa_core::hook::settle::Queued;
    use ankusa_core::wire::{Claim, SettleOp};
    use std::rc::Rc;

    const NODE: &str = r#"{"node":"edge-1",
        "sources":{"gh":{"tenant":"acme","dedupe":"github"}},
        "rate_limits":{"default":{"rate":10,"burst":20}}}"#;
    const FLEET: &str = r#"{"node":"edge-1",
        "sources":{"gh":{"tenant":"acme","dedupe":"github"}},
        "rate_limits":{"scope":"fleet","default":{"rate":10,"burst":20}},"dedupe":{"scope":"fleet"},
        "fleet":{"settle_interval_ms":5}}"#;

    /// The root's tick as `on_configure` and each `on_tick` leave it.
    fn tick(ticker: &mut Ticker, host: &Rc<MockHost>, queued: bool, in_flight: bool) {
        let waiting = Waiting {
            held: !host.worker.held.borrow().is_empty(),
            queued,
            in_flight,
        };
        ticker.want(host, &host.worker.config, waiting);
    }

    fn release() -> Queued {
        let claim = Claim {
            tenant: "acme".into(),
            source_id: "gh".into(),
            key: "d-1".into(),
            hook_id: "h-1".into(),
            node: "edge-1".into(),
            ttl_ms: 60_000,
            pending_ttl_ms: 5_000,
        };
        Queued {
            retries: 0,
            op: SettleOp::Release { claim },
        }
    }

    #[test]
    fn node_scopes_set_no_tick_at_all() {
        let host = MockHost::new(NODE, &[]);
        let mut ticker = Ticker::default();
        for _ in 0..3 {
            tick(&mut ticker, &host, false, false);
        }
        assert!(host.ticks.borrow().is_empty(), "{:?}", host.ticks.borrow());
        assert_eq!(ticker.period_ms(), 0);
    }

    #[test]
    fn an_idle_fleet_root_ticks_slowly_and_fast_while_a_settle_waits() {
        let host = MockHost::new(FLEET, &[]);
        let mut ticker = Ticker::default();
        tick(&mut ticker, &host, false, false);
        tick(&mut ticker, &host, false, false);
        assert_eq!(
            *host.ticks.borrow(),
            [IDLE_TICK_MS],
            "set once, when it changes"
        );

        // A hook's settle is held: the next tick sets the fast period.
        host.worker.held.borrow_mut().hold(release(), 0, 100);
        tick(&mut ticker, &host, false, false);
        assert_eq!(*host.ticks.borrow(), [IDLE_TICK_MS, 5]);
        // Spilled to the node's queue, then a batch in flight: still fast.
        host.worker.held.borrow_mut().take_all();
        tick(&mut ticker, &host, true, false);
        tick(&mut ticker, &host, false, true);
        assert_eq!(*host.ticks.borrow(), [IDLE_TICK_MS, 5]);
        // Nothing waits any more: slow again.
        tick(&mut ticker, &host, false, false);
        assert_eq!(*host.ticks.borrow(), [IDLE_TICK_MS, 5, IDLE_TICK_MS]);
    }
}
