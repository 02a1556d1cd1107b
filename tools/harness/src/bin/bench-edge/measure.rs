//! What bench-edge reads around each measured run: CPU time from `/proc`,
//! the edges' counters and those of each variant's own store and Redis
//! ([`super::backend`]); and the pinning of Envoy to one core and everything
//! else to another.

use super::backend::{Backend, Counts};
use super::cpu::cpu_seconds;
use super::peer::PEER_OK;
use super::variants::LOCAL_OK;
use ankusa_testkit::envoy::Edge;
use ankusa_testkit::http;
use ankusa_testkit::metrics::find_metric;
use ankusa_tools::floors;
use ankusa_tools::load::Report;
use std::time::Duration;

/// Moves every thread of `pid` to `cpu` (`taskset -a -p -c`); threads it
/// starts later inherit it.
pub fn pin(pid: u32, cpu: usize) -> Result<(), String> {
    let out = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &cpu.to_string(), &pid.to_string()])
        .output()
        .map_err(|e| format!("cannot run taskset: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "taskset -a -p -c {cpu} {pid}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The CPUs `pid`'s main thread may run on, as `/proc/<pid>/status` lists them.
pub fn allowed_cpus(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map_or("?".to_string(), |s| s.trim().to_string())
}

/// One edge's counters, as its admin prints them.
#[derive(Clone, Copy, Debug, Default)]
pub struct EdgeCounts {
    pub admitted: f64,
    pub fallbacks: f64,
    pub noop: f64,
    pub callout_calls: f64,
    pub callout_answers: f64,
    pub local_ok: f64,
    /// Hooks the peer's `ratelimit` filter passed on Limitador's answer.
    pub peer_ok: f64,
    /// `ankusa_fleet_breaker_state` (0 closed, 1 open); a gauge, not subtracted.
    pub breaker: f64,
}

impl EdgeCounts {
    pub fn read(edge: &Edge) -> EdgeCounts {
        let text = http::get(&edge.admin_url("/stats/prometheus"))
            .map(|r| r.text())
            .unwrap_or_default();
        // The native module's stats under the names Prometheus stores.
        let text = ankusa_testkit::envoy::shell::as_scraped(&text);
        // The native floors count under the wasm floors' names, prefixed
        // `envoy_ankusa_` (their metrics namespace).
        let m = |name: &str| {
            find_metric(&text, name)
                .or_else(|| find_metric(&text, &format!("envoy_ankusa_{name}")))
                .unwrap_or(0.0)
        };
        EdgeCounts {
            admitted: m(r#"ankusa_admissions_total{outcome="admitted"}"#),
            fallbacks: m("ankusa_fleet_fallback_total"),
            noop: m(floors::NOOP_REQUESTS),
            callout_calls: m(floors::CALLOUT_CALLS),
            callout_answers: m(floors::CALLOUT_ANSWERS),
            local_ok: m(LOCAL_OK),
            peer_ok: m(PEER_OK),
            breaker: m("ankusa_fleet_breaker_state"),
        }
    }

    fn since(self, before: EdgeCounts) -> EdgeCounts {
        EdgeCounts {
            admitted: self.admitted - before.admitted,
            fallbacks: self.fallbacks - before.fallbacks,
            noop: self.noop - before.noop,
            callout_calls: self.callout_calls - before.callout_calls,
            callout_answers: self.callout_answers - before.callout_answers,
            local_ok: self.local_ok - before.local_ok,
            peer_ok: self.peer_ok - before.peer_ok,
            breaker: self.breaker,
        }
    }

    fn add(&mut self, o: EdgeCounts) {
        self.admitted += o.admitted;
        self.fallbacks += o.fallbacks;
        self.noop += o.noop;
        self.callout_calls += o.callout_calls;
        self.callout_answers += o.callout_answers;
        self.local_ok += o.local_ok;
        self.peer_ok += o.peer_ok;
        self.breaker = o.breaker;
    }
}

/// One edge's state at one moment: its CPU time and counters, and its own
/// store's and Redis's if it has them.
#[derive(Clone, Copy, Debug, Default)]
pub struct Snapshot {
    pub cpu: f64,
    pub counts: EdgeCounts,
    pub backend: Counts,
}

impl Snapshot {
    /// Taken before a run: the counters first, so rendering them (Envoy's
    /// admin, the store's `/metrics`, Redis's INFO: not a hook) falls
    /// outside the CPU measured.
    pub fn before(edge: &Edge, backend: Option<&Backend>, tick: f64) -> Snapshot {
        let counts = EdgeCounts::read(edge);
        let mut b = backend.map(Backend::counts).unwrap_or_default();
        if let Some(backend) = backend {
            backend.cpu(&mut b, tick);
        }
        Snapshot {
            cpu: cpu_seconds(edge.proc.pid(), tick),
            counts,
            backend: b,
        }
    }

    /// Taken after a run: the CPU first, for the same reason.
    pub fn after(edge: &Edge, backend: Option<&Backend>, tick: f64) -> Snapshot {
        let cpu = cpu_seconds(edge.proc.pid(), tick);
        let mut b = Counts::default();
        if let Some(backend) = backend {
            backend.cpu(&mut b, tick);
            b = Counts {
                store_cpu: b.store_cpu,
                redis_cpu: b.redis_cpu,
                ..backend.counts()
            };
        }
        Snapshot {
            cpu,
            counts: EdgeCounts::read(edge),
            backend: b,
        }
    }
}

/// Everything one variant measured, summed over its rounds.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub ok: u64,
    pub non_2xx: u64,
    pub errors: u64,
    pub reconnects: u64,
    pub elapsed: Duration,
    /// Sorted once every round is in ([`Tally::finish`]).
    pub latencies_us: Vec<u32>,
    pub envoy_cpu: f64,
    pub counts: EdgeCounts,
    /// The work of the variant's own store and Redis (none: zeros).
    pub backend: Counts,
    /// Envoy CPU µs per 2xx answer in each round.
    pub per_round_us: Vec<f64>,
    /// Envoy + store + Redis CPU µs per 2xx answer in each round.
    pub per_round_total_us: Vec<f64>,
}

impl Tally {
    pub fn add(&mut self, report: &Report, before: Snapshot, after: Snapshot) {
        let cpu = after.cpu - before.cpu;
        self.ok += report.ok;
        self.non_2xx += report.non_2xx + report.bad_body;
        self.errors += report.errors;
        self.reconnects += report.reconnects();
        self.elapsed += report.elapsed;
        self.latencies_us.extend(&report.latencies_us);
        self.envoy_cpu += cpu;
        self.counts.add(after.counts.since(before.counts));
        self.backend.add(after.backend.since(before.backend));
        let b = after.backend.since(before.backend);
        let per_hook = |x: f64| {
            if report.ok > 0 {
                x * 1e6 / report.ok as f64
            } else {
                f64::NAN
            }
        };
        self.per_round_us.push(per_hook(cpu));
        self.per_round_total_us
            .push(per_hook(cpu + b.store_cpu + b.redis_cpu));
    }

    pub fn finish(&mut self) {
        self.latencies_us.sort_unstable();
    }

    pub fn rps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.ok as f64 / s
        } else {
            0.0
        }
    }

    pub fn percentile_ms(&self, p: f64) -> f64 {
        ankusa_tools::load::percentile_ms(&self.latencies_us, p)
    }

    /// Envoy CPU µs per 2xx answer over every round; `None` without one.
    pub fn envoy_us(&self) -> Option<f64> {
        (self.ok > 0).then(|| self.envoy_cpu * 1e6 / self.ok as f64)
    }

    /// Envoy, store and Redis CPU µs per 2xx answer; `None` without one.
    pub fn total_us(&self) -> Option<f64> {
        let b = &self.backend;
        (self.ok > 0).then(|| (self.envoy_cpu + b.store_cpu + b.redis_cpu) * 1e6 / self.ok as f64)
    }

    /// `x` per 2xx answer; 0 without one.
    pub fn per_hook(&self, x: f64) -> f64 {
        if self.ok > 0 {
            x / self.ok as f64
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::clock_tick;

    #[test]
    fn a_tally_sums_rounds_and_keeps_each_rounds_cost() {
        let mut t = Tally::default();
        let report = |ok, ms: u32| Report {
            ok,
            clients: 1,
            connects: 1,
            elapsed: Duration::from_secs(1),
            latencies_us: vec![ms * 1000; ok as usize],
            ..Report::default()
        };
        let snap = |cpu, admitted| Snapshot {
            cpu,
            counts: EdgeCounts {
                admitted,
                breaker: 1.0,
                ..EdgeCounts::default()
            },
            backend: Counts {
                store_cpu: cpu / 2.0,
                redis_cpu: cpu / 4.0,
                store_hits: admitted,
                ..Counts::default()
            },
        };
        t.add(&report(100, 2), snap(1.0, 10.0), snap(1.01, 110.0));
        t.add(&report(300, 1), snap(2.0, 110.0), snap(2.06, 410.0));
        t.finish();
        assert_eq!(t.ok, 400);
        assert_eq!(t.counts.admitted, 400.0);
        assert_eq!(t.counts.breaker, 1.0);
        assert!((t.rps() - 200.0).abs() < 1e-9);
        assert!((t.envoy_us().unwrap() - 175.0).abs() < 1e-6);
        assert!((t.per_round_us[0] - 100.0).abs() < 1e-6);
        assert!((t.per_round_us[1] - 200.0).abs() < 1e-6);
        assert_eq!(t.backend.store_hits, 400.0);
        assert!((t.total_us().unwrap() - 175.0 * 1.75).abs() < 1e-6);
        assert!((t.per_round_total_us[1] - 350.0).abs() < 1e-6);
        assert_eq!(t.percentile_ms(0.5), 1.0);
        assert_eq!(t.percentile_ms(0.99), 2.0);
        assert_eq!(Tally::default().envoy_us(), None);
        assert_eq!(Tally::default().total_us(), None);
    }

    #[test]
    fn this_process_has_cpu_time_and_an_allowed_cpu_list() {
        let pid = std::process::id();
        // Busy until /proc shows a tick of CPU time, on a loaded machine too.
        let spin = std::time::Instant::now();
        while cpu_seconds(pid, clock_tick()) == 0.0 && spin.elapsed() < Duration::from_secs(20) {}
        assert!(cpu_seconds(pid, clock_tick()) > 0.0);
        assert_ne!(allowed_cpus(pid), "?");
        assert_eq!(cpu_seconds(u32::MAX, 100.0), 0.0);
    }
}
