//! A node's durable storage: redb, with group commit.
//!
//! Every write is durable before it is acked: appended to the node's write-ahead log and
//! synced (`log`), then applied to redb without a sync; every `CHECKPOINT_GROUPS` groups (or
//! when the log is full) redb is committed with `Durability::Immediate` instead, and the log
//! starts over. Opening the database replays the log's records into it.
//! One sync per write would cap a node at a few hundred writes per second, so writes are
//! committed in groups: the writes that arrived during one commit share the next one. There is
//! no commit thread to hand writes to (waking one cost a single client about a tenth of its
//! latency): the writer that finds no commit under way becomes the committer and commits, in
//! its own thread, its write and every write queued meanwhile, until the queue is empty.

use super::log::{self, Logged, WriteLog};
use super::wire::StoredValue;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use std::ops::Bound;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// key -> (version: 8 bytes big-endian, flag: 1 = value / 0 = tombstone, value bytes).
const DATA: TableDefinition<&[u8], &[u8]> = TableDefinition::new("data");
/// "max_version" -> the highest version ever stored, so recovery need not scan the data.
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const MAX_VERSION_KEY: &str = "max_version";
/// "cluster_id" -> the cluster this database belongs to (`cluster::datadir`), written when
/// the cluster first starts the node: a database without it was created since.
const CLUSTER_ID_KEY: &str = "cluster_id";
/// "log_id" -> this database's id in its write-ahead log's records (drawn when it is created).
const LOG_ID_KEY: &str = "log_id";
/// "log_generation" -> the generation of the log records not yet durable in redb.
const LOG_GENERATION_KEY: &str = "log_generation";
/// Groups logged between two durable commits at most: each makes the next durable commit
/// write more pages (3 ms after 128 groups, 0.5 ms after 16 on the development machine).
const CHECKPOINT_GROUPS: u32 = 32;
/// Entries per transaction when a database is rebuilt from another one.
const COPY_BATCH_ENTRIES: usize = 4096;

/// Writes in one group commit at most: bounds a transaction's size and the wait of the first.
pub const BATCH_WRITES_MAX: usize = 512;
/// How long `open` waits for another process to release the database: a node of a `store up`
/// that was just killed is still exiting when the next one starts.
const OPEN_WAIT_MS: u64 = 10_000;
const OPEN_RETRY_MS: u64 = 20;
/// After a failed commit the database is closed and opened again at most this often, on the
/// next write: a full disk fails writes at once, and they succeed again once space returns.
const REOPEN_RETRY_MS: u64 = 200;
/// A storage failure is logged once per cause in this interval, with how many were not.
const FAILURE_LOG_INTERVAL_MS: u64 = 10_000;

struct PendingWrite {
    write: Logged,
    done: WriteDone,
}

/// Told a write's outcome, on the committer's thread: the key's version now, or why it failed.
pub type WriteDone = Box<dyn FnOnce(Result<u64, String>) + Send>;

#[derive(Clone)]
pub struct Storage {
    db: Arc<Handle>,
    commits: Arc<Mutex<Commits>>,
    log: Arc<Mutex<WriteLog>>,
    max_version: Arc<AtomicU64>,
    /// The cluster stamped into the database when it opened (`None`: never stamped, a node
    /// run by hand outside a cluster's data directory).
    cluster_id: Option<u64>,
}

/// Writes waiting for a commit, and whether a committer is at work.
#[derive(Default)]
struct Commits {
    queued: Vec<PendingWrite>,
    committing: bool,
    /// The committer's: kept here so that the next committer continues them.
    failures: FailureLog,
    last_reopen: Option<Instant>,
    /// Groups logged since redb's last durable commit.
    logged_groups: u32,
}

/// The caller of `Storage::submit` who must commit: `run` commits every queued write (its own
/// first) until the queue is empty, blocking its thread on each fsync.
#[must_use = "the submitted write waits until a committer runs"]
pub struct Committer {
    db: Arc<Handle>,
    commits: Arc<Mutex<Commits>>,
    log: Arc<Mutex<WriteLog>>,
    max_version: Arc<AtomicU64>,
}

/// The open database, or why it is closed. redb refuses every operation after an I/O error
/// (a full disk) until the database is opened again, so the writer closes it when a commit
/// fails and opens it again later: the node recovers by itself when the cause goes away.
struct Handle {
    /// The node's data directory: the database and its log.
    dir: PathBuf,
    db: RwLock<Result<Arc<Database>, String>>,
}

impl Handle {
    fn path(&self) -> PathBuf {
        self.dir.join(DATABASE_FILE)
    }

    fn get(&self) -> Result<Arc<Database>, String> {
        self.db.read().expect("database lock").clone()
    }

    fn close(&self, cause: String) {
        *self.db.write().expect("database lock") = Err(cause);
    }

    /// Open it again if closed, replaying the log into it (what was applied without a sync
    /// went with the closed handle); `Err(cause)` if that fails (a read may still hold the
    /// old handle for a moment: the next attempt gets it).
    fn reopen(&self, log: &mut WriteLog, max_version: &AtomicU64) -> Result<Arc<Database>, String> {
        let mut slot = self.db.write().expect("database lock");
        if let Ok(db) = &*slot {
            return Ok(Arc::clone(db));
        }
        let db = match Database::create(self.path()) {
            Ok(db) => db,
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => return slot.clone(),
            Err(e) => {
                *slot = Err(cause(&e));
                return slot.clone();
            }
        };
        match recover(&db, &self.dir) {
            Ok(recovered) => {
                log.restart(recovered.log_generation);
                max_version.fetch_max(recovered.max_version, Ordering::SeqCst);
                let db = Arc::new(db);
                *slot = Ok(Arc::clone(&db));
                Ok(db)
            }
            Err(why) => {
                *slot = Err(why);
                slot.clone()
            }
        }
    }
}

fn log_missing(dir: &Path) -> String {
    format!(
        "{} is missing, but {} was written through it: writes acknowledged since its last durable commit would be lost",
        dir.join(log::LOG_FILE).display(),
        dir.join(DATABASE_FILE).display()
    )
}

/// What a database holds after its log was replayed into it.
struct Recovered {
    max_version: u64,
    cluster_id: Option<u64>,
    log_id: u64,
    /// The generation the log's records are written in from now on.
    log_generation: u64,
}

/// Replay the log in `dir` into `db` in one durable commit that moves the log to its next
/// generation (drawing the database's log id if it has none yet).
fn recover(db: &Database, dir: &Path) -> Result<Recovered, String> {
    let txn = db.begin_write().map_err(db_error)?;
    let recovered = {
        let mut data = txn.open_table(DATA).map_err(db_error)?;
        let mut meta = txn.open_table(META).map_err(db_error)?;
        let read = |meta: &redb::Table<&str, u64>, key: &str| -> Result<Option<u64>, String> {
            Ok(meta.get(key).map_err(db_error)?.map(|v| v.value()))
        };
        let log_id = match read(&meta, LOG_ID_KEY)? {
            Some(_) if !dir.join(log::LOG_FILE).exists() => return Err(log_missing(dir)),
            Some(id) => id,
            None => {
                // The log exists before any record can depend on it.
                log::create_if_missing(dir)?;
                use std::hash::BuildHasher;
                let id = std::collections::hash_map::RandomState::new().hash_one((
                    std::time::SystemTime::now(),
                    std::process::id(),
                    dir,
                ));
                meta.insert(LOG_ID_KEY, id).map_err(db_error)?;
                id
            }
        };
        let generation = read(&meta, LOG_GENERATION_KEY)?.unwrap_or(0);
        let mut max_version = read(&meta, MAX_VERSION_KEY)?.unwrap_or(0);
        for w in log::read_records(dir, log_id, generation)? {
            let version = decode_record(&w.record)?.0;
            put_newer(&mut data, &w.key, version, &w.record)?;
            max_version = max_version.max(version);
        }
        raise_max_version(&mut meta, max_version)?;
        meta.insert(LOG_GENERATION_KEY, generation + 1).map_err(db_error)?;
        Recovered {
            max_version,
            cluster_id: read(&meta, CLUSTER_ID_KEY)?,
            log_id,
            log_generation: generation + 1,
        }
    };
    txn.commit().map_err(db_error)?;
    Ok(recovered)
}

/// What a storage error says, in the words an operator looks for.
pub(super) fn cause(e: &dyn std::fmt::Display) -> String {
    let text = e.to_string();
    if text.contains("No space left on device") {
        "storage: no space left on device".into()
    } else {
        format!("storage: {text}")
    }
}

/// Logs each storage failure cause once per interval, and the recovery.
#[derive(Default)]
struct FailureLog {
    /// cause -> (last logged, failures since not logged).
    logged: std::collections::HashMap<String, (Instant, u64)>,
}

impl FailureLog {
    fn failed(&mut self, path: &Path, why: &str) {
        let now = Instant::now();
        let interval = Duration::from_millis(FAILURE_LOG_INTERVAL_MS);
        match self.logged.get_mut(why) {
            Some((at, quiet)) if now.duration_since(*at) < interval => *quiet += 1,
            Some((at, quiet)) => {
                eprintln!("replicheck store node: {}: {why}: writes fail until it is fixed ({quiet} more failures since the last report)", path.display());
                (*at, *quiet) = (now, 0);
            }
            None => {
                eprintln!("replicheck store node: {}: {why}: writes fail until it is fixed", path.display());
                self.logged.insert(why.to_string(), (now, 0));
            }
        }
    }

    fn recovered(&mut self, path: &Path) {
        if !self.logged.is_empty() {
            eprintln!("replicheck store node: {}: storage works again: writes resume", path.display());
            self.logged.clear();
        }
    }
}

fn encode_record(version: u64, value: &StoredValue) -> Vec<u8> {
    let mut out = version.to_be_bytes().to_vec();
    match value {
        None => out.push(0),
        Some(bytes) => {
            out.push(1);
            out.extend_from_slice(bytes);
        }
    }
    out
}

/// The version a record made by `encode_record` holds.
fn record_version(record: &[u8]) -> u64 {
    u64::from_be_bytes(record[..8].try_into().expect("a record starts with its version"))
}

fn decode_record(bytes: &[u8]) -> Result<(u64, StoredValue), String> {
    if bytes.len() < 9 {
        return Err(format!("corrupt record of {} bytes", bytes.len()));
    }
    let version = u64::from_be_bytes(bytes[..8].try_into().expect("8 bytes"));
    match bytes[8] {
        0 => Ok((version, None)),
        1 => Ok((version, Some(bytes[9..].to_vec()))),
        flag => Err(format!("corrupt record flag {flag}")),
    }
}

fn db_error(e: impl std::fmt::Display) -> String {
    cause(&e)
}

/// A node's database in its data directory.
pub const DATABASE_FILE: &str = "node.redb";

/// Open `path` (created if missing and `create`), waiting for another process to release it.
pub fn open_database(path: &Path, create: bool) -> Result<Database, String> {
    let waited_max = std::time::Instant::now() + std::time::Duration::from_millis(OPEN_WAIT_MS);
    loop {
        let opened = if create { Database::create(path) } else { Database::open(path) };
        match opened {
            Ok(db) => return Ok(db),
            Err(redb::DatabaseError::DatabaseAlreadyOpen) if std::time::Instant::now() < waited_max => {
                std::thread::sleep(std::time::Duration::from_millis(OPEN_RETRY_MS));
            }
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                return Err(format!(
                    "cannot open {}: still in use by another process after {OPEN_WAIT_MS} ms (a node of another `store up`?)",
                    path.display()
                ))
            }
            Err(e) => return Err(format!("cannot open {}: {e}", path.display())),
        }
    }
}

/// What a node's data directory holds, read while no node serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataFile {
    Missing,
    /// A file of 0 bytes: truncated, never a database redb wrote.
    Empty,
    Database {
        cluster_id: Option<u64>,
        /// The highest version ever stored (0: nothing was).
        max_version: u64,
    },
    /// A database whose write-ahead log is gone: the writes acked since its last durable
    /// commit went with it. What the database itself says.
    LogMissing {
        cluster_id: Option<u64>,
        max_version: u64,
    },
}

/// Read what `dir` holds without changing it.
pub fn inspect(dir: &Path) -> Result<DataFile, String> {
    let path = dir.join(DATABASE_FILE);
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(DataFile::Missing),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        Ok(m) if m.len() == 0 => return Ok(DataFile::Empty),
        Ok(_) => {}
    }
    let db = open_database(&path, false)?;
    let txn = db.begin_read().map_err(db_error)?;
    let meta = match txn.open_table(META) {
        Ok(meta) => meta,
        // Created but never opened by a node: nothing stored, nothing stamped.
        Err(redb::TableError::TableDoesNotExist(_)) => {
            return Ok(DataFile::Database { cluster_id: None, max_version: 0 })
        }
        Err(e) => return Err(format!("{}: {}", path.display(), db_error(e))),
    };
    let read = |key: &str| meta.get(key).map(|v| v.map(|v| v.value())).map_err(db_error);
    // Writes acked since the last durable commit are in the log.
    let stored = read(MAX_VERSION_KEY)?.unwrap_or(0);
    let logged = match read(LOG_ID_KEY)? {
        Some(_) if !dir.join(log::LOG_FILE).exists() => {
            return Ok(DataFile::LogMissing { cluster_id: read(CLUSTER_ID_KEY)?, max_version: stored })
        }
        Some(log_id) => log::read_records(dir, log_id, read(LOG_GENERATION_KEY)?.unwrap_or(0))?,
        None => Vec::new(),
    };
    Ok(DataFile::Database {
        cluster_id: read(CLUSTER_ID_KEY)?,
        max_version: logged
            .iter()
            .try_fold(stored, |max, w| decode_record(&w.record).map(|(v, _)| max.max(v)))?,
    })
}

/// Record that the database in `dir` (created if missing) belongs to `cluster_id`.
pub fn stamp(dir: &Path, cluster_id: u64) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let db = open_database(&dir.join(DATABASE_FILE), true)?;
    let txn = db.begin_write().map_err(db_error)?;
    {
        txn.open_table(DATA).map_err(db_error)?;
        let mut meta = txn.open_table(META).map_err(db_error)?;
        meta.insert(CLUSTER_ID_KEY, cluster_id).map_err(db_error)?;
    }
    txn.commit().map_err(db_error)
}

/// Copy into `to`'s database every entry of `from`'s whose key `keep` accepts, where it is
/// newer than what `to` holds (as a write would); returns the entries copied. Both databases
/// are closed when it returns.
pub fn copy_newer(from: &Path, to: &Path, keep: &dyn Fn(&[u8]) -> bool) -> Result<u64, String> {
    let source = open_database(&from.join(DATABASE_FILE), false)?;
    // The source's writes since its last durable commit are in its log.
    recover(&source, from)?;
    let target = open_database(&to.join(DATABASE_FILE), true)?;
    let read = source.begin_read().map_err(db_error)?;
    let table = match read.open_table(DATA) {
        Ok(table) => table,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(db_error(e)),
    };
    let mut copied = 0;
    let mut entries = table.iter().map_err(db_error)?.peekable();
    while entries.peek().is_some() {
        let txn = target.begin_write().map_err(db_error)?;
        {
            let mut data = txn.open_table(DATA).map_err(db_error)?;
            let mut batch_max = 0;
            for entry in entries.by_ref().take(COPY_BATCH_ENTRIES) {
                let (key, record) = entry.map_err(db_error)?;
                if !keep(key.value()) {
                    continue;
                }
                let version = decode_record(record.value())?.0;
                if put_newer(&mut data, key.value(), version, record.value())? == version {
                    copied += 1;
                }
                batch_max = batch_max.max(version);
            }
            raise_max_version(&mut txn.open_table(META).map_err(db_error)?, batch_max)?;
        }
        txn.commit().map_err(db_error)?;
    }
    Ok(copied)
}

/// Store `record` (at `version`) unless `key` already has that version or a newer one; the
/// key's version after. Versions order the writes of a key: an older version arriving late (a
/// retry, a catch-up copy) must not overwrite a newer one.
fn put_newer(
    data: &mut redb::Table<&[u8], &[u8]>,
    key: &[u8],
    version: u64,
    record: &[u8],
) -> Result<u64, String> {
    let current = match data.get(key).map_err(db_error)? {
        Some(stored) => decode_record(stored.value())?.0,
        None => 0,
    };
    if version > current {
        data.insert(key, record).map_err(db_error)?;
        Ok(version)
    } else {
        Ok(current)
    }
}

fn raise_max_version(meta: &mut redb::Table<&str, u64>, version: u64) -> Result<(), String> {
    let stored = meta.get(MAX_VERSION_KEY).map_err(db_error)?.map(|v| v.value()).unwrap_or(0);
    if version > stored {
        meta.insert(MAX_VERSION_KEY, version).map_err(db_error)?;
    }
    Ok(())
}

impl Storage {
    /// Open (or create) the database in `dir`. After a crash redb recovers the last committed
    /// transaction, which includes every write that was acked.
    pub fn open(dir: &Path) -> Result<Storage, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let db = open_database(&dir.join(DATABASE_FILE), true)?;
        let recovered = recover(&db, dir)?;
        let log = WriteLog::open(dir, recovered.log_id, recovered.log_generation)?;
        let db = Arc::new(Handle { dir: dir.to_path_buf(), db: RwLock::new(Ok(Arc::new(db))) });
        Ok(Storage {
            db,
            commits: Arc::default(),
            log: Arc::new(Mutex::new(log)),
            max_version: Arc::new(AtomicU64::new(recovered.max_version)),
            cluster_id: recovered.cluster_id,
        })
    }

    /// The cluster this database belongs to, as stamped when it opened.
    pub fn cluster_id(&self) -> Option<u64> {
        self.cluster_id
    }

    /// Hold every commit at its start while the guard lives: a disk that does not answer.
    #[cfg(test)]
    pub(crate) fn stall_commits(&self) -> std::sync::MutexGuard<'_, super::log::WriteLog> {
        self.log.lock().expect("log lock")
    }

    /// Store `value` at `version` unless the key already has that version or a newer one;
    /// resolves once durable, with the key's version now.
    /// (Blocks its thread while it commits.)
    pub fn write(&self, key: Vec<u8>, version: u64, value: StoredValue) -> Result<u64, String> {
        let (done, result) = std::sync::mpsc::channel();
        let done: WriteDone = Box::new(move |outcome| drop(done.send(outcome)));
        if let Some(committer) = self.submit(key, version, value, done) {
            committer.run();
        }
        result.recv().map_err(|_| "storage: the committer stopped".to_string())?
    }

    /// Queue a write; `done` is called on the committer's thread once it is durable (or
    /// failed), so the node writes its reply from there. `Some` if no commit is under way:
    /// the caller is the committer and must `run` it (a node does so off its async runtime).
    pub fn submit(
        &self,
        key: Vec<u8>,
        version: u64,
        value: StoredValue,
        done: WriteDone,
    ) -> Option<Committer> {
        let mut commits = self.commits.lock().expect("commits lock");
        let record = encode_record(version, &value);
        commits.queued.push(PendingWrite { write: Logged { key, record }, done });
        if commits.committing {
            return None;
        }
        commits.committing = true;
        Some(Committer {
            db: Arc::clone(&self.db),
            commits: Arc::clone(&self.commits),
            log: Arc::clone(&self.log),
            max_version: Arc::clone(&self.max_version),
        })
    }

    pub fn read(&self, key: &[u8]) -> Result<(u64, StoredValue), String> {
        let txn = self.db.get()?.begin_read().map_err(db_error)?;
        let table = txn.open_table(DATA).map_err(db_error)?;
        match table.get(key).map_err(db_error)? {
            Some(record) => decode_record(record.value()),
            None => Ok((0, None)),
        }
    }

    pub fn max_version(&self) -> u64 {
        self.max_version.load(Ordering::SeqCst)
    }

    /// Up to `limit` entries with keys after `after`, in key order.
    pub fn scan(
        &self,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, u64, StoredValue)>, String> {
        let txn = self.db.get()?.begin_read().map_err(db_error)?;
        let table = txn.open_table(DATA).map_err(db_error)?;
        let start = match after {
            Some(key) => Bound::Excluded(key),
            None => Bound::Unbounded,
        };
        let mut out = Vec::new();
        for entry in table.range::<&[u8]>((start, Bound::Unbounded)).map_err(db_error)?.take(limit) {
            let (key, record) = entry.map_err(db_error)?;
            let (version, value) = decode_record(record.value())?;
            out.push((key.value().to_vec(), version, value));
        }
        Ok(out)
    }
}

impl Committer {
    /// Commit queued writes, up to `BATCH_WRITES_MAX` a group, until none is queued.
    pub fn run(self) {
        let mut log = self.log.lock().expect("log lock");
        loop {
            let (batch, reopen, logged_groups) = {
                let mut commits = self.commits.lock().expect("commits lock");
                if commits.queued.is_empty() {
                    commits.committing = false;
                    return;
                }
                let take = commits.queued.len().min(BATCH_WRITES_MAX);
                let batch: Vec<PendingWrite> = commits.queued.drain(..take).collect();
                let due = commits
                    .last_reopen
                    .is_none_or(|at| at.elapsed() >= Duration::from_millis(REOPEN_RETRY_MS));
                (batch, due, commits.logged_groups)
            };
            let db = match self.db.get() {
                Ok(db) => Ok(db),
                Err(why) if !reopen => Err(why),
                Err(_) => {
                    self.commits.lock().expect("commits lock").last_reopen = Some(Instant::now());
                    self.db.reopen(&mut log, &self.max_version)
                }
            };
            let writes: Vec<&Logged> = batch.iter().map(|p| &p.write).collect();
            let checkpoint = logged_groups >= CHECKPOINT_GROUPS || !log.fits(log::encoded_bytes(&writes));
            // Closed after a failed commit, so that the next attempt opens it afresh (redb
            // refuses every operation after an I/O error until then) and replays the log.
            let close = |why: &String| self.db.close(why.clone());
            let mut unapplied = None;
            let committed = db.and_then(|db| {
                if checkpoint {
                    let generation = log.generation() + 1;
                    let committed = commit_batch(&db, &writes, Some(generation)).inspect_err(close);
                    if committed.is_ok() {
                        log.restart(generation);
                    }
                    return committed;
                }
                log.append(&writes)?;
                commit_batch(&db, &writes, None).or_else(|why| {
                    // Durable in the log, so acked: redb gets it when it is opened again
                    // (replayed), and until then no read is served from it.
                    close(&why);
                    unapplied = Some(why);
                    let versions: Vec<u64> = writes.iter().map(|w| record_version(&w.record)).collect();
                    let batch_max = versions.iter().copied().max().unwrap_or(0);
                    Ok((versions, batch_max))
                })
            });
            let mut commits = self.commits.lock().expect("commits lock");
            match committed {
                Ok((versions, batch_max)) => {
                    commits.logged_groups = if checkpoint { 0 } else { commits.logged_groups + 1 };
                    match &unapplied {
                        Some(why) => commits.failures.failed(&self.db.path(), why),
                        None => commits.failures.recovered(&self.db.path()),
                    }
                    drop(commits);
                    self.max_version.fetch_max(batch_max, Ordering::SeqCst);
                    for (pending, version) in batch.into_iter().zip(versions) {
                        (pending.done)(Ok(version));
                    }
                }
                Err(why) => {
                    commits.failures.failed(&self.db.path(), &why);
                    drop(commits);
                    for pending in batch {
                        (pending.done)(Err(why.clone()));
                    }
                }
            }
        }
    }
}

/// One transaction for the whole batch; returns each write's resulting version. With
/// `checkpoint` (the log's next generation) it is durable and starts that generation; without,
/// the writes are already durable in the log and redb need not sync.
fn commit_batch(
    db: &Database,
    batch: &[&Logged],
    checkpoint: Option<u64>,
) -> Result<(Vec<u64>, u64), String> {
    let mut txn = db.begin_write().map_err(db_error)?;
    if checkpoint.is_none() {
        txn.set_durability(Durability::None).map_err(db_error)?;
    }
    let mut versions = Vec::with_capacity(batch.len());
    let mut batch_max = 0;
    {
        let mut data = txn.open_table(DATA).map_err(db_error)?;
        for write in batch {
            let version = record_version(&write.record);
            versions.push(put_newer(&mut data, &write.key, version, &write.record)?);
            batch_max = batch_max.max(version);
        }
        let mut meta = txn.open_table(META).map_err(db_error)?;
        raise_max_version(&mut meta, batch_max)?;
        if let Some(generation) = checkpoint {
            meta.insert(LOG_GENERATION_KEY, generation).map_err(db_error)?;
        }
    }
    txn.commit().map_err(db_error)?;
    Ok((versions, batch_max))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_win_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = Storage::open(dir.path()).unwrap();
            assert_eq!(s.write(b"k".to_vec(), 5, Some(b"five".to_vec())).unwrap(), 5);
            assert_eq!(s.write(b"k".to_vec(), 3, Some(b"three".to_vec())).unwrap(), 5);
            assert_eq!(s.write(b"d".to_vec(), 7, None).unwrap(), 7);
            assert_eq!(s.read(b"k").unwrap(), (5, Some(b"five".to_vec())));
        }
        // Nothing holds the file once the handle is dropped.
        let s = Storage::open(dir.path()).unwrap();
        assert_eq!(s.read(b"k").unwrap(), (5, Some(b"five".to_vec())));
        assert_eq!(s.read(b"d").unwrap(), (7, None));
        assert_eq!(s.read(b"none").unwrap(), (0, None));
        assert_eq!(s.max_version(), 7);
        let all = s.scan(None, 10).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(s.scan(Some(b"d"), 10).unwrap(), vec![(b"k".to_vec(), 5, Some(b"five".to_vec()))]);
    }

    /// A process killed between two durable commits leaves the database file as it was at the
    /// last one, and the log: copied while open, the files are such a crash's image. Opened,
    /// it holds every write acked, which it would not without the log.
    #[test]
    fn writes_acked_since_the_last_durable_commit_survive_a_crash_through_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("live");
        let s = Storage::open(&live).unwrap();
        let writes = 10u64;
        for v in 1..=writes {
            assert_eq!(s.write(format!("k{v}").into_bytes(), v, Some(vec![v as u8; 100])).unwrap(), v);
            assert_eq!(s.read(format!("k{v}").as_bytes()).unwrap().0, v, "read after its ack");
        }
        assert!(writes < u64::from(CHECKPOINT_GROUPS), "no checkpoint yet");
        let image = |name: &str, with_log: bool| {
            let to = dir.path().join(name);
            std::fs::create_dir_all(&to).unwrap();
            std::fs::copy(live.join(DATABASE_FILE), to.join(DATABASE_FILE)).unwrap();
            if with_log {
                std::fs::copy(live.join(log::LOG_FILE), to.join(log::LOG_FILE)).unwrap();
            }
            to
        };
        let (crashed, without_log) = (image("crashed", true), image("without-log", false));
        assert_eq!(inspect(&crashed).unwrap(), DataFile::Database { cluster_id: None, max_version: writes });
        let recovered = Storage::open(&crashed).unwrap();
        for v in 1..=writes {
            assert_eq!(recovered.read(format!("k{v}").as_bytes()).unwrap(), (v, Some(vec![v as u8; 100])));
        }
        assert_eq!(recovered.max_version(), writes);
        // Without its log the database is refused, and it was the log that kept the writes.
        assert!(matches!(inspect(&without_log).unwrap(), DataFile::LogMissing { cluster_id: None, .. }));
        let refused = Storage::open(&without_log).err().expect("a database without its log is refused");
        assert!(
            refused.contains("node.log is missing, but") && refused.contains("would be lost"),
            "{refused}"
        );
        let db = Database::open(without_log.join(DATABASE_FILE)).unwrap();
        let txn = db.begin_read().unwrap();
        assert!(txn.open_table(DATA).unwrap().get(format!("k{writes}").as_bytes()).unwrap().is_none());

        // Past a checkpoint, and the log started over: still all there.
        for v in writes + 1..=writes + u64::from(CHECKPOINT_GROUPS) + 5 {
            s.write(format!("k{v}").into_bytes(), v, None).unwrap();
        }
        let crashed = image("crashed-later", true);
        let recovered = Storage::open(&crashed).unwrap();
        assert_eq!(recovered.max_version(), writes + u64::from(CHECKPOINT_GROUPS) + 5);
        assert_eq!(recovered.read(b"k1").unwrap().0, 1);
        assert_eq!(recovered.read(format!("k{}", writes + 20).as_bytes()).unwrap(), (writes + 20, None));
    }

    /// Writers on many threads at once: each write is committed by whichever writer is the
    /// committer then, none waits for ever, and every one is durable when it returns.
    #[test]
    fn concurrent_writers_elect_committers_and_every_write_commits() {
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        const THREADS: u64 = 6;
        const WRITES: u64 = 50;
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..WRITES {
                        let version = 1 + t * WRITES + i;
                        let key = format!("k{t}-{}", i % 7).into_bytes();
                        assert_eq!(s.write(key, version, Some(vec![1; 10])).unwrap(), version);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(s.max_version(), THREADS * WRITES);
        assert_eq!(s.scan(None, 1_000).unwrap().len(), (THREADS * 7) as usize);
        assert!(!s.commits.lock().unwrap().committing, "the last committer stepped down");
        drop(s);
        let reopened = Storage::open(dir.path()).unwrap();
        assert_eq!(reopened.max_version(), THREADS * WRITES);
        let (version, _) = reopened.read(b"k3-0").unwrap();
        assert_eq!(version, 1 + 3 * WRITES + 49, "the newest write of key k3-0 (i = 49)");
    }
}
