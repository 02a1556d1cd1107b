use ankusa_store::config::redact_url;
use ankusa_store::tokens::{Role, Tokens, OLD_TOKENS_ENV};
use ankusa_store::{server, telemetry, Config};
use clap::Parser;

/// Every request allocates its body, its JSON and its Redis command; under
/// load the C library's allocator took a fifth of the store's CPU, mimalloc a
/// fraction of that (BENCHMARKS.md, the store).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut config = Config::parse();
    // Before the runtime: the exporter's HTTP client runs its own.
    let telemetry = match telemetry::install(&config) {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("ankusa-store: {e}");
            std::process::exit(2);
        }
    };
    if std::env::var_os(OLD_TOKENS_ENV).is_some() {
        eprintln!(
            "ankusa-store: {}",
            ankusa_store::auth::old_tokens_env_refused()
        );
        std::process::exit(2);
    }
    for role in [Role::Edge, Role::Operator] {
        if let Ok(list) = std::env::var(role.env()) {
            match Tokens::from_list(&list, role) {
                Ok(tokens) => *config.tokens.of_mut(role) = tokens,
                Err(e) => {
                    eprintln!("ankusa-store: {e}");
                    std::process::exit(2);
                }
            }
        }
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.thread_name("ankusa-worker");
    if config.threads > 0 {
        builder.worker_threads(config.threads);
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ankusa-store: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    // The Redis URL, the receipt keys and the token policy are checked before binding, so a
    // refused start never listened, not even for a moment.
    if let Err(e) = ankusa_store::config::RedisTarget::parse(&config.redis_url) {
        eprintln!("ankusa-store: {e}");
        std::process::exit(2);
    }
    if let Err(e) = config.receipts() {
        eprintln!("ankusa-store: {e}");
        std::process::exit(2);
    }
    if let Some(addr) = std::net::ToSocketAddrs::to_socket_addrs(&config.listen)
        .ok()
        .and_then(|mut a| a.next())
    {
        if let Err(e) = ankusa_store::auth::Auth::from_config(&config, addr) {
            eprintln!("ankusa-store: {e}");
            std::process::exit(2);
        }
    }
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .map_err(|e| format!("--listen {}: {e}", config.listen))?;
        tracing::info!(
            "listening on {} (Redis {})",
            config.listen,
            redact_url(&config.redis_url)
        );
        server::run(listener, config, stop_signal()).await
    });
    drop(runtime);
    // The spans of the last hits leave before the process does.
    telemetry.shutdown();
    if let Err(e) = result {
        eprintln!("ankusa-store: {e}");
        std::process::exit(2);
    }
}

/// SIGTERM or SIGINT.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
