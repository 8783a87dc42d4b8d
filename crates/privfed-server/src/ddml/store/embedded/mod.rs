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
use super::{
    Admission, CommitStats, Decision, Drawn, ModelSnapshot, Rejection, Store, SubmitOutcome,
};
use crate::ddml::model::{ModelSpec, decode_f32, encode_f32};
use crate::ddml::ticket::{
    FormerIncarnation, Handle, RetiredInstances, Ticket, TicketBook, TicketKey, TicketLimits,
    TicketMinter, UsedTicket, handle,
};
use crate::http::error::StoreError;
use bytes::Bytes;
use privfed_ddml::decision::SpamStats;
use privfed_ddml::engine::replacement_index;
use privfed_ddml::ticket::Redeem;
use rand::SeedableRng;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock, TryLockError, Weak};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

mod pipeline;
mod replay;
mod writer;

use pipeline::WriterCore;
use pipeline::{Pending, Pipeline, Queue, WRITER_STOPPED};
use replay::{
    durable_write, former_incarnation, load_model, put_meta, put_used, replay, restore_tickets,
};
pub use writer::JOURNAL_MAX_INSTANCE_BYTES;
use writer::Writer;

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
/// Each instance's version ([`crate::ddml::ticket::Instance::version`]), beside its value.
const VERSIONS: TableDefinition<(&str, u32), u64> = TableDefinition::new("instance_versions");
/// Used tickets (model, instance, version drawn, ticket) → expiry (ms since the epoch, u64 LE)
/// and the outcome ([`crate::ddml::store::encode_outcome`]): written at checkpoints (and by
/// commits that bypass the journal); a row matters only while its instance holds that version.
const USED: TableDefinition<(&str, u32, u64, u128), &[u8]> = TableDefinition::new("used_tickets");
/// The incarnation of each model name deleted last ([`FormerIncarnation::to_bytes`]), written
/// by the deletion's transaction and read when the name is created again or loaded, so that its
/// tickets answer `ticket_for_another_model`; rows older than a ticket lifetime are dropped at
/// the next deletion.
const FORMER: TableDefinition<&str, &[u8]> = TableDefinition::new("former_incarnations");
/// The store's secrets: [`TICKET_KEY`].
const SECRETS: TableDefinition<&str, &[u8]> = TableDefinition::new("secrets");
/// The key of the tickets' tags ([`TicketKey`]), 32 bytes.
const TICKET_KEY: &str = "ticket_key";

/// The most operations folded into one commit.
const MAX_BATCH: usize = 4096;

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
    /// What tickets refer to ([`crate::ddml::ticket::Handle`]), with each value's version.
    handles: Vec<Handle>,
}

struct ModelState {
    spec: Arc<ModelSpec>,
    instances: RwLock<Instances>,
    /// The spam filter's statistics (followed only for models that have one).
    stats: RwLock<SpamStats>,
    accepted: AtomicU64,
    rejected: AtomicU64,
    deleted: AtomicBool,
    tickets: TicketBook<SubmitOutcome>,
    retired: RetiredInstances,
}

impl ModelState {
    /// A model's state with its instances and their versions (as many), its counters, the
    /// store's ticket key, and the incarnation deleted before it under its name, if its
    /// tickets may still be presented.
    fn new(
        spec: ModelSpec,
        instances: Vec<Arc<[f32]>>,
        versions: &[u64],
        (accepted, rejected): (u64, u64),
        limits: TicketLimits,
        key: &TicketKey,
        former: Option<FormerIncarnation>,
    ) -> Result<Self, StoreError> {
        if versions.len() != instances.len() {
            return Err(StoreError::Backend(format!(
                "model `{}`: {} instance versions for {} instances",
                spec.name,
                versions.len(),
                instances.len()
            )));
        }
        let stats = SpamStats::new(&instances).map_err(backend)?;
        let (k, dim) = (spec.k, spec.dim);
        // Only a model whose updates need their draw's ticket protects young tickets: without a
        // guard a ticket only answers retries, and a full book forgets its oldest as before
        // rather than make draws wait.
        let limits = if crate::ddml::store::needs_ticket(&spec) {
            limits
        } else {
            TicketLimits {
                min_age: Duration::ZERO,
                ..limits
            }
        };
        let minter = TicketMinter::new(key, &spec.name, spec.generation);
        let mut tickets = TicketBook::new(limits, minter);
        if let Some(f) = former {
            tickets = tickets.with_former(key, &spec.name, f);
        }
        Ok(Self {
            spec: Arc::new(spec),
            instances: RwLock::new(Instances {
                encoded: instances
                    .iter()
                    .map(|w| Bytes::from(encode_f32(w)))
                    .collect(),
                handles: instances
                    .iter()
                    .zip(versions)
                    .map(|(w, v)| handle(w, *v))
                    .collect(),
                weights: instances,
            }),
            stats: RwLock::new(stats),
            accepted: AtomicU64::new(accepted),
            rejected: AtomicU64::new(rejected),
            deleted: AtomicBool::new(false),
            tickets,
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
        /// The instance the engine chose to overwrite.
        instance: usize,
        /// Made an `Arc` by the writer (the copy off the request path).
        weights: Vec<f32>,
        /// The ticket the update uses, recorded durably with it.
        used: Option<UsedTicket>,
        ack: Ack<SubmitOutcome>,
    },
    Reject {
        model: Arc<ModelState>,
        rejection: Rejection,
        /// The ticket the update uses, recorded durably with its rejection.
        used: Option<UsedTicket>,
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
        let (checkpointed, tag, key) = {
            let w = durable_write(&db)?;
            w.open_table(META).map_err(backend)?;
            w.open_table(INSTANCES).map_err(backend)?;
            w.open_table(VERSIONS).map_err(backend)?;
            w.open_table(USED).map_err(backend)?;
            w.open_table(FORMER).map_err(backend)?;
            let c = {
                let t = w.open_table(JOURNAL).map_err(backend)?;
                let get = |key| Ok(t.get(key).map_err(backend)?.map(|v| v.value()));
                (get(CHECKPOINTED)?, get(TAG)?)
            };
            // The tickets' key: made once (a store from before it gets one now).
            let key = {
                let mut t = w.open_table(SECRETS).map_err(backend)?;
                let stored = t
                    .get(TICKET_KEY)
                    .map_err(backend)?
                    .map(|v| <[u8; 32]>::try_from(v.value()));
                match stored {
                    Some(Ok(bytes)) => TicketKey::from_bytes(bytes),
                    Some(Err(_)) => {
                        return Err(StoreError::Backend(
                            "the store's ticket key is not 32 bytes".into(),
                        ));
                    }
                    None => {
                        let key = TicketKey::random();
                        t.insert(TICKET_KEY, key.to_bytes().as_slice())
                            .map_err(backend)?;
                        key
                    }
                }
            };
            w.commit().map_err(backend)?;
            (c.0, c.1, key)
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
            let versions = r.open_table(VERSIONS).map_err(backend)?;
            let former = r.open_table(FORMER).map_err(backend)?;
            for entry in meta.iter().map_err(backend)? {
                let (name_key, v) = entry.map_err(backend)?;
                let name = name_key.value().to_string();
                let before = former_incarnation(&former, &name, limits.ttl)?;
                match load_model(&name, v.value(), (&inst, &versions), limits, &key, before) {
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
        restore_tickets(&db, &map)?;
        let models: Models = Arc::new(RwLock::new(map));
        let quarantine: Quarantine = Arc::new(RwLock::new(quarantine));
        let failure: Failure = Arc::new(Mutex::new(None));
        let counters = Arc::new(CommitCounters::default());
        let writer = Writer {
            db,
            journal,
            dirty: HashMap::new(),
            key,
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

    /// [`Store::apply`] with the engine's decision made here, or [`Store::persist`] of a given
    /// one: queues it and waits (at most the commit deadline) for its commit.
    async fn apply_decided(
        &self,
        name: &str,
        admitted: EmbeddedAdmission,
        weights: Vec<f32>,
        decision: Option<Decision>,
    ) -> Result<SubmitOutcome, StoreError> {
        if weights.len() != admitted.model.spec.dim
            || admitted.model.deleted.load(Ordering::Acquire)
        {
            return Err(StoreError::NotFound(name.to_string()));
        }
        let mut rx = self.decide_and_queue(&admitted, weights, decision)?;
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

    fn stall_error(&self) -> StoreError {
        StoreError::Unavailable(format!(
            "a commit has not completed within the {} ms deadline (stalled disk?)",
            self.deadline.as_millis()
        ))
    }

    /// Has the engine decide on an admitted update (guard, spam filter, the instance to
    /// overwrite) unless `decision` is given, and queues the decision for the next group
    /// commit; the receiver answers once it is durable.
    fn decide_and_queue(
        &self,
        admitted: &EmbeddedAdmission,
        weights: Vec<f32>,
        decision: Option<Decision>,
    ) -> Result<oneshot::Receiver<Result<SubmitOutcome, StoreError>>, StoreError> {
        let model = admitted.model.clone();
        let used = admitted.used();
        let decision = match decision {
            Some(d) => d,
            None => {
                // The spam filter's statistics, read-locked only for models that have one.
                let stats = match model.spec.spam {
                    Some(_) => Some(model.stats.read().map_err(|_| lock_poisoned())?),
                    None => None,
                };
                crate::ddml::store::decide(
                    &model.spec,
                    admitted.base.as_deref(),
                    &weights,
                    stats.as_deref().map(SpamStats::instances),
                )?
            }
        };
        if let Decision::Write { instance } = decision
            && instance >= model.spec.k
        {
            return Err(StoreError::Backend(format!(
                "a write of instance {instance} of model `{}` with k = {}",
                model.spec.name, model.spec.k
            )));
        }
        self.queue_op(|ack| match decision {
            Decision::Write { instance } => WriteOp::Update {
                model,
                instance,
                weights,
                used,
                ack,
            },
            Decision::Reject(rejection) => WriteOp::Reject {
                model,
                rejection,
                used,
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
    /// The version of the instance the ticket drew.
    version: u64,
}

impl EmbeddedAdmission {
    /// The durable record of the ticket's use, if the update has a ticket.
    fn used(&self) -> Option<UsedTicket> {
        self.ticket
            .map(|t| self.model.tickets.used_record(t, self.version))
    }

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
            .issue(&inst.handles[i], i)
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
            if crate::ddml::store::needs_ticket(&model.spec) {
                return Err(StoreError::TicketRequired);
            }
            return Ok(Admission::Admitted(EmbeddedAdmission {
                model,
                base: None,
                ticket: None,
                version: 0,
            }));
        };
        // A ticket from before a restart is checked against the instance it names as it is now.
        let current = |j: usize| {
            let inst = model.instances.read().unwrap_or_else(|e| e.into_inner());
            inst.handles.get(j).cloned()
        };
        match model.tickets.redeem(t, current) {
            Redeem::Fresh(drawn) => Ok(Admission::Admitted(EmbeddedAdmission {
                base: Some(drawn.weights.clone()),
                version: drawn.version,
                model,
                ticket: Some(t),
            })),
            Redeem::Replay(o) => Ok(Admission::Replayed(o)),
            Redeem::InProgress => Err(StoreError::TicketInUse),
            Redeem::Refuse(why) => Err(StoreError::TicketInvalid(why)),
        }
    }

    async fn apply(
        &self,
        name: &str,
        admitted: EmbeddedAdmission,
        weights: Vec<f32>,
    ) -> Result<SubmitOutcome, StoreError> {
        self.apply_decided(name, admitted, weights, None).await
    }

    async fn persist(
        &self,
        name: &str,
        admitted: EmbeddedAdmission,
        decision: Decision,
        weights: Vec<f32>,
    ) -> Result<SubmitOutcome, StoreError> {
        self.apply_decided(name, admitted, weights, Some(decision))
            .await
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

    async fn spam_stats(&self, name: &str) -> Result<Option<SpamStats>, StoreError> {
        let m = self.get(name)?;
        if m.spec.spam.is_none() {
            return Ok(None);
        }
        let stats = m.stats.read().map_err(|_| lock_poisoned())?.clone();
        Ok(Some(stats))
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
