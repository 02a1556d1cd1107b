//! `fleet --edges N --base-port P [--filter-config FILE] [--vm-env NAME]… [--release]`
//!
//! Starts Redis, ankusa-store, the intake and N Envoy edges, prints one line
//! `READY {json}` on stdout once every part answers, and stops them all on
//! SIGINT or SIGTERM (or when one of them dies, exiting 1).

use ankusa_tools::children;
use ankusa_tools::fleet::{Fleet, FleetSpec, Ports};
use clap::Parser;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// A local Ankusa fleet as native processes.
#[derive(Parser, Debug)]
#[command(name = "fleet", version)]
struct Args {
    /// Envoy edges to start (nodes edge-1 … edge-N).
    #[arg(long, default_value_t = 2)]
    edges: usize,
    /// Redis on P, store P+1, intake P+2, edge-i on P+10·i (admin P+10·i+1).
    #[arg(long, default_value_t = 20_000)]
    base_port: u16,
    /// The plugin configuration (JSON) for every edge; default: fleet scopes, tenant acme, sources gh and stripe.
    #[arg(long)]
    filter_config: Option<PathBuf>,
    /// Envoy worker threads per edge.
    #[arg(long, default_value_t = 2)]
    concurrency: u32,
    /// Run the release builds of ankusa-store and intake (target/release).
    #[arg(long)]
    release: bool,
    /// An environment variable of this process to hand to every edge's filter
    /// VM (a signing secret a `verify` names); repeatable. Only the name
    /// reaches Envoy's configuration.
    #[arg(long = "vm-env", value_name = "NAME")]
    vm_env: Vec<String>,
}

fn spec(args: &Args) -> Result<FleetSpec, String> {
    if args.release {
        let dir = ankusa_testkit::paths::target_dir().join("release");
        for bin in ["ankusa-store", "intake"] {
            if !dir.join(bin).exists() {
                return Err(format!(
                    "--release: {} is missing: run `cargo build --release -p ankusa-store -p ankusa-tools --bins`",
                    dir.join(bin).display()
                ));
            }
        }
    }
    Ports::from_base(args.base_port, args.edges)?.check_free()?;
    let filter_config = match &args.filter_config {
        None => ankusa_testkit::envoy::fleet_filter_config(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--filter-config {}: cannot read: {e}", path.display()))?;
            serde_json::from_str(&text)
                .map_err(|e| format!("--filter-config {}: not JSON: {e}", path.display()))?
        }
    };
    let vm_env = args
        .vm_env
        .iter()
        .map(|name| match std::env::var(name) {
            Ok(value) if !value.is_empty() => Ok((name.clone(), value)),
            _ => Err(format!("--vm-env {name}: not set in the environment")),
        })
        .collect::<Result<Vec<_>, String>>()?;
    // The signing secrets go to the edges only (each edge is handed them
    // explicitly): Redis, the store and the intake inherit this process's
    // environment, so they leave it before any of them starts.
    for (name, _) in &vm_env {
        std::env::remove_var(name);
    }
    Ok(FleetSpec {
        edges: args.edges,
        base_port: Some(args.base_port),
        filter_config,
        concurrency: args.concurrency,
        vm_env,
        obey_test_headers: false,
        access_log: true,
    })
}

fn main() {
    let args = Args::parse();
    if args.release {
        // Read by testkit::paths::workspace_bin.
        std::env::set_var("ANKUSA_PROFILE", "release");
    }
    let spec = match spec(&args) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("fleet: {e}");
            std::process::exit(2);
        }
    };
    // A release build aborts on panic without running destructors: stop the
    // children from the hook, which runs either way.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        children::stop_children(Duration::from_secs(5));
    }));
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fleet: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(run(spec));
    std::process::exit(code);
}

async fn run(spec: FleetSpec) -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    // Handlers go in before any child starts, so a signal during start-up
    // can't kill this process with its children still running.
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("fleet: cannot install signal handlers");
        return 1;
    };
    let starting = tokio::task::spawn_blocking(move || Fleet::start(&spec));
    tokio::pin!(starting);
    let mut stop_requested = false;
    let started = loop {
        tokio::select! {
            done = &mut starting => break done,
            _ = term.recv() => stop_requested = true,
            _ = int.recv() => stop_requested = true,
        }
    };
    let mut fleet = match started {
        Ok(fleet) => fleet,
        // The panic message is printed already; unwinding stopped what had started.
        Err(_) => return 1,
    };
    if stop_requested {
        eprintln!("fleet: stopping (signal during start-up)");
        fleet.stop();
        return 130;
    }
    let ready = fleet.ready_json();
    eprintln!(
        "fleet: {} edge(s) up; logs under {}",
        fleet.edges.len(),
        fleet.dir.display()
    );
    eprintln!(
        "fleet: the store's operator token (to change overrides: PUT/DELETE {}/v1/overrides/<tenant>) \
         is in {}; each edge holds only its own edge token, which speaks for its node alone",
        fleet.store.url(),
        fleet.operator_token_file.display()
    );
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "READY {ready}");
    let _ = out.flush();
    drop(out);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let code = loop {
        tokio::select! {
            _ = term.recv() => break 0,
            _ = int.recv() => break 0,
            _ = tick.tick() => {
                if let Err(e) = fleet.check_running() {
                    eprintln!("fleet: {e}");
                    break 1;
                }
            }
        }
    };
    eprintln!("fleet: stopping");
    fleet.stop();
    code
}
