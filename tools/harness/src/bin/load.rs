//! `load --url URL [--header k:v]… [--bearer-env VAR] [--body TEXT] [--clients N] [--seconds S]
//!       [--rate R] [--requests N]`
//!
//! Keep-alive HTTP/1.1 load for a fixed time; prints one `key=value` line
//! (rate, p50/p99 of the ok answers, counts). `{i}` in a header value or the
//! body becomes a per-request counter.

use ankusa_tools::load::{self, LoadSpec};
use clap::Parser;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "load", version)]
struct Args {
    /// Where to send, `http://HOST:PORT/path`.
    #[arg(long)]
    url: String,
    #[arg(long, default_value = "POST")]
    method: String,
    /// `name:value`, repeatable; `{i}` in the value is the request counter.
    #[arg(long = "header", value_parser = load::parse_header)]
    headers: Vec<(String, String)>,
    /// Sends `authorization: Bearer <token>` with the token read from this
    /// environment variable (a store token stays off the command line).
    #[arg(long, value_name = "VAR")]
    bearer_env: Option<String>,
    /// Request body; `{i}` is the request counter.
    #[arg(long, default_value = "")]
    body: String,
    /// Concurrent clients, each with its own keep-alive connection.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// How long to send.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// A 2xx counts as ok only if its body starts with this.
    #[arg(long)]
    expect_body: Option<String>,
    /// Longest wait for a connection or one answer, in seconds.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Requests per second over all clients (each paced at its share);
    /// without it every client sends as soon as its last answer is in.
    #[arg(long)]
    rate: Option<f64>,
    /// Stop after this many requests (or at --seconds, whichever is first).
    #[arg(long)]
    requests: Option<u64>,
}

fn main() {
    let mut args = Args::parse();
    if let Some(var) = &args.bearer_env {
        match std::env::var(var) {
            Ok(token) if !token.trim().is_empty() => args
                .headers
                .push(("authorization".into(), format!("Bearer {}", token.trim()))),
            _ => {
                eprintln!("load: --bearer-env {var}: the variable is not set");
                std::process::exit(2);
            }
        }
    }
    let seconds = |flag: &str, v: f64| {
        Duration::try_from_secs_f64(v)
            .map_err(|_| format!("--{flag} must be a number of seconds ≥ 0, got {v}"))
    };
    let spec = seconds("seconds", args.seconds).and_then(|duration| {
        Ok(LoadSpec {
            url: args.url,
            method: args.method,
            headers: args.headers,
            body: args.body,
            clients: args.clients,
            duration,
            expect_body: args.expect_body,
            timeout: seconds("timeout", args.timeout)?,
            rate: args.rate,
            max_requests: args.requests,
        })
    });
    match spec.and_then(|spec| load::run(&spec)) {
        Ok(report) => println!("{}", report.line()),
        Err(e) => {
            eprintln!("load: {e}");
            std::process::exit(2);
        }
    }
}
