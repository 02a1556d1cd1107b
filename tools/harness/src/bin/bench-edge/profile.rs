//! `--perf DIR`: `perf record` on the Envoys' core while a concurrent load
//! runs, then each variant's Envoy CPU per hook split by where it ran: the
//! Envoy binary, the kernel, V8's generated code (the filter's wasm and the
//! trampolines around host calls: anonymous memory, no symbols), libc.
//! Envoy's release binary is stripped, so the split stops at the binary.
//! Perf names threads, not processes: each Envoy's threads are read from
//! `/proc` while it runs. With it, each Envoy's CPU while idle: what its
//! timers (the filter's tick) cost with no hook to charge them to.

use super::cpu::cpu_seconds;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A `perf record` running on one core.
pub struct Recording {
    child: Child,
    pub file: PathBuf,
}

/// Starts recording every process on `cpu` into `dir/perf-<label>.data`.
pub fn start(dir: &Path, label: &str, cpu: usize) -> Result<Recording, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("--perf {}: {e}", dir.display()))?;
    let file = dir.join(format!("perf-{label}.data"));
    let child = Command::new("perf")
        .args(["record", "-q", "-F", "2999", "-C", &cpu.to_string(), "-o"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run perf: {e}"))?;
    // perf needs a moment to open its events before the load starts.
    std::thread::sleep(std::time::Duration::from_millis(300));
    Ok(Recording { child, file })
}

impl Recording {
    /// Stops the recording (SIGINT, as perf expects) and waits for the file.
    pub fn stop(mut self) -> Result<PathBuf, String> {
        let pid = self.child.id().to_string();
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .map_err(|e| format!("kill -INT {pid}: {e}"))?;
        self.child.wait().map_err(|e| format!("perf: {e}"))?;
        Ok(self.file)
    }
}

/// Per process and shared object, the share of the samples: `(pid, dso, %)`.
pub fn by_pid_and_dso(file: &Path) -> Result<Vec<(u32, String, f64)>, String> {
    let out = Command::new("perf")
        .args(["report", "--stdio", "-q", "--sort", "pid,dso", "-i"])
        .arg(file)
        .output()
        .map_err(|e| format!("cannot run perf report: {e}"))?;
    Ok(parse_report(&String::from_utf8_lossy(&out.stdout)))
}

/// Each Envoy's CPU µs per second while no client sends anything, over
/// `seconds` (`pids`: one per variant): what its timers (the filter's tick)
/// and housekeeping cost with no hook to charge them to.
pub fn idle(pids: &[u32], seconds: f64, tick: f64) -> Vec<f64> {
    let before: Vec<f64> = pids.iter().map(|&p| cpu_seconds(p, tick)).collect();
    std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
    pids.iter()
        .zip(before)
        .map(|(&p, b)| (cpu_seconds(p, tick) - b) * 1e6 / seconds)
        .collect()
}

/// The threads of process `pid` (perf's `pid` column names threads).
pub fn threads(pid: u32) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Lines like `    41.53%  12345:envoy   [kernel.kallsyms]`.
fn parse_report(text: &str) -> Vec<(u32, String, f64)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let pct = parts.next()?.strip_suffix('%')?.parse::<f64>().ok()?;
            let pid = parts.next()?.split(':').next()?.parse::<u32>().ok()?;
            let dso = parts.collect::<Vec<_>>().join(" ");
            Some((pid, dso, pct))
        })
        .collect()
}

/// Which part a shared object is counted in.
pub fn part(dso: &str) -> &'static str {
    match dso {
        "envoy" => "envoy",
        "[kernel.kallsyms]" => "kernel",
        d if d.starts_with("libc") || d.starts_with("ld-linux") || d.starts_with("libm") => "libc",
        // V8's code space: anonymous executable memory perf can't name.
        "[unknown]" | "[anon]" | "[JIT] tid" => "jit",
        d if d.starts_with("perf-") || d.starts_with("[JIT]") || d.starts_with("//anon") => "jit",
        _ => "other",
    }
}

/// The samples of threads `tids` by part, each a fraction of their whole.
pub fn split(rows: &[(u32, String, f64)], tids: &[u32]) -> Vec<(&'static str, f64)> {
    let mine: Vec<&(u32, String, f64)> = rows.iter().filter(|r| tids.contains(&r.0)).collect();
    let whole: f64 = mine.iter().map(|r| r.2).sum();
    let mut parts: Vec<(&'static str, f64)> = Vec::new();
    for name in ["envoy", "kernel", "jit", "libc", "other"] {
        // From +0.0: an empty f64 sum is -0.0, which would print as "-0.0".
        let sum = mine
            .iter()
            .filter(|r| part(&r.1) == name)
            .fold(0.0, |sum, r| sum + r.2);
        if whole > 0.0 {
            parts.push((name, sum / whole));
        }
    }
    parts
}

/// Each variant's Envoy CPU per hook split by part (`rows`: variant key,
/// the Envoy's threads, µs per hook).
pub fn print(file: &Path, rows: &[(char, Vec<u32>, Option<f64>)]) {
    let report = match by_pid_and_dso(file) {
        Ok(r) => r,
        Err(e) => {
            println!("  perf: {e}");
            return;
        }
    };
    println!(
        "Envoy CPU per hook by where it ran (perf record -C on the Envoys' core, {}):",
        file.display()
    );
    println!("        envoy µs/hk  = envoy binary + kernel + V8 code (wasm, host-call trampolines) + libc + other");
    for (key, tids, us) in rows {
        let Some(us) = us else { continue };
        let parts = split(&report, tids);
        let text: Vec<String> = parts
            .iter()
            .map(|(name, f)| format!("{name} {:.1}", f * us))
            .collect();
        println!("  ({key}) {us:>10.1}  = {}", text.join(" + "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_splits_by_pid_and_part() {
        let text = "    40.00%  101:envoy  envoy\n    20.00%  101:envoy  [kernel.kallsyms]\n\
                    \x20   10.00%  101:wrk:0  [unknown]\n    30.00%  202:envoy  libc.so.6\n";
        let rows = parse_report(text);
        assert_eq!(rows.len(), 4);
        let s = split(&rows, &[101, 103]);
        let get = |n: &str| s.iter().find(|p| p.0 == n).unwrap().1;
        assert!((get("envoy") - 40.0 / 70.0).abs() < 1e-9);
        assert!((get("kernel") - 20.0 / 70.0).abs() < 1e-9);
        assert!((get("jit") - 10.0 / 70.0).abs() < 1e-9);
        assert_eq!(get("libc"), 0.0);
        assert!(split(&rows, &[999]).is_empty());
        assert!(!format!("{:.1}", get("libc")).starts_with('-'));
        assert!(!threads(std::process::id()).is_empty());
    }
}
