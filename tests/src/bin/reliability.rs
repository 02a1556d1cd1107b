//! Rewrites the tables of `RELIABILITY.md` from the rows a run of the fault
//! suite and the hostile-input probes saved (`ANKUSA_RELIABILITY_DIR`).
//!
//! `reliability --rows DIR --doc RELIABILITY.md --machine TEXT`

use ankusa_tests::faults::table::{fault_table, read_rows, replace_section};
use ankusa_tests::faults::Fault;
use clap::Parser;
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "Rewrite RELIABILITY.md's tables from saved fault-suite rows")]
struct Args {
    /// The folder the rows were saved in (`ANKUSA_RELIABILITY_DIR`).
    #[arg(long)]
    rows: PathBuf,
    /// The document whose sections are rewritten.
    #[arg(long, default_value = "RELIABILITY.md")]
    doc: PathBuf,
    /// What the run ran on (put in the `machine` section).
    #[arg(long, default_value = "")]
    machine: String,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = rewrite(&args) {
        eprintln!("reliability: {e}");
        std::process::exit(1);
    }
}

fn rewrite(args: &Args) -> Result<(), String> {
    let rows = read_rows(&args.rows)?;
    if rows.is_empty() {
        return Err(format!("no rows in {}", args.rows.display()));
    }
    let order: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
    let mut doc = std::fs::read_to_string(&args.doc)
        .map_err(|e| format!("cannot read {}: {e}", args.doc.display()))?;
    doc = replace_section(&doc, "faults", &fault_table(&rows, &order))?;
    let hostile: Vec<String> = ["hostile-probes.md", "hostile-memory.md"]
        .iter()
        .filter_map(|name| std::fs::read_to_string(args.rows.join(name)).ok())
        .collect();
    if !hostile.is_empty() {
        doc = replace_section(&doc, "hostile", &hostile.join("\n"))?;
    }
    if !args.machine.is_empty() {
        doc = replace_section(&doc, "machine", &format!("{}\n", args.machine.trim_end()))?;
    }
    std::fs::write(&args.doc, doc)
        .map_err(|e| format!("cannot write {}: {e}", args.doc.display()))?;
    let lost: u64 = rows.iter().map(|r| r.lost).sum();
    eprintln!(
        "{}: {} fault rows, {lost} hooks lost",
        args.doc.display(),
        rows.len()
    );
    Ok(())
}
