//! `bench-edge [--clients N] [--seconds S] [--rounds R] [--mode M] …`
//!
//! What the filter costs an edge, as Envoy CPU per hook beside what other
//! edges cost: the same Envoy, listener and route forwarding the same webhook
//! POSTs to the intake, with (a) the router alone, (l) Envoy's native
//! `local_ratelimit`, (n) a no-op wasm filter, (f) a wasm filter making one
//! callout per hook (the store's `/healthz`), then the Ankusa filter on
//! (b) node scopes, (d) node scopes verifying GitHub signatures, (c) fleet
//! scopes (one store hit per hook, hooks that arrive together sharing a
//! call, to a release ankusa-store on a real Redis) and (o) fleet scopes
//! with the store unreachable and the breaker open; with `--limitador`,
//! (p) the peer: Envoy's native `ratelimit` filter asking Limitador over
//! gRPC, its counters in a Redis of its own; when named, (h) the callout
//! floor making a real hit on the store's `/v1/hit` instead of `/healthz`;
//! with `--baseline-wasm`,
//! (B) and (C) run another build of the filter on (b)'s and (c)'s
//! configurations, for a before/after in the same run.
//! Quotas are high enough that nothing is refused.
//!
//! Every Envoy runs with one worker pinned to one core (`taskset`), and
//! everything else (Redis, the store, the intake, this load generator) on
//! another. Envoy's CPU per hook is Δ(utime+stime) from `/proc/<pid>/stat`
//! over the 2xx answers; every variant calling a store has a store and Redis
//! of its own, whose CPU per hook is added for a total. Two modes: `sequential` loads one Envoy at a time,
//! in rounds whose order alternates (forward, then backward), so a drift in
//! what else the machine does falls on every variant alike; `concurrent`
//! loads every Envoy at once on the same core (the clients split evenly), so
//! ratios between variants are taken in the same moment and survive a noisy
//! machine. Prints ratios beside the goals. Run by scripts/bench-edge.sh,
//! which builds the release artefacts first.

use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::intake::Intake;
use ankusa_testkit::paths;
use ankusa_testkit::ports::free_port;
use ankusa_tools::children::stop_children_on_exit;
use ankusa_tools::floors;
use ankusa_tools::load;
use clap::{Parser, ValueEnum};
use std::time::Duration;

mod backend;
mod cpu;
mod hooks;
mod measure;
mod peer;
mod profile;
mod regression;
mod report;
mod variants;
use backend::Backend;
use cpu::clock_tick;
use hooks::load_spec;
use measure::{allowed_cpus, pin, Snapshot, Tally};
use variants::Variant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// One Envoy loaded at a time, rounds alternating in order.
    Sequential,
    /// Every Envoy loaded at once on the same core.
    Concurrent,
    /// Sequential, then concurrent.
    Both,
}

#[derive(Parser)]
#[command(name = "bench-edge", version)]
pub struct Args {
    /// Concurrent keep-alive clients (split evenly between the Envoys in
    /// concurrent mode, unless `--per-envoy` says how many each gets).
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Concurrent mode: clients per Envoy, one load after another (e.g.
    /// `1,4,32`: every variant at 1 client, then at 4, then at 32).
    #[arg(long, value_delimiter = ',')]
    per_envoy: Vec<usize>,
    /// Measured seconds per variant per round.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Rounds per mode.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Unmeasured seconds per variant first (V8's JIT, upstream connections).
    #[arg(long, default_value_t = 1.0)]
    warmup_seconds: f64,
    /// Envoy worker threads (`--concurrency`).
    #[arg(long, default_value_t = 1)]
    concurrency: u32,
    #[arg(long, value_enum, default_value_t = Mode::Both)]
    mode: Mode,
    /// The variants to run, by key (`alnfbdco`; `h` and `k` only when named; `p`
    /// needs `--limitador`, `B` and `C` need `--baseline-wasm`).
    #[arg(long, default_value = "alnfbdco")]
    only: String,
    /// The core every Envoy is pinned to.
    #[arg(long, default_value_t = 0)]
    envoy_cpu: usize,
    /// The core everything else is pinned to.
    #[arg(long, default_value_t = 1)]
    rest_cpu: usize,
    /// Pin nothing (a machine with one core, or a comparison with the old figures).
    #[arg(long)]
    no_pin: bool,
    /// Another build of the filter (e.g. an older commit's), run by variants
    /// (B) and (C) beside this tree's (b) and (c) for a paired before/after.
    #[arg(long)]
    baseline_wasm: Option<std::path::PathBuf>,
    /// A built `limitador-server` (Kuadrant's rate-limit service, v2), run
    /// by variant (p), the peer.
    #[arg(long)]
    limitador: Option<std::path::PathBuf>,
    /// Concurrent mode: `perf record` the Envoys' core during each load's
    /// rounds into this directory, and split each Envoy's CPU per hook by
    /// where it ran (see `profile`).
    #[arg(long)]
    perf: Option<std::path::PathBuf>,
}

fn main() {
    let args = Args::parse();
    // Read by testkit::paths::workspace_bin: the store and intake as released.
    std::env::set_var("ANKUSA_PROFILE", "release");
    if let Err(e) = stop_children_on_exit("bench-edge") {
        eprintln!("bench-edge: {e}");
        std::process::exit(1);
    }
    match run(&args) {
        Ok(problems) => {
            for p in &problems {
                eprintln!("bench-edge: {p}");
            }
            std::process::exit(if problems.is_empty() { 0 } else { 1 });
        }
        Err(e) => {
            eprintln!("bench-edge: {e}");
            std::process::exit(1);
        }
    }
}

fn seconds(flag: &str, v: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(v).map_err(|_| format!("--{flag} must be seconds ≥ 0, got {v}"))
}

/// The variants `only` names, in their usual order.
fn chosen(only: &str) -> Result<Vec<Variant>, String> {
    let all = variants::variants();
    if let Some(bad) = only.chars().find(|c| !all.iter().any(|v| v.key == *c)) {
        return Err(format!(
            "--only {only:?}: no variant {bad:?} (the keys are {})",
            all.iter().map(|v| v.key).collect::<String>()
        ));
    }
    let picked: Vec<Variant> = all.into_iter().filter(|v| only.contains(v.key)).collect();
    if picked.is_empty() {
        return Err("--only names no variant".to_string());
    }
    Ok(picked)
}

/// The Limitador the peer runs: required when (p) is chosen, and a file.
fn peer_binary<'a>(
    chosen: &[Variant],
    limitador: Option<&'a std::path::Path>,
) -> Result<Option<&'a std::path::Path>, String> {
    if !chosen.iter().any(|v| v.module == variants::Module::Peer) {
        return Ok(None);
    }
    match limitador {
        None => Err(
            "variant 'p' (the peer) needs --limitador <limitador-server binary> \
                     (LIMITADOR=<path> for scripts/bench-edge.sh)"
                .to_string(),
        ),
        Some(bin) if !bin.is_file() => Err(format!("--limitador {}: no such file", bin.display())),
        Some(bin) => Ok(Some(bin)),
    }
}

fn run(args: &Args) -> Result<Vec<String>, String> {
    let measured = seconds("seconds", args.seconds)?;
    let warmup = seconds("warmup-seconds", args.warmup_seconds)?;
    if args.rounds == 0 {
        return Err("--rounds must be at least 1, got 0".to_string());
    }
    let chosen = chosen(&args.only)?;
    if args.per_envoy.contains(&0) {
        return Err(format!(
            "--per-envoy {:?}: every load needs at least 1 client",
            args.per_envoy
        ));
    }
    for needed in [
        paths::target_dir().join("release/ankusa-store"),
        paths::target_dir().join("release/intake"),
        paths::target_dir().join("wasm32-wasip1/release/ankusa_filter.wasm"),
    ] {
        if !needed.exists() {
            return Err(format!(
                "{} is missing: run scripts/bench-edge.sh, which builds it",
                needed.display()
            ));
        }
    }
    floors::wasm(floors::NOOP)?;
    floors::wasm(floors::CALLOUT)?;
    if let Some(wasm) = &args.baseline_wasm {
        if !wasm.is_file() {
            return Err(format!("--baseline-wasm {}: no such file", wasm.display()));
        }
    }
    let limitador = peer_binary(&chosen, args.limitador.as_deref())?;

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pinned = !args.no_pin && cores >= 2;
    if pinned {
        // Before any child starts: they inherit it; each Envoy is moved after.
        pin(std::process::id(), args.rest_cpu)?;
    }
    // Every variant calling a store has its own store and Redis: their CPU
    // per hook is that variant's alone, in both modes.
    let mut backends = Vec::new();
    for v in &chosen {
        backends.push(match (v.module, limitador) {
            (variants::Module::Peer, Some(bin)) => Some(Backend::start_peer(bin)?),
            _ if v.needs_store() => Some(Backend::start()?),
            _ => None,
        });
    }
    // The hooks carry `x-intake-status: 201` (answered without storing).
    let intake = Intake::start_obeying();
    let dead_store = free_port();

    let mut edges = Vec::new();
    for (v, backend) in chosen.iter().zip(&backends) {
        let store_port = match backend {
            Some(b) if !v.store_down => b.port(),
            _ => dead_store,
        };
        let mut spec = EdgeSpec::new(
            &format!("bench-{}", v.key),
            intake.port,
            store_port,
            serde_json::Value::Null,
        );
        spec.concurrency = args.concurrency;
        let mut edge = variants::spawn(v, spec, args.baseline_wasm.as_deref())?;
        edge.wait_ready(Duration::from_secs(90));
        if pinned {
            pin(edge.proc.pid(), args.envoy_cpu)?;
        }
        edges.push(edge);
    }
    let pinning = if pinned {
        format!(
            "every Envoy on CPU {} (Cpus_allowed_list {}), everything else on CPU {} ({})",
            args.envoy_cpu,
            allowed_cpus(edges[0].proc.pid()),
            args.rest_cpu,
            allowed_cpus(std::process::id())
        )
    } else {
        "none (every process may run on every core)".to_string()
    };
    report::print_facts(args, &pinning);

    for (v, edge) in chosen.iter().zip(&edges) {
        load::run(&load_spec(v, edge, "warm", args.clients, warmup))?;
        if v.store_down {
            // The breaker opens after a few failed calls; give it up to 10 more warm-ups.
            for _ in 0..10 {
                if edge.stat("ankusa_fleet_breaker_state") == 1.0 {
                    break;
                }
                load::run(&load_spec(
                    v,
                    edge,
                    "warm",
                    args.clients,
                    Duration::from_millis(500),
                ))?;
            }
        }
    }

    let tick = clock_tick();
    let mut problems = Vec::new();
    let sequential = matches!(args.mode, Mode::Sequential | Mode::Both);
    let concurrent = matches!(args.mode, Mode::Concurrent | Mode::Both);

    if sequential {
        let mut tallies = vec![Tally::default(); chosen.len()];
        for round in 0..args.rounds {
            let mut order: Vec<usize> = (0..chosen.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let (v, edge, backend) = (&chosen[i], &edges[i], backends[i].as_ref());
                let spec = load_spec(v, edge, &format!("seq{round}"), args.clients, measured);
                let before = Snapshot::before(edge, backend, tick);
                let report = load::run(&spec)?;
                let after = Snapshot::after(edge, backend, tick);
                tallies[i].add(&report, before, after);
            }
        }
        problems.extend(finish(
            "sequential: one Envoy loaded at a time",
            "sequential",
            args.clients,
            &chosen,
            &mut tallies,
        ));
    }

    if concurrent {
        let loads = if args.per_envoy.is_empty() {
            vec![(args.clients / chosen.len()).max(1)]
        } else {
            args.per_envoy.clone()
        };
        if args.perf.is_some() {
            let pids: Vec<u32> = edges.iter().map(|e| e.proc.pid()).collect();
            let idle = profile::idle(&pids, 10.0, tick);
            println!();
            println!("Envoy CPU while idle (10 s, no client), µs per second:");
            for (v, us) in chosen.iter().zip(idle) {
                println!("  ({}) {us:>8.0}", v.key);
            }
        }
        for each in loads {
            let mut tallies = vec![Tally::default(); chosen.len()];
            let recording = match &args.perf {
                Some(dir) => Some(profile::start(dir, &each.to_string(), args.envoy_cpu)?),
                None => None,
            };
            for round in 0..args.rounds {
                let specs = chosen
                    .iter()
                    .zip(&edges)
                    .map(|(v, e)| load_spec(v, e, &format!("con{each}-{round}"), each, measured))
                    .collect();
                let snap = |at: fn(&Edge, Option<&Backend>, f64) -> Snapshot| -> Vec<Snapshot> {
                    edges
                        .iter()
                        .zip(&backends)
                        .map(|(e, b)| at(e, b.as_ref(), tick))
                        .collect()
                };
                let before = snap(Snapshot::before);
                let reports = load::run_all(specs)?;
                let after = snap(Snapshot::after);
                for (i, t) in tallies.iter_mut().enumerate() {
                    t.add(&reports[i], before[i], after[i]);
                }
            }
            let title =
                format!("concurrent: every Envoy loaded at once on one core, {each} clients each");
            problems.extend(finish(&title, "concurrent", each, &chosen, &mut tallies));
            if let Some(recording) = recording {
                let file = recording.stop()?;
                let rows: Vec<(char, Vec<u32>, Option<f64>)> = (0..chosen.len())
                    .map(|i| {
                        let tids = profile::threads(edges[i].proc.pid());
                        (chosen[i].key, tids, tallies[i].envoy_us())
                    })
                    .collect();
                profile::print(&file, &rows);
            }
        }
    }
    drop(edges);
    drop(backends);
    Ok(problems)
}

/// Prints one mode, its load `clients` per Envoy, and returns its problems.
fn finish(
    title: &str,
    mode: &str,
    clients: usize,
    chosen: &[Variant],
    tallies: &mut [Tally],
) -> Vec<String> {
    tallies.iter_mut().for_each(Tally::finish);
    let rows: Vec<(&Variant, &Tally)> = chosen.iter().zip(tallies.iter()).collect();
    report::print_mode(title, clients, &rows);
    report::print_native_goals(clients, &rows);
    rows.iter()
        .filter_map(|(v, t)| report::problem(v, t, mode))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_picks_variants_by_key_in_their_order() {
        let keys = |s: &str| chosen(s).unwrap().iter().map(|v| v.key).collect::<String>();
        assert_eq!(keys("ca"), "ac");
        assert_eq!(keys("alnfbdco"), "alnfbdco");
        let err = chosen("az").err().unwrap();
        assert!(err.contains("'z'"), "{err}");
        assert!(chosen("").is_err());
    }

    #[test]
    fn the_peer_needs_a_limitador_that_exists() {
        let err = peer_binary(&chosen("fp").unwrap(), None).unwrap_err();
        assert!(err.contains("--limitador"), "{err}");
        let missing = std::path::Path::new("/nonexistent/limitador-server");
        let err = peer_binary(&chosen("p").unwrap(), Some(missing)).unwrap_err();
        assert!(err.contains("/nonexistent/limitador-server"), "{err}");
        assert_eq!(peer_binary(&chosen("fc").unwrap(), None), Ok(None));
        let here = std::env::current_exe().unwrap();
        assert_eq!(
            peer_binary(&chosen("p").unwrap(), Some(&here)),
            Ok(Some(here.as_path()))
        );
    }
}
