//! Rewrites the tables of `RELIABILITY.md` from the rows a run of the fault
//! suite and the hostile-input probes saved (`ANKUSA_RELIABILITY_DIR`), or
//! the rows across hosts `compose-faults --out DIR` saved.
//!
//! `reliability --rows DIR --doc RELIABILITY.md --machine TEXT`
//! `reliability --rows DIR --across-hosts --command TEXT --machine TEXT`

use ankusa_tools::compose::HostFault;
use ankusa_tools::faults::row::{read_rows, Row};
use ankusa_tools::faults::table::{merge_runs, merge_table, replace_section, section};
use ankusa_tools::faults::Fault;
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
    /// What the run ran on (put in the `machine` section, or beside the
    /// command under the table across hosts).
    #[arg(long, default_value = "")]
    machine: String,
    /// The rows are `compose-faults`': they go in the `hosts` section, and
    /// the run in the `hosts-runs` list under it.
    #[arg(long)]
    across_hosts: bool,
    /// The command that made the rows (with `--across-hosts`).
    #[arg(long, default_value = "")]
    command: String,
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
    let hostile = hostile_section(&args.rows);
    if rows.is_empty() && hostile.is_none() {
        return Err(format!("no rows in {}", args.rows.display()));
    }
    let mut doc = std::fs::read_to_string(&args.doc)
        .map_err(|e| format!("cannot read {}: {e}", args.doc.display()))?;
    if args.across_hosts {
        doc = across_hosts(&doc, &rows, args)?;
    } else {
        // A run of the hostile-input probes alone leaves the fault table as it is.
        if !rows.is_empty() {
            let order: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
            let table = merge_table(section(&doc, "faults").unwrap_or(""), &rows, &order);
            doc = replace_section(&doc, "faults", &table)?;
        }
        if let Some(hostile) = hostile {
            doc = replace_section(&doc, "hostile", &hostile)?;
        }
        if !args.machine.is_empty() {
            doc = replace_section(&doc, "machine", &format!("{}\n", args.machine.trim_end()))?;
        }
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

/// `doc` with the table across hosts holding `rows` (the others kept), and
/// the run that made them first in the list of runs under it.
fn across_hosts(doc: &str, rows: &[Row], args: &Args) -> Result<String, String> {
    let order: Vec<&str> = HostFault::ALL.iter().map(|f| f.name()).collect();
    let table = merge_table(section(doc, "hosts").unwrap_or(""), rows, &order);
    let doc = replace_section(doc, "hosts", &table)?;
    let mut made: Vec<&str> = rows.iter().map(|r| r.fault.as_str()).collect();
    made.sort_by_key(|name| order.iter().position(|n| n == name));
    let mut run = format!("- {}: `{}`", made.join(", "), args.command.trim());
    if !args.machine.is_empty() {
        run.push_str(&format!(", {}", args.machine.trim_end()));
    }
    let runs = merge_runs(section(&doc, "hosts-runs").unwrap_or(""), &run);
    replace_section(&doc, "hosts-runs", &runs)
}

/// The probes' table, then one memory row per load size, when a run saved them.
/// The probes' table, then one memory row per load size and one row per
/// connection flood, when a run saved them.
fn hostile_section(rows: &std::path::Path) -> Option<String> {
    let probes = std::fs::read_to_string(rows.join("hostile-probes.md")).ok();
    let saved = |prefix: &str| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(rows)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix))
            })
            .collect();
        files.sort();
        files
    };
    let (memory, floods) = (saved("hostile-memory-"), saved("hostile-floods-"));
    if probes.is_none() && memory.is_empty() && floods.is_empty() {
        return None;
    }
    let mut out = probes.unwrap_or_default();
    let tables = [
        (
            memory,
            "| load | edge (Envoy) RSS | store RSS | Redis used memory |\n|---|---|---|---|",
        ),
        (
            floods,
            "| connection flood | what was answered meanwhile | what the server did |\n|---|---|---|",
        ),
    ];
    for (files, head) in tables {
        if files.is_empty() {
            continue;
        }
        out.push_str(&format!("\n{head}\n"));
        for file in files {
            out.push_str(&std::fs::read_to_string(file).unwrap_or_default());
        }
    }
    Some(out)
}
