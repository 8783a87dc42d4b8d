//! Where secure-aggregation rounds are kept: a record per round (its configuration, stage and
//! joined clients) and every accepted client message, by (round, stage, client).
//!
//! The coordinator rebuilds a round's state machine by replaying its messages stage by stage, so
//! storing each message before acknowledging it is enough for a round to survive a crash: after
//! a restart, the same messages give the same state (the protocol's server is deterministic in
//! them, whatever their order within a stage).
//!
//! ## The contract (both stores; `tests/it/secagg_store.rs` checks it against each)
//! * A round's **version** advances with every change of the round and never goes back: it is
//!   set at creation, every stored message advances it by exactly one and every
//!   [`RoundStore::update_round`] sets it to the new record's (greater) version — one more, but
//!   for the coordinator's abort of a round whose store went back in time. So a replica built at
//!   version `v` is current exactly when the stored version is still `v`.
//! * [`RoundStore::update_round`] is a compare-and-set on the version: of several processes that
//!   try to close the same stage from the same version, exactly one succeeds. A finished or
//!   aborted round never changes again (only deletion removes it).
//! * [`RoundStore::put_message`] stores a message only while the round collects that stage, so a
//!   stage's messages cannot change once a compare-and-set moved the round past it (a late
//!   message from a process with a stale replica is refused with [`PutOutcome::StageClosed`]).
//!   A message is put-if-absent: a retry with the same bytes is [`PutOutcome::Duplicate`], other
//!   bytes [`PutOutcome::Conflict`]; neither changes anything.
//! * Messages are listed by increasing client id; deleting a round removes its record, its
//!   messages and its result.
//! * Every acknowledged write is durable as the store promises ([`RoundStore::durable_acks`]);
//!   an outage is [`StoreError::Unavailable`] (503 with `Retry-After`), never a wrong answer.
//!
//! [`EmbeddedRoundStore`] keeps rounds in a redb file (`secagg.redb` beside the model store) and
//! commits every write durably before it returns; one process serves its rounds.
//! [`redis::RedisRoundStore`] keeps them in Redis, so several server processes serve one round.

pub mod redis;

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use privfed_secagg::{ClientId, Roster, RoundConfig};

use crate::http::error::StoreError;

/// The file of the embedded round store, in the server's data directory.
pub const ROUNDS_FILE: &str = "secagg.redb";

/// Where a stored round is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredStatus {
    /// Collecting the messages of stage `stage` (0 = advertise keys … 3 = unmasking).
    Collecting {
        /// Index in the round's [`privfed_secagg::RoundConfig::stages`].
        stage: u8,
    },
    /// The sum is known (stored as the message of client 0 at [`result_stage`]).
    Finished,
    /// The round stopped; nothing was revealed.
    Aborted {
        /// Why.
        reason: String,
    },
}

/// The stage index under which a finished honest-but-curious round's aggregate is stored (one
/// past its four stages); [`result_stage`] gives it for any round.
pub const RESULT_STAGE: u8 = 4;

/// The stage index under which a finished round's aggregate is stored: one past the round's own
/// stages (4 for an honest-but-curious round, 5 for an active one).
pub fn result_stage(config: &RoundConfig) -> u8 {
    config.stages().len() as u8
}

/// A round as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoundRecord {
    /// The protocol's public configuration.
    pub config: RoundConfig,
    /// Where the round is.
    pub status: StoredStatus,
    /// When the current stage opened (milliseconds since the Unix epoch).
    pub stage_opened_ms: u64,
    /// How long each stage stays open at most.
    pub stage_timeout_ms: u64,
    /// SHA-256 of each joined client's token, by client id − 1.
    pub joined: Vec<[u8; 32]>,
    /// Active rounds: the roster of devices that may join (the join credential is a device
    /// signature; the round's configuration names this roster's digest).
    #[serde(default)]
    pub roster: Option<Roster>,
    /// Active rounds: the device key of each joined client, by client id − 1 (one id per
    /// device).
    #[serde(default)]
    pub devices: Vec<[u8; 32]>,
    /// Honest-but-curious rounds created with join tickets (the default): SHA-256 of each
    /// ticket the administrator was handed, with whether it was used. `None`: an open round,
    /// which anyone may join (created with `"open": true`, or stored before rounds had tickets).
    #[serde(default)]
    pub join_tickets: Option<Vec<JoinTicket>>,
    /// Advanced by one by every change of the round (compare-and-set of the record, or a stored
    /// message): see the [module documentation](self).
    pub version: u64,
}

/// One join ticket of an honest-but-curious round, as stored: the SHA-256 of the ticket (the
/// ticket itself is handed to the administrator once and never stored) and whether a client
/// joined with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinTicket {
    /// SHA-256 of the ticket's hex text.
    pub digest: [u8; 32],
    /// A client has joined with it (a ticket admits one client).
    pub used: bool,
}

/// What [`RoundStore::put_message`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// Stored; the round is now at this version.
    Stored {
        /// The round's version after the message (one more than before).
        version: u64,
    },
    /// This client's message for this stage was stored before, with the same bytes.
    Duplicate,
    /// This client's message for this stage was stored before, with other bytes.
    Conflict,
    /// The round is not collecting this stage (it moved on, or is over): nothing was stored.
    StageClosed,
}

/// The future of a [`RoundStore`] operation (boxed, so the coordinator can hold an
/// `Arc<dyn RoundStore>`).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Persistence of secure-aggregation rounds (the contract is in the
/// [module documentation](self)).
pub trait RoundStore: Send + Sync + 'static {
    /// Stores a new round; [`StoreError::Conflict`] if the id exists.
    fn create_round<'a>(&'a self, id: &'a str, record: &'a RoundRecord) -> StoreFuture<'a, ()>;
    /// Every stored round.
    fn rounds(&self) -> StoreFuture<'_, Vec<(String, RoundRecord)>>;
    /// One round's record, `None` if there is no such round.
    fn round<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<RoundRecord>>;
    /// One round's version (cheaper than its record), `None` if there is no such round.
    fn version<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<u64>>;
    /// Replaces a round's record if its stored version is `expected_version` and the round is
    /// still collecting (`false` if not; [`StoreError::NotFound`] if there is no such round).
    /// `record.version` must be greater than `expected_version`. With `result`, also stores the
    /// round's aggregate (as the message of client 0 at [`result_stage`]) in the same atomic
    /// write.
    fn update_round<'a>(
        &'a self,
        id: &'a str,
        expected_version: u64,
        record: &'a RoundRecord,
        result: Option<&'a [u8]>,
    ) -> StoreFuture<'a, bool>;
    /// Stores a client's message of a stage unless one is there, and only while the round
    /// collects that stage; [`StoreError::NotFound`] if there is no such round.
    fn put_message<'a>(
        &'a self,
        id: &'a str,
        stage: u8,
        client: ClientId,
        bytes: &'a [u8],
    ) -> StoreFuture<'a, PutOutcome>;
    /// The clients whose message of a stage is stored, increasing.
    fn message_clients<'a>(&'a self, id: &'a str, stage: u8) -> StoreFuture<'a, Vec<ClientId>>;
    /// The stored messages of a stage from `clients` (those absent are skipped), by increasing
    /// client id.
    fn messages_of<'a>(
        &'a self,
        id: &'a str,
        stage: u8,
        clients: &'a [ClientId],
    ) -> StoreFuture<'a, Vec<(ClientId, Vec<u8>)>>;
    /// A stage's messages, by increasing client id.
    fn messages<'a>(&'a self, id: &'a str, stage: u8) -> StoreFuture<'a, Vec<(ClientId, Vec<u8>)>> {
        Box::pin(async move {
            let clients = self.message_clients(id, stage).await?;
            self.messages_of(id, stage, &clients).await
        })
    }
    /// Removes a round, its messages and its result; [`StoreError::NotFound`] if there is none.
    fn delete_round<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()>;
    /// Whether an acknowledged write survives a crash of the store's backend (`false` only for
    /// a Redis store run with best-effort durability; the API then answers `"durable": false`).
    fn durable_acks(&self) -> bool {
        true
    }
}

/// The status as the stores index it: the stage being collected (`"0"`..`"3"`), `"f"`
/// (finished) or `"a"` (aborted). [`RoundStore::put_message`] of stage `s` needs `"s"`.
pub(crate) fn status_code(status: &StoredStatus) -> String {
    match status {
        StoredStatus::Collecting { stage } => stage.to_string(),
        StoredStatus::Finished => "f".into(),
        StoredStatus::Aborted { .. } => "a".into(),
    }
}

/// Checks that a new record advances the version (a coordinator bug otherwise: refused, so a
/// replica can never mistake a changed round for its own version).
pub(crate) fn check_advance(
    id: &str,
    expected_version: u64,
    record: &RoundRecord,
) -> Result<(), StoreError> {
    if record.version > expected_version {
        Ok(())
    } else {
        Err(StoreError::Backend(format!(
            "round {id}: a new record must have a version above {expected_version}, not {}",
            record.version
        )))
    }
}

const ROUNDS: TableDefinition<&str, &[u8]> = TableDefinition::new("secagg_rounds");
const MESSAGES: TableDefinition<(&str, u8, u32), &[u8]> = TableDefinition::new("secagg_messages");

fn backend<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn unavailable<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

pub(crate) fn decode_record(id: &str, bytes: &[u8]) -> Result<RoundRecord, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Backend(format!("round {id}: {e}")))
}

/// Rounds in a redb file; every write is committed with immediate durability (fsync) before
/// the call returns. The file is opened by one process at a time.
pub struct EmbeddedRoundStore {
    db: Arc<Database>,
}

impl std::fmt::Debug for EmbeddedRoundStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedRoundStore").finish_non_exhaustive()
    }
}

/// Runs a redb operation off the async workers (redb blocks on fsync).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Backend(format!("store task failed: {e}")))?
}

fn write<T>(
    db: &Database,
    f: impl FnOnce(&redb::WriteTransaction) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut w = db.begin_write().map_err(unavailable)?;
    w.set_durability(Durability::Immediate).map_err(backend)?;
    let out = f(&w)?;
    w.commit().map_err(unavailable)?;
    Ok(out)
}

fn read_record(
    t: &impl ReadableTable<&'static str, &'static [u8]>,
    id: &str,
) -> Result<Option<RoundRecord>, StoreError> {
    match t.get(id).map_err(backend)? {
        Some(v) => Ok(Some(decode_record(id, v.value())?)),
        None => Ok(None),
    }
}

impl EmbeddedRoundStore {
    /// Opens `DIR/secagg.redb`, creating it if absent.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(backend)?;
        let db = Database::create(data_dir.join(ROUNDS_FILE)).map_err(backend)?;
        let w = db.begin_write().map_err(backend)?;
        w.open_table(ROUNDS).map_err(backend)?;
        w.open_table(MESSAGES).map_err(backend)?;
        w.commit().map_err(backend)?;
        Ok(EmbeddedRoundStore { db: Arc::new(db) })
    }

    fn read_round(&self, id: &str) -> StoreFuture<'static, Option<RoundRecord>> {
        let (db, id) = (self.db.clone(), id.to_string());
        Box::pin(blocking(move || {
            let r = db.begin_read().map_err(backend)?;
            let t = r.open_table(ROUNDS).map_err(backend)?;
            read_record(&t, &id)
        }))
    }
}

impl RoundStore for EmbeddedRoundStore {
    fn create_round<'a>(&'a self, id: &'a str, record: &'a RoundRecord) -> StoreFuture<'a, ()> {
        let (db, id, bytes) = (self.db.clone(), id.to_string(), serde_json::to_vec(record));
        Box::pin(async move {
            let bytes = bytes.map_err(backend)?;
            blocking(move || {
                write(&db, |w| {
                    let mut t = w.open_table(ROUNDS).map_err(backend)?;
                    if t.get(id.as_str()).map_err(backend)?.is_some() {
                        return Err(StoreError::Conflict(id.clone()));
                    }
                    t.insert(id.as_str(), bytes.as_slice()).map_err(backend)?;
                    Ok(())
                })
            })
            .await
        })
    }

    fn rounds(&self) -> StoreFuture<'_, Vec<(String, RoundRecord)>> {
        let db = self.db.clone();
        Box::pin(blocking(move || {
            let r = db.begin_read().map_err(backend)?;
            let t = r.open_table(ROUNDS).map_err(backend)?;
            let mut out = Vec::new();
            for entry in t.iter().map_err(backend)? {
                let (k, v) = entry.map_err(backend)?;
                out.push((k.value().to_string(), decode_record(k.value(), v.value())?));
            }
            Ok(out)
        }))
    }

    fn round<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<RoundRecord>> {
        self.read_round(id)
    }

    fn version<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<u64>> {
        let read = self.read_round(id);
        Box::pin(async move { Ok(read.await?.map(|r| r.version)) })
    }

    fn update_round<'a>(
        &'a self,
        id: &'a str,
        expected_version: u64,
        record: &'a RoundRecord,
        result: Option<&'a [u8]>,
    ) -> StoreFuture<'a, bool> {
        let checked = check_advance(id, expected_version, record)
            .and_then(|()| serde_json::to_vec(record).map_err(backend));
        let (db, id, result) = (self.db.clone(), id.to_string(), result.map(<[u8]>::to_vec));
        Box::pin(async move {
            let bytes = checked?;
            let result_at = result_stage(&record.config);
            blocking(move || {
                write(&db, |w| {
                    let mut t = w.open_table(ROUNDS).map_err(backend)?;
                    let current =
                        read_record(&t, &id)?.ok_or_else(|| StoreError::NotFound(id.clone()))?;
                    let collecting = matches!(current.status, StoredStatus::Collecting { .. });
                    if current.version != expected_version || !collecting {
                        return Ok(false);
                    }
                    t.insert(id.as_str(), bytes.as_slice()).map_err(backend)?;
                    if let Some(result) = &result {
                        let mut m = w.open_table(MESSAGES).map_err(backend)?;
                        m.insert((id.as_str(), result_at, 0u32), result.as_slice())
                            .map_err(backend)?;
                    }
                    Ok(true)
                })
            })
            .await
        })
    }

    fn put_message<'a>(
        &'a self,
        id: &'a str,
        stage: u8,
        client: ClientId,
        bytes: &'a [u8],
    ) -> StoreFuture<'a, PutOutcome> {
        let (db, id, bytes) = (self.db.clone(), id.to_string(), bytes.to_vec());
        Box::pin(blocking(move || {
            write(&db, |w| {
                let mut rounds = w.open_table(ROUNDS).map_err(backend)?;
                let mut record =
                    read_record(&rounds, &id)?.ok_or_else(|| StoreError::NotFound(id.clone()))?;
                if record.status != (StoredStatus::Collecting { stage }) {
                    return Ok(PutOutcome::StageClosed);
                }
                let mut t = w.open_table(MESSAGES).map_err(backend)?;
                if let Some(prev) = t.get((id.as_str(), stage, client)).map_err(backend)? {
                    return Ok(if prev.value() == bytes.as_slice() {
                        PutOutcome::Duplicate
                    } else {
                        PutOutcome::Conflict
                    });
                }
                t.insert((id.as_str(), stage, client), bytes.as_slice())
                    .map_err(backend)?;
                record.version += 1;
                let encoded = serde_json::to_vec(&record).map_err(backend)?;
                rounds
                    .insert(id.as_str(), encoded.as_slice())
                    .map_err(backend)?;
                Ok(PutOutcome::Stored {
                    version: record.version,
                })
            })
        }))
    }

    fn message_clients<'a>(&'a self, id: &'a str, stage: u8) -> StoreFuture<'a, Vec<ClientId>> {
        let (db, id) = (self.db.clone(), id.to_string());
        Box::pin(blocking(move || {
            let r = db.begin_read().map_err(backend)?;
            let t = r.open_table(MESSAGES).map_err(backend)?;
            let mut out = Vec::new();
            for entry in t
                .range((id.as_str(), stage, 0u32)..=(id.as_str(), stage, u32::MAX))
                .map_err(backend)?
            {
                let (k, _) = entry.map_err(backend)?;
                out.push(k.value().2);
            }
            Ok(out)
        }))
    }

    fn messages_of<'a>(
        &'a self,
        id: &'a str,
        stage: u8,
        clients: &'a [ClientId],
    ) -> StoreFuture<'a, Vec<(ClientId, Vec<u8>)>> {
        let (db, id) = (self.db.clone(), id.to_string());
        let mut clients = clients.to_vec();
        clients.sort_unstable();
        clients.dedup();
        Box::pin(blocking(move || {
            let r = db.begin_read().map_err(backend)?;
            let t = r.open_table(MESSAGES).map_err(backend)?;
            let mut out = Vec::new();
            for c in clients {
                if let Some(v) = t.get((id.as_str(), stage, c)).map_err(backend)? {
                    out.push((c, v.value().to_vec()));
                }
            }
            Ok(out)
        }))
    }

    fn delete_round<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        let (db, id) = (self.db.clone(), id.to_string());
        Box::pin(blocking(move || {
            write(&db, |w| {
                let mut rounds = w.open_table(ROUNDS).map_err(backend)?;
                if rounds.remove(id.as_str()).map_err(backend)?.is_none() {
                    return Err(StoreError::NotFound(id.clone()));
                }
                let mut msgs = w.open_table(MESSAGES).map_err(backend)?;
                let keys: Vec<(u8, u32)> = msgs
                    .range((id.as_str(), 0u8, 0u32)..=(id.as_str(), u8::MAX, u32::MAX))
                    .map_err(backend)?
                    .map(|e| e.map(|(k, _)| (k.value().1, k.value().2)))
                    .collect::<Result<_, _>>()
                    .map_err(backend)?;
                for (s, c) in keys {
                    msgs.remove((id.as_str(), s, c)).map_err(backend)?;
                }
                Ok(())
            })
        }))
    }
}
