//! `mock-provider --edges URL[,URL..] --events N --rate R --profile P --tenant T
//! --source S --redeliver 0.2 --deadline-s D --intake URL [--json]`
//!
//! Exit status: 0 when nothing acknowledged was lost and every forgery was
//! refused 401, 1 when something was lost or a forgery was not refused, 3 when
//! the audit could not be made.

use ankusa_tools::provider::{self, Options, Profile};
use clap::Parser;
use std::time::Duration;

/// Delivers webhooks to Ankusa edges like a real provider and audits the intake.
#[derive(Parser, Debug)]
#[command(name = "mock-provider", version)]
struct Args {
    /// Edge base URLs, comma separated (deliveries go to {URL}/webhooks/{tenant}/{source}).
    #[arg(long, value_delimiter = ',', required = true)]
    edges: Vec<String>,
    /// Distinct events to deliver.
    #[arg(long, default_value_t = 1000)]
    events: usize,
    /// First deliveries per second.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    #[arg(long, value_enum, default_value_t = Profile::Github)]
    profile: Profile,
    #[arg(long, default_value = "acme")]
    tenant: String,
    #[arg(long, default_value = "gh")]
    source: String,
    /// Share of events delivered again to another edge (0..=1).
    #[arg(long, default_value_t = 0.2)]
    redeliver: f64,
    /// Share of redeliveries sent alongside the first delivery instead of after its 2xx (0..=1).
    #[arg(long, default_value_t = 0.5)]
    concurrent: f64,
    /// Seconds after which no attempt starts; deliveries not acknowledged by then are given up.
    #[arg(long, default_value_t = 60.0)]
    deadline_s: f64,
    /// The intake to audit (GET {URL}/hooks); without it there is no audit.
    #[arg(long)]
    intake: Option<String>,
    /// Print the summary as one JSON object on stdout (the table goes to stderr).
    #[arg(long)]
    json: bool,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Seed for ids and jitter; the same seed repeats the same event ids.
    #[arg(long)]
    seed: Option<u64>,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
    /// The environment variable holding the secret to sign with (the one the
    /// edges verify with); without it, a built-in test secret.
    #[arg(long, value_name = "NAME")]
    secret_env: Option<String>,
    /// Share of events (0..=1) that also get a forged delivery: same event id
    /// and body, signed with a wrong secret, a stale timestamp, or not at all.
    #[arg(long, default_value_t = 0.0, value_name = "SHARE")]
    forge: f64,
}

fn check(args: &Args) -> Result<(), String> {
    let share = |name: &str, v: f64| {
        if (0.0..=1.0).contains(&v) {
            Ok(())
        } else {
            Err(format!("--{name} must be a share in 0..=1, got {v}"))
        }
    };
    share("redeliver", args.redeliver)?;
    share("concurrent", args.concurrent)?;
    share("forge", args.forge)?;
    if !(args.rate.is_finite() && args.rate > 0.0) {
        return Err(format!(
            "--rate must be a positive number of events per second, got {}",
            args.rate
        ));
    }
    if !(args.deadline_s.is_finite() && args.deadline_s > 0.0) {
        return Err(format!(
            "--deadline-s must be a positive number of seconds, got {}",
            args.deadline_s
        ));
    }
    if args.concurrency == 0 {
        return Err("--concurrency must be at least 1, got 0".into());
    }
    for url in args.edges.iter().chain(&args.intake) {
        if !url.starts_with("http://") {
            return Err(format!("URLs must start with http://, got {url:?}"));
        }
    }
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = check(&args) {
        eprintln!("mock-provider: {e}");
        std::process::exit(2);
    }
    let secret = match &args.secret_env {
        None => provider::profile::DEFAULT_SECRET.to_string(),
        Some(name) => match std::env::var(name) {
            Ok(value) if !value.is_empty() => value,
            _ => {
                eprintln!("mock-provider: --secret-env {name}: not set in the environment");
                std::process::exit(2);
            }
        },
    };
    let options = Options {
        edges: args.edges.clone(),
        events: args.events,
        rate: args.rate,
        profile: args.profile,
        tenant: args.tenant.clone(),
        source: args.source.clone(),
        redeliver: args.redeliver,
        concurrent: args.concurrent,
        deadline: Duration::from_secs_f64(args.deadline_s),
        concurrency: args.concurrency,
        seed: args
            .seed
            .unwrap_or_else(|| ankusa_tools::ids::Rng::from_entropy().next_u64()),
        progress: !args.quiet,
        secret,
        forge: args.forge,
    };
    let summary = provider::deliver_and_audit(&options, args.intake.as_deref());
    if args.json {
        eprint!("{}", summary.table());
        println!(
            "{}",
            serde_json::to_string(&summary).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
        );
    } else {
        print!("{}", summary.table());
    }
    let forgery_passed = summary.tally.forged_rejected != summary.tally.forged_sent;
    let code = match (summary.lost, args.intake.is_some()) {
        (Some(n), _) if n > 0 => 1,
        _ if forgery_passed => 1,
        (None, true) => 3,
        _ => 0,
    };
    std::process::exit(code);
}
