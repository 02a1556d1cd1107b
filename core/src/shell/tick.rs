//! A root's tick: the period the core wants
//! ([`crate::hook::settle::tick`]), set on the host only when it
//! changes (Envoy starts a root with no tick).

use crate::config::Config;
use crate::hook::settle::tick::{period, Waiting};
use std::rc::Rc;

/// What a root's tick needs of its host.
pub trait Ticks {
    /// Ticks every `ms` from now on; 0: no tick.
    fn set_tick_period(&self, ms: u64);
}

/// A shared host ticks as the host.
impl<T: Ticks> Ticks for Rc<T> {
    fn set_tick_period(&self, ms: u64) {
        T::set_tick_period(self, ms)
    }
}

/// The period a root ticks at (0: none, as Envoy starts it).
#[derive(Debug, Default)]
pub struct Ticker {
    period_ms: u64,
}

impl Ticker {
    /// Sets the period `config` wants with `waiting`, if it differs.
    pub fn want<T: Ticks>(&mut self, host: &T, config: &Config, waiting: Waiting) {
        let wanted = period(config, waiting);
        if wanted != self.period_ms {
            host.set_tick_period(wanted);
            self.period_ms = wanted;
        }
    }

    /// The period set (ms; 0: none).
    pub fn period_ms(&self) -> u64 {
        self.period_ms
    }
}
