//! `ankusa-config check FILE…`: each plugin configuration in the files is read
//! by the core's own parser (`ankusa_core::config::Config::parse`, the one the
//! filter's `on_configure` runs), so it refuses exactly what an edge refuses,
//! with the same sentence naming the field and the value.
//! `ankusa-config schema`: prints the JSON Schema of the plugin configuration
//! (`deploy/schema/ankusa-config.schema.json`, compiled in).
//!
//! Exit status: 0 when every configuration loads, 1 when one is refused (or a
//! file holds none), 2 on a usage error (no such command, no file, a file
//! that can't be read).

mod extract;

use ankusa_core::config::Config;
use std::path::Path;
use std::process::ExitCode;

/// The schema as checked in; `schema` prints exactly these bytes.
const SCHEMA: &str = include_str!("../../../deploy/schema/ankusa-config.schema.json");

const USAGE: &str = "usage: ankusa-config check FILE...   check plugin configurations (JSON, or YAML: an Envoy bootstrap, Kubernetes manifests)
       ankusa-config schema          print the configuration's JSON Schema";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("schema") if args.len() == 1 => {
            print!("{SCHEMA}");
            ExitCode::SUCCESS
        }
        Some("check") if args.len() > 1 => check(&args[1..]),
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => usage(&format!("unexpected arguments {args:?}")),
    }
}

fn usage(why: &str) -> ExitCode {
    eprintln!("ankusa-config: {why}\n{USAGE}");
    ExitCode::from(2)
}

fn check(files: &[String]) -> ExitCode {
    let mut refused = 0usize;
    let mut checked = 0usize;
    for file in files {
        let text = match std::fs::read(file) {
            Ok(text) => text,
            Err(e) => return usage(&format!("cannot read {file}: {e}")),
        };
        let found = match extract::configurations(Path::new(file), &text) {
            Ok(found) => found,
            Err(why) => {
                println!("{file}: refused: {why}");
                refused += 1;
                continue;
            }
        };
        for (place, json) in found {
            checked += 1;
            let name = if place.is_empty() {
                file.clone()
            } else {
                format!("{file} ({place})")
            };
            match Config::parse(&json) {
                Ok(_) => println!("{name}: ok"),
                Err(e) => {
                    println!("{name}: refused: {e}");
                    refused += 1;
                }
            }
        }
    }
    if refused > 0 {
        eprintln!("ankusa-config: {refused} refused, {checked} configurations checked");
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
