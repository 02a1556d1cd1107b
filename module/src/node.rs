//! The node's background store calls, which no hook waits on: settle
//! batches off the process-wide queue and the override-list poll. The
//! module has one node-wide root for them, on Envoy's main thread, where a
//! configuration's callouts and scheduler run
//! (`…_http_filter_config_http_callout`, `…_config_scheduler_*`): a thread
//! of the module's own sleeps the period the core wants
//! ([`ankusa_core::shell::tick`]) and commits a tick on the configuration's
//! scheduler, which Envoy runs on the main thread
//! (`on_http_filter_config_scheduled`). When a call is due and what its
//! answer means are the core's ([`ankusa_core::shell::drain`],
//! [`ankusa_core::shell::poll`]).
#![deny(unsafe_code)]

use crate::abi::{self, Answer, ConfigScheduler, EnvoyConfig};
use crate::host::{now_us, NativeStats, Runtime, NODE, SETTLES};
use crate::store;
use ankusa_core::config::Config;
use ankusa_core::hook::machine::Level;
use ankusa_core::hook::settle::tick::Waiting;
use ankusa_core::hook::settle::Queued;
use ankusa_core::node::cas::MapStore;
use ankusa_core::shell::background::Background;
use ankusa_core::shell::drain::Drainer;
use ankusa_core::shell::metrics::Metrics;
use ankusa_core::shell::poll::Poller;
use ankusa_core::shell::tick::{Ticker, Ticks};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The tick's event on the configuration's scheduler.
pub const TICK_EVENT: u64 = 1;

/// How long the ticking thread sleeps when no period is set (ms).
const NO_TICK_SLEEP_MS: u64 = 1_000;

/// What the ticking thread shares with the main thread.
#[derive(Default)]
struct Ticking {
    /// None once the configuration is gone: the thread ends.
    scheduler: Mutex<Option<ConfigScheduler>>,
    period_ms: AtomicU64,
}

impl Ticks for Ticking {
    fn set_tick_period(&self, ms: u64) {
        self.period_ms.store(ms, Ordering::Relaxed);
    }
}

/// Settle batches the node's one root may have in flight at once (a wasm
/// edge has one per worker's root).
const SETTLE_BATCHES_IN_FLIGHT: usize = 4;

/// The root's calls in flight and its tick, touched on the main thread only.
struct State {
    poller: Poller,
    drainer: Drainer,
    ticker: Ticker,
}

/// A configuration's node-wide root.
pub struct Node {
    envoy: EnvoyConfig,
    ticking: Arc<Ticking>,
    state: Mutex<State>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Node {
    /// The root of `config` (None: it makes no background call).
    pub fn start(envoy: EnvoyConfig, config: &Config) -> Option<Node> {
        if !config.uses_store() && !config.polls_overrides() {
            return None;
        }
        let ticking = Arc::new(Ticking {
            scheduler: Mutex::new(Some(envoy.scheduler())),
            period_ms: AtomicU64::new(0),
        });
        let node = Node {
            envoy,
            ticking: Arc::clone(&ticking),
            state: Mutex::new(State {
                poller: Poller::default(),
                drainer: Drainer::parallel(SETTLE_BATCHES_IN_FLIGHT),
                ticker: Ticker::default(),
            }),
        };
        locked(&node.state)
            .ticker
            .want(&*ticking, config, Waiting::default());
        let spawned = std::thread::Builder::new()
            .name("ankusa-tick".into())
            .spawn(move || tick_every_period(&ticking));
        if let Err(e) = spawned {
            abi::log(
                abi::LOG_ERROR,
                &format!("ankusa: no thread for the node's tick ({e}): settles and override polls ride on hit calls only"),
            );
        }
        Some(node)
    }

    /// One tick, on the main thread: an override poll and a settle batch if due.
    pub fn tick(&self, rt: &Runtime) {
        let host = NodeHost {
            rt,
            envoy: self.envoy,
        };
        let mut state = locked(&self.state);
        if rt.config().polls_overrides() {
            state.poller.tick(&host);
        }
        if rt.config().uses_store() {
            // Held operations no hit call carried within the settle
            // interval go to the node's queue.
            for item in SETTLES.spill_due(now_us(), rt.config().fleet.settle_interval_ms) {
                rt.enqueue(item);
            }
            state.drainer.tick(&host);
        }
        let waiting = Waiting {
            held: SETTLES.holds(),
            queued: !SETTLES.is_empty(),
            in_flight: state.drainer.in_flight(),
        };
        state.ticker.want(&*self.ticking, rt.config(), waiting);
    }

    /// The answer to the root's callout `callout`.
    pub fn answered(&self, rt: &Runtime, callout: u64, answer: Answer) {
        let host = NodeHost {
            rt,
            envoy: self.envoy,
        };
        let mut state = locked(&self.state);
        let status = answer.status.as_deref();
        if state.poller.owns(callout) {
            let len = answer.body.len();
            state
                .poller
                .answered(&host, status, len, || Some(answer.body.clone()));
        } else {
            state.drainer.answered(&host, &rt.worker, callout, status);
        }
    }
}

impl Drop for Node {
    /// The configuration is going: no tick is committed any more.
    fn drop(&mut self) {
        if let Some(scheduler) = locked(&self.ticking.scheduler).take() {
            scheduler.delete();
        }
    }
}

/// The ticking thread: sleeps the period the core last set, then commits a
/// tick, until the configuration is gone.
fn tick_every_period(ticking: &Ticking) {
    loop {
        let ms = match ticking.period_ms.load(Ordering::Relaxed) {
            0 => NO_TICK_SLEEP_MS,
            ms => ms,
        };
        std::thread::sleep(Duration::from_millis(ms));
        let scheduler = locked(&ticking.scheduler);
        match scheduler.as_ref() {
            Some(scheduler) => scheduler.commit(TICK_EVENT),
            None => return,
        }
    }
}

/// The core's background host over the configuration's callouts.
struct NodeHost<'a> {
    rt: &'a Runtime,
    envoy: EnvoyConfig,
}

impl Background for NodeHost<'_> {
    type Store = MapStore;
    type Stats = NativeStats;

    fn config(&self) -> &Config {
        self.rt.config()
    }

    fn store(&self) -> &MapStore {
        &NODE
    }

    fn metrics(&self) -> &Metrics<NativeStats> {
        &self.rt.metrics
    }

    fn now_us(&self) -> u64 {
        now_us()
    }

    fn call(&self, path: &str, body: Option<&[u8]>, timeout_ms: u64) -> Result<u64, String> {
        let mut budget = String::new();
        let fleet = &self.config().fleet;
        let call = store::call(
            fleet,
            self.rt.authorization.as_deref(),
            path,
            body,
            timeout_ms,
            &mut budget,
        );
        self.envoy
            .callout(&call)
            .ok_or_else(|| format!("Envoy refused a callout to cluster {:?}", fleet.cluster))
    }

    fn dequeue(&self, max: usize) -> Vec<Queued> {
        SETTLES.dequeue(&*NODE, max)
    }

    fn requeue(&self, item: Queued) {
        self.rt.settle(item);
    }

    fn log(&self, level: Level, line: &str) {
        let level = match level {
            Level::Info => abi::LOG_INFO,
            Level::Warn => abi::LOG_WARN,
        };
        abi::log(level, line);
    }
}
