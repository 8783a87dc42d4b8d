//! Secure-aggregation rounds in Redis (`privfed serve --store redis://…`), so several server
//! processes, on several machines, serve one round.
//!
//! Layout, under a prefix `P` (default [`DEFAULT_PREFIX`]; one per deployment sharing a Redis):
//! * `P rounds` — a set of the round ids;
//! * `P r:{id}` — a hash: `v` (the version), `s` (the status code: the stage being collected
//!   `0`..`3`, `f` finished, `a` aborted) and `r` (the record as JSON; its `version` field is
//!   replaced by `v` when read);
//! * `P m:{id}:{stage}` — a hash from client id to the message's bytes (the finished round's
//!   aggregate is client 0 of stage [`result_stage`]).
//!
//! Every write is one Lua script, so it is atomic: creation (`SADD` + `HSET` unless the round
//! exists), the compare-and-set of the record on `v` (with the aggregate in the same script;
//! refused once `s` is `f` or `a`),
//! put-if-absent of a message (only while `s` is its stage; it increments `v`), deletion of
//! the record, every stage's messages and the index entry. The connection and the durability
//! policy are the Draw-and-Discard store's ([`RedisConnection`]): at start-up a strict store
//! refuses a Redis that would lose acknowledged writes in a crash, and each write — including a
//! put answered as a duplicate, whose acknowledgment promises the first write — is confirmed
//! (`WAITAOF` on Redis ≥ 7.2, a configuration re-check before) before it returns; an outage
//! is [`StoreError::Unavailable`]. Standalone Redis only (the scripts build the message keys of
//! a round, as the model store's do).

use std::sync::Arc;

use privfed_secagg::ClientId;

use super::{
    PutOutcome, RoundRecord, RoundStore, StoreFuture, check_advance, decode_record, result_stage,
    status_code,
};
use crate::http::error::StoreError;
use crate::redis_conn::{Durability, RedisConnection, RedisOptions, redis_err};

/// The key prefix of [`RedisRoundStore::new`] when none is chosen.
pub const DEFAULT_PREFIX: &str = "privfed-secagg:";

/// Messages read per `HMGET` when listing a stage (a masked input can weigh megabytes; smaller
/// replies keep each one well inside the connection's reply timeout).
const READ_BATCH: usize = 16;

// KEYS = record, index; ARGV = id, version, status code, record JSON. 1 created, 0 exists.
const CREATE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[3], 'r', ARGV[4])
redis.call('SADD', KEYS[2], ARGV[1])
return 1";

// KEYS = record, result hash; ARGV = expected version, new version, status code, record JSON,
// '1' when a result follows, the result. 1 swapped, 0 other version or round over, -1 no round.
const UPDATE: &str = r"
local cur = redis.call('HMGET', KEYS[1], 'v', 's')
if not cur[1] then return -1 end
if cur[1] ~= ARGV[1] or cur[2] == 'f' or cur[2] == 'a' then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 's', ARGV[3], 'r', ARGV[4])
if ARGV[5] == '1' then redis.call('HSET', KEYS[2], '0', ARGV[6]) end
return 1";

// KEYS = record, stage hash; ARGV = stage, client, bytes. {0, version} stored, {1} duplicate,
// {2} conflict, {3} stage closed, {-1} no round.
const PUT: &str = r"
local s = redis.call('HGET', KEYS[1], 's')
if not s then return {-1} end
if s ~= ARGV[1] then return {3} end
local prev = redis.call('HGET', KEYS[2], ARGV[2])
if prev then
  if prev == ARGV[3] then return {1} end
  return {2}
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return {0, redis.call('HINCRBY', KEYS[1], 'v', 1)}";

// KEYS = record, index; ARGV = id, message key prefix `P m:{id}:`. 1 deleted, 0 no round.
const DELETE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('DEL', KEYS[1])
for s = 0, 255 do redis.call('DEL', ARGV[2] .. s) end
redis.call('SREM', KEYS[2], ARGV[1])
return 1";

/// Secure-aggregation rounds in Redis (see the [module documentation](self)).
#[derive(Clone)]
pub struct RedisRoundStore {
    conn: RedisConnection,
    prefix: String,
    create: Arc<redis::Script>,
    update: Arc<redis::Script>,
    put: Arc<redis::Script>,
    delete: Arc<redis::Script>,
}

impl std::fmt::Debug for RedisRoundStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRoundStore")
            .field("prefix", &self.prefix)
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

fn backend<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Backend(e.to_string())
}

impl RedisRoundStore {
    /// The store over an open connection (e.g. the model store's,
    /// [`RedisStore::connection`](crate::ddml::store::redis::RedisStore::connection)), with its keys
    /// under `prefix`.
    pub fn new(conn: RedisConnection, prefix: &str) -> Self {
        Self {
            conn,
            prefix: prefix.to_string(),
            create: Arc::new(redis::Script::new(CREATE)),
            update: Arc::new(redis::Script::new(UPDATE)),
            put: Arc::new(redis::Script::new(PUT)),
            delete: Arc::new(redis::Script::new(DELETE)),
        }
    }

    /// Connects to `url` (`redis://HOST:PORT[/DB]`) with `options` (the same checks as the
    /// model store: a strict store refuses a Redis that would lose acknowledged writes) and
    /// keeps its keys under `prefix`.
    pub async fn connect(
        url: &str,
        options: RedisOptions,
        prefix: &str,
    ) -> Result<Self, StoreError> {
        Ok(Self::new(
            RedisConnection::connect(url, options).await?,
            prefix,
        ))
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn index_key(&self) -> String {
        format!("{}rounds", self.prefix)
    }

    fn record_key(&self, id: &str) -> String {
        format!("{}r:{id}", self.prefix)
    }

    fn stage_prefix(&self, id: &str) -> String {
        format!("{}m:{id}:", self.prefix)
    }

    fn stage_key(&self, id: &str, stage: u8) -> String {
        format!("{}{stage}", self.stage_prefix(id))
    }

    /// A record from its hash fields `v` and `r`; `None` when the round is absent.
    fn parse_record(
        id: &str,
        v: Option<String>,
        r: Option<Vec<u8>>,
    ) -> Result<Option<RoundRecord>, StoreError> {
        match (v, r) {
            (Some(v), Some(r)) => {
                let mut record = decode_record(id, &r)?;
                record.version = v
                    .parse()
                    .map_err(|e| StoreError::Backend(format!("round {id}: version `{v}`: {e}")))?;
                Ok(Some(record))
            }
            _ => Ok(None),
        }
    }

    async fn read_record(&self, id: &str) -> Result<Option<RoundRecord>, StoreError> {
        let mut con = self.conn.manager();
        let (v, r): (Option<String>, Option<Vec<u8>>) = redis::cmd("HMGET")
            .arg(self.record_key(id))
            .arg("v")
            .arg("r")
            .query_async(&mut con)
            .await
            .map_err(redis_err)?;
        Self::parse_record(id, v, r)
    }
}

impl RoundStore for RedisRoundStore {
    fn create_round<'a>(&'a self, id: &'a str, record: &'a RoundRecord) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let json = serde_json::to_vec(record).map_err(backend)?;
            let mut con = self.conn.manager();
            let created: i64 = self
                .create
                .key(self.record_key(id))
                .key(self.index_key())
                .arg(id)
                .arg(record.version)
                .arg(status_code(&record.status))
                .arg(json)
                .invoke_async(&mut con)
                .await
                .map_err(redis_err)?;
            if created != 1 {
                return Err(StoreError::Conflict(id.to_string()));
            }
            self.conn.confirm_durable().await
        })
    }

    fn rounds(&self) -> StoreFuture<'_, Vec<(String, RoundRecord)>> {
        Box::pin(async move {
            let mut con = self.conn.manager();
            let mut ids: Vec<String> = redis::cmd("SMEMBERS")
                .arg(self.index_key())
                .query_async(&mut con)
                .await
                .map_err(redis_err)?;
            ids.sort();
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                // A round deleted since SMEMBERS is skipped.
                if let Some(record) = self.read_record(&id).await? {
                    out.push((id, record));
                }
            }
            Ok(out)
        })
    }

    fn round<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<RoundRecord>> {
        Box::pin(self.read_record(id))
    }

    fn version<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<u64>> {
        Box::pin(async move {
            let mut con = self.conn.manager();
            let v: Option<String> = redis::cmd("HGET")
                .arg(self.record_key(id))
                .arg("v")
                .query_async(&mut con)
                .await
                .map_err(redis_err)?;
            v.map(|v| {
                v.parse()
                    .map_err(|e| StoreError::Backend(format!("round {id}: version `{v}`: {e}")))
            })
            .transpose()
        })
    }

    fn update_round<'a>(
        &'a self,
        id: &'a str,
        expected_version: u64,
        record: &'a RoundRecord,
        result: Option<&'a [u8]>,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            check_advance(id, expected_version, record)?;
            let json = serde_json::to_vec(record).map_err(backend)?;
            let mut con = self.conn.manager();
            let swapped: i64 = self
                .update
                .key(self.record_key(id))
                .key(self.stage_key(id, result_stage(&record.config)))
                .arg(expected_version)
                .arg(record.version)
                .arg(status_code(&record.status))
                .arg(json)
                .arg(if result.is_some() { "1" } else { "0" })
                .arg(result.unwrap_or_default())
                .invoke_async(&mut con)
                .await
                .map_err(redis_err)?;
            match swapped {
                1 => {
                    self.conn.confirm_durable().await?;
                    Ok(true)
                }
                0 => Ok(false),
                _ => Err(StoreError::NotFound(id.to_string())),
            }
        })
    }

    fn put_message<'a>(
        &'a self,
        id: &'a str,
        stage: u8,
        client: ClientId,
        bytes: &'a [u8],
    ) -> StoreFuture<'a, PutOutcome> {
        Box::pin(async move {
            let mut con = self.conn.manager();
            let r: Vec<i64> = self
                .put
                .key(self.record_key(id))
                .key(self.stage_key(id, stage))
                .arg(stage)
                .arg(client)
                .arg(bytes)
                .invoke_async(&mut con)
                .await
                .map_err(redis_err)?;
            let outcome = match r.as_slice() {
                [0, version] => PutOutcome::Stored {
                    version: u64::try_from(*version).map_err(backend)?,
                },
                [1] => PutOutcome::Duplicate,
                [2] => return Ok(PutOutcome::Conflict),
                [3] => return Ok(PutOutcome::StageClosed),
                [-1] => return Err(StoreError::NotFound(id.to_string())),
                other => {
                    return Err(StoreError::Backend(format!(
                        "round {id}: unexpected reply {other:?} to a put"
                    )));
                }
            };
            // A duplicate acknowledges the first write (perhaps another process's, perhaps
            // one whose confirmation failed): confirm that persistence still holds.
            self.conn.confirm_durable().await?;
            Ok(outcome)
        })
    }

    fn message_clients<'a>(&'a self, id: &'a str, stage: u8) -> StoreFuture<'a, Vec<ClientId>> {
        Box::pin(async move {
            let mut con = self.conn.manager();
            let fields: Vec<String> = redis::cmd("HKEYS")
                .arg(self.stage_key(id, stage))
                .query_async(&mut con)
                .await
                .map_err(redis_err)?;
            let mut clients = fields
                .iter()
                .map(|f| {
                    f.parse::<ClientId>().map_err(|e| {
                        StoreError::Backend(format!("round {id}: client field `{f}`: {e}"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            // Numerically, not as the strings Redis keeps (10 after 9).
            clients.sort_unstable();
            Ok(clients)
        })
    }

    fn messages_of<'a>(
        &'a self,
        id: &'a str,
        stage: u8,
        clients: &'a [ClientId],
    ) -> StoreFuture<'a, Vec<(ClientId, Vec<u8>)>> {
        Box::pin(async move {
            let mut clients = clients.to_vec();
            clients.sort_unstable();
            clients.dedup();
            let key = self.stage_key(id, stage);
            let mut con = self.conn.manager();
            let mut out = Vec::with_capacity(clients.len());
            for batch in clients.chunks(READ_BATCH) {
                let values: Vec<Option<Vec<u8>>> = redis::cmd("HMGET")
                    .arg(&key)
                    .arg(batch)
                    .query_async(&mut con)
                    .await
                    .map_err(redis_err)?;
                out.extend(
                    batch
                        .iter()
                        .zip(values)
                        .filter_map(|(&c, v)| v.map(|v| (c, v))),
                );
            }
            Ok(out)
        })
    }

    fn delete_round<'a>(&'a self, id: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut con = self.conn.manager();
            let deleted: i64 = self
                .delete
                .key(self.record_key(id))
                .key(self.index_key())
                .arg(id)
                .arg(self.stage_prefix(id))
                .invoke_async(&mut con)
                .await
                .map_err(redis_err)?;
            if deleted != 1 {
                return Err(StoreError::NotFound(id.to_string()));
            }
            self.conn.confirm_durable().await
        })
    }

    fn durable_acks(&self) -> bool {
        self.conn.durability() == Durability::Strict
    }
}
