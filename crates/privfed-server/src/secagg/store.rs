//! Where secure-aggregation rounds are kept: a record per round (its configuration, stage and
//! joined clients) and every accepted client message, by (round, stage, client).
//!
//! The coordinator rebuilds a round's state machine by replaying its messages stage by stage, so
//! storing each message before acknowledging it is enough for a round to survive a crash: after
//! a restart, the same messages give the same state (the protocol's server is deterministic in
//! them). [`EmbeddedRoundStore`] keeps them in a redb file (`secagg.redb` beside the model store)
//! and commits every write durably before it returns.

use std::path::Path;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use privfed_secagg::{ClientId, RoundConfig};

use crate::error::StoreError;

/// The file of the embedded round store, in the server's data directory.
pub const ROUNDS_FILE: &str = "secagg.redb";

/// Where a stored round is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StoredStatus {
    /// Collecting the messages of stage `stage` (0 = advertise keys … 3 = unmasking).
    Collecting {
        /// Index in [`privfed_secagg::Stage::ALL`].
        stage: u8,
    },
    /// The sum is known (stored as the message of stage [`RESULT_STAGE`]).
    Finished,
    /// The round stopped; nothing was revealed.
    Aborted {
        /// Why.
        reason: String,
    },
}

/// The stage index under which a finished round's aggregate is stored.
pub const RESULT_STAGE: u8 = 4;

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
    /// Bumped by every update (compare-and-set).
    pub version: u64,
}

/// What [`RoundStore::put_message`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// Stored.
    Stored,
    /// This client's message for this stage was stored before, with the same bytes.
    Duplicate,
    /// This client's message for this stage was stored before, with other bytes.
    Conflict,
}

/// Persistence of secure-aggregation rounds.
pub trait RoundStore: Send + Sync + 'static {
    /// Stores a new round; [`StoreError::Conflict`] if the id exists.
    fn create_round(&self, id: &str, record: &RoundRecord) -> Result<(), StoreError>;
    /// Every stored round.
    fn rounds(&self) -> Result<Vec<(String, RoundRecord)>, StoreError>;
    /// Replaces a round's record if its stored version is `expected_version`; `false` if not.
    fn update_round(
        &self,
        id: &str,
        expected_version: u64,
        record: &RoundRecord,
    ) -> Result<bool, StoreError>;
    /// Stores a client's message of a stage unless one is there.
    fn put_message(
        &self,
        id: &str,
        stage: u8,
        client: ClientId,
        bytes: &[u8],
    ) -> Result<PutOutcome, StoreError>;
    /// A stage's messages, by increasing client id.
    fn messages(&self, id: &str, stage: u8) -> Result<Vec<(ClientId, Vec<u8>)>, StoreError>;
    /// Removes a round and its messages.
    fn delete_round(&self, id: &str) -> Result<(), StoreError>;
}

const ROUNDS: TableDefinition<&str, &[u8]> = TableDefinition::new("secagg_rounds");
const MESSAGES: TableDefinition<(&str, u8, u32), &[u8]> = TableDefinition::new("secagg_messages");

fn backend<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn unavailable<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Unavailable(e.to_string())
}

fn decode_record(id: &str, bytes: &[u8]) -> Result<RoundRecord, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Backend(format!("round {id}: {e}")))
}

/// Rounds in a redb file; every write is committed with immediate durability (fsync) before
/// the call returns.
pub struct EmbeddedRoundStore {
    db: Database,
}

impl std::fmt::Debug for EmbeddedRoundStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedRoundStore").finish_non_exhaustive()
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
        Ok(EmbeddedRoundStore { db })
    }

    fn write<T>(
        &self,
        f: impl FnOnce(&redb::WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut w = self.db.begin_write().map_err(unavailable)?;
        w.set_durability(Durability::Immediate).map_err(backend)?;
        let out = f(&w)?;
        w.commit().map_err(unavailable)?;
        Ok(out)
    }
}

impl RoundStore for EmbeddedRoundStore {
    fn create_round(&self, id: &str, record: &RoundRecord) -> Result<(), StoreError> {
        let bytes = serde_json::to_vec(record).map_err(backend)?;
        self.write(|w| {
            let mut t = w.open_table(ROUNDS).map_err(backend)?;
            if t.get(id).map_err(backend)?.is_some() {
                return Err(StoreError::Conflict(id.to_string()));
            }
            t.insert(id, bytes.as_slice()).map_err(backend)?;
            Ok(())
        })
    }

    fn rounds(&self) -> Result<Vec<(String, RoundRecord)>, StoreError> {
        let r = self.db.begin_read().map_err(backend)?;
        let t = r.open_table(ROUNDS).map_err(backend)?;
        let mut out = Vec::new();
        for entry in t.iter().map_err(backend)? {
            let (k, v) = entry.map_err(backend)?;
            out.push((k.value().to_string(), decode_record(k.value(), v.value())?));
        }
        Ok(out)
    }

    fn update_round(
        &self,
        id: &str,
        expected_version: u64,
        record: &RoundRecord,
    ) -> Result<bool, StoreError> {
        let bytes = serde_json::to_vec(record).map_err(backend)?;
        self.write(|w| {
            let mut t = w.open_table(ROUNDS).map_err(backend)?;
            let current = match t.get(id).map_err(backend)? {
                Some(v) => decode_record(id, v.value())?,
                None => return Err(StoreError::NotFound(id.to_string())),
            };
            if current.version != expected_version {
                return Ok(false);
            }
            t.insert(id, bytes.as_slice()).map_err(backend)?;
            Ok(true)
        })
    }

    fn put_message(
        &self,
        id: &str,
        stage: u8,
        client: ClientId,
        bytes: &[u8],
    ) -> Result<PutOutcome, StoreError> {
        self.write(|w| {
            let mut t = w.open_table(MESSAGES).map_err(backend)?;
            if let Some(prev) = t.get((id, stage, client)).map_err(backend)? {
                return Ok(if prev.value() == bytes {
                    PutOutcome::Duplicate
                } else {
                    PutOutcome::Conflict
                });
            }
            t.insert((id, stage, client), bytes).map_err(backend)?;
            Ok(PutOutcome::Stored)
        })
    }

    fn messages(&self, id: &str, stage: u8) -> Result<Vec<(ClientId, Vec<u8>)>, StoreError> {
        let r = self.db.begin_read().map_err(backend)?;
        let t = r.open_table(MESSAGES).map_err(backend)?;
        let mut out = Vec::new();
        for entry in t
            .range((id, stage, 0u32)..=(id, stage, u32::MAX))
            .map_err(backend)?
        {
            let (k, v) = entry.map_err(backend)?;
            out.push((k.value().2, v.value().to_vec()));
        }
        Ok(out)
    }

    fn delete_round(&self, id: &str) -> Result<(), StoreError> {
        self.write(|w| {
            let mut rounds = w.open_table(ROUNDS).map_err(backend)?;
            if rounds.remove(id).map_err(backend)?.is_none() {
                return Err(StoreError::NotFound(id.to_string()));
            }
            let mut msgs = w.open_table(MESSAGES).map_err(backend)?;
            let keys: Vec<(String, u8, u32)> = msgs
                .range((id, 0u8, 0u32)..=(id, u8::MAX, u32::MAX))
                .map_err(backend)?
                .map(|e| e.map(|(k, _)| (k.value().0.to_string(), k.value().1, k.value().2)))
                .collect::<Result<_, _>>()
                .map_err(backend)?;
            for (r, s, c) in keys {
                msgs.remove((r.as_str(), s, c)).map_err(backend)?;
            }
            Ok(())
        })
    }
}
