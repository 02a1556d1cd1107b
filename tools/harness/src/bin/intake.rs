//! `intake --listen 127.0.0.1:PORT --data-dir DIR [--dedupe-ttl-ms N] [--obey-test-headers]
//! [--receipt-key-file PATH]`

use ankusa_tools::intake::{self, Config, DEFAULT_DEDUPE_TTL_MS};
use clap::Parser;
use std::path::PathBuf;

/// mimalloc, as the store (without transparent huge pages: see the
/// workspace's Cargo.toml): it gives back freed memory in 64 KiB pieces,
/// where the C library's allocator kept the intake's memory near the high
/// mark of its busiest moment (a step at each `intake-timeout` in the soak).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The sample intake: stores every POSTed hook durably and dedupes by event key.
#[derive(Parser, Debug)]
#[command(name = "intake", version)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "INTAKE_LISTEN", default_value = "127.0.0.1:8080")]
    listen: String,
    /// Folder for the journal (hooks.jsonl); created if missing.
    #[arg(long, env = "INTAKE_DATA_DIR")]
    data_dir: PathBuf,
    /// How long a stored event key makes a later copy a duplicate (ms).
    #[arg(long, env = "INTAKE_DEDUPE_TTL_MS", default_value_t = DEFAULT_DEDUPE_TTL_MS,
          value_parser = clap::value_parser!(u64).range(1..))]
    dedupe_ttl_ms: u64,
    /// Obey the test headers `x-intake-delay-ms` and `x-intake-status` (for
    /// tests and benchmarks only: any sender can set them through the edge).
    #[arg(long)]
    obey_test_headers: bool,
    /// A file holding the store's receipt key (its first line that isn't
    /// blank or a `#` comment): every 2xx for a hook it holds that came with
    /// `x-ankusa-tenant` carries `x-ankusa-receipt`, the proof the store asks
    /// before it commits the hook's claims. Without it, no receipts.
    #[arg(long, env = "INTAKE_RECEIPT_KEY_FILE", value_name = "PATH")]
    receipt_key_file: Option<PathBuf>,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let receipt_key = match &args.receipt_key_file {
        None => None,
        Some(path) => match read_key(path) {
            Ok(key) => Some(key),
            Err(e) => {
                eprintln!("intake: {e}");
                std::process::exit(2);
            }
        },
    };
    let listener = match tokio::net::TcpListener::bind(&args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("intake: cannot listen on --listen {}: {e}", args.listen);
            std::process::exit(2);
        }
    };
    eprintln!(
        "intake: listening on {}, data in {}, {}",
        args.listen,
        args.data_dir.display(),
        if receipt_key.is_some() {
            "receipts on"
        } else {
            "no receipts"
        }
    );
    let config = Config {
        data_dir: args.data_dir,
        dedupe_ttl_ms: args.dedupe_ttl_ms,
        obey_test_headers: args.obey_test_headers,
        receipt_key,
    };
    if let Err(e) = intake::run(listener, config, shutdown()).await {
        eprintln!("intake: {e}");
        std::process::exit(1);
    }
}

/// The signing key: the first key line of the file (a store may accept
/// more, for a rotation). Errors name the file and line, never a key.
fn read_key(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let origin = format!("--receipt-key-file {}", path.display());
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("{origin}: cannot read it: {e}"))?;
    let keys = ankusa_core::wire::receipt::keys_of_file(&text, &origin)?;
    keys.into_iter()
        .next()
        .ok_or_else(|| format!("{origin}: holds no key"))
}

/// SIGINT or SIGTERM. Answers already promised are synced before they are sent,
/// so stopping here loses nothing that was acknowledged.
async fn shutdown() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
