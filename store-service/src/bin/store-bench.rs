//! `store-bench --print-hit-script`: prints the hit script exactly as the
//! store loads it, so scripts/bench-store.sh can run the same script straight
//! on Redis with redis-benchmark. The HTTP load itself comes from `load`
//! (tools/harness/src/bin/load.rs), the client every benchmark script shares.

use ankusa_store::scripts::hit_source;
use clap::Parser;

#[derive(Parser)]
#[command(name = "store-bench")]
struct Args {
    /// Print the hit script as the store runs it, and exit (for redis-benchmark).
    #[arg(long)]
    print_hit_script: bool,
}

fn main() {
    let args = Args::parse();
    if !args.print_hit_script {
        eprintln!(
            "store-bench: nothing to do: pass --print-hit-script (drive the store with `load`)"
        );
        std::process::exit(2);
    }
    print!("{}", hit_source());
}
