//! The open connections, their limit, and when each one is closed.
//!
//! Every accepted connection is registered until it closes. It is
//! *unauthenticated* until one of its requests carries a token the store
//! accepts (any role; with `--insecure-no-auth`, any `/v1/*` call), then
//! *authenticated* for good. At most `limit` are open at once: without a
//! limit, 300 idle h2c connections with no token took every descriptor of a
//! store allowed 256, and it answered no edge until they closed.
//!
//! A connection arriving at the limit makes room for itself, in order:
//!
//! 1. The oldest unauthenticated connection is closed at once (one with no
//!    request in flight first). A flood can't keep an edge out this way: an
//!    edge's new connection sends its token with its first request, a round
//!    trip after it was accepted, and meanwhile it is the newest
//!    unauthenticated connection, so a flood must open `limit` more in that
//!    round trip to close it first. Once its token is seen it is never
//!    closed for an unauthenticated one.
//! 2. Else the authenticated connection idle the longest is closed
//!    gracefully: an edge opens another when it next calls, and a leaked
//!    token can't keep every connection to itself by holding them idle.
//! 3. Else (every connection authenticated and busy) the new one is closed.
//!
//! A warning says so, at most once every [`WARN_EVERY`] with the count since.
//! A connection is also closed once it has had no request in flight for the
//! idle timeout (the header-read timeout, over HTTP/1.1 and HTTP/2 alike:
//! hyper bounds only HTTP/1.1's headers itself).

use crate::metrics::Metrics;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::sync::Notify;
// The runtime's clock (a paused one in tests), not the system's.
use tokio::time::Instant;

/// The most often the limit is logged.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// How a connection is asked to close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    /// Drop it now: nothing it may still send is wanted.
    Now,
    /// Finish what is in flight, then close (HTTP/2 GOAWAY, HTTP/1.1
    /// `connection: close`).
    Gracefully,
}

const KEEP: u8 = 0;
const NOW: u8 = 1;
const GRACEFULLY: u8 = 2;

/// The registry of open connections.
pub struct Conns {
    limit: usize,
    epoch: Instant,
    table: Mutex<Table>,
    next_id: AtomicU64,
    emptied: Notify,
    warned: Mutex<Warned>,
    metrics: Arc<Metrics>,
}

#[derive(Default)]
struct Table {
    /// By id, so in the order they were accepted.
    open: BTreeMap<u64, Arc<Conn>>,
    unauthenticated: usize,
}

#[derive(Default)]
struct Warned {
    last: Option<Instant>,
    /// Connections closed (or refused) for the limit since the last line.
    since: u64,
}

/// One open connection, as its requests and the registry see it; a
/// request carries it in its extensions.
pub struct Conn {
    id: u64,
    opened: Instant,
    epoch: Instant,
    authenticated: AtomicBool,
    /// Requests in flight.
    busy: AtomicU32,
    /// When it last had no request in flight (µs since `epoch`).
    idle_since_us: AtomicU64,
    close: AtomicU8,
    asked: Notify,
    conns: Weak<Conns>,
}

/// A connection's place in the registry, given back when dropped.
pub struct Registered {
    conn: Arc<Conn>,
    conns: Arc<Conns>,
}

/// A request in flight on a connection, counted until dropped.
pub struct Busy(Arc<Conn>);

impl Conns {
    pub fn new(limit: usize, metrics: Arc<Metrics>) -> Arc<Conns> {
        Arc::new(Conns {
            limit: limit.max(1),
            epoch: Instant::now(),
            table: Mutex::new(Table::default()),
            next_id: AtomicU64::new(0),
            emptied: Notify::new(),
            warned: Mutex::new(Warned::default()),
            metrics,
        })
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a connection just accepted, making room for it at the
    /// limit (see the module docs); None: it must be closed.
    pub fn admit(self: &Arc<Conns>) -> Option<Registered> {
        let mut table = self.lock();
        let mut shed = None;
        if table.open.len() >= self.limit {
            match victim(&table) {
                Some((id, how, why)) => {
                    if let Some(conn) = table.open.remove(&id) {
                        if !conn.is_authenticated() {
                            table.unauthenticated -= 1;
                        }
                        conn.ask(how);
                        shed = Some((why, conn.opened.elapsed()));
                    }
                }
                None => {
                    drop(table);
                    self.note_limit("limit_refused", None);
                    return None;
                }
            }
        }
        let now = Instant::now();
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            opened: now,
            epoch: self.epoch,
            authenticated: AtomicBool::new(false),
            busy: AtomicU32::new(0),
            idle_since_us: AtomicU64::new(micros(now - self.epoch)),
            close: AtomicU8::new(KEEP),
            asked: Notify::new(),
            conns: Arc::downgrade(self),
        });
        table.open.insert(conn.id, Arc::clone(&conn));
        table.unauthenticated += 1;
        self.show(&table);
        drop(table);
        if let Some((why, age)) = shed {
            self.note_limit(why, Some(age));
        }
        Some(Registered {
            conn,
            conns: Arc::clone(self),
        })
    }

    fn forget(&self, conn: &Conn) {
        let mut table = self.lock();
        if table.open.remove(&conn.id).is_some() && !conn.is_authenticated() {
            table.unauthenticated -= 1;
        }
        self.show(&table);
        if table.open.is_empty() {
            self.emptied.notify_waiters();
        }
    }

    fn authenticated(&self, conn: &Conn) {
        let mut table = self.lock();
        // Under the lock, so a connection shed meanwhile isn't counted twice.
        if !conn.authenticated.swap(true, Ordering::SeqCst) && table.open.contains_key(&conn.id) {
            table.unauthenticated -= 1;
            self.show(&table);
        }
    }

    fn show(&self, table: &Table) {
        let gauge = &self.metrics.connections;
        let unauthenticated = table.unauthenticated as i64;
        let all = table.open.len() as i64;
        gauge
            .with_label_values(&["unauthenticated"])
            .set(unauthenticated);
        gauge
            .with_label_values(&["authenticated"])
            .set(all - unauthenticated);
    }

    /// Counts a connection closed (or refused) for the limit, and says so in
    /// the log at most once every [`WARN_EVERY`].
    fn note_limit(&self, why: &str, age: Option<Duration>) {
        self.metrics
            .connections_closed
            .with_label_values(&[why])
            .inc();
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        warned.since += 1;
        if warned.last.is_some_and(|at| at.elapsed() < WARN_EVERY) {
            return;
        }
        let what = match (why, age) {
            ("limit_unauthenticated", Some(age)) => format!(
                "closed the oldest connection that sent no accepted token (open {:.1} s)",
                age.as_secs_f64()
            ),
            ("limit_idle", Some(age)) => format!(
                "closed the authenticated connection idle the longest (open {:.1} s)",
                age.as_secs_f64()
            ),
            _ => "refused a new connection: every open one is authenticated and busy".into(),
        };
        tracing::warn!(
            "connection limit of {} reached (--max-connections): {what}; {} closed or refused \
             for the limit since the last such line",
            self.limit,
            warned.since
        );
        warned.last = Some(Instant::now());
        warned.since = 0;
    }

    /// Resolves once no connection is open.
    pub async fn all_closed(&self) {
        loop {
            let emptied = self.emptied.notified();
            if self.open() == 0 {
                return;
            }
            emptied.await;
        }
    }
}

/// The connection to close for a new one, how, and the metric's `why`.
fn victim(table: &Table) -> Option<(u64, Close, &'static str)> {
    let unauthenticated = || table.open.values().filter(|c| !c.is_authenticated());
    if let Some(c) = unauthenticated()
        .find(|c| c.is_idle())
        .or_else(|| unauthenticated().next())
    {
        return Some((c.id, Close::Now, "limit_unauthenticated"));
    }
    table
        .open
        .values()
        .filter(|c| c.is_idle())
        .min_by_key(|c| c.idle_since_us.load(Ordering::SeqCst))
        .map(|c| (c.id, Close::Gracefully, "limit_idle"))
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Conn {
    pub fn is_authenticated(&self) -> bool {
        self.authenticated.load(Ordering::SeqCst)
    }

    fn is_idle(&self) -> bool {
        self.busy.load(Ordering::SeqCst) == 0
    }

    /// One of its requests carried a token the store accepts.
    pub fn authenticate(&self) {
        if self.is_authenticated() {
            return;
        }
        if let Some(conns) = self.conns.upgrade() {
            conns.authenticated(self);
        }
    }

    /// A request begins; it counts as in flight until the [`Busy`] is dropped.
    pub fn begin(self: &Arc<Conn>) -> Busy {
        self.busy.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(self))
    }

    fn ask(&self, how: Close) {
        let code = match how {
            Close::Now => NOW,
            Close::Gracefully => GRACEFULLY,
        };
        self.close.store(code, Ordering::SeqCst);
        self.asked.notify_one();
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let conn = &self.0;
        conn.idle_since_us
            .store(micros(conn.epoch.elapsed()), Ordering::SeqCst);
        conn.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Registered {
    /// The connection, for its requests' extensions.
    pub fn conn(&self) -> &Arc<Conn> {
        &self.conn
    }

    /// Resolves when the registry asks the connection to close: how.
    pub async fn asked(&self) -> Close {
        loop {
            match self.conn.close.load(Ordering::SeqCst) {
                NOW => return Close::Now,
                GRACEFULLY => return Close::Gracefully,
                _ => self.conn.asked.notified().await,
            }
        }
    }

    /// Resolves once the connection has had no request in flight for
    /// `timeout` (counted from when it was accepted, or from the end of its
    /// last request).
    pub async fn idle_for(&self, timeout: Duration) {
        let conn = &self.conn;
        loop {
            let since = conn.idle_since_us.load(Ordering::SeqCst);
            let idle_until = conn.epoch + Duration::from_micros(since) + timeout;
            let now = Instant::now();
            let wake = match conn.is_idle() {
                true if now >= idle_until => return,
                true => idle_until,
                // Busy: look again a timeout from now, or once it is done.
                false => now + timeout,
            };
            tokio::time::sleep_until(wake).await;
        }
    }

    /// The idle timeout closed it: counted.
    pub fn note_idle_close(&self) {
        self.conns
            .metrics
            .connections_closed
            .with_label_values(&["idle"])
            .inc();
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.conns.forget(&self.conn);
    }
}

/// How long a request's body may take to arrive, carried in the request's
/// extensions for the routes that read one.
#[derive(Clone, Copy, Debug)]
pub struct BodyTimeout(pub Duration);

#[cfg(test)]
mod tests;
