//! What bench-edge prints: the machine and knobs, one row per variant with
//! its ratios to the bare Envoy, and where the CPU went.

use super::{Args, Variant, BODY, INTAKE_STATUS, PATH};
use ankusa_testkit::paths;
use ankusa_testkit::redis::Redis;
use ankusa_tests::load::{self, Report};
use std::time::Duration;

/// What one variant measured, and the edge's and store's counts over the run.
pub struct Row {
    pub variant: Variant,
    pub report: Report,
    pub admitted: f64,
    pub fallbacks: f64,
    pub store_hits: f64,
    /// CPU seconds each process used over the measured run, in [`CPU_OF`] order.
    pub cpu: [f64; 5],
}

/// Whose CPU time is read: on a machine this small they all share the cores.
pub const CPU_OF: [&str; 5] = ["envoy", "store", "redis", "intake", "load"];

impl Row {
    /// Why this row doesn't measure what it names, if it doesn't.
    pub fn problem(&self) -> Option<String> {
        let v = &self.variant;
        if self.report.ok == 0 {
            return Some(format!(
                "({}) got no 2xx answer: {}",
                v.key,
                self.report.line()
            ));
        }
        if v.config.is_some() && self.admitted == 0.0 {
            return Some(format!("({}) the filter admitted nothing", v.key));
        }
        if v.signed && self.report.non_2xx > 0 {
            return Some(format!(
                "({}) {} signed hooks were refused",
                v.key, self.report.non_2xx
            ));
        }
        if v.key == 'c' && self.store_hits == 0.0 {
            return Some(format!("({}) the store saw no /v1/hit", v.key));
        }
        None
    }
}

/// Clock ticks per second, the unit of /proc's CPU times.
pub fn clock_tick() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// User plus system CPU seconds `pid` (all its threads) has used so far; 0 if unreadable.
pub fn cpu_seconds(pid: u32, tick: f64) -> f64 {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name may hold spaces: fields are counted after the last ')',
    // where field 3 (state) comes first, so utime (14) and stime (15) are 11 and 12.
    let Some(rest) = text.rfind(')').map(|i| &text[i + 1..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / tick
}

pub fn print_cpu(rows: &[Row], concurrency: u32, measured: Duration) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!();
    println!(
        "CPU seconds over each measured run ({cores} cores × {:.0} s available; envoy has {concurrency} workers):",
        measured.as_secs_f64()
    );
    print!("{:<28}", "variant");
    for name in CPU_OF {
        print!(" {name:>7}");
    }
    println!(" {:>14} {:>12}", "envoy µs/hook", "all µs/hook");
    for row in rows {
        print!(
            "{:<28}",
            format!("({}) {}", row.variant.key, row.variant.name)
        );
        for s in row.cpu {
            print!(" {s:>7.2}");
        }
        let per_hook = |s: f64| {
            if row.report.ok > 0 {
                format!("{:.0}", s * 1e6 / row.report.ok as f64)
            } else {
                "-".to_string()
            }
        };
        println!(
            " {:>14} {:>12}",
            per_hook(row.cpu[0]),
            per_hook(row.cpu.iter().sum())
        );
    }
    let envoy_us = |key: char| {
        rows.iter()
            .find(|r| r.variant.key == key && r.report.ok > 0)
            .map(|r| r.cpu[0] * 1e6 / r.report.ok as f64)
    };
    if let (Some(b), Some(d)) = (envoy_us('b'), envoy_us('d')) {
        println!(
            "verification: (d) {d:.0} vs (b) {b:.0} Envoy CPU µs/hook: {:+.0} µs per hook, ratio d/b {:.2}",
            d - b,
            d / b
        );
    }
}

pub fn print_facts(args: &Args, redis: &Redis) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')))
        .map_or("unknown CPU", |(_, m)| m.trim());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    let envoy = std::process::Command::new(paths::envoy_bin())
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let envoy = envoy
        .split_once("version: ")
        .map_or("unknown", |(_, v)| v.trim());
    let redis_version = redis.cli(&["INFO", "server"]);
    let redis_version = redis_version
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("unknown");
    println!(
        "machine: {cores} cores ({model}), load average {}",
        load.join(" ")
    );
    println!("envoy:   {envoy}, --concurrency {}", args.concurrency);
    println!(
        "redis:   {redis_version}; ankusa-store, intake and this load generator: release builds"
    );
    println!(
        "knobs:   {} keep-alive HTTP/1.1 clients, {}s measured per variant after {}s warm-up; \
         POST {PATH}, a ~{}-byte JSON body, a fresh x-github-delivery per hook; \
         intake answers {INTAKE_STATUS} without storing (x-intake-status)",
        args.clients,
        args.seconds,
        args.warmup_seconds,
        BODY.replace(load::COUNTER, "12345").len()
    );
    println!();
}

pub fn print_table(rows: &[Row]) {
    let base = rows
        .iter()
        .find(|r| r.variant.key == 'a')
        .map(|r| &r.report);
    let ratio = |v: f64, b: Option<f64>| match b {
        Some(b) if b > 0.0 => format!("{:.2}", v / b),
        _ => "-".to_string(),
    };
    println!(
        "{:<28} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7}   {:>7} {:>7} {:>7}",
        "variant",
        "2xx/s",
        "p50_ms",
        "p99_ms",
        "non_2xx",
        "errors",
        "reconn",
        "rate/a",
        "p50/a",
        "p99/a"
    );
    for row in rows {
        let r = &row.report;
        println!(
            "{:<28} {:>8.0} {:>8.3} {:>8.3} {:>8} {:>7} {:>7}   {:>7} {:>7} {:>7}",
            format!("({}) {}", row.variant.key, row.variant.name),
            r.rps(),
            r.percentile_ms(0.50),
            r.percentile_ms(0.99),
            r.non_2xx,
            r.errors,
            r.reconnects(),
            ratio(r.rps(), base.map(Report::rps)),
            ratio(r.percentile_ms(0.50), base.map(|b| b.percentile_ms(0.50))),
            ratio(r.percentile_ms(0.99), base.map(|b| b.percentile_ms(0.99))),
        );
    }
    println!();
    for row in rows.iter().filter(|r| r.variant.config.is_some()) {
        let per_hook = |n: f64| {
            if row.report.ok > 0 {
                n / row.report.ok as f64
            } else {
                0.0
            }
        };
        println!(
            "({}) filter admitted {:.0} of {} 2xx; store /v1/hit calls {:.0} ({:.2} per hook); fleet fallbacks {:.0}",
            row.variant.key,
            row.admitted,
            row.report.ok,
            row.store_hits,
            per_hook(row.store_hits),
            row.fallbacks
        );
    }
}
