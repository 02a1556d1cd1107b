//! The resident memory of every process of the soak's fleet, read from
//! `/proc/PID/status` (`VmRSS`) every few seconds.

use ankusa_testkit::process::rss_kib;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often every process's memory is read.
pub const EVERY: Duration = Duration::from_secs(5);

/// A process of the fleet: its role (`edge-1`, `store`, `redis:7001`,
/// `intake`) and pid. A process restarted by a fault is a new one (same
/// role, new pid).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Process {
    pub role: String,
    pub pid: u32,
}

/// One reading: a process's resident memory at a moment of the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rss {
    /// Seconds from the start of traffic.
    pub at_s: f64,
    pub process: Process,
    pub kib: u64,
}

/// Reads the memory of the processes `processes` names, every [`EVERY`],
/// until `done`. A process gone (killed by a fault) gives no reading.
pub fn watch(processes: &Mutex<Vec<Process>>, start: Instant, done: &AtomicBool) -> Vec<Rss> {
    let mut readings = Vec::new();
    let mut next = Instant::now();
    while !done.load(Ordering::SeqCst) {
        if Instant::now() >= next {
            let now: Vec<Process> = processes.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let at_s = start.elapsed().as_secs_f64();
            for process in now {
                let kib = rss_kib(process.pid);
                if kib > 0 {
                    readings.push(Rss { at_s, process, kib });
                }
            }
            next += EVERY;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    readings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_and_skips_one_that_is_gone() {
        let me = Process {
            role: "soak".into(),
            pid: std::process::id(),
        };
        let gone = Process {
            role: "gone".into(),
            pid: u32::MAX - 1,
        };
        let processes = Mutex::new(vec![me.clone(), gone]);
        let done = AtomicBool::new(false);
        let readings = std::thread::scope(|s| {
            let w = s.spawn(|| watch(&processes, Instant::now(), &done));
            std::thread::sleep(Duration::from_millis(300));
            done.store(true, Ordering::SeqCst);
            w.join().unwrap_or_default()
        });
        assert_eq!(readings.len(), 1, "{readings:?}");
        assert_eq!(readings[0].process, me);
        assert!(readings[0].kib > 0);
    }
}
