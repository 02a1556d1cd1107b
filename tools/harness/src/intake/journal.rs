//! The intake's durable part: an append-only JSON-lines file and the local
//! dedupe index rebuilt from it.
//!
//! One writer thread owns both. Serialising every write through it makes the
//! dedupe check and the append one atomic step (two copies of an event racing
//! in can't both be stored), and lets one `fsync` cover every hook that arrived
//! while the previous one ran (group commit). Nobody is answered before the
//! `fsync` that covers their hook returns.

use super::index::{DedupeKey, Index};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use tokio::sync::oneshot;

/// The journal's file name inside `--data-dir`.
pub const FILE_NAME: &str = "hooks.jsonl";

/// Most hooks one `fsync` covers; bounds the latency of the last one in.
const MAX_GROUP: usize = 512;

/// One stored hook, one line of the journal.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Record {
    pub id: String,
    pub tenant: Option<String>,
    pub source: Option<String>,
    pub event_key: Option<String>,
    /// When the intake stored it (Unix ms); the dedupe TTL counts from here.
    pub received_ms: u64,
    /// The body, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body in base64, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_b64: Option<String>,
}

impl Record {
    fn dedupe_key(&self) -> Option<DedupeKey> {
        Some((
            self.tenant.clone()?,
            self.source.clone()?,
            self.event_key.clone()?,
        ))
    }

    fn summary(&self) -> serde_json::Value {
        serde_json::json!({"id": self.id, "tenant": self.tenant, "source": self.source, "event_key": self.event_key})
    }
}

/// What became of a hook handed to the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Written and synced under this id.
    Stored(String),
    /// Its key was already held, by the hook with this id; nothing written.
    Duplicate(String),
}

struct Job {
    record: Record,
    reply: oneshot::Sender<Result<Outcome, String>>,
}

/// A handle to the writer thread; cheap to clone.
#[derive(Clone)]
pub struct Journal {
    jobs: mpsc::Sender<Job>,
    /// The journal, read again for `GET /hooks`: what it holds isn't kept in
    /// memory, so the intake's memory stays bounded by its index over a long run.
    path: PathBuf,
    /// Hooks synced so far.
    stored: Arc<AtomicU64>,
    /// Copies the index caught since the start, for `GET /stats`.
    caught: Arc<AtomicU64>,
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, replays it into the index and
    /// starts the writer thread.
    pub fn open(dir: &Path, dedupe_ttl_ms: u64) -> Result<Journal, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create data dir {}: {e}", dir.display()))?;
        let path = dir.join(FILE_NAME);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        // The file's own name must survive a crash too, or a freshly created
        // journal could vanish with every hook synced into it.
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| format!("cannot sync data dir {}: {e}", dir.display()))?;
        let records = replay(&mut file, &path)?;
        let mut index = Index::new(dedupe_ttl_ms, crate::ids::now_ms());
        let stored = Arc::new(AtomicU64::new(records.len() as u64));
        for record in records {
            if let Some(key) = record.dedupe_key() {
                index.insert(key, record.id.clone(), record.received_ms);
            }
        }
        let caught = Arc::new(AtomicU64::new(0));
        let (jobs, rx) = mpsc::channel();
        let writer = Writer {
            file,
            path: path.clone(),
            index,
            stored: stored.clone(),
            caught: caught.clone(),
        };
        std::thread::Builder::new()
            .name("journal-writer".into())
            .spawn(move || writer.run(rx))
            .map_err(|e| format!("cannot start the journal writer: {e}"))?;
        Ok(Journal {
            jobs,
            path,
            stored,
            caught,
        })
    }

    /// Stores `record` unless its key is held; returns once the answer is durable.
    pub async fn append(&self, record: Record) -> Result<Outcome, String> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job { record, reply })
            .map_err(|_| "journal writer stopped".to_string())?;
        answer
            .await
            .map_err(|_| "journal writer stopped".to_string())?
    }

    /// Copies answered as duplicates (caught by the index, not stored again)
    /// since the start.
    pub fn duplicates_caught(&self) -> u64 {
        self.caught.load(Ordering::SeqCst)
    }

    /// How many hooks are stored.
    pub fn stored(&self) -> u64 {
        self.stored.load(Ordering::SeqCst)
    }

    /// Every stored hook as `{"id","tenant","source","event_key"}`, read
    /// from the journal: the whole lines of it (a line still being written
    /// is left for the next read).
    pub fn summaries(&self) -> Result<Vec<serde_json::Value>, String> {
        let file = File::open(&self.path)
            .map_err(|e| format!("cannot open {}: {e}", self.path.display()))?;
        let mut hooks = Vec::new();
        let mut reader = BufReader::new(file);
        let mut line = String::new();
        loop {
            line.clear();
            let n = reader
                .read_line(&mut line)
                .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
            if n == 0 || !line.ends_with('\n') {
                return Ok(hooks);
            }
            if let Ok(record) = serde_json::from_str::<Record>(&line) {
                hooks.push(record.summary());
            }
        }
    }
}

/// Reads every record back. A last line with no newline is a write cut short by
/// a crash — never acknowledged, since the answer waits for the sync — so it is
/// cut off; any other bad line is corruption and stops the start.
fn replay(file: &mut File, path: &Path) -> Result<Vec<Record>, String> {
    let len = file
        .metadata()
        .map_err(|e| format!("cannot stat {}: {e}", path.display()))?
        .len();
    file.seek(SeekFrom::Start(0))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut records = Vec::new();
    let mut complete = 0u64;
    let mut reader = BufReader::new(&mut *file);
    let mut line = String::new();
    let mut number = 0;
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 || !line.ends_with('\n') {
            break;
        }
        number += 1;
        complete += n as u64;
        if line.trim().is_empty() {
            continue;
        }
        let record: Record = serde_json::from_str(&line).map_err(|e| {
            format!(
                "{} line {number} is not a hook record ({e}): {}",
                path.display(),
                line.trim()
            )
        })?;
        records.push(record);
    }
    if complete < len {
        eprintln!(
            "intake: cutting {} bytes of an unfinished last write from {}",
            len - complete,
            path.display()
        );
        file.set_len(complete)
            .map_err(|e| format!("cannot truncate {}: {e}", path.display()))?;
    }
    Ok(records)
}

struct Writer {
    file: File,
    path: PathBuf,
    index: Index,
    stored: Arc<AtomicU64>,
    caught: Arc<AtomicU64>,
}

impl Writer {
    fn run(mut self, rx: mpsc::Receiver<Job>) {
        while let Ok(first) = rx.recv() {
            let mut group = vec![first];
            while group.len() < MAX_GROUP {
                match rx.try_recv() {
                    Ok(job) => group.push(job),
                    Err(_) => break,
                }
            }
            self.commit(group);
        }
    }

    /// Decides every job of the group, writes the new records in one append,
    /// syncs, and only then publishes them and answers.
    fn commit(&mut self, group: Vec<Job>) {
        let now = crate::ids::now_ms();
        let mut outcomes = Vec::with_capacity(group.len());
        let mut fresh: HashMap<DedupeKey, String> = HashMap::new();
        let mut lines = Vec::new();
        let mut stored = Vec::new();
        for job in &group {
            let key = job.record.dedupe_key();
            let held = key.as_ref().and_then(|k| {
                fresh
                    .get(k)
                    .cloned()
                    .or_else(|| self.index.held(k, now).map(str::to_string))
            });
            if let Some(old) = held {
                self.caught.fetch_add(1, Ordering::SeqCst);
                outcomes.push(Ok(Outcome::Duplicate(old)));
                continue;
            }
            match serde_json::to_vec(&job.record) {
                Ok(mut line) => {
                    line.push(b'\n');
                    lines.extend_from_slice(&line);
                }
                Err(e) => {
                    outcomes.push(Err(format!("cannot encode hook {}: {e}", job.record.id)));
                    continue;
                }
            }
            if let Some(k) = key {
                fresh.insert(k, job.record.id.clone());
            }
            stored.push(job.record.clone());
            outcomes.push(Ok(Outcome::Stored(job.record.id.clone())));
        }
        let written = if lines.is_empty() {
            Ok(())
        } else {
            self.file
                .write_all(&lines)
                .and_then(|()| self.file.sync_data())
        };
        if let Err(e) = written {
            let message = format!("cannot write {}: {e}", self.path.display());
            eprintln!("intake: {message}");
            for job in group {
                let _ = job.reply.send(Err(message.clone()));
            }
            return;
        }
        for record in &stored {
            if let Some(key) = record.dedupe_key() {
                self.index
                    .insert(key, record.id.clone(), record.received_ms);
            }
        }
        self.stored.fetch_add(stored.len() as u64, Ordering::SeqCst);
        self.index.stored(now, stored.len());
        for (job, outcome) in group.into_iter().zip(outcomes) {
            let _ = job.reply.send(outcome);
        }
    }
}
