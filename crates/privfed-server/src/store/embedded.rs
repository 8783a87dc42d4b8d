//! The default store: redb (an embedded ACID database) and an update journal in `--data-dir`.
//!
//! Reads are served from an in-memory copy of every instance. All writes go through one writer
//! thread: it takes every pending operation and makes the batch's updates durable as one
//! record of the update journal ([`super::journal`]: one positioned write and one `fdatasync`;
//! the batch's last value of each instance it overwrites, and the counters' increments), and
//! only after that does it update the in-memory copy and acknowledge the requests (group
//! commit). When the journal is full, a checkpoint writes the instances it holds and the
//! counters into redb in one `Durability::Immediate` transaction, and the journal starts over;
//! at start-up the records after the last checkpoint are replayed into redb before the models
//! are loaded. Model creation and deletion are redb transactions of their own (a deletion
//! checkpoints first, so the journal never names a model that is gone), and so is a batch too
//! large for the whole journal; updates of models with instances larger than
//! [`JOURNAL_MAX_INSTANCE_BYTES`] always go straight into redb. Hence after a crash:
//! * every instance is a whole model that was initialized or written by an acknowledged-or-in-flight
//!   update (a record is applied whole or not at all: its checksum covers it, and redb commits
//!   are atomic);
//! * the `accepted`/`rejected` counters travel in the same record or transaction as the
//!   instances, so they match what was applied;
//! * every acknowledged update was in a synced record or a committed transaction before its
//!   acknowledgement, and so was everything before it in the journal.
//!
//! Failure handling:
//! * **Fail closed.** If a commit fails (disk error) or the database file or the journal is no
//!   longer the one that was opened (deleted or replaced under the running server), the store
//!   stops taking writes: that batch and every later write answer [`StoreError::Unavailable`]
//!   (503), and [`Store::healthy`] turns false. Nothing is acknowledged that is not durably in
//!   the files.
//! * **Explicit creation.** [`EmbeddedStore::open`] opens an existing store only; a new one is
//!   made by [`EmbeddedStore::create`], so a lost data directory is an error at start-up, not a
//!   silently empty server. A store whose journal is gone does not open either (its last
//!   acknowledged updates may have been there only); a store from before the journal gets one.
//! * **Quarantine.** A model whose records are damaged is not loaded: it answers
//!   [`StoreError::Quarantined`] and is listed by [`EmbeddedStore::quarantined`], while every
//!   other model is served; deleting it removes its records.
//! * **Identity.** An update is applied only to the incarnation (generation) of the model it
//!   was validated against, and its length is checked again where it is written.
//!
//! **When a group commit starts, and on which thread**, is [`CommitPacing`]. `Eager` (the
//! library default): the writer thread commits as soon as it wakes with something pending.
//! Under load that is a commit, one fsync, per few updates: the writer wakes for the first
//! update while the workers are still handling the requests that will post the next ones.
//! `WhenIdle` (what `privfed serve` uses) waits until a runtime worker is about to park, i.e.
//! until the workers have run out of requests that could add to the batch, or until
//! `max_delay`. The parking worker commits the batch itself ([`IdleSignal::notify`]) when it
//! holds only updates of journaled models and no other commit is under way; otherwise it hands
//! the batch to the writer thread at once. So at low load a commit starts as soon as the update
//! is queued, under load the batch holds everything the workers could queue meanwhile, and the
//! common commit needs no cross-thread wake-up: neither to start the writer nor to resume the
//! requests it acknowledges (docs/history/BENCHMARKS-history.md, "Session 16" and "Session 19"). The writer thread
//! commits the rest: creations, deletions, large models' updates, and anything that waited
//! `max_delay` because no worker parked. Acknowledgement still follows the commit.

use super::journal::{self, Entry, Journal};
use super::{Admission, CommitStats, Drawn, ModelSnapshot, Rejection, Store, SubmitOutcome};
use crate::error::StoreError;
use crate::model::{ModelSpec, decode_f32, encode_f32};
use crate::ticket::{Handle, Redeemed, RetiredInstances, Ticket, TicketBook, TicketLimits, handle};
use bytes::Bytes;
use privfed_ddml::engine::{InstanceStats, replacement_index};
use rand::SeedableRng;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, TryLockError, Weak};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The database file inside the data directory.
pub const DB_FILE: &str = "privfed.redb";

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("models");
const INSTANCES: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("instances");
/// [`CHECKPOINTED`]: the last journal record whose writes are in the tables; [`TAG`]: the
/// journal's store tag ([`journal`]). Present once the store has a journal (stores from before
/// the journal get one when opened).
const JOURNAL: TableDefinition<&str, u64> = TableDefinition::new("journal");
const CHECKPOINTED: &str = "checkpointed";
const TAG: &str = "tag";

/// The most operations folded into one commit.
const MAX_BATCH: usize = 4096;
/// Running sums are recomputed from scratch after this many overwrites.
const RECOMPUTE_EVERY: u64 = 4096;

/// When the writer thread starts a group commit (see the [module documentation](self)).
#[derive(Debug, Clone, Default)]
pub enum CommitPacing {
    /// As soon as it wakes with an operation pending.
    #[default]
    Eager,
    /// Once a worker of the runtime has parked ([`IdleSignal::notify`]) since the first pending
    /// operation was queued, or `max_delay` after that operation, whichever comes first.
    WhenIdle {
        /// Raised by the runtime's workers when they park.
        signal: IdleSignal,
        /// The longest the first pending operation waits for the commit to start.
        max_delay: Duration,
    },
}

/// How the runtime tells a [`CommitPacing::WhenIdle`] store that its workers ran out of work:
/// register [`IdleSignal::notify`] as tokio's `on_thread_park` hook. One signal paces one store.
#[derive(Clone, Default)]
pub struct IdleSignal(Arc<IdleInner>);

#[derive(Default)]
struct IdleInner {
    /// The store's pipeline (weak: the hook lives as long as the runtime, the store may not).
    pipeline: OnceLock<Weak<Pipeline>>,
}

impl std::fmt::Debug for IdleSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdleSignal")
            .field("paces_a_store", &self.0.pipeline.get().is_some())
            .finish()
    }
}

impl IdleSignal {
    /// A signal no worker has raised yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A worker is about to park: the pending batch is committed now. On the calling thread,
    /// when the batch holds only updates of journaled models and no commit is under way (it
    /// returns once the batch is durable and acknowledged); otherwise by the writer thread,
    /// woken for it. With nothing pending it costs a lock and a check.
    pub fn notify(&self) {
        if let Some(p) = self.0.pipeline.get().and_then(Weak::upgrade) {
            p.on_park();
        }
    }
}

/// Options of [`EmbeddedStore::open_with`].
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// Limits of the ticket book of each model.
    pub limits: TicketLimits,
    /// When group commits start.
    pub pacing: CommitPacing,
    /// The size of the update journal when one is created ([`journal`]; at least
    /// [`journal::MIN_JOURNAL_BYTES`]). An existing journal keeps its size.
    pub journal_bytes: u64,
    /// How long a write may wait for its commit. Past it the write answers 503 (its ticket
    /// stays in progress until the commit completes), further writes are refused at once and
    /// [`Store::healthy`] is false, until commits complete again.
    pub commit_deadline: Duration,
}

/// Default [`EmbeddedOptions::commit_deadline`].
pub const DEFAULT_COMMIT_DEADLINE: Duration = Duration::from_secs(5);

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            limits: TicketLimits::default(),
            pacing: CommitPacing::default(),
            journal_bytes: journal::DEFAULT_JOURNAL_BYTES,
            commit_deadline: DEFAULT_COMMIT_DEADLINE,
        }
    }
}

/// What [`Store::commit_stats`] reports, counted by the writer.
#[derive(Default)]
struct CommitCounters {
    commits: AtomicU64,
    operations: AtomicU64,
    checkpoints: AtomicU64,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredMeta {
    spec: ModelSpec,
    accepted: u64,
    rejected: u64,
}

/// The instances, and each one's little-endian encoding (what a draw sends; encoded once per
/// overwrite instead of once per draw).
struct Instances {
    weights: Vec<Arc<[f32]>>,
    encoded: Vec<Bytes>,
    /// What tickets refer to ([`crate::ticket::Handle`]).
    handles: Vec<Handle>,
}

struct ModelState {
    spec: Arc<ModelSpec>,
    instances: RwLock<Instances>,
    stats: RwLock<InstanceStats>,
    accepted: AtomicU64,
    rejected: AtomicU64,
    overwrites: AtomicU64,
    deleted: AtomicBool,
    tickets: TicketBook<SubmitOutcome>,
    retired: RetiredInstances,
}

impl ModelState {
    fn new(
        spec: ModelSpec,
        instances: Vec<Arc<[f32]>>,
        accepted: u64,
        rejected: u64,
        limits: TicketLimits,
    ) -> Result<Self, StoreError> {
        let stats = InstanceStats::from_instances(&instances).map_err(backend)?;
        let (k, dim) = (spec.k, spec.dim);
        // Only a model whose updates need their draw's ticket protects young tickets: without a
        // guard a ticket only answers retries, and a full book forgets its oldest as before
        // rather than make draws wait.
        let limits = if crate::store::needs_ticket(&spec) {
            limits
        } else {
            TicketLimits {
                min_age: Duration::ZERO,
                ..limits
            }
        };
        Ok(Self {
            spec: Arc::new(spec),
            instances: RwLock::new(Instances {
                encoded: instances
                    .iter()
                    .map(|w| Bytes::from(encode_f32(w)))
                    .collect(),
                handles: instances.iter().map(handle).collect(),
                weights: instances,
            }),
            stats: RwLock::new(stats),
            accepted: AtomicU64::new(accepted),
            rejected: AtomicU64::new(rejected),
            overwrites: AtomicU64::new(0),
            deleted: AtomicBool::new(false),
            tickets: TicketBook::new(limits),
            retired: RetiredInstances::new(limits.retired_cap(k, dim)),
        })
    }
}

type Ack<T> = oneshot::Sender<Result<T, StoreError>>;

enum WriteOp {
    Create {
        spec: ModelSpec,
        instances: Vec<Vec<f32>>,
        ack: Ack<()>,
    },
    Delete {
        name: String,
        ack: Ack<()>,
    },
    Update {
        model: Arc<ModelState>,
        /// Made an `Arc` by the writer (the copy off the request path).
        weights: Vec<f32>,
        ack: Ack<SubmitOutcome>,
    },
    Reject {
        model: Arc<ModelState>,
        rejection: Rejection,
        ack: Ack<SubmitOutcome>,
    },
}

type Models = Arc<RwLock<HashMap<String, Arc<ModelState>>>>;

/// Models set aside at start-up, with why.
type Quarantine = Arc<RwLock<HashMap<String, String>>>;

/// Why the store stopped taking writes, once it has.
type Failure = Arc<Mutex<Option<String>>>;

/// How [`EmbeddedStore::open_with`] treats the data directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// The store must exist.
    Existing,
    /// The store must not exist; a new empty one is created.
    Create,
}

/// The redb-backed store (see the [module documentation](self)).
#[derive(Clone)]
pub struct EmbeddedStore {
    models: Models,
    quarantine: Quarantine,
    failure: Failure,
    file: FileIdentity,
    /// Where writes are queued for their group commit.
    queue: Arc<Queue>,
    counters: Arc<CommitCounters>,
    /// [`EmbeddedOptions::commit_deadline`].
    deadline: Duration,
    /// Whether the store was last seen stalled (to log transitions only).
    stall_logged: Arc<AtomicBool>,
}

/// The database file's and the journal's paths and identities (device and inode) when opened:
/// if a path no longer names its file, writes would go to a file nobody will open again.
#[derive(Clone)]
struct FileIdentity(Arc<[(PathBuf, (u64, u64))]>);

impl FileIdentity {
    fn of(paths: &[&Path]) -> std::io::Result<Self> {
        let ids = paths
            .iter()
            .map(|p| Ok((p.to_path_buf(), file_id(p)?)))
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Self(ids.into()))
    }

    /// `Err` with a reason if a path is gone or names another file.
    fn check(&self) -> Result<(), String> {
        for (path, id) in self.0.iter() {
            match file_id(path) {
                Ok(now) if now == *id => {}
                Ok(_) => {
                    return Err(format!(
                        "{} was replaced by another file while the server ran",
                        path.display()
                    ));
                }
                Err(e) => return Err(format!("{} is gone: {e}", path.display())),
            }
        }
        Ok(())
    }
}

#[cfg(unix)]
fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

#[cfg(not(unix))]
fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    std::fs::metadata(path).map(|_| (0, 0))
}

fn signal_in_use() -> StoreError {
    StoreError::Backend(
        "this IdleSignal paces another store already; each store needs its own".into(),
    )
}

fn backend<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn lock_poisoned() -> StoreError {
    StoreError::Backend("a lock was poisoned by a panic".into())
}

impl EmbeddedStore {
    /// Opens the existing store `DIR/privfed.redb`, loads every model (quarantining damaged ones)
    /// and starts the writer thread. Errors if there is no store there (a new one is an explicit
    /// choice: [`EmbeddedStore::create`]), or the database cannot be opened (e.g. another process
    /// holds it).
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        Self::open_with(data_dir, OpenMode::Existing, EmbeddedOptions::default())
    }

    /// Creates a new empty store in `data_dir` (made if absent). Errors if one exists there.
    pub fn create(data_dir: &Path) -> Result<Self, StoreError> {
        Self::open_with(data_dir, OpenMode::Create, EmbeddedOptions::default())
    }

    /// [`EmbeddedStore::open`] or [`EmbeddedStore::create`], with the given options. Errors also
    /// if the options' [`IdleSignal`] paces another store already.
    pub fn open_with(
        data_dir: &Path,
        mode: OpenMode,
        options: EmbeddedOptions,
    ) -> Result<Self, StoreError> {
        let EmbeddedOptions {
            limits,
            pacing,
            journal_bytes,
            commit_deadline,
        } = options;
        if let CommitPacing::WhenIdle { signal, .. } = &pacing
            && signal.0.pipeline.get().is_some()
        {
            return Err(signal_in_use());
        }
        let path = data_dir.join(DB_FILE);
        let exists = path.try_exists().map_err(backend)?;
        let db = match (mode, exists) {
            (OpenMode::Existing, true) => Database::open(&path).map_err(backend)?,
            (OpenMode::Existing, false) => {
                return Err(StoreError::Missing(path.display().to_string()));
            }
            (OpenMode::Create, true) => {
                return Err(StoreError::Backend(format!(
                    "a store exists already at {}",
                    path.display()
                )));
            }
            (OpenMode::Create, false) => {
                std::fs::create_dir_all(data_dir).map_err(backend)?;
                Database::create(&path).map_err(backend)?
            }
        };
        let (checkpointed, tag) = {
            let w = db.begin_write().map_err(backend)?;
            w.open_table(META).map_err(backend)?;
            w.open_table(INSTANCES).map_err(backend)?;
            let c = {
                let t = w.open_table(JOURNAL).map_err(backend)?;
                let get = |key| Ok(t.get(key).map_err(backend)?.map(|v| v.value()));
                (get(CHECKPOINTED)?, get(TAG)?)
            };
            w.commit().map_err(backend)?;
            c
        };
        let journal_path = data_dir.join(journal::JOURNAL_FILE);
        let (last_seq, tag) = match (checkpointed, tag) {
            // A new store, or one from before the journal: the journal is made, then recorded.
            (None, _) => {
                journal::create(&journal_path, journal_bytes).map_err(backend)?;
                let tag = rand::random::<u64>();
                let w = db.begin_write().map_err(backend)?;
                {
                    let mut t = w.open_table(JOURNAL).map_err(backend)?;
                    t.insert(CHECKPOINTED, 0).map_err(backend)?;
                    t.insert(TAG, tag).map_err(backend)?;
                }
                w.commit().map_err(backend)?;
                (0, tag)
            }
            (Some(_), None) => {
                return Err(StoreError::Backend(
                    "the store records a journal checkpoint but no journal tag".into(),
                ));
            }
            (Some(s), Some(tag)) => {
                if !journal_path.try_exists().map_err(backend)? {
                    return Err(StoreError::Backend(format!(
                        "the update journal {} is gone: updates acknowledged after the last \
                         checkpoint may be lost; not starting (restore the file, or move the \
                         store aside and create a new one)",
                        journal_path.display()
                    )));
                }
                (replay(&db, &journal_path, s, tag)?, tag)
            }
        };
        let journal = Journal::open(&journal_path, last_seq + 1, tag).map_err(backend)?;
        let file = FileIdentity::of(&[&path, &journal_path]).map_err(backend)?;
        let mut map = HashMap::new();
        let mut quarantine = HashMap::new();
        {
            let r = db.begin_read().map_err(backend)?;
            let meta = r.open_table(META).map_err(backend)?;
            let inst = r.open_table(INSTANCES).map_err(backend)?;
            for entry in meta.iter().map_err(backend)? {
                let (key, v) = entry.map_err(backend)?;
                let name = key.value().to_string();
                match load_model(&name, v.value(), &inst, limits) {
                    Ok(state) => {
                        map.insert(name, Arc::new(state));
                    }
                    Err(why) => {
                        tracing::error!(model = %name, reason = %why, "model quarantined");
                        quarantine.insert(name, why);
                    }
                }
            }
        }
        let models: Models = Arc::new(RwLock::new(map));
        let quarantine: Quarantine = Arc::new(RwLock::new(quarantine));
        let failure: Failure = Arc::new(Mutex::new(None));
        let counters = Arc::new(CommitCounters::default());
        let writer = Writer {
            db,
            journal,
            dirty: HashMap::new(),
            models: models.clone(),
            quarantine: quarantine.clone(),
            failure: failure.clone(),
            file: file.clone(),
            limits,
            counters: counters.clone(),
        };
        let (max_delay, signal) = match pacing {
            CommitPacing::WhenIdle { signal, max_delay } => (Some(max_delay), Some(signal)),
            CommitPacing::Eager => (None, None),
        };
        let pipeline = Arc::new(Pipeline {
            pending: Mutex::new(Pending::default()),
            writer: Mutex::new(WriterCore {
                writer,
                rng: rand::rngs::ChaCha20Rng::from_rng(&mut rand::rng()),
            }),
            max_delay,
            thread: OnceLock::new(),
            failure: failure.clone(),
            committing_since: Mutex::new(None),
        });
        let (ended, stopped) = std::sync::mpsc::sync_channel::<()>(0);
        let thread = {
            let pipeline = pipeline.clone();
            std::thread::Builder::new()
                .name("privfed-redb-writer".into())
                .spawn(move || {
                    pipeline.run();
                    // The database closes with the pipeline's last reference, before the
                    // store's drop returns.
                    drop(pipeline);
                    drop(ended);
                })
                .map_err(backend)?
        };
        // From here on, dropping `queue` (on any early return too) stops the writer thread.
        let queue = Arc::new(Queue {
            pipeline: pipeline.clone(),
            stopped: Mutex::new(stopped),
        });
        let _ = pipeline.thread.set(thread.thread().clone());
        if let Some(signal) = &signal
            && signal.0.pipeline.set(Arc::downgrade(&pipeline)).is_err()
        {
            // Another store registered between the check above and here.
            return Err(signal_in_use());
        }
        Ok(Self {
            models,
            quarantine,
            failure,
            file,
            queue,
            counters,
            deadline: commit_deadline,
            stall_logged: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Models set aside at start-up because their records are damaged, with the reason.
    pub fn quarantined(&self) -> Vec<(String, String)> {
        let q = self.quarantine.read().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(String, String)> = q.iter().map(|(a, b)| (a.clone(), b.clone())).collect();
        v.sort();
        v
    }

    /// Why the store stopped taking writes, if it has.
    pub fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn check_writable(&self) -> Result<(), StoreError> {
        match self.failure() {
            Some(why) => Err(StoreError::Unavailable(why)),
            None => Ok(()),
        }
    }

    fn get(&self, name: &str) -> Result<Arc<ModelState>, StoreError> {
        if let Some(m) = self.models.read().map_err(|_| lock_poisoned())?.get(name) {
            return Ok(m.clone());
        }
        if self
            .quarantine
            .read()
            .map_err(|_| lock_poisoned())?
            .contains_key(name)
        {
            return Err(StoreError::Quarantined(name.to_string()));
        }
        Err(StoreError::NotFound(name.to_string()))
    }

    /// Queues a write for the next group commit, unless the store has failed or its commits
    /// are past their deadline.
    fn queue_op<T>(
        &self,
        make: impl FnOnce(Ack<T>) -> WriteOp,
    ) -> Result<oneshot::Receiver<Result<T, StoreError>>, StoreError> {
        self.check_writable()?;
        if self.stalled() {
            return Err(self.stall_error());
        }
        let (ack, rx) = oneshot::channel();
        if !self.queue.pipeline.push(make(ack)) {
            return Err(StoreError::Unavailable(WRITER_STOPPED.into()));
        }
        Ok(rx)
    }

    /// Queues a write and waits (at most the commit deadline) until it is durable.
    async fn send<T>(&self, make: impl FnOnce(Ack<T>) -> WriteOp) -> Result<T, StoreError> {
        let rx = self.queue_op(make)?;
        match tokio::time::timeout(self.deadline, rx).await {
            Ok(r) => r.map_err(|_| {
                StoreError::Unavailable("the writer thread dropped a request".into())
            })?,
            Err(_elapsed) => Err(self.stall_error()),
        }
    }

    /// Whether a commit has been pending or under way for longer than the deadline (a stalled
    /// disk). The first time it is seen an ERROR is logged, and an INFO once commits complete
    /// again.
    fn stalled(&self) -> bool {
        let late = self
            .queue
            .pipeline
            .busy_for(Instant::now())
            .is_some_and(|d| d > self.deadline);
        if late != self.stall_logged.swap(late, Ordering::AcqRel) {
            if late {
                tracing::error!(
                    deadline_ms = self.deadline.as_millis() as u64,
                    "the store's commits are past their deadline (is the disk stalled?): \
                     writes answer 503 and /healthz reports unhealthy until they complete"
                );
            } else {
                tracing::info!("the store's commits complete again");
            }
        }
        late
    }

    fn stall_error(&self) -> StoreError {
        StoreError::Unavailable(format!(
            "a commit has not completed within the {} ms deadline (stalled disk?)",
            self.deadline.as_millis()
        ))
    }

    /// Checks an admitted update (guard, spam filter) and queues its write (or its rejection)
    /// for the next group commit; the receiver answers once it is durable.
    fn check_and_queue(
        &self,
        admitted: &EmbeddedAdmission,
        weights: Vec<f32>,
    ) -> Result<oneshot::Receiver<Result<SubmitOutcome, StoreError>>, StoreError> {
        let model = admitted.model.clone();
        let verdict = {
            // The spam filter's statistics, read-locked only for models that have one.
            let stats = match model.spec.spam {
                Some(_) => Some(model.stats.read().map_err(|_| lock_poisoned())?),
                None => None,
            };
            crate::store::check_update(
                &model.spec,
                admitted.base.as_deref(),
                &weights,
                stats.as_deref(),
            )?
        };
        self.queue_op(|ack| match verdict {
            None => WriteOp::Update {
                model,
                weights,
                ack,
            },
            Some(rejection) => WriteOp::Reject {
                model,
                rejection,
                ack,
            },
        })
    }
}

/// An update admitted by the embedded store ([`Store::admit`]): its model, and the ticket it
/// holds in progress with the instance that ticket drew. Dropped unapplied, it returns the
/// ticket to the book.
pub struct EmbeddedAdmission {
    model: Arc<ModelState>,
    base: Option<Arc<[f32]>>,
    ticket: Option<Ticket>,
}

impl EmbeddedAdmission {
    /// Records the outcome for replays of the ticket.
    fn finish(mut self, outcome: &SubmitOutcome) {
        if let Some(t) = self.ticket.take() {
            self.model.tickets.finish(t, outcome.clone());
        }
    }
}

impl Drop for EmbeddedAdmission {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            self.model.tickets.release(t);
        }
    }
}

/// A write transaction that is durable once committed (`Durability::Immediate`: fsynced).
fn durable_write(db: &Database) -> Result<redb::WriteTransaction, StoreError> {
    let mut w = db.begin_write().map_err(backend)?;
    w.set_durability(Durability::Immediate).map_err(backend)?;
    Ok(w)
}

/// Stores a model's metadata record (spec and counters).
fn put_meta(
    meta: &mut redb::Table<&'static str, &'static [u8]>,
    name: &str,
    m: &StoredMeta,
) -> Result<(), StoreError> {
    meta.insert(name, serde_json::to_vec(m).map_err(backend)?.as_slice())
        .map_err(backend)?;
    Ok(())
}

/// At start-up: writes the journal's records after checkpoint `checkpointed` (carrying the
/// store's `tag`) into the tables in
/// one durable transaction that records the last of them as checkpointed; returns the last
/// sequence number the tables cover. A record's entry for a model that is not stored under that
/// generation, or a write that does not fit the stored model, is skipped and logged (a delete
/// checkpoints first, so neither happens unless the records or the tables were damaged).
fn replay(db: &Database, path: &Path, checkpointed: u64, tag: u64) -> Result<u64, StoreError> {
    let records = journal::read_after(path, checkpointed, tag).map_err(backend)?;
    let Some(last) = records.last().map(|r| r.seq) else {
        return Ok(checkpointed);
    };
    let (mut applied, mut skipped) = (0u64, 0u64);
    let w = durable_write(db)?;
    {
        let mut meta = w.open_table(META).map_err(backend)?;
        let mut inst = w.open_table(INSTANCES).map_err(backend)?;
        for r in &records {
            for e in &r.entries {
                let name = e.name.as_str();
                let stored = meta
                    .get(name)
                    .map_err(backend)?
                    .map(|v| serde_json::from_slice::<StoredMeta>(v.value()));
                let mut m = match stored {
                    Some(Ok(m)) if m.spec.generation == e.generation => m,
                    _ => {
                        tracing::warn!(model = %name, record = r.seq,
                            "journal entry for a model not stored under its generation: skipped");
                        skipped += e.writes.len() as u64;
                        continue;
                    }
                };
                for (j, bytes) in &e.writes {
                    if (*j as usize) < m.spec.k && bytes.len() == 4 * m.spec.dim {
                        inst.insert((name, *j), bytes.as_slice()).map_err(backend)?;
                        applied += 1;
                    } else {
                        tracing::warn!(model = %name, record = r.seq, instance = j,
                            "journal write that does not fit the model: skipped");
                        skipped += 1;
                    }
                }
                m.accepted += e.accepted;
                m.rejected += e.rejected;
                put_meta(&mut meta, name, &m)?;
            }
        }
        w.open_table(JOURNAL)
            .map_err(backend)?
            .insert(CHECKPOINTED, last)
            .map_err(backend)?;
    }
    w.commit().map_err(backend)?;
    tracing::info!(
        records = records.len(),
        instance_writes = applied,
        skipped,
        "update journal replayed"
    );
    Ok(last)
}

/// Reads one stored model; `Err` with the reason when any of its records is damaged.
fn load_model(
    name: &str,
    meta: &[u8],
    inst: &impl ReadableTable<(&'static str, u32), &'static [u8]>,
    limits: TicketLimits,
) -> Result<ModelState, String> {
    let mut m: StoredMeta =
        serde_json::from_slice(meta).map_err(|e| format!("unreadable metadata: {e}"))?;
    m.spec = m.spec.prepared()?;
    if m.spec.name != name {
        return Err(format!("metadata names `{}`", m.spec.name));
    }
    let mut instances = Vec::with_capacity(m.spec.k);
    for i in 0..m.spec.k {
        let blob = inst
            .get((name, i as u32))
            .map_err(|e| format!("instance {i}: {e}"))?
            .ok_or_else(|| format!("instance {i} is missing"))?;
        let w = decode_f32(blob.value())
            .filter(|w| w.len() == m.spec.dim && w.iter().all(|x| x.is_finite()))
            .ok_or_else(|| {
                format!(
                    "instance {i} has {} bytes, not {} finite weights",
                    blob.value().len(),
                    m.spec.dim
                )
            })?;
        instances.push(Arc::from(w));
    }
    ModelState::new(m.spec, instances, m.accepted, m.rejected, limits).map_err(|e| e.to_string())
}

impl Store for EmbeddedStore {
    async fn create_model(
        &self,
        spec: ModelSpec,
        instances: Vec<Vec<f32>>,
    ) -> Result<(), StoreError> {
        self.send(|ack| WriteOp::Create {
            spec,
            instances,
            ack,
        })
        .await
    }

    async fn delete_model(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_string();
        self.send(|ack| WriteOp::Delete { name, ack }).await
    }

    async fn spec(&self, name: &str) -> Result<Arc<ModelSpec>, StoreError> {
        Ok(self.get(name)?.spec.clone())
    }

    async fn draw(&self, name: &str) -> Result<Drawn, StoreError> {
        let m = self.get(name)?;
        let i = replacement_index(m.spec.k, &mut rand::rng());
        // The ticket is issued under the read lock: the writer cannot retire the instance
        // between the draw and the ticket (it would see no ticket and drop the instance, and the
        // ticket would be invalid at once).
        let inst = m.instances.read().map_err(|_| lock_poisoned())?;
        let ticket = m
            .tickets
            .issue(&inst.handles[i])
            .map_err(StoreError::TicketsFull)?;
        Ok(Drawn {
            weights: inst.encoded[i].clone(),
            ticket,
        })
    }

    type Admitted = EmbeddedAdmission;

    async fn admit(
        &self,
        name: &str,
        spec: &Arc<ModelSpec>,
        ticket: Option<Ticket>,
    ) -> Result<Admission<EmbeddedAdmission>, StoreError> {
        let model = self.get(name)?;
        if model.spec.generation != spec.generation {
            // The model the request resolved was deleted (and maybe re-created).
            return Err(StoreError::NotFound(name.to_string()));
        }
        let Some(t) = ticket else {
            if crate::store::needs_ticket(&model.spec) {
                return Err(StoreError::TicketRequired);
            }
            return Ok(Admission::Admitted(EmbeddedAdmission {
                model,
                base: None,
                ticket: None,
            }));
        };
        match model.tickets.redeem(t) {
            Redeemed::Fresh(base) => Ok(Admission::Admitted(EmbeddedAdmission {
                model,
                base: Some(base),
                ticket: Some(t),
            })),
            Redeemed::Replay(o) => Ok(Admission::Replayed(o)),
            Redeemed::InProgress => Err(StoreError::TicketInUse),
            Redeemed::Invalid => Err(StoreError::TicketInvalid),
        }
    }

    async fn apply(
        &self,
        name: &str,
        admitted: EmbeddedAdmission,
        weights: Vec<f32>,
    ) -> Result<SubmitOutcome, StoreError> {
        if weights.len() != admitted.model.spec.dim
            || admitted.model.deleted.load(Ordering::Acquire)
        {
            return Err(StoreError::NotFound(name.to_string()));
        }
        let mut rx = self.check_and_queue(&admitted, weights)?;
        match tokio::time::timeout(self.deadline, &mut rx).await {
            Ok(Ok(Ok(o))) => {
                admitted.finish(&o);
                Ok(o)
            }
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(StoreError::Unavailable(
                "the writer thread dropped a request".into(),
            )),
            Err(_elapsed) => {
                // The commit is late (a stalled disk): answer now, and keep the ticket in
                // progress until the commit completes, so that a retry is answered with its
                // outcome instead of being applied a second time.
                tokio::spawn(async move {
                    if let Ok(Ok(o)) = rx.await {
                        admitted.finish(&o);
                    }
                });
                Err(self.stall_error())
            }
        }
    }

    async fn release(&self, admitted: EmbeddedAdmission) {
        drop(admitted);
    }

    async fn snapshot(&self, name: &str) -> Result<ModelSnapshot, StoreError> {
        let m = self.get(name)?;
        let instances = m
            .instances
            .read()
            .map_err(|_| lock_poisoned())?
            .weights
            .clone();
        Ok(ModelSnapshot {
            spec: m.spec.clone(),
            accepted: m.accepted.load(Ordering::Acquire),
            rejected: m.rejected.load(Ordering::Acquire),
            instances,
        })
    }

    async fn healthy(&self) -> bool {
        if self.queue.pipeline.lock_pending().stopped || self.failure().is_some() {
            return false;
        }
        if self.stalled() {
            return false;
        }
        if let Err(why) = self.file.check() {
            fail(&self.failure, why);
            return false;
        }
        true
    }

    fn commit_stats(&self) -> Option<CommitStats> {
        Some(CommitStats {
            commits: self.counters.commits.load(Ordering::Acquire),
            operations: self.counters.operations.load(Ordering::Acquire),
            checkpoints: self.counters.checkpoints.load(Ordering::Acquire),
        })
    }

    async fn total_floats(&self) -> Result<u64, StoreError> {
        Ok(self
            .models
            .read()
            .map_err(|_| lock_poisoned())?
            .values()
            .map(|m| (m.spec.dim as u64).saturating_mul(m.spec.k as u64))
            .sum())
    }
}

/// Marks the store failed (first reason wins) and logs it.
fn fail(failure: &Failure, why: String) {
    let mut f = failure.lock().unwrap_or_else(|e| e.into_inner());
    if f.is_none() {
        tracing::error!(reason = %why, "the store stops taking writes");
        *f = Some(why);
    }
}

/// How long the writer thread of a [`CommitPacing::WhenIdle`] store keeps checking every
/// `max_delay` after it last saw a pending operation, instead of waiting to be woken by the next
/// one: under load it is then never woken per batch.
const WRITER_LINGER: Duration = Duration::from_millis(100);

/// Why writes are refused once the writer thread has ended.
const WRITER_STOPPED: &str = "the writer thread has stopped";

/// Operations waiting for their group commit, and whoever commits them: the thread holding
/// `writer`, i.e. the writer thread or a runtime worker about to park ([`IdleSignal::notify`]).
struct Pipeline {
    pending: Mutex<Pending>,
    /// Taken before `pending` whenever both are held, so batches commit in queue order.
    writer: Mutex<WriterCore>,
    /// [`CommitPacing::WhenIdle`]'s maximum delay; `None` is [`CommitPacing::Eager`].
    max_delay: Option<Duration>,
    /// The writer thread, to wake.
    thread: OnceLock<std::thread::Thread>,
    failure: Failure,
    /// When the commit under way started (`None` when none is).
    committing_since: Mutex<Option<Instant>>,
}

#[derive(Default)]
struct Pending {
    ops: Vec<WriteOp>,
    /// When the oldest of `ops` was queued (`None` iff `ops` is empty).
    since: Option<Instant>,
    /// Some of `ops` are the writer thread's to commit ([`WriteOp::inline`]).
    writer_only: bool,
    /// A worker parked with `ops` pending: the writer thread commits them at once.
    released: bool,
    /// The writer thread waits without a deadline: the next push wakes it.
    writer_asleep: bool,
    /// Every handle of the store is gone: the writer thread commits what is left and stops.
    closed: bool,
    /// The writer thread has stopped (closed, or it panicked): nothing more is taken.
    stopped: bool,
}

/// The committer's state.
struct WriterCore {
    writer: Writer,
    rng: rand::rngs::ChaCha20Rng,
}

/// How long dropping the store's last handle waits for the writer thread's final commit and
/// checkpoint (then the process may exit; an unfinished checkpoint is replayed at start-up).
const SHUTDOWN_WAIT: Duration = Duration::from_secs(30);

/// The store's handle on its pipeline. Dropping the last one closes the pipeline and waits (at
/// most [`SHUTDOWN_WAIT`]) until the writer thread has committed what was pending, checkpointed
/// and stopped, so a process that exits right after has an empty journal.
struct Queue {
    pipeline: Arc<Pipeline>,
    /// Disconnected when the writer thread ends (in a mutex only to be `Sync`).
    stopped: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Drop for Queue {
    fn drop(&mut self) {
        self.pipeline.lock_pending().closed = true;
        self.pipeline.wake_writer();
        let stopped = self.stopped.get_mut().unwrap_or_else(|e| e.into_inner());
        let _ = stopped.recv_timeout(SHUTDOWN_WAIT);
    }
}

/// Marks the pipeline stopped and refuses what is pending, when the writer thread ends (even
/// by a panic).
struct StopGuard<'a>(&'a Pipeline);

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        let left = {
            let mut p = self.0.lock_pending();
            p.stopped = true;
            p.since = None;
            std::mem::take(&mut p.ops)
        };
        for op in left {
            op.refuse(WRITER_STOPPED);
        }
    }
}

impl Pipeline {
    fn lock_pending(&self) -> MutexGuard<'_, Pending> {
        // Nothing panics while holding it; recover anyway.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The committer's state. A commit that panicked leaves it poisoned: the store then fails
    /// closed (it is not known what that commit wrote).
    fn poisoned<'a>(
        &'a self,
        e: std::sync::PoisonError<MutexGuard<'a, WriterCore>>,
    ) -> MutexGuard<'a, WriterCore> {
        fail(&self.failure, "a group commit panicked".into());
        e.into_inner()
    }

    fn lock_writer(&self) -> MutexGuard<'_, WriterCore> {
        self.writer.lock().unwrap_or_else(|e| self.poisoned(e))
    }

    fn wake_writer(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Queues an operation for a group commit; false (and the operation dropped) if the writer
    /// thread has stopped.
    fn push(&self, op: WriteOp) -> bool {
        let mut p = self.lock_pending();
        if p.stopped {
            return false;
        }
        if p.since.is_none() {
            p.since = Some(Instant::now());
        }
        p.writer_only |= !op.inline();
        p.ops.push(op);
        let wake = std::mem::take(&mut p.writer_asleep);
        drop(p);
        if wake {
            self.wake_writer();
        }
        true
    }

    /// A runtime worker is about to park ([`IdleSignal::notify`]).
    fn on_park(&self) {
        let mut p = self.lock_pending();
        if p.ops.is_empty() {
            return;
        }
        if !p.writer_only {
            drop(p);
            let writer = match self.writer.try_lock() {
                Ok(w) => Some(w),
                Err(TryLockError::Poisoned(e)) => Some(self.poisoned(e)),
                Err(TryLockError::WouldBlock) => None,
            };
            if let Some(mut w) = writer {
                self.commit_pending(&mut w);
                return;
            }
            // A commit is under way: the writer thread takes this batch right after it.
            p = self.lock_pending();
            if p.ops.is_empty() {
                return;
            }
        }
        p.released = true;
        p.writer_asleep = false;
        drop(p);
        self.wake_writer();
    }

    /// Commits up to [`MAX_BATCH`] pending operations, oldest first; the caller holds the
    /// writer. What is left over is released to the writer thread.
    fn commit_pending(&self, w: &mut WriterCore) {
        let (batch, left_over) = {
            let mut p = self.lock_pending();
            let n = p.ops.len().min(MAX_BATCH);
            let batch: Vec<WriteOp> = p.ops.drain(..n).collect();
            p.writer_only = p.ops.iter().any(|op| !op.inline());
            p.released = !p.ops.is_empty();
            if p.ops.is_empty() {
                p.since = None;
            }
            (batch, p.released && std::mem::take(&mut p.writer_asleep))
        };
        if left_over {
            self.wake_writer();
        }
        if !batch.is_empty() {
            let WriterCore { writer, rng } = w;
            *self.lock_committing() = Some(Instant::now());
            writer.commit(batch, rng);
            *self.lock_committing() = None;
        }
    }

    fn lock_committing(&self) -> MutexGuard<'_, Option<Instant>> {
        self.committing_since
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// How long the oldest write still waiting for, or inside, its commit has waited; `None`
    /// when no write is.
    fn busy_for(&self, now: Instant) -> Option<Duration> {
        let pending = self.lock_pending().since;
        let committing = *self.lock_committing();
        [pending, committing]
            .into_iter()
            .flatten()
            .min()
            .map(|t| now.saturating_duration_since(t))
    }

    /// The writer thread: commits what is due ([`CommitPacing`]) until the store is closed,
    /// then checkpoints.
    fn run(&self) {
        let _stop = StopGuard(self);
        let mut last_seen = Instant::now();
        loop {
            let now = Instant::now();
            let wait = {
                let mut p = self.lock_pending();
                match p.since {
                    None if p.closed => break,
                    None => match self.max_delay {
                        Some(d) if now.duration_since(last_seen) < WRITER_LINGER => Some(d),
                        _ => {
                            p.writer_asleep = true;
                            None
                        }
                    },
                    Some(since) => {
                        last_seen = now;
                        let due = match self.max_delay {
                            Some(d) if !p.released && !p.closed => since + d,
                            _ => now,
                        };
                        if due <= now {
                            drop(p);
                            self.commit_pending(&mut self.lock_writer());
                            continue;
                        }
                        Some(due - now)
                    }
                }
            };
            match wait {
                Some(d) => std::thread::park_timeout(d),
                None => std::thread::park(),
            }
        }
        self.lock_writer().writer.shut_down();
    }
}

/// The writer thread's state: group commit.
struct Writer {
    db: Database,
    journal: Journal,
    /// The instances written to the journal since the last checkpoint, per model.
    dirty: HashMap<String, (Arc<ModelState>, BTreeSet<usize>)>,
    models: Models,
    quarantine: Quarantine,
    failure: Failure,
    file: FileIdentity,
    limits: TicketLimits,
    counters: Arc<CommitCounters>,
}

impl Writer {
    fn failed(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// After a commit: the commit went to the file that will be opened again.
    fn committed(&self, r: Result<(), StoreError>) -> Result<(), StoreError> {
        let r = r.and_then(|()| {
            self.file
                .check()
                .map_err(|why| StoreError::Unavailable(why.clone()))
        });
        if let Err(e) = &r {
            fail(&self.failure, e.to_string());
            return Err(StoreError::Unavailable(e.to_string()));
        }
        r
    }

    /// Commits a batch in queue order: creations and deletions in transactions of their own,
    /// each run of updates between them in one group commit.
    fn commit(&mut self, batch: Vec<WriteOp>, rng: &mut rand::rngs::ChaCha20Rng) {
        if let Some(why) = self.failed() {
            for op in batch {
                op.refuse(&why);
            }
            return;
        }
        let mut updates = Vec::new();
        for op in batch {
            match op {
                WriteOp::Create {
                    spec,
                    instances,
                    ack,
                } => {
                    self.commit_updates(std::mem::take(&mut updates), rng);
                    let _ = ack.send(self.create(spec, instances));
                }
                WriteOp::Delete { name, ack } => {
                    self.commit_updates(std::mem::take(&mut updates), rng);
                    let _ = ack.send(self.delete(&name));
                }
                other => updates.push(other),
            }
        }
        self.commit_updates(updates, rng);
    }

    /// At shutdown: leaves an empty journal (recovery would replay it otherwise).
    fn shut_down(&mut self) {
        if self.failed().is_none()
            && let Err(e) = self.checkpoint()
        {
            tracing::error!(error = %e, "the final checkpoint failed; the journal will be replayed");
        }
    }

    /// Writes every instance the journal holds (their current values, which are the journal's
    /// last ones) and the counters of the models it names into the tables, in one durable
    /// transaction that records the journal's last record as checkpointed; the journal then
    /// starts over from offset 0.
    fn checkpoint(&mut self) -> Result<(), StoreError> {
        if self.journal.is_empty() {
            return Ok(());
        }
        let r = (|| -> Result<(), StoreError> {
            let w = durable_write(&self.db)?;
            {
                let mut meta = w.open_table(META).map_err(backend)?;
                let mut inst = w.open_table(INSTANCES).map_err(backend)?;
                for (name, (model, js)) in &self.dirty {
                    // A delete checkpoints first, so this is only a guard.
                    if model.deleted.load(Ordering::Acquire) {
                        continue;
                    }
                    {
                        let instances = model.instances.read().unwrap_or_else(|e| e.into_inner());
                        for &j in js {
                            inst.insert((name.as_str(), j as u32), instances.encoded[j].as_ref())
                                .map_err(backend)?;
                        }
                    }
                    let stored = StoredMeta {
                        spec: (*model.spec).clone(),
                        accepted: model.accepted.load(Ordering::Acquire),
                        rejected: model.rejected.load(Ordering::Acquire),
                    };
                    put_meta(&mut meta, name, &stored)?;
                }
                w.open_table(JOURNAL)
                    .map_err(backend)?
                    .insert(CHECKPOINTED, self.journal.last_seq())
                    .map_err(backend)?;
            }
            w.commit().map_err(backend)
        })();
        self.committed(r)?;
        self.counters.checkpoints.fetch_add(1, Ordering::AcqRel);
        self.dirty.clear();
        self.journal.restart();
        Ok(())
    }

    fn create(&self, spec: ModelSpec, instances: Vec<Vec<f32>>) -> Result<(), StoreError> {
        if let Some(why) = self.failed() {
            return Err(StoreError::Unavailable(why));
        }
        if self
            .models
            .read()
            .map_err(|_| lock_poisoned())?
            .contains_key(&spec.name)
            || self
                .quarantine
                .read()
                .map_err(|_| lock_poisoned())?
                .contains_key(&spec.name)
        {
            return Err(StoreError::Conflict(spec.name));
        }
        if instances.len() != spec.k || instances.iter().any(|w| w.len() != spec.dim) {
            return Err(StoreError::Backend(format!(
                "model `{}`: initial instances do not match k × dim",
                spec.name
            )));
        }
        let r = (|| -> Result<(), StoreError> {
            let w = durable_write(&self.db)?;
            {
                let mut meta = w.open_table(META).map_err(backend)?;
                let mut inst = w.open_table(INSTANCES).map_err(backend)?;
                let stored = StoredMeta {
                    spec: spec.clone(),
                    accepted: 0,
                    rejected: 0,
                };
                put_meta(&mut meta, &spec.name, &stored)?;
                for (i, v) in instances.iter().enumerate() {
                    inst.insert((spec.name.as_str(), i as u32), encode_f32(v).as_slice())
                        .map_err(backend)?;
                }
            }
            w.commit().map_err(backend)
        })();
        self.committed(r)?;
        let instances: Vec<Arc<[f32]>> = instances.into_iter().map(Arc::from).collect();
        let name = spec.name.clone();
        let state = ModelState::new(spec, instances, 0, 0, self.limits)?;
        self.models
            .write()
            .map_err(|_| lock_poisoned())?
            .insert(name, Arc::new(state));
        Ok(())
    }

    fn delete(&mut self, name: &str) -> Result<(), StoreError> {
        if let Some(why) = self.failed() {
            return Err(StoreError::Unavailable(why));
        }
        // The journal then names no incarnation of the model that is about to go.
        self.checkpoint()?;
        let model = self
            .models
            .read()
            .map_err(|_| lock_poisoned())?
            .get(name)
            .cloned();
        let quarantined = self
            .quarantine
            .read()
            .map_err(|_| lock_poisoned())?
            .contains_key(name);
        if model.is_none() && !quarantined {
            return Err(StoreError::NotFound(name.to_string()));
        }
        let r = (|| -> Result<(), StoreError> {
            let w = durable_write(&self.db)?;
            {
                let mut meta = w.open_table(META).map_err(backend)?;
                let mut inst = w.open_table(INSTANCES).map_err(backend)?;
                meta.remove(name).map_err(backend)?;
                // Every instance record of the name, whatever k the (maybe damaged) metadata says.
                inst.retain_in((name, 0u32)..=(name, u32::MAX), |_, _| false)
                    .map_err(backend)?;
            }
            w.commit().map_err(backend)
        })();
        self.committed(r)?;
        if let Some(model) = model {
            model.deleted.store(true, Ordering::Release);
        }
        self.models
            .write()
            .map_err(|_| lock_poisoned())?
            .remove(name);
        self.quarantine
            .write()
            .map_err(|_| lock_poisoned())?
            .remove(name);
        Ok(())
    }

    fn commit_updates(&mut self, ops: Vec<WriteOp>, rng: &mut rand::rngs::ChaCha20Rng) {
        if ops.is_empty() {
            return;
        }
        if let Some(why) = self.failed() {
            for op in ops {
                op.refuse(&why);
            }
            return;
        }
        let mut plans: Vec<Planned> = Vec::new();
        let mut acks: Vec<(Ack<SubmitOutcome>, SubmitOutcome)> = Vec::with_capacity(ops.len());
        for op in ops {
            let (model, ack, outcome, write) = match op {
                WriteOp::Update {
                    model,
                    weights,
                    ack,
                } => (model, ack, SubmitOutcome::Accepted, Some(weights)),
                WriteOp::Reject {
                    model,
                    rejection,
                    ack,
                } => (model, ack, SubmitOutcome::Rejected(rejection), None),
                WriteOp::Create { ack, .. } | WriteOp::Delete { ack, .. } => {
                    let _ = ack.send(Err(StoreError::Backend("misrouted write".into())));
                    continue;
                }
            };
            if model.deleted.load(Ordering::Acquire) {
                let _ = ack.send(Err(StoreError::NotFound(model.spec.name.clone())));
                continue;
            }
            if let Some(w) = &write
                && w.len() != model.spec.dim
            {
                // The length is checked where it is written, whatever the caller did.
                let _ = ack.send(Err(StoreError::Backend(format!(
                    "update of {} weights for model `{}` of dim {}",
                    w.len(),
                    model.spec.name,
                    model.spec.dim
                ))));
                continue;
            }
            let plan = match plans.iter_mut().position(|p| Arc::ptr_eq(&p.model, &model)) {
                Some(i) => &mut plans[i],
                None => {
                    plans.push(Planned {
                        model: model.clone(),
                        writes: Vec::new(),
                        accepted: 0,
                        rejected: 0,
                    });
                    plans.last_mut().expect("just pushed")
                }
            };
            match write {
                Some(w) => {
                    let j = replacement_index(model.spec.k, rng);
                    plan.writes.push((j, w));
                    plan.accepted += 1;
                }
                None => plan.rejected += 1,
            }
            acks.push((ack, outcome));
        }
        if plans.is_empty() {
            // Every operation was answered already (a deleted model, a wrong length).
            return;
        }
        let finals: Vec<Vec<Final>> = plans.iter().map(Planned::finals).collect();
        let (small, large): (Vec<Batch>, Vec<Batch>) = plans
            .iter()
            .zip(&finals)
            .map(|(p, f)| (p, f.as_slice()))
            .partition(|(p, _)| journaled_model(&p.model.spec));
        let mut journaled = false;
        let mut result = Ok(());
        if !small.is_empty() {
            let entries: Vec<Entry<&[u8]>> = small
                .iter()
                .map(|(p, f)| Entry {
                    name: p.model.spec.name.clone(),
                    generation: p.model.spec.generation,
                    accepted: p.accepted,
                    rejected: p.rejected,
                    writes: f
                        .iter()
                        .map(|(j, _, le)| (*j as u32, le.as_ref()))
                        .collect(),
                })
                .collect();
            let len = journal::record_len(&entries);
            journaled = self.journal.could_fit(len);
            result = if journaled {
                let room = match self.journal.fits(len) {
                    true => Ok(()),
                    false => self.checkpoint(),
                };
                room.and_then(|()| self.journal.append(&entries).map_err(backend))
            } else {
                // Larger than the whole journal: straight into the tables, after what it holds.
                self.checkpoint().and_then(|()| self.store_directly(&small))
            };
        }
        if result.is_ok() && !large.is_empty() {
            result = self.store_directly(&large);
        }
        match self.committed(result) {
            Ok(()) => {
                if journaled {
                    for (p, f) in &small {
                        self.dirty
                            .entry(p.model.spec.name.clone())
                            .or_insert_with(|| (p.model.clone(), BTreeSet::new()))
                            .1
                            .extend(f.iter().map(|(j, _, _)| *j));
                    }
                }
                self.counters.commits.fetch_add(1, Ordering::AcqRel);
                self.counters
                    .operations
                    .fetch_add(acks.len() as u64, Ordering::AcqRel);
                for (p, finals) in plans.iter().zip(&finals) {
                    apply_to_memory(p, finals);
                }
                for (ack, outcome) in acks {
                    let _ = ack.send(Ok(outcome));
                }
            }
            Err(e) => {
                for (ack, _) in acks {
                    let _ = ack.send(Err(StoreError::Unavailable(e.to_string())));
                }
            }
        }
    }

    /// One durable transaction with the batch's last values and the models' counters.
    fn store_directly(&self, batch: &[Batch]) -> Result<(), StoreError> {
        let w = durable_write(&self.db)?;
        {
            let mut meta = w.open_table(META).map_err(backend)?;
            let mut inst = w.open_table(INSTANCES).map_err(backend)?;
            for (p, finals) in batch {
                let name = p.model.spec.name.as_str();
                for (j, _, le) in finals.iter() {
                    inst.insert((name, *j as u32), le.as_ref())
                        .map_err(backend)?;
                }
                let stored = StoredMeta {
                    spec: (*p.model.spec).clone(),
                    accepted: p.model.accepted.load(Ordering::Acquire) + p.accepted,
                    rejected: p.model.rejected.load(Ordering::Acquire) + p.rejected,
                };
                put_meta(&mut meta, name, &stored)?;
            }
        }
        w.commit().map_err(backend)
    }
}

impl WriteOp {
    /// Whether a parking worker may commit it ([`IdleSignal::notify`]): an update of a model
    /// whose updates go to the journal (one record and one `fdatasync`). Creations, deletions
    /// and large models' updates (redb transactions) are the writer thread's.
    fn inline(&self) -> bool {
        match self {
            WriteOp::Update { model, .. } | WriteOp::Reject { model, .. } => {
                journaled_model(&model.spec)
            }
            WriteOp::Create { .. } | WriteOp::Delete { .. } => false,
        }
    }

    /// Answers the operation with the store's failure.
    fn refuse(self, why: &str) {
        let e = || StoreError::Unavailable(why.to_string());
        match self {
            WriteOp::Create { ack, .. } | WriteOp::Delete { ack, .. } => {
                let _ = ack.send(Err(e()));
            }
            WriteOp::Update { ack, .. } | WriteOp::Reject { ack, .. } => {
                let _ = ack.send(Err(e()));
            }
        }
    }
}

/// One planned change to a model within a batch.
struct Planned {
    model: Arc<ModelState>,
    /// Overwrites in order (instance index, new value).
    writes: Vec<(usize, Vec<f32>)>,
    accepted: u64,
    rejected: u64,
}

/// An instance's last value in a batch: (index, value, its encoding).
type Final = (usize, Arc<[f32]>, Bytes);

/// A model's part of a batch: what it plans and its last values.
type Batch<'a> = (&'a Planned, &'a [Final]);

/// The largest instance (in bytes) of a model whose updates go to the journal. A larger one's
/// go straight into redb: a batch of them is mostly data, which redb writes once while the
/// journal would write it twice (the record, then the checkpoint); measured at 50,000 weights,
/// the journal was 7–19% slower (docs/history/BENCHMARKS-history.md, "Session 18").
pub const JOURNAL_MAX_INSTANCE_BYTES: usize = 64 << 10;

/// Whether the model's updates go to the journal ([`JOURNAL_MAX_INSTANCE_BYTES`]).
fn journaled_model(spec: &ModelSpec) -> bool {
    spec.dim.saturating_mul(4) <= JOURNAL_MAX_INSTANCE_BYTES
}

impl Planned {
    /// The batch's last value of each overwritten instance: what is stored and becomes visible.
    /// Earlier values of the same instance in the batch are never seen by a draw (memory changes
    /// only after the commit, under one lock), so only these are encoded, stored and given
    /// ticket handles.
    fn finals(&self) -> Vec<Final> {
        let mut last: HashMap<usize, usize> = HashMap::with_capacity(self.writes.len());
        for (n, (j, _)) in self.writes.iter().enumerate() {
            last.insert(*j, n);
        }
        last.into_iter()
            .map(|(j, n)| {
                let w = &self.writes[n].1;
                (j, Arc::from(w.as_slice()), Bytes::from(encode_f32(w)))
            })
            .collect()
    }
}

/// After the commit: installs `finals` (from [`Planned::finals`]), keeping the instances they
/// replace for the tickets that still refer to them, and counts the batch.
fn apply_to_memory(p: &Planned, finals: &[Final]) {
    let m = &p.model;
    // Poisoning cannot happen (no panics while holding these locks); recover anyway.
    let mut inst = m.instances.write().unwrap_or_else(|e| e.into_inner());
    // Only the spam filter reads the running statistics (views recompute from the instances).
    let mut stats = m
        .spec
        .spam
        .is_some()
        .then(|| m.stats.write().unwrap_or_else(|e| e.into_inner()));
    let stale = stats
        .as_deref_mut()
        .is_some_and(|s| track_overwrites(m, s, &inst.weights, &p.writes));
    for (j, w, le) in finals {
        inst.weights[*j] = w.clone();
        inst.encoded[*j] = le.clone();
        let old_handle = std::mem::replace(&mut inst.handles[*j], handle(w));
        m.retired.retire(old_handle);
    }
    if stale
        && let Some(s) = stats.as_deref_mut()
        && let Ok(fresh) = InstanceStats::from_instances(&inst.weights)
    {
        *s = fresh;
    }
    m.accepted.fetch_add(p.accepted, Ordering::AcqRel);
    m.rejected.fetch_add(p.rejected, Ordering::AcqRel);
}

/// Follows every overwrite of `writes`, in order and intermediate values included, in the
/// spam filter's running statistics of `instances` (the values before the batch); `true` if
/// they should be recomputed (issue 16 item 3: lost precision, or every [`RECOMPUTE_EVERY`]
/// overwrites) once the batch is installed.
fn track_overwrites(
    m: &ModelState,
    stats: &mut InstanceStats,
    instances: &[Arc<[f32]>],
    writes: &[(usize, Vec<f32>)],
) -> bool {
    let mut current: HashMap<usize, &[f32]> = HashMap::new();
    let mut stale = false;
    for (j, w) in writes {
        let old = current.insert(*j, w).unwrap_or(&instances[*j]);
        let n = m.overwrites.fetch_add(1, Ordering::AcqRel) + 1;
        stale |= n.is_multiple_of(RECOMPUTE_EVERY) || !stats.replace(old, w);
    }
    stale
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_ddml::engine::SpamFilter;

    /// A batch with several overwrites of the same instance: the spam filter's running
    /// statistics follow every overwrite in order and end where statistics computed afresh from
    /// the installed instances are; the instances are the batch's last values; only the
    /// instances from before the batch that a ticket refers to are kept for tickets.
    #[test]
    fn a_batch_installs_its_last_values_and_tracks_every_overwrite() {
        let spec = ModelSpec {
            name: "s".into(),
            dim: 2,
            k: 3,
            init_std: 1.0,
            spam: Some(SpamFilter::new(8.0, 0.0).unwrap()),
            generation: 1,
            guard: None,
            step_guard: None,
        };
        let start: Vec<Arc<[f32]>> = (0..3)
            .map(|i| Arc::from(vec![i as f32, -(i as f32)]))
            .collect();
        let m = Arc::new(ModelState::new(spec, start, 0, 0, TicketLimits::default()).unwrap());
        // A ticket on instance 1 from before the batch.
        let ticket = {
            let inst = m.instances.read().unwrap();
            m.tickets.issue(&inst.handles[1]).unwrap()
        };
        let p = Planned {
            model: m.clone(),
            writes: vec![
                (1, vec![5.0, 5.0]),
                (2, vec![7.0, -1.0]),
                (1, vec![6.0, 4.0]),
                (1, vec![8.0, 3.0]),
            ],
            accepted: 4,
            rejected: 0,
        };
        let finals = p.finals();
        assert_eq!(finals.len(), 2);
        apply_to_memory(&p, &finals);

        let inst = m.instances.read().unwrap();
        let want: [&[f32]; 3] = [&[0.0, 0.0], &[8.0, 3.0], &[7.0, -1.0]];
        for (j, w) in want.iter().enumerate() {
            assert_eq!(&*inst.weights[j], *w, "instance {j}");
            assert_eq!(decode_f32(&inst.encoded[j]).unwrap(), *w);
            assert_eq!(&**inst.handles[j], *w);
        }
        let fresh = InstanceStats::from_instances(&inst.weights).unwrap();
        let stats = m.stats.read().unwrap();
        for d in 0..2 {
            assert!((stats.mean(d) - fresh.mean(d)).abs() < 1e-12, "mean {d}");
            assert!(
                (stats.variance(d) - fresh.variance(d)).abs() < 1e-9,
                "variance {d}"
            );
        }
        assert_eq!(m.overwrites.load(Ordering::Acquire), 4);
        assert_eq!(m.accepted.load(Ordering::Acquire), 4);
        // The instance the ticket drew was kept for it; nothing else was.
        assert_eq!(m.retired.len(), 1);
        match m.tickets.redeem(ticket) {
            Redeemed::Fresh(base) => assert_eq!(&*base, &[1.0f32, -1.0][..]),
            _ => panic!("the ticket lost its instance"),
        }
    }
}
