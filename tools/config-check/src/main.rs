//! `ankusa-config check FILE…`: each plugin configuration in the files is read
//! by the core's own parser (`ankusa_core::config::Config::parse`, the one the
//! filter's `on_configure` and the native module's configuration run), so it
//! refuses exactly what an edge refuses,
//! with the same sentence naming the field and the value.
//! `ankusa-config check --release X.Y.Z FILE…`: also refuses every key an
//! edge of that older release doesn't know, naming the release that
//! introduced it (`ankusa_core::config::since`): check a configuration
//! against the oldest release still running before you roll it out.
//! `ankusa-config schema`: prints the JSON Schema of the plugin configuration
//! (`deploy/schema/ankusa-config.schema.json`, compiled in).
//!
//! Exit status: 0 when every configuration loads, 1 when one is refused (or a
//! file holds none), 2 on a usage error (no such command, no file, a file
//! that can't be read).

mod extract;

use ankusa_core::config::{since, Config};
use std::path::Path;
use std::process::ExitCode;

/// The schema as checked in; `schema` prints exactly these bytes.
const SCHEMA: &str = include_str!("../../../deploy/schema/ankusa-config.schema.json");

const USAGE: &str = "usage: ankusa-config check [--release X.Y.Z] FILE...   check plugin configurations (JSON, or YAML: an Envoy bootstrap, Kubernetes manifests), for edges of this release or of release X.Y.Z
       ankusa-config schema          print the configuration's JSON Schema";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("schema") if args.len() == 1 => {
            print!("{SCHEMA}");
            ExitCode::SUCCESS
        }
        Some("check") if args.len() > 1 => match args.get(1).map(String::as_str) {
            Some("--release") if args.len() > 3 => {
                let release = args[2].trim_start_matches('v').to_string();
                if let Err(why) = since::too_new(&serde_json::json!({}), &release, &[]) {
                    return usage(&why);
                }
                check(&args[3..], Some(&release))
            }
            Some("--release") => usage("--release needs a release and at least one FILE"),
            _ => check(&args[1..], None),
        },
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

fn check(files: &[String], release: Option<&str>) -> ExitCode {
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
        for (place, json, _shell) in found {
            checked += 1;
            let name = if place.is_empty() {
                file.clone()
            } else {
                format!("{file} ({place})")
            };
            match Config::parse(&json)
                .map(|_| ())
                .map_err(|e| e.to_string())
                .and_then(|_| release.map_or(Ok(()), |release| for_release(&json, release)))
            {
                Ok(()) => println!("{name}: ok"),
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

/// Whether edges of `release` load `json` too: every key newer than it, named.
fn for_release(json: &[u8], release: &str) -> Result<(), String> {
    let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    let newer = since::too_new(&value, release, since::INTRODUCED)?;
    if newer.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = newer
        .iter()
        .map(|(path, since)| format!("{path} (introduced in {since})"))
        .collect();
    Err(format!(
        "an edge of v{release} refuses {}: roll that release out first",
        named.join(", ")
    ))
}
