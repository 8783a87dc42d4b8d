//! The Redis store (`--store redis://HOST:PORT`): several server processes, on several machines,
//! serve one model from one Redis.
//!
//! Layout: `privfed:{name}:meta` is a hash (`spec` as JSON, `gen`, `accepted`, `rejected`);
//! instance `i` is the string `privfed:{name}:inst:{i}` holding `dim` little-endian `f32`.
//! Creation, deletion and every write are Lua scripts, so each is atomic: an instance is always
//! replaced whole together with its counter, and a write checks the model's generation (a model
//! deleted and re-created under the same name rejects writes meant for the old one).
//!
//! Each process caches a model's spec for [`SPEC_TTL`] and the per-weight spread used by the spam
//! filter for [`STATS_TTL`] (the filter then judges against a view at most that old, which the
//! lock-free design of paper 003 allows anyway).
//!
//! ## Durability ([`Durability`])
//! Under Redis' stock configuration (RDB snapshots, no AOF) a crash of `redis-server` loses every
//! write since the last snapshot: kill -9 under load lost 25k–66k acknowledged updates.
//! So [`RedisStore::connect`] reads the server's persistence configuration
//! (`CONFIG GET appendonly appendfsync`, or `INFO persistence` when `CONFIG` is renamed or denied)
//! and, in the default [`Durability::Strict`] mode, refuses to start unless every write is
//! fsynced to the append-only file before Redis answers: `appendonly yes` and
//! `appendfsync always`. Then each write is also confirmed before it is acknowledged:
//! * Redis ≥ 7.2: `WAITAOF 1 0 ms` after the write (on the same connection, so it covers it):
//!   the write is acknowledged only once Redis reports it fsynced to the local AOF;
//! * older Redis (no `WAITAOF`; with `appendfsync always` the write is fsynced before Redis
//!   replies): `CONFIG GET appendonly appendfsync` right after the write, so an operator who
//!   turns persistence off at run time (`CONFIG SET appendonly no`) gets 503s from the next write
//!   on, never a false acknowledgment.
//!
//! A failed confirmation answers 503 ([`StoreError::Unavailable`]); the write may then have been
//! applied without being acknowledged. [`Store::healthy`] runs the same check, so `/healthz`
//! fails while persistence is off. [`Durability::BestEffort`] skips all of this for deployments
//! that accept the risk; its 202 says so (`{"status":"accepted","durable":false}`, through
//! [`Store::durable_acks`]).
//!
//! ## Outages
//! The connection ([`RedisOptions`]) times out a connection attempt and a reply after about 1 s
//! and retries a reconnection once, so while Redis is down or hung a request answers 503 with
//! `Retry-After` within about 0.1 s (connection refused) to about 2 s (unreachable host) instead
//! of hanging; connection, timeout and I/O errors, and Redis' own "not now" errors (`LOADING`,
//! `BUSY`, `MISCONF`, `OOM`, `READONLY`, …), become [`StoreError::Unavailable`], other errors
//! [`StoreError::Backend`]. The next request after a failure reconnects, so the server recovers
//! by itself when Redis returns.

use super::{Admission, Decision, Drawn, ModelSnapshot, Rejection, Store, SubmitOutcome};
use crate::error::StoreError;
use crate::model::{ModelSpec, decode_f32, encode_f32};
use crate::ticket::{Redeemed, Ticket, TicketLimits};
use bytes::Bytes;
use privfed_ddml::engine::{InstanceStats, replacement_index};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a process trusts its cached copy of a model's spec.
pub const SPEC_TTL: Duration = Duration::from_secs(1);
/// How long a process trusts its cached spread (spam-filter statistics).
pub const STATS_TTL: Duration = Duration::from_millis(100);

const CREATE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'spec', ARGV[1], 'gen', ARGV[2], 'accepted', 0, 'rejected', 0)
for i = 2, #KEYS do redis.call('SET', KEYS[i], ARGV[i + 1]) end
return 1";

const DELETE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('DEL', unpack(KEYS))
return 1";

// Draw: KEYS = meta, instance i, ticket; ARGV = i, ttl ms, key prefix `privfed:{name}:`.
// Records the ticket as `gen:i:v` (v = the instance's version) and pins that version, so an
// overwrite keeps it for the ticket's lifetime. Returns the instance, or false if the model is gone.
const DRAW: &str = r"
local gen = redis.call('HGET', KEYS[1], 'gen')
if not gen then return false end
local w = redis.call('GET', KEYS[2])
if not w then return false end
local v = redis.call('HGET', KEYS[1], 'v:' .. ARGV[1]) or '0'
redis.call('SET', KEYS[3], gen .. ':' .. ARGV[1] .. ':' .. v, 'PX', ARGV[2])
redis.call('SET', ARGV[3] .. 'pin:' .. gen .. ':' .. ARGV[1] .. ':' .. v, '1', 'PX', ARGV[2])
return w";

// Redeem: KEYS = meta, ticket; ARGV = expected generation, key prefix, in-progress hold ms.
// Returns {'fresh', base} (and holds the ticket in progress for the hold time), {'used', outcome},
// {'busy'} or {'invalid'}. A hold that lapsed (its request died) makes the ticket fresh again.
const REDEEM: &str = r"
local t = redis.call('GET', KEYS[2])
if not t then return {'invalid'} end
if string.sub(t, 1, 2) == 'u:' then return {'used', string.sub(t, 3)} end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if string.sub(t, 1, 2) == 'p:' then
  local until_ms, rest = string.match(t, '^p:(%d+):(.*)$')
  if tonumber(until_ms) > now_ms then return {'busy'} end
  t = rest
end
local gen, i, v = string.match(t, '^(%d+):(%d+):(%d+)$')
if gen ~= ARGV[1] then return {'invalid'} end
local cur = redis.call('HGET', KEYS[1], 'v:' .. i) or '0'
local base
if cur == v then
  base = redis.call('GET', ARGV[2] .. 'inst:' .. i)
else
  base = redis.call('GET', ARGV[2] .. 'old:' .. gen .. ':' .. i .. ':' .. v)
end
if not base then return {'invalid'} end
redis.call('SET', KEYS[2], 'p:' .. (now_ms + tonumber(ARGV[3])) .. ':' .. t, 'KEEPTTL')
return {'fresh', base}";

// Release an in-progress ticket (its update was not applied): KEYS = ticket.
const RELEASE: &str = r"
local t = redis.call('GET', KEYS[1])
if t and string.sub(t, 1, 2) == 'p:' then
  redis.call('SET', KEYS[1], string.match(t, '^p:%d+:(.*)$'), 'KEEPTTL')
end
return 1";

// Update: KEYS = meta, instance j, ticket (or a dummy key); ARGV = expected generation, new
// value, j, key prefix, ttl ms, cap, whether a ticket is used ('1'/'0'). Checks the generation
// and the length where the value is written; keeps the old value if a ticket pinned it (at most
// cap kept: the oldest is dropped). Returns 1, 0 (model gone) or -1 (wrong length).
const UPDATE: &str = r"
local gen = redis.call('HGET', KEYS[1], 'gen')
if gen ~= ARGV[1] then return 0 end
if redis.call('STRLEN', KEYS[2]) ~= string.len(ARGV[2]) then return -1 end
local j = ARGV[3]
local v = redis.call('HGET', KEYS[1], 'v:' .. j) or '0'
if redis.call('EXISTS', ARGV[4] .. 'pin:' .. gen .. ':' .. j .. ':' .. v) == 1 then
  local old = ARGV[4] .. 'old:' .. gen .. ':' .. j .. ':' .. v
  redis.call('SET', old, redis.call('GET', KEYS[2]), 'PX', ARGV[5])
  local list = ARGV[4] .. 'retired'
  redis.call('RPUSH', list, old)
  redis.call('PEXPIRE', list, ARGV[5])
  while redis.call('LLEN', list) > tonumber(ARGV[6]) do
    redis.call('DEL', redis.call('LPOP', list))
  end
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('HINCRBY', KEYS[1], 'v:' .. j, 1)
redis.call('HINCRBY', KEYS[1], 'accepted', 1)
if ARGV[7] == '1' then redis.call('SET', KEYS[3], 'u:a', 'KEEPTTL') end
return 1";

// Reject: KEYS = meta, ticket (or a dummy key); ARGV = expected generation, outcome JSON, whether
// a ticket is used.
const REJECT: &str = r"
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then return 0 end
redis.call('HINCRBY', KEYS[1], 'rejected', 1)
if ARGV[3] == '1' then redis.call('SET', KEYS[2], 'u:r' .. ARGV[2], 'KEEPTTL') end
return 1";

/// How long a redeemed ticket is held for its request before a retry may use it again.
const TICKET_HOLD_MS: u64 = 10_000;

struct Cached {
    spec: Arc<ModelSpec>,
    at: Instant,
    stats: Option<(Instant, Arc<InstanceStats>)>,
}

/// The Redis-backed store (see the [module documentation](self)).
#[derive(Clone)]
pub struct RedisStore {
    conn: RedisConnection,
    cache: Arc<Mutex<HashMap<String, Cached>>>,
    create: Arc<redis::Script>,
    delete: Arc<redis::Script>,
    update: Arc<redis::Script>,
    reject: Arc<redis::Script>,
    draw: Arc<redis::Script>,
    redeem: Arc<redis::Script>,
    release: Arc<redis::Script>,
    limits: TicketLimits,
}

fn backend<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn meta_key(name: &str) -> String {
    format!("privfed:{name}:meta")
}

fn inst_key(name: &str, i: usize) -> String {
    format!("privfed:{name}:inst:{i}")
}

fn prefix(name: &str) -> String {
    format!("privfed:{name}:")
}

fn ticket_key(name: &str, t: Ticket) -> String {
    format!("privfed:{name}:t:{t}")
}

/// How a used ticket's outcome is stored for replays ([`crate::store::decode_outcome`]), without
/// the `r` of a rejection, which the scripts add.
fn encode_outcome(o: &SubmitOutcome) -> String {
    match o {
        SubmitOutcome::Rejected(Rejection::Spam(r)) => {
            format!("s{}", serde_json::to_string(r).unwrap_or_default())
        }
        SubmitOutcome::Rejected(Rejection::Guard(r)) => {
            format!("g{}", serde_json::to_string(r).unwrap_or_default())
        }
        _ => String::new(),
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://HOST:PORT[/DB]`) with the default [`RedisOptions`]
    /// ([`Durability::Strict`]): fails unless Redis persists every write before answering (see
    /// the [module documentation](self)).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, RedisOptions::default()).await
    }

    /// Connects to `url` with `options`: applies the timeouts, reads the server's version and
    /// persistence configuration and, in [`Durability::Strict`] mode, refuses (with
    /// [`StoreError::Unavailable`] naming the setting to change) a Redis that would lose
    /// acknowledged writes in a crash.
    pub async fn connect_with(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        Ok(Self::with_connection(
            RedisConnection::connect(url, options).await?,
        ))
    }

    /// The store over an open connection (which may be shared with a
    /// [`RedisRoundStore`](crate::secagg::RedisRoundStore): one connection, one
    /// durability check, per process).
    pub fn with_connection(conn: RedisConnection) -> Self {
        Self {
            conn,
            cache: Arc::new(Mutex::new(HashMap::new())),
            create: Arc::new(redis::Script::new(CREATE)),
            delete: Arc::new(redis::Script::new(DELETE)),
            update: Arc::new(redis::Script::new(UPDATE)),
            reject: Arc::new(redis::Script::new(REJECT)),
            draw: Arc::new(redis::Script::new(DRAW)),
            redeem: Arc::new(redis::Script::new(REDEEM)),
            release: Arc::new(redis::Script::new(RELEASE)),
            limits: TicketLimits::default(),
        }
    }

    /// The connection (to share it with the secure-aggregation round store).
    pub fn connection(&self) -> &RedisConnection {
        &self.conn
    }

    fn forget(&self, name: &str) {
        if let Ok(mut c) = self.cache.lock() {
            c.remove(name);
        }
    }

    async fn fetch_spec(&self, name: &str) -> Result<Arc<ModelSpec>, StoreError> {
        let mut con = self.conn.manager();
        let raw: Option<String> = redis::cmd("HGET")
            .arg(meta_key(name))
            .arg("spec")
            .query_async(&mut con)
            .await
            .map_err(redis_err)?;
        let raw = raw.ok_or_else(|| StoreError::NotFound(name.to_string()))?;
        let spec: ModelSpec = serde_json::from_str::<ModelSpec>(&raw)
            .map_err(backend)?
            .prepared()
            .map_err(StoreError::Backend)?;
        Ok(Arc::new(spec))
    }

    async fn fetch_instances(&self, spec: &ModelSpec) -> Result<Vec<Arc<[f32]>>, StoreError> {
        let mut con = self.conn.manager();
        let keys: Vec<String> = (0..spec.k).map(|i| inst_key(&spec.name, i)).collect();
        let blobs: Vec<Option<Vec<u8>>> = redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut con)
            .await
            .map_err(redis_err)?;
        blobs
            .into_iter()
            .map(|b| {
                let b = b.ok_or_else(|| StoreError::NotFound(spec.name.clone()))?;
                decode_f32(&b)
                    .filter(|w| w.len() == spec.dim)
                    .map(Arc::from)
                    .ok_or_else(|| {
                        StoreError::Backend(format!("corrupt instance of `{}`", spec.name))
                    })
            })
            .collect()
    }

    async fn stats(&self, spec: &Arc<ModelSpec>) -> Result<Arc<InstanceStats>, StoreError> {
        if let Ok(c) = self.cache.lock()
            && let Some(Cached {
                stats: Some((at, s)),
                spec: cs,
                ..
            }) = c.get(&spec.name)
            && cs.generation == spec.generation
            && at.elapsed() < STATS_TTL
        {
            return Ok(s.clone());
        }
        let inst = self.fetch_instances(spec).await?;
        let s = Arc::new(InstanceStats::from_instances(&inst).map_err(backend)?);
        if let Ok(mut c) = self.cache.lock()
            && let Some(entry) = c.get_mut(&spec.name)
            && entry.spec.generation == spec.generation
        {
            entry.stats = Some((Instant::now(), s.clone()));
        }
        Ok(s)
    }
}

/// Field `i` of a script's array reply (the type's default when absent).
fn reply_field<T: redis::FromRedisValue + Default>(
    r: &[redis::Value],
    i: usize,
) -> Result<T, StoreError> {
    Ok(r.get(i)
        .map(redis::from_redis_value_ref)
        .transpose()
        .map_err(backend)?
        .unwrap_or_default())
}

impl RedisStore {
    /// Runs the redeem script for ticket `t` of generation `spec.generation`; a fresh ticket is
    /// then held in progress for [`TICKET_HOLD_MS`].
    async fn redeem_ticket(
        &self,
        name: &str,
        spec: &ModelSpec,
        t: Ticket,
    ) -> Result<Redeemed<SubmitOutcome>, StoreError> {
        let mut con = self.conn.manager();
        let r: Vec<redis::Value> = self
            .redeem
            .key(meta_key(name))
            .key(ticket_key(name, t))
            .arg(spec.generation.to_string())
            .arg(prefix(name))
            .arg(TICKET_HOLD_MS)
            .invoke_async(&mut con)
            .await
            .map_err(redis_err)?;
        Ok(match reply_field::<String>(&r, 0)?.as_str() {
            "fresh" => {
                let b: Vec<u8> = reply_field(&r, 1)?;
                let w = decode_f32(&b)
                    .filter(|w| w.len() == spec.dim)
                    .ok_or_else(|| StoreError::Backend(format!("corrupt instance of `{name}`")))?;
                Redeemed::Fresh(Arc::from(w))
            }
            "used" => Redeemed::Replay(crate::store::decode_outcome(&reply_field::<String>(
                &r, 1,
            )?)?),
            "busy" => Redeemed::InProgress,
            _ => Redeemed::Invalid,
        })
    }

    /// Has the engine decide on an update whose ticket (if any) this call holds, unless
    /// `decision` is given, and persists the decision.
    async fn apply_admitted(
        &self,
        name: &str,
        spec: &Arc<ModelSpec>,
        ticket: Option<Ticket>,
        weights: Vec<f32>,
        (base, decision): (Option<&[f32]>, Option<Decision>),
    ) -> Result<SubmitOutcome, StoreError> {
        let decision = match decision {
            Some(d) => d,
            None => {
                let stats = match &spec.spam {
                    Some(_) => Some(self.stats(spec).await?),
                    None => None,
                };
                crate::store::decide(spec, base, &weights, stats.as_deref())?
            }
        };
        let mut con = self.conn.manager();
        let gen_arg = spec.generation.to_string();
        let ticket_key_or_dummy = match ticket {
            Some(t) => ticket_key(name, t),
            None => format!("{}t:none", prefix(name)),
        };
        let has_ticket = if ticket.is_some() { "1" } else { "0" };
        let (ok, outcome): (i64, SubmitOutcome) = match decision {
            Decision::Write { instance: j } => {
                if j >= spec.k {
                    return Err(StoreError::Backend(format!(
                        "a write of instance {j} of model `{name}` with k = {}",
                        spec.k
                    )));
                }
                let r = self
                    .update
                    .key(meta_key(name))
                    .key(inst_key(name, j))
                    .key(ticket_key_or_dummy)
                    .arg(gen_arg)
                    .arg(encode_f32(&weights))
                    .arg(j)
                    .arg(prefix(name))
                    .arg(self.limits.ttl.as_millis() as u64)
                    .arg(self.limits.retired_cap(spec.k, spec.dim))
                    .arg(has_ticket)
                    .invoke_async(&mut con)
                    .await
                    .map_err(redis_err)?;
                (r, SubmitOutcome::Accepted)
            }
            Decision::Reject(rej) => {
                let outcome = SubmitOutcome::Rejected(rej);
                let r = self
                    .reject
                    .key(meta_key(name))
                    .key(ticket_key_or_dummy)
                    .arg(gen_arg)
                    .arg(encode_outcome(&outcome))
                    .arg(has_ticket)
                    .invoke_async(&mut con)
                    .await
                    .map_err(redis_err)?;
                (r, outcome)
            }
        };
        match ok {
            1 => {
                self.conn.confirm_durable().await?;
                Ok(outcome)
            }
            -1 => Err(StoreError::Backend(format!(
                "update of {} weights does not match the stored instances of `{name}`",
                weights.len()
            ))),
            _ => {
                self.forget(name);
                Err(StoreError::NotFound(name.to_string()))
            }
        }
    }
}

/// An update admitted by the Redis store ([`Store::admit`]): the spec it was admitted against,
/// and the ticket it holds in progress (for at most `TICKET_HOLD_MS`) with the instance that
/// ticket drew.
#[derive(Debug)]
pub struct RedisAdmission {
    spec: Arc<ModelSpec>,
    ticket: Option<Ticket>,
    base: Option<Arc<[f32]>>,
}

impl RedisStore {
    /// [`Store::apply`] with the engine's decision made here, or [`Store::persist`] of a given
    /// one; the ticket is returned on an error.
    async fn apply_decided(
        &self,
        name: &str,
        admitted: RedisAdmission,
        weights: Vec<f32>,
        decision: Option<Decision>,
    ) -> Result<SubmitOutcome, StoreError> {
        if weights.len() != admitted.spec.dim {
            return Err(StoreError::NotFound(name.to_string()));
        }
        let result = self
            .apply_admitted(
                name,
                &admitted.spec,
                admitted.ticket,
                weights,
                (admitted.base.as_deref(), decision),
            )
            .await;
        if result.is_err() {
            self.release(admitted).await;
        }
        result
    }
}

impl Store for RedisStore {
    async fn create_model(
        &self,
        spec: ModelSpec,
        instances: Vec<Vec<f32>>,
    ) -> Result<(), StoreError> {
        let mut con = self.conn.manager();
        let mut inv = self.create.key(meta_key(&spec.name));
        for i in 0..spec.k {
            inv.key(inst_key(&spec.name, i));
        }
        inv.arg(serde_json::to_string(&spec).map_err(backend)?)
            .arg(spec.generation.to_string());
        for w in &instances {
            inv.arg(encode_f32(w));
        }
        let created: i64 = inv.invoke_async(&mut con).await.map_err(redis_err)?;
        if created == 1 {
            self.forget(&spec.name);
            self.conn.confirm_durable().await?;
            Ok(())
        } else {
            Err(StoreError::Conflict(spec.name))
        }
    }

    async fn delete_model(&self, name: &str) -> Result<(), StoreError> {
        let spec = self.fetch_spec(name).await?;
        let mut con = self.conn.manager();
        let mut inv = self.delete.key(meta_key(name));
        for i in 0..spec.k {
            inv.key(inst_key(name, i));
        }
        let deleted: i64 = inv.invoke_async(&mut con).await.map_err(redis_err)?;
        self.forget(name);
        if deleted == 1 {
            self.conn.confirm_durable().await?;
            Ok(())
        } else {
            Err(StoreError::NotFound(name.to_string()))
        }
    }

    async fn spec(&self, name: &str) -> Result<Arc<ModelSpec>, StoreError> {
        if let Ok(c) = self.cache.lock()
            && let Some(e) = c.get(name)
            && e.at.elapsed() < SPEC_TTL
        {
            return Ok(e.spec.clone());
        }
        let spec = self.fetch_spec(name).await?;
        if let Ok(mut c) = self.cache.lock() {
            c.insert(
                name.to_string(),
                Cached {
                    spec: spec.clone(),
                    at: Instant::now(),
                    stats: None,
                },
            );
        }
        Ok(spec)
    }

    async fn draw(&self, name: &str) -> Result<Drawn, StoreError> {
        let spec = self.spec(name).await?;
        let i = replacement_index(spec.k, &mut rand::rng());
        let ticket = Ticket::random();
        let mut con = self.conn.manager();
        let blob: Option<Vec<u8>> = self
            .draw
            .key(meta_key(name))
            .key(inst_key(name, i))
            .key(ticket_key(name, ticket))
            .arg(i)
            .arg(self.limits.ttl.as_millis() as u64)
            .arg(prefix(name))
            .invoke_async(&mut con)
            .await
            .map_err(redis_err)?;
        match blob {
            // Stored as the wire format: answer it as is.
            Some(b) if b.len() == 4 * spec.dim => Ok(Drawn {
                weights: Bytes::from(b),
                ticket,
            }),
            _ => {
                self.forget(name);
                Err(StoreError::NotFound(name.to_string()))
            }
        }
    }

    type Admitted = RedisAdmission;

    async fn admit(
        &self,
        name: &str,
        spec: &Arc<ModelSpec>,
        ticket: Option<Ticket>,
    ) -> Result<Admission<RedisAdmission>, StoreError> {
        let base = match ticket {
            None if crate::store::needs_ticket(spec) => return Err(StoreError::TicketRequired),
            None => None,
            Some(t) => match self.redeem_ticket(name, spec, t).await? {
                Redeemed::Fresh(base) => Some(base),
                Redeemed::Replay(o) => return Ok(Admission::Replayed(o)),
                Redeemed::InProgress => return Err(StoreError::TicketInUse),
                Redeemed::Invalid => return Err(StoreError::TicketInvalid),
            },
        };
        Ok(Admission::Admitted(RedisAdmission {
            spec: spec.clone(),
            ticket,
            base,
        }))
    }

    async fn apply(
        &self,
        name: &str,
        admitted: RedisAdmission,
        weights: Vec<f32>,
    ) -> Result<SubmitOutcome, StoreError> {
        self.apply_decided(name, admitted, weights, None).await
    }

    async fn persist(
        &self,
        name: &str,
        admitted: RedisAdmission,
        decision: Decision,
        weights: Vec<f32>,
    ) -> Result<SubmitOutcome, StoreError> {
        self.apply_decided(name, admitted, weights, Some(decision))
            .await
    }

    async fn release(&self, admitted: RedisAdmission) {
        if let Some(t) = admitted.ticket {
            // Best effort; otherwise the hold lapses after TICKET_HOLD_MS.
            let mut con = self.conn.manager();
            let _: Result<i64, _> = self
                .release
                .key(ticket_key(&admitted.spec.name, t))
                .invoke_async(&mut con)
                .await;
        }
    }

    async fn total_floats(&self) -> Result<u64, StoreError> {
        // SCAN the model metadata keys (admin path only: runs when a model is created).
        let mut con = self.conn.manager();
        let mut cursor: u64 = 0;
        let mut total: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg("privfed:*:meta")
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut con)
                .await
                .map_err(backend)?;
            for key in keys {
                let raw: Option<String> = redis::cmd("HGET")
                    .arg(&key)
                    .arg("spec")
                    .query_async(&mut con)
                    .await
                    .map_err(backend)?;
                if let Some(raw) = raw {
                    let spec: ModelSpec = serde_json::from_str(&raw).map_err(backend)?;
                    total = total.saturating_add((spec.dim as u64).saturating_mul(spec.k as u64));
                }
            }
            if next == 0 {
                return Ok(total);
            }
            cursor = next;
        }
    }

    async fn snapshot(&self, name: &str) -> Result<ModelSnapshot, StoreError> {
        let mut con = self.conn.manager();
        let meta: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(meta_key(name))
            .query_async(&mut con)
            .await
            .map_err(redis_err)?;
        let raw = meta
            .get("spec")
            .ok_or_else(|| StoreError::NotFound(name.to_string()))?;
        let spec: Arc<ModelSpec> = Arc::new(
            serde_json::from_str::<ModelSpec>(raw)
                .map_err(backend)?
                .prepared()
                .map_err(StoreError::Backend)?,
        );
        let count = |f: &str| -> Result<u64, StoreError> {
            meta.get(f)
                .map(|v| v.parse::<u64>().map_err(backend))
                .unwrap_or(Ok(0))
        };
        let instances = self.fetch_instances(&spec).await?;
        Ok(ModelSnapshot {
            accepted: count("accepted")?,
            rejected: count("rejected")?,
            spec,
            instances,
        })
    }

    async fn healthy(&self) -> bool {
        self.conn.healthy().await
    }

    fn durable_acks(&self) -> bool {
        self.conn.durability() == Durability::Strict
    }
}

/// What an acknowledged write (202) of a [`RedisStore`] promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Survives a crash of `redis-server`: start-up requires `appendonly yes` and
    /// `appendfsync always`, and each write is confirmed persistent before it is acknowledged
    /// (`WAITAOF` on Redis ≥ 7.2, a configuration re-check before). The default.
    #[default]
    Strict,
    /// As durable as the Redis deployment happens to make it (the stock configuration loses the
    /// writes since the last RDB snapshot); 202 answers `{"status":"accepted","durable":false}`.
    BestEffort,
}

/// Connection options of [`RedisStore::connect_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedisOptions {
    /// What a 202 promises.
    pub durability: Durability,
    /// Limit of one attempt to (re)connect to Redis (default 1 s).
    pub connection_timeout: Duration,
    /// Limit of one command's reply (default 1 s; keep it above [`WAITAOF_TIMEOUT`]).
    pub response_timeout: Duration,
    /// Attempts to reconnect after the first failed one, with a backoff of 100–500 ms
    /// (default 1), before a request fails with 503. Each later request tries again.
    pub reconnect_retries: usize,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Strict,
            connection_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            reconnect_retries: 1,
        }
    }
}

impl RedisOptions {
    fn manager_config(&self) -> ConnectionManagerConfig {
        ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connection_timeout))
            .set_response_timeout(Some(self.response_timeout))
            .set_number_of_retries(self.reconnect_retries)
            .set_min_delay(Duration::from_millis(100))
            .set_max_delay(Duration::from_millis(500))
    }
}

/// How long `WAITAOF` (Redis ≥ 7.2, [`Durability::Strict`]) waits for a write to reach the AOF
/// on disk before the write is answered 503 instead of 202.
pub const WAITAOF_TIMEOUT: Duration = Duration::from_millis(500);

/// How a strict store confirms each write before acknowledging it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Confirm {
    /// Best-effort: nothing.
    Nothing,
    /// `WAITAOF 1 0 ms` (Redis ≥ 7.2).
    WaitAof,
    /// `CONFIG GET appendonly` / `appendfsync` still `yes` / `always` (Redis < 7.2, where
    /// `appendfsync always` fsyncs before the reply).
    Config,
}

/// A Redis server's persistence, as read at start-up and by health checks.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Persistence {
    /// `redis_version` of `INFO server`, `(0, 0, 0)` when unknown.
    version: (u32, u32, u32),
    /// `appendonly` (`CONFIG GET`), or `aof_enabled` of `INFO persistence`.
    appendonly: bool,
    /// `appendfsync`, `None` when `CONFIG GET` is unavailable.
    appendfsync: Option<String>,
    /// Why `CONFIG GET` could not be used (renamed, disabled, denied by an ACL).
    config_error: Option<String>,
}

impl Persistence {
    /// How each write is confirmed in strict mode, or why strict mode is impossible (naming the
    /// setting to change).
    fn strict_confirm(&self) -> Result<Confirm, String> {
        let has_waitaof = self.version >= (7, 2, 0);
        if !self.appendonly {
            let source = match &self.config_error {
                None => "appendonly is `no`".to_string(),
                Some(e) => format!(
                    "INFO persistence reports aof_enabled:0 (CONFIG GET is unavailable: {e})"
                ),
            };
            return Err(format!(
                "{source}; set `appendonly yes` and `appendfsync always` (in redis.conf, or \
                 CONFIG SET appendonly yes, CONFIG SET appendfsync always, CONFIG REWRITE)"
            ));
        }
        match (self.appendfsync.as_deref(), &self.config_error) {
            (Some("always"), _) if has_waitaof => Ok(Confirm::WaitAof),
            (Some("always"), _) => Ok(Confirm::Config),
            (Some(other), _) => Err(format!(
                "appendfsync is `{other}`, so the writes of up to the last second or more are lost \
                 in a crash; set `appendfsync always` (in redis.conf, or CONFIG SET appendfsync \
                 always, CONFIG REWRITE)"
            )),
            // WAITAOF confirms each write whatever the fsync policy.
            (None, _) if has_waitaof => Ok(Confirm::WaitAof),
            (None, e) => Err(format!(
                "appendfsync cannot be read (CONFIG GET is unavailable: {}; INFO persistence does \
                 not report it) and Redis {}.{}.{} has no WAITAOF (7.2) to confirm each write; \
                 allow CONFIG GET for this connection and set `appendfsync always`, or use \
                 Redis ≥ 7.2 with `appendonly yes`",
                e.as_deref().unwrap_or("unknown"),
                self.version.0,
                self.version.1,
                self.version.2
            )),
        }
    }
}

/// Whether a Redis error means "not now" (outage, timeout, Redis loading or refusing writes):
/// such errors answer 503 with `Retry-After`, all others 500.
fn is_outage(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_unrecoverable_error()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ReadOnly
            )
        )
        || matches!(
            e.code(),
            Some("MISCONF" | "BUSY" | "OOM" | "NOREPLICAS" | "LOADING" | "MASTERDOWN")
        )
}

/// A Redis error as a store error: [`StoreError::Unavailable`] for an outage ([`is_outage`]),
/// [`StoreError::Backend`] otherwise.
pub(crate) fn redis_err(e: redis::RedisError) -> StoreError {
    if is_outage(&e) {
        StoreError::Unavailable(format!("redis: {e}"))
    } else {
        StoreError::Backend(format!("redis: {e}"))
    }
}

/// The value of `field` in the text of `INFO` (`field:value` lines).
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(str::trim)
}

/// `"7.0.15"` as `(7, 0, 15)`; missing or unparsable parts count as 0.
fn parse_version(v: &str) -> (u32, u32, u32) {
    let mut parts = v.trim().split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

/// `(appendonly, appendfsync)` from `CONFIG GET`; the inner `Err` says why `CONFIG` cannot be
/// used (a server error such as an unknown or denied command), the outer one is an outage.
async fn read_config(
    con: &mut ConnectionManager,
) -> Result<Result<(bool, String), String>, StoreError> {
    // One parameter per CONFIG GET (several need Redis 7), pipelined in one round trip.
    let r: redis::RedisResult<(HashMap<String, String>, HashMap<String, String>)> = redis::pipe()
        .cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync")
        .query_async(con)
        .await;
    match r {
        Ok((a, f)) => match (a.get("appendonly"), f.get("appendfsync")) {
            (Some(a), Some(f)) => Ok(Ok((a.eq_ignore_ascii_case("yes"), f.to_ascii_lowercase()))),
            _ => Ok(Err(
                "CONFIG GET did not return appendonly/appendfsync".into()
            )),
        },
        Err(e) if is_outage(&e) => Err(redis_err(e)),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// The server's version and persistence configuration (`INFO persistence` when `CONFIG` is
/// unavailable).
async fn read_persistence(con: &mut ConnectionManager) -> Result<Persistence, StoreError> {
    let server: redis::RedisResult<String> =
        redis::cmd("INFO").arg("server").query_async(con).await;
    let version = match server {
        Ok(info) => info_field(&info, "redis_version").map_or((0, 0, 0), parse_version),
        Err(e) if is_outage(&e) => return Err(redis_err(e)),
        Err(_) => (0, 0, 0),
    };
    match read_config(con).await? {
        Ok((appendonly, fsync)) => Ok(Persistence {
            version,
            appendonly,
            appendfsync: Some(fsync),
            config_error: None,
        }),
        Err(why) => {
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query_async(con)
                .await
                .map_err(redis_err)?;
            Ok(Persistence {
                version,
                appendonly: info_field(&info, "aof_enabled") == Some("1"),
                appendfsync: None,
                config_error: Some(why),
            })
        }
    }
}

impl RedisStore {
    /// What a 202 of this store promises.
    pub fn durability(&self) -> Durability {
        self.conn.durability()
    }
}

/// A connection to Redis with its durability policy: the one place where the Redis stores (the
/// Draw-and-Discard [`RedisStore`] and the secure-aggregation
/// [`RedisRoundStore`](crate::secagg::RedisRoundStore)) connect, check the server's
/// persistence at start-up, confirm each write before acknowledging it and classify errors
/// (see the [module documentation](self)). Clones share one multiplexed connection, so a
/// `WAITAOF` sent through any clone covers the writes sent before it through the others.
#[derive(Clone)]
pub struct RedisConnection {
    con: ConnectionManager,
    durability: Durability,
    confirm: Confirm,
}

impl std::fmt::Debug for RedisConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConnection")
            .field("durability", &self.durability)
            .field("confirm", &self.confirm)
            .finish_non_exhaustive()
    }
}

impl RedisConnection {
    /// Connects to `url` (`redis://HOST:PORT[/DB]`) with `options`: applies the timeouts, reads
    /// the server's version and persistence configuration and, in [`Durability::Strict`] mode,
    /// refuses (with [`StoreError::Unavailable`] naming the setting to change) a Redis that
    /// would lose acknowledged writes in a crash.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(backend)?;
        let mut con = ConnectionManager::new_with_config(client, options.manager_config())
            .await
            .map_err(redis_err)?;
        let _: String = redis::cmd("PING")
            .query_async(&mut con)
            .await
            .map_err(redis_err)?;
        let confirm = match options.durability {
            Durability::BestEffort => {
                tracing::warn!(
                    "Redis durability is best-effort: an acknowledged update may be lost if \
                     redis-server crashes (202 answers \"durable\": false)"
                );
                Confirm::Nothing
            }
            Durability::Strict => {
                let p = read_persistence(&mut con).await?;
                p.strict_confirm().map_err(|why| {
                    StoreError::Unavailable(format!(
                        "this Redis would lose acknowledged updates in a crash: {why}; or \
                         accept that risk with best-effort durability \
                         (--redis-durability best-effort), whose 202 answers \"durable\": false"
                    ))
                })?
            }
        };
        Ok(Self {
            con,
            durability: options.durability,
            confirm,
        })
    }

    /// A handle on the multiplexed connection (cheap to clone).
    pub fn manager(&self) -> ConnectionManager {
        self.con.clone()
    }

    /// What an acknowledged write promises.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Whether Redis answers and, in [`Durability::Strict`] mode, still persists every write as
    /// promised at start-up (what `/healthz` reports).
    pub async fn healthy(&self) -> bool {
        let mut con = self.con.clone();
        match self.durability {
            Durability::BestEffort => redis::cmd("PING")
                .query_async::<String>(&mut con)
                .await
                .is_ok(),
            Durability::Strict => match read_persistence(&mut con).await {
                Ok(p) => p.strict_confirm().is_ok(),
                Err(_) => false,
            },
        }
    }

    /// After a write, before it is acknowledged: confirms that it is as durable as promised
    /// (see [`Durability::Strict`]), or answers [`StoreError::Unavailable`].
    pub async fn confirm_durable(&self) -> Result<(), StoreError> {
        let mut con = self.con.clone();
        match self.confirm {
            Confirm::Nothing => Ok(()),
            Confirm::WaitAof => {
                let r: redis::RedisResult<(u64, u64)> = redis::cmd("WAITAOF")
                    .arg(1)
                    .arg(0)
                    .arg(WAITAOF_TIMEOUT.as_millis() as u64)
                    .query_async(&mut con)
                    .await;
                match r {
                    Ok((local, _)) if local >= 1 => Ok(()),
                    Ok(_) => Err(StoreError::Unavailable(format!(
                        "redis: the write did not reach the AOF on disk within {} ms (WAITAOF)",
                        WAITAOF_TIMEOUT.as_millis()
                    ))),
                    Err(e) if is_outage(&e) => Err(redis_err(e)),
                    // E.g. "WAITAOF cannot be used when numlocal is set but appendonly is
                    // disabled": persistence was turned off at run time.
                    Err(e) => Err(StoreError::Unavailable(format!(
                        "redis: cannot confirm persistence: {e}"
                    ))),
                }
            }
            Confirm::Config => match read_config(&mut con).await? {
                Ok((true, fsync)) if fsync == "always" => Ok(()),
                Ok((appendonly, fsync)) => Err(StoreError::Unavailable(format!(
                    "redis: persistence changed at run time (appendonly {}, appendfsync {fsync}): \
                     writes are no longer durable",
                    if appendonly { "yes" } else { "no" }
                ))),
                Err(why) => Err(StoreError::Unavailable(format!(
                    "redis: cannot confirm persistence: {why}"
                ))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(version: (u32, u32, u32), appendonly: bool, fsync: Option<&str>) -> Persistence {
        Persistence {
            version,
            appendonly,
            appendfsync: fsync.map(String::from),
            config_error: fsync
                .is_none()
                .then(|| "ERR unknown command 'CONFIG'".into()),
        }
    }

    #[test]
    fn strict_requires_aof_with_fsync_always() {
        let e = p((7, 0, 15), false, Some("everysec"))
            .strict_confirm()
            .unwrap_err();
        assert!(
            e.contains("appendonly is `no`") && e.contains("appendonly yes"),
            "{e}"
        );
        let e = p((7, 0, 15), true, Some("everysec"))
            .strict_confirm()
            .unwrap_err();
        assert!(e.contains("appendfsync is `everysec`") && e.contains("appendfsync always"));
        assert_eq!(
            p((7, 0, 15), true, Some("always")).strict_confirm(),
            Ok(Confirm::Config)
        );
        assert_eq!(
            p((7, 2, 0), true, Some("always")).strict_confirm(),
            Ok(Confirm::WaitAof)
        );
        // Even 7.2's WAITAOF is not accepted in place of `always` when the policy is known to
        // be weaker: a write would wait up to a second, past the fail-fast timeouts.
        assert!(p((7, 4, 1), true, Some("no")).strict_confirm().is_err());
    }

    #[test]
    fn without_config_strict_needs_waitaof() {
        let e = p((7, 0, 15), true, None).strict_confirm().unwrap_err();
        assert!(
            e.contains("CONFIG GET is unavailable") && e.contains("WAITAOF"),
            "{e}"
        );
        assert_eq!(
            p((8, 0, 2), true, None).strict_confirm(),
            Ok(Confirm::WaitAof)
        );
        let e = p((8, 0, 2), false, None).strict_confirm().unwrap_err();
        assert!(
            e.contains("aof_enabled:0") && e.contains("appendonly yes"),
            "{e}"
        );
    }

    #[test]
    fn info_and_version_parsing() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n";
        assert_eq!(info_field(info, "redis_version"), Some("7.0.15"));
        assert_eq!(info_field(info, "redis"), None);
        assert_eq!(parse_version("7.0.15"), (7, 0, 15));
        assert_eq!(parse_version("7.2"), (7, 2, 0));
        assert_eq!(parse_version("x"), (0, 0, 0));
        assert!(parse_version("7.2.4") >= (7, 2, 0) && parse_version("7.0.15") < (7, 2, 0));
        let pers = "# Persistence\r\nloading:0\r\naof_enabled:1\r\n";
        assert_eq!(info_field(pers, "aof_enabled"), Some("1"));
    }

    #[test]
    fn outages_are_unavailable_other_errors_backend() {
        use redis::{ErrorKind, RedisError, ServerErrorKind};
        for k in [
            std::io::ErrorKind::ConnectionRefused,
            std::io::ErrorKind::TimedOut,
            std::io::ErrorKind::BrokenPipe,
            std::io::ErrorKind::UnexpectedEof,
        ] {
            let e = RedisError::from(std::io::Error::from(k));
            assert!(matches!(redis_err(e), StoreError::Unavailable(_)), "{k:?}");
        }
        let loading = RedisError::from((
            ErrorKind::Server(ServerErrorKind::BusyLoading),
            "Redis is loading the dataset in memory",
        ));
        assert!(matches!(redis_err(loading), StoreError::Unavailable(_)));
        let err = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            "wrong kind of value",
        ));
        assert!(matches!(redis_err(err), StoreError::Backend(_)));
        let ty = RedisError::from((ErrorKind::UnexpectedReturnType, "not a string"));
        assert!(matches!(redis_err(ty), StoreError::Backend(_)));
    }
}
