use ankusa_store::{server, Config};
use clap::Parser;

/// Log lines on stderr; `ANKUSA_LOG=debug` for more.
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, meta: &log::Metadata) -> bool {
        meta.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!("ankusa-store {} {}", record.level(), record.args());
        }
    }

    fn flush(&self) {}
}

fn main() {
    let config = Config::parse();
    let level = match std::env::var("ANKUSA_LOG").as_deref() {
        Ok("debug") => log::LevelFilter::Debug,
        Ok("warn") => log::LevelFilter::Warn,
        _ => log::LevelFilter::Info,
    };
    if log::set_logger(&StderrLog).is_ok() {
        log::set_max_level(level);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ankusa-store: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .map_err(|e| format!("--listen {}: {e}", config.listen))?;
        log::info!(
            "listening on {} (Redis {})",
            config.listen,
            config.redis_url
        );
        server::run(listener, config, stop_signal()).await
    });
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
