//! The listener loop: HTTP/1.1 keep-alive and cleartext HTTP/2 (prior
//! knowledge) on one port, each connection held to [`crate::conns`]'s limit
//! and timeouts, and a graceful stop that flushes queued settles.

use crate::auth::{self, Auth};
use crate::backend::Backend;
use crate::batcher;
use crate::config::{Config, RedisTarget};
use crate::conns::{BodyTimeout, Close, Conns, Registered};
use crate::edges::LiveEdges;
use crate::metrics::Metrics;
use crate::receipts;
use crate::routes::{self, Shared};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
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
    let listen = listener
        .local_addr()
        .map_err(|e| format!("--listen {}: {e}", config.listen))?;
    let auth = Auth::from_config(&config, listen)?;
    auth.announce(listen);
    let auth = Arc::new(std::sync::RwLock::new(auth));
    let reload = auth::spawn_reload_on_sighup(config.clone(), Arc::clone(&auth));
    let receipts = config.receipts()?;
    receipts.announce();
    let receipts = Arc::new(std::sync::RwLock::new(receipts));
    let receipts_reload = config.receipt_key_file.clone().and_then(|file| {
        receipts::spawn_reload_on_sighup(
            config.receipt_keys.clone(),
            file,
            config.receipts,
            Arc::clone(&receipts),
        )
    });
    let metrics = Arc::new(Metrics::new());
    let backend = Backend::new(target, metrics, config.committed_layout);
    tracing::info!(
        "committed claims are written in the {} layout (--committed-layout)",
        config.committed_layout.as_str()
    );
    let monitor = backend.spawn_monitor();
    let (draining_tx, draining_rx) = watch::channel(false);
    let stopping = draining_rx.clone();
    let (settler, batcher_task) = batcher::spawn(
        Arc::clone(&backend),
        config.settle_window(),
        config.settle_batch_max,
        config.settle_queue_max,
        draining_rx,
    );
    let edges = Arc::new(LiveEdges::new(Duration::from_millis(
        config.edges_ttl_ms.max(1),
    )));
    let edges_task = edges.spawn(
        Arc::clone(&backend),
        Duration::from_millis(config.edges_refresh_ms.max(1)),
    );
    let shared = Arc::new(Shared {
        backend,
        edges,
        settler,
        max_budget: config.max_budget(),
        auth,
        receipts,
    });
    let conns = Conns::new(
        config.connection_limit(),
        Arc::clone(&shared.backend.metrics),
    );
    tracing::info!(
        "at most {} connections open at once ({})",
        conns.limit(),
        if config.max_connections > 0 {
            "--max-connections".to_string()
        } else {
            format!(
                "the descriptor limit less {}",
                crate::config::RESERVED_DESCRIPTORS
            )
        }
    );
    let header_timeout = config.header_read_timeout();
    let body_timeout = BodyTimeout(config.body_read_timeout());
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // A client that opens a request and never finishes its headers is
    // disconnected after `header_timeout`, so idle half-requests can't hold
    // sockets and tasks forever. Keep-alive stays on: edges pool connections.
    // HTTP/2 has no such bound in hyper: the connection's own idle timeout
    // (the same `header_timeout`, see `serve`) covers both.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    builder.http2().timer(TokioTimer::new());

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
                tracing::warn!("accept: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // At the limit, room is made (or the new one is dropped: closed).
        let Some(registered) = conns.admit() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let conn = Arc::clone(registered.conn());
        let shared = Arc::clone(&shared);
        let service = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            let busy = conn.begin();
            req.extensions_mut().insert(Arc::clone(&conn));
            req.extensions_mut().insert(body_timeout);
            let shared = Arc::clone(&shared);
            async move {
                let reply = routes::handle(shared, req).await;
                drop(busy);
                reply
            }
        });
        let builder = builder.clone();
        let stopping = stopping.clone();
        tokio::spawn(serve(
            stream,
            builder,
            service,
            registered,
            stopping,
            header_timeout,
        ));
    }

    tracing::info!("stopping: no new connections, flushing settles");
    drop(listener);
    let _ = draining_tx.send(true);
    if tokio::time::timeout(DRAIN_GRACE, conns.all_closed())
        .await
        .is_err()
    {
        tracing::warn!("some connections were still busy after {DRAIN_GRACE:?}");
    }
    // The batcher ends once the last settle handle is gone, after its flush.
    drop(shared);
    if tokio::time::timeout(DRAIN_GRACE, batcher_task)
        .await
        .is_err()
    {
        tracing::warn!("settle flush did not finish within {DRAIN_GRACE:?}");
    }
    monitor.abort();
    edges_task.abort();
    for reload in [reload, receipts_reload].into_iter().flatten() {
        reload.abort();
    }
    Ok(())
}

/// Serves one connection until it ends, the store stops, the registry asks
/// it to close (the connection limit), or it has had no request in flight
/// for `idle_timeout`. A graceful close that the peer doesn't let finish
/// (it never reads its answers) ends after [`DRAIN_GRACE`].
async fn serve<S>(
    stream: TcpStream,
    builder: auto::Builder<TokioExecutor>,
    service: S,
    registered: Registered,
    mut stopping: watch::Receiver<bool>,
    idle_timeout: Duration,
) where
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = routes::Reply,
            Error = std::convert::Infallible,
        > + Send
        + 'static,
    S::Future: Send + 'static,
{
    // hyper's header timeout starts once the protocol is known; the first
    // bytes that tell HTTP/1.1 from HTTP/2 get the same bound. A stop, or the
    // limit, doesn't wait for a connection that hasn't said anything.
    tokio::select! {
        known = protocol_known_within(&stream, idle_timeout) => if !known {
            tracing::debug!("connection: no request within {idle_timeout:?}");
            return;
        },
        _ = stopping.wait_for(|stopping| *stopping) => return,
        _ = registered.asked() => return,
    }
    let conn = builder
        .serve_connection(TokioIo::new(stream), service)
        .into_owned();
    tokio::pin!(conn);
    let mut closing_by: Option<tokio::time::Instant> = None;
    loop {
        let closing = closing_by.is_some();
        let give_up = closing_by.unwrap_or_else(tokio::time::Instant::now);
        tokio::select! {
            served = conn.as_mut() => {
                if let Err(e) = served {
                    tracing::debug!("connection: {e}");
                }
                return;
            }
            _ = stopping.wait_for(|stopping| *stopping), if !closing => {}
            how = registered.asked(), if !closing => {
                if how == Close::Now {
                    return;
                }
            }
            () = registered.idle_for(idle_timeout), if !closing => {
                tracing::debug!("connection: idle for {idle_timeout:?}");
                registered.note_idle_close();
            }
            () = tokio::time::sleep_until(give_up), if closing => return,
        }
        // Each branch that lands here asks for a graceful close, once.
        conn.as_mut().graceful_shutdown();
        closing_by = Some(tokio::time::Instant::now() + DRAIN_GRACE);
    }
}

/// The HTTP/2 prior-knowledge preface; its first bytes decide the protocol.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Waits until the bytes received tell HTTP/1.1 from HTTP/2 (they depart
/// from the preface, or hold all of it) or the peer closed, at most `limit`.
async fn protocol_known_within(stream: &TcpStream, limit: Duration) -> bool {
    let decided = async {
        let mut buf = [0u8; H2_PREFACE.len()];
        loop {
            match stream.peek(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) if n == buf.len() || buf[..n] != H2_PREFACE[..n] => return,
                Ok(_) => {
                    // Part of the preface: wait for more bytes to arrive.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    };
    tokio::time::timeout(limit, decided).await.is_ok()
}
