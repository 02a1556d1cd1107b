//! The fault rows across hosts: each row in a Compose stack of its own,
//! the mock provider's traffic from this host, one fault injected with
//! Docker and healed, held to the fault table's promises. Exits 1 when a row
//! breaks one (or can't run), 2 on bad arguments.
//!
//! `compose-faults --rows quick|long|all|NAME[,NAME...] [--out DIR] [--env-file FILE] [--seed N]`

use ankusa_tools::children::on_abrupt_exit;
use ankusa_tools::compose::command::Compose;
use ankusa_tools::compose::run::run_rows;
use ankusa_tools::compose::stack::{down_every_stack, Setting};
use ankusa_tools::compose::HostFault;
use ankusa_tools::faults::table::fault_table;
use clap::Parser;
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "Run the fault rows across hosts on docker-compose.yml's stack")]
struct Args {
    /// `quick` (CI's four), `long` (the other three), `all`, or row names,
    /// comma separated.
    #[arg(long, default_value = "all")]
    rows: String,
    /// Where each row is written as NAME.json.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Compose's env file (`docker/offline.env` on an engine that can't pull).
    #[arg(long)]
    env_file: Option<PathBuf>,
    /// The first row's provider seed (the next rows count up from it).
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

fn main() {
    let args = Args::parse();
    let faults = HostFault::select(&args.rows).unwrap_or_else(|e| {
        eprintln!("compose-faults: {e}");
        std::process::exit(2);
    });
    if let Err(e) = on_abrupt_exit("compose-faults", down_every_stack) {
        eprintln!("compose-faults: {e}");
        std::process::exit(1);
    }
    let setting = Setting {
        cli: Compose::cli(),
        root: ankusa_testkit::paths::workspace_root(),
        env_file: args.env_file.map(|f| std::path::absolute(&f).unwrap_or(f)),
    };
    let outcome = run_rows(&setting, &faults, args.out.as_deref(), args.seed);
    down_every_stack();
    let order: Vec<&str> = faults.iter().map(|f| f.name()).collect();
    println!("\n{}", fault_table(&outcome.rows, &order));
    if !outcome.failures.is_empty() {
        eprintln!("compose-faults: {} row(s) failed:", outcome.failures.len());
        for failure in &outcome.failures {
            eprintln!("  {failure}");
        }
        std::process::exit(1);
    }
}
