//! How long each edge's Envoy worker waited for a CPU during a row.
//!
//! On a shared, overloaded machine (CPU pressure near 100 %) a runnable
//! Envoy worker can wait hundreds of milliseconds for a core: a hook held
//! that long at the edge says nothing about the edge. Linux counts, per
//! thread, the time spent runnable but not running (the second field of
//! `/proc/PID/task/TID/schedstat`, ns). A watcher reads it for each edge's
//! worker thread (`wrk:worker_0`; the rows run one worker per edge) every
//! [`EVERY`], and the budget check takes from each hook's time at the edge
//! the time its worker waited for a CPU meanwhile.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often the workers' wait counters are read.
pub const EVERY: Duration = Duration::from_millis(10);

/// The name Envoy gives its first worker thread.
const WORKER: &str = "wrk:worker_0";

/// Now, in Unix ms.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// One worker's cumulative wait for a CPU (ms) at moments (Unix ms), in order.
#[derive(Clone, Debug, Default)]
pub struct Series(pub Vec<(u64, f64)>);

impl Series {
    /// The cumulative wait at `t`, interpolated between readings (held flat
    /// outside them).
    fn at(&self, t: u64) -> f64 {
        let s = &self.0;
        let i = s.partition_point(|(at, _)| *at <= t);
        match (i.checked_sub(1).and_then(|j| s.get(j)), s.get(i)) {
            (Some(&(t0, w0)), Some(&(t1, w1))) if t1 > t0 => {
                w0 + (w1 - w0) * (t - t0) as f64 / (t1 - t0) as f64
            }
            (Some(&(_, w0)), _) => w0,
            (None, Some(&(_, w1))) => w1,
            (None, None) => 0.0,
        }
    }

    /// How long the worker waited for a CPU within `[from, to)` (Unix ms).
    pub fn waited_ms(&self, from: u64, to: u64) -> u64 {
        (self.at(to) - self.at(from)).max(0.0).round() as u64
    }
}

/// The thread id of Envoy `pid`'s first worker.
fn worker_tid(pid: u32) -> Option<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .find_map(|task| {
            let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
            (comm.trim() == WORKER)
                .then(|| task.file_name().to_str()?.parse().ok())
                .flatten()
        })
}

/// The thread's time spent runnable but not running so far (ms).
fn waited_so_far_ms(pid: u32, tid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    let ns: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    Some(ns as f64 / 1e6)
}

/// Reads the wait counters of the workers of `pids` until `done`; a series per pid.
pub fn watch(pids: &[u32], done: &AtomicBool) -> HashMap<u32, Series> {
    watch_live(|| pids.to_vec(), done)
}

/// [`watch`] over the edges `pids()` names at each reading (an edge
/// restarted mid-run has a new pid).
pub fn watch_live(pids: impl Fn() -> Vec<u32>, done: &AtomicBool) -> HashMap<u32, Series> {
    let mut tids: HashMap<u32, u32> = HashMap::new();
    let mut series: HashMap<u32, Series> = HashMap::new();
    while !done.load(Ordering::SeqCst) {
        for pid in pids() {
            let tid = match tids.get(&pid) {
                Some(&tid) => tid,
                None => match worker_tid(pid) {
                    Some(tid) => *tids.entry(pid).or_insert(tid),
                    None => continue,
                },
            };
            if let Some(waited) = waited_so_far_ms(pid, tid) {
                series.entry(pid).or_default().0.push((unix_ms(), waited));
            }
        }
        std::thread::sleep(EVERY);
    }
    series
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_interpolate_between_readings() {
        let s = Series(vec![(1000, 0.0), (1010, 10.0), (1020, 10.0), (1030, 40.0)]);
        assert_eq!(s.waited_ms(1000, 1010), 10);
        assert_eq!(s.waited_ms(1005, 1025), 5 + 15);
        assert_eq!(s.waited_ms(1010, 1020), 0);
        assert_eq!(s.waited_ms(900, 2000), 40, "flat outside the readings");
        assert_eq!(Series::default().waited_ms(0, 10), 0);
    }

    #[test]
    fn this_process_has_a_wait_counter() {
        let pid = std::process::id();
        assert!(waited_so_far_ms(pid, pid).is_some());
        let done = AtomicBool::new(true);
        assert!(watch(&[pid], &done).is_empty());
    }
}
