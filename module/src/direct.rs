//! Store calls on connections the module owns (`fleet.connection:
//! "direct"`), off Envoy's workers. A hook's hit call (or its worker's
//! batched call) is queued here from the worker with the stream's
//! [`SharedScheduler`]; a connection thread sends it on a keep-alive
//! HTTP/1.1 connection to `fleet.store` and the answer is handed back to
//! the stream by committing its scheduler (`on_http_filter_scheduled`, on
//! the stream's own worker), where it is taken as a callout's answer would be.
//!
//! The hard budget holds whatever a connection does: a timer thread answers
//! every call still in flight at its deadline as Envoy answers a callout
//! that timed out (504); the core's breaker and fallback decide from there.
//! A connection that failed, timed out or answered garbage is dropped, and
//! a connection thread that could not connect waits [`RECONNECT_PAUSE`]
//! before it tries again (its calls meanwhile answered as reset). Nothing
//! here blocks a worker beyond a short lock. A stream that ends before its
//! answer [`forget`]s its calls: the answer is dropped, never handed over.
#![deny(unsafe_code)]

pub mod http1;

use crate::abi::{Answer, SharedScheduler};
use ankusa_core::config::StoreAddr;
use ankusa_core::shell::deadlines::Deadlines;
use std::collections::{HashMap, VecDeque};
use std::io::{BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Direct call ids carry this bit, and are the scheduler events that hand
/// their answers over (a worker's wake is a small number).
pub const DIRECT_EVENT: u64 = 1 << 62;

/// Connection threads at most (each holds one connection, one call at a time).
pub const MAX_CONNECTIONS: usize = 8;

/// How long a connection thread that could not connect waits before it tries again.
pub const RECONNECT_PAUSE: Duration = Duration::from_millis(50);

/// What a call still in flight at its deadline is answered, as Envoy
/// answers a callout past its timeout.
pub fn timed_out() -> Answer {
    Answer {
        status: Some("504".to_string()),
        body: b"upstream request timeout".to_vec(),
    }
}

/// One call waiting for a connection thread.
struct Job {
    id: u64,
    addr: StoreAddr,
    request: Vec<u8>,
    deadline: Instant,
    /// The call's whole budget: how long a connection's reads and writes may block.
    budget: Duration,
}

/// The calls in flight: their deadlines, the schedulers their answers go
/// to, and answers handed over but not taken yet.
#[derive(Default)]
struct Calls {
    deadlines: Deadlines,
    schedulers: HashMap<u64, Arc<SharedScheduler>>,
    answers: HashMap<u64, Answer>,
    /// When the timer wakes next on its own (None: it waits to be woken).
    timer_until: Option<u64>,
}

#[derive(Default)]
struct Threads {
    started: usize,
    idle: usize,
    timer: bool,
}

struct Client {
    queue: Mutex<VecDeque<Job>>,
    queued: Condvar,
    calls: Mutex<Calls>,
    /// The timer waits on it for the next deadline (or an earlier one).
    deadline_added: Condvar,
    threads: Mutex<Threads>,
    epoch: Instant,
}

static CLIENT: LazyLock<Client> = LazyLock::new(|| Client {
    queue: Mutex::new(VecDeque::new()),
    queued: Condvar::new(),
    calls: Mutex::new(Calls::default()),
    deadline_added: Condvar::new(),
    threads: Mutex::new(Threads::default()),
    epoch: Instant::now(),
});

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A panic elsewhere leaves the data behind a lock plain: it is used on.
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Client {
    fn mono_us(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_micros()).unwrap_or(u64::MAX)
    }

    /// Hands call `id`'s answer to its stream, once (false: it was answered or forgotten).
    fn complete(&self, id: u64, answer: Answer) -> bool {
        let scheduler = {
            let mut calls = locked(&self.calls);
            if !calls.deadlines.remove(id) {
                return false;
            }
            calls.answers.insert(id, answer);
            calls.schedulers.remove(&id)
        };
        if let Some(scheduler) = scheduler {
            scheduler.commit(id);
        }
        true
    }

    fn in_flight(&self, id: u64) -> bool {
        locked(&self.calls).deadlines.contains(id)
    }

    /// Starts the timer, and a connection thread when fewer are idle than
    /// calls `waiting` (this one included); false when no thread could be
    /// started and none runs.
    fn ensure_threads(&'static self, waiting: usize) -> bool {
        let mut threads = locked(&self.threads);
        if !threads.timer {
            let spawned = std::thread::Builder::new()
                .name("ankusa-store-timer".into())
                .spawn(move || self.run_timer());
            threads.timer = spawned.is_ok();
        }
        if threads.idle < waiting && threads.started < MAX_CONNECTIONS {
            let spawned = std::thread::Builder::new()
                .name("ankusa-store-conn".into())
                .spawn(move || self.run_connection());
            if spawned.is_ok() {
                threads.started += 1;
                // Counted idle now: the next call doesn't start another for itself.
                threads.idle += 1;
            }
        }
        threads.timer && threads.started > 0
    }

    /// Answers every call at its deadline.
    fn run_timer(&self) {
        let mut calls = locked(&self.calls);
        loop {
            let now = self.mono_us(Instant::now());
            let due = calls.deadlines.take_due(now);
            if due.is_empty() {
                let next = calls.deadlines.next();
                calls.timer_until = next;
                calls = match next {
                    Some(d) => {
                        self.deadline_added
                            .wait_timeout(calls, Duration::from_micros(d - now))
                            .unwrap_or_else(|p| p.into_inner())
                            .0
                    }
                    None => self
                        .deadline_added
                        .wait(calls)
                        .unwrap_or_else(|p| p.into_inner()),
                };
                continue;
            }
            let mut commits = Vec::with_capacity(due.len());
            for id in due {
                calls.answers.insert(id, timed_out());
                if let Some(scheduler) = calls.schedulers.remove(&id) {
                    commits.push((id, scheduler));
                }
            }
            drop(calls);
            for (id, scheduler) in commits {
                scheduler.commit(id);
            }
            calls = locked(&self.calls);
        }
    }

    /// The next job (waiting idle for one).
    fn next_job(&self) -> Job {
        let mut queue = locked(&self.queue);
        loop {
            if let Some(job) = queue.pop_front() {
                locked(&self.threads).idle -= 1;
                return job;
            }
            queue = self.queued.wait(queue).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// One connection's thread: its calls one at a time.
    fn run_connection(&self) {
        let mut conn = Connection::default();
        loop {
            let job = self.next_job();
            if self.in_flight(job.id) {
                let answer = conn.exchange(&job);
                self.complete(job.id, answer);
            }
            locked(&self.threads).idle += 1;
        }
    }
}

/// One keep-alive connection to the store (None: to be made).
#[derive(Default)]
struct Connection {
    stream: Option<(StoreAddr, BufReader<TcpStream>)>,
    /// When a connect last failed: none is tried until [`RECONNECT_PAUSE`] after.
    failed_at: Option<Instant>,
}

impl Connection {
    /// Sends `job` and reads its answer before its deadline; any failure is
    /// a reset (an empty answer) and drops the connection. A kept
    /// connection the store closed meanwhile is made again once.
    fn exchange(&mut self, job: &Job) -> Answer {
        for attempt in 0..2 {
            let reused = self.stream.as_ref().is_some_and(|(a, _)| *a == job.addr);
            if !reused {
                self.stream = None;
                if !self.connect(job) {
                    return Answer::default();
                }
            }
            match self.send(job) {
                Ok(answer) => return answer,
                Err(sent_nothing) => {
                    self.stream = None;
                    // Only a kept connection's first write or read may go again.
                    if !(reused && sent_nothing && attempt == 0) {
                        return Answer::default();
                    }
                }
            }
        }
        Answer::default()
    }

    fn connect(&mut self, job: &Job) -> bool {
        if self
            .failed_at
            .is_some_and(|t| t.elapsed() < RECONNECT_PAUSE)
        {
            return false;
        }
        let left = job.deadline.saturating_duration_since(Instant::now());
        let addr = (job.addr.host.as_str(), job.addr.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next());
        let stream = addr
            .filter(|_| !left.is_zero())
            .and_then(|a| TcpStream::connect_timeout(&a, left).ok());
        match stream {
            Some(stream) => {
                // Set once a connection: the timer answers each call at its
                // own deadline; these only bound how long the thread waits.
                let bounded = stream.set_write_timeout(Some(job.budget)).is_ok()
                    && stream.set_read_timeout(Some(job.budget)).is_ok();
                if !bounded {
                    self.failed_at = Some(Instant::now());
                    return false;
                }
                let _ = stream.set_nodelay(true);
                self.failed_at = None;
                self.stream = Some((job.addr.clone(), BufReader::new(stream)));
                true
            }
            None => {
                self.failed_at = Some(Instant::now());
                false
            }
        }
    }

    /// Err(true): the store closed a kept connection before any answer came.
    fn send(&mut self, job: &Job) -> Result<Answer, bool> {
        let Some((_, reader)) = self.stream.as_mut() else {
            return Err(false);
        };
        if Instant::now() >= job.deadline {
            return Err(false);
        }
        if let Err(e) = reader.get_mut().write_all(&job.request) {
            return Err(e.kind() == std::io::ErrorKind::BrokenPipe
                || e.kind() == std::io::ErrorKind::ConnectionReset);
        }
        match http1::response(reader) {
            Ok(response) => {
                if !response.keep_alive {
                    self.stream = None;
                }
                Ok(response.answer)
            }
            Err(e) => Err(matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
            ) && reader.buffer().is_empty()),
        }
    }
}

/// Queues `request` to the store at `addr`, answered to `scheduler` by
/// `timeout_ms` at the latest: its call id (also the scheduler event that
/// hands the answer over), or None when no connection thread could start.
pub fn send(
    addr: &StoreAddr,
    request: Vec<u8>,
    timeout_ms: u64,
    scheduler: &Arc<SharedScheduler>,
) -> Option<u64> {
    let client: &'static Client = &CLIENT;
    let waiting = locked(&client.queue).len() + 1;
    if !client.ensure_threads(waiting) {
        return None;
    }
    let id = DIRECT_EVENT | (NEXT_ID.fetch_add(1, Ordering::Relaxed) & (DIRECT_EVENT - 1));
    let budget = Duration::from_millis(timeout_ms.max(1));
    let deadline = Instant::now() + budget;
    let earliest = {
        let mut calls = locked(&client.calls);
        let at = client.mono_us(deadline);
        // The timer is woken only when it would wake too late on its own
        // (it sleeps to the earliest deadline it knew of, or until woken).
        let earliest = calls.timer_until.is_none_or(|until| at < until);
        if earliest {
            calls.timer_until = Some(at);
        }
        calls.deadlines.insert(id, at);
        calls.schedulers.insert(id, Arc::clone(scheduler));
        earliest
    };
    if earliest {
        client.deadline_added.notify_one();
    }
    locked(&client.queue).push_back(Job {
        id,
        addr: addr.clone(),
        request,
        deadline,
        budget,
    });
    client.queued.notify_one();
    Some(id)
}

/// Whether scheduler event `event` hands over a direct call's answer.
pub fn is_answer(event: u64) -> bool {
    event & DIRECT_EVENT != 0
}

/// The answer handed over for call `id` (None: none, or taken already).
pub fn take(id: u64) -> Option<Answer> {
    locked(&CLIENT.calls).answers.remove(&id)
}

/// Call `id`'s stream is gone: its answer, now or later, is dropped.
pub fn forget(id: u64) {
    let scheduler = {
        let mut calls = locked(&CLIENT.calls);
        calls.deadlines.remove(id);
        calls.answers.remove(&id);
        calls.schedulers.remove(&id)
    };
    drop(scheduler);
}

/// Calls in flight and answers not taken yet (for tests).
pub fn outstanding() -> (usize, usize) {
    let calls = locked(&CLIENT.calls);
    (calls.deadlines.len(), calls.answers.len())
}
