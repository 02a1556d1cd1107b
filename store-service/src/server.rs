//! The listener loop: HTTP/1.1 keep-alive and cleartext HTTP/2 (prior
//! knowledge) on one port, and a graceful stop that flushes queued settles.

use crate::backend::Backend;
use crate::batcher;
use crate::config::{Config, RedisTarget};
use crate::metrics::Metrics;
use crate::routes::{self, Shared};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How long in-flight requests may take to finish once stopping.
const DRAIN_GRACE: Duration = Duration::from_secs(10);

/// Serves on `listener` until `shutdown` resolves, then stops accepting,
/// lets in-flight requests finish, flushes queued settles and returns.
/// Never waits for Redis: it is reached in the background.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let target = RedisTarget::parse(&config.redis_url)?;
    let metrics = Arc::new(Metrics::new());
    let backend = Backend::new(target, metrics);
    let monitor = backend.spawn_monitor();
    let (draining_tx, draining_rx) = watch::channel(false);
    let (settler, batcher_task) = batcher::spawn(
        Arc::clone(&backend),
        config.settle_window(),
        config.settle_batch_max,
        draining_rx,
    );
    let shared = Arc::new(Shared {
        backend,
        settler,
        max_budget: config.max_budget(),
    });
    let graceful = GracefulShutdown::new();
    let builder = auto::Builder::new(TokioExecutor::new());

    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors and the like: back off, keep serving.
                log::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = Arc::clone(&shared);
        let service = service_fn(move |req| routes::handle(Arc::clone(&shared), req));
        let conn = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                log::debug!("connection: {e}");
            }
        });
    }

    log::info!("stopping: no new connections, flushing settles");
    drop(listener);
    let _ = draining_tx.send(true);
    if tokio::time::timeout(DRAIN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        log::warn!("some connections were still busy after {DRAIN_GRACE:?}");
    }
    // The batcher ends once the last settle handle is gone, after its flush.
    drop(shared);
    if tokio::time::timeout(DRAIN_GRACE, batcher_task)
        .await
        .is_err()
    {
        log::warn!("settle flush did not finish within {DRAIN_GRACE:?}");
    }
    monitor.abort();
    Ok(())
}
