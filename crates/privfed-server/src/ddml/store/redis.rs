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
use crate::ddml::model::{ModelSpec, decode_f32, encode_f32};
use crate::ddml::ticket::{Ticket, TicketLimits};
use crate::http::error::StoreError;
use crate::redis_conn::redis_err;
pub use crate::redis_conn::{Durability, RedisConnection, RedisOptions, WAITAOF_TIMEOUT};
use bytes::Bytes;
use privfed_ddml::decision::SpamStats;
use privfed_ddml::engine::replacement_index;
use privfed_ddml::ticket::{Redeem, Refusal};
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

/// The redemption rule of `privfed_ddml::ticket::redeem`, carried out atomically in Redis (a Lua
/// script; a test runs a table of records through both and compares). KEYS = meta, ticket;
/// ARGV = expected generation, key prefix, in-progress hold in ms. A ticket's value is
/// `gen:i:v` (issued from version `v` of instance `i`), `p:UNTIL_MS:gen:i:v` (in progress until
/// then; a lapsed hold, whose request died, is issued again) or `u:OUTCOME` (used); an expired
/// ticket's key is gone (its lifetime is the key's). Returns `{'fresh', base}` (and holds the
/// ticket in progress), `{'used', outcome}`, `{'busy'}` or `{'invalid', why}` (refused; `why` is
/// `unknown` — no key, also an expired ticket's, which the store tells apart by the issue time
/// the ticket carries —, `other_model` or `overwritten`).
pub const REDEEM_SCRIPT: &str = r"
local t = redis.call('GET', KEYS[2])
if not t then return {'invalid', 'unknown'} end
if string.sub(t, 1, 2) == 'u:' then return {'used', string.sub(t, 3)} end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
if string.sub(t, 1, 2) == 'p:' then
  local until_ms, rest = string.match(t, '^p:(%d+):(.*)$')
  if tonumber(until_ms) > now_ms then return {'busy'} end
  t = rest
end
local gen, i, v = string.match(t, '^(%d+):(%d+):(%d+)$')
if gen ~= ARGV[1] then return {'invalid', 'other_model'} end
local cur = redis.call('HGET', KEYS[1], 'v:' .. i) or '0'
local base
if cur == v then
  base = redis.call('GET', ARGV[2] .. 'inst:' .. i)
else
  base = redis.call('GET', ARGV[2] .. 'old:' .. gen .. ':' .. i .. ':' .. v)
end
if not base then return {'invalid', 'overwritten'} end
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
    stats: Option<(Instant, Arc<SpamStats>)>,
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

/// How a used ticket's outcome is stored for replays ([`crate::ddml::store::decode_outcome`]), without
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
            redeem: Arc::new(redis::Script::new(REDEEM_SCRIPT)),
            release: Arc::new(redis::Script::new(RELEASE)),
            limits: TicketLimits::default(),
        }
    }

    /// The store with other ticket limits (lifetime, and memory for overwritten instances kept
    /// for tickets) than [`TicketLimits::default`].
    pub fn with_ticket_limits(mut self, limits: TicketLimits) -> Self {
        self.limits = limits;
        self
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

    async fn stats(&self, spec: &Arc<ModelSpec>) -> Result<Arc<SpamStats>, StoreError> {
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
        let s = Arc::new(SpamStats::new(&inst).map_err(backend)?);
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
    ) -> Result<Redeem<SubmitOutcome, Arc<[f32]>>, StoreError> {
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
                Redeem::Fresh(Arc::from(w))
            }
            "used" => Redeem::Replay(crate::ddml::store::decode_outcome(&reply_field::<String>(
                &r, 1,
            )?)?),
            "busy" => Redeem::InProgress,
            _ => Redeem::Refuse(match reply_field::<String>(&r, 1)?.as_str() {
                "other_model" => Refusal::OtherModel,
                "overwritten" => Refusal::Overwritten,
                // Redis forgets a ticket at its expiry: the issue time it carries tells.
                _ if t.expired(self.limits.ttl, crate::ddml::ticket::wall_ms()) => Refusal::Expired,
                _ => Refusal::Unknown,
            }),
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
                let stats = stats.as_deref().map(SpamStats::instances);
                crate::ddml::store::decide(spec, base, &weights, stats)?
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
        let ticket = Ticket::random_issued_at(crate::ddml::ticket::wall_ms());
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
            None if crate::ddml::store::needs_ticket(spec) => {
                return Err(StoreError::TicketRequired);
            }
            None => None,
            Some(t) => match self.redeem_ticket(name, spec, t).await? {
                Redeem::Fresh(base) => Some(base),
                Redeem::Replay(o) => return Ok(Admission::Replayed(o)),
                Redeem::InProgress => return Err(StoreError::TicketInUse),
                Redeem::Refuse(why) => return Err(StoreError::TicketInvalid(why)),
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

    async fn spam_stats(&self, name: &str) -> Result<Option<SpamStats>, StoreError> {
        let spec = self.fetch_spec(name).await?;
        if spec.spam.is_none() {
            return Ok(None);
        }
        let inst = self.fetch_instances(&spec).await?;
        Ok(Some(SpamStats::new(&inst).map_err(backend)?))
    }

    async fn healthy(&self) -> bool {
        self.conn.healthy().await
    }

    fn durable_acks(&self) -> bool {
        self.conn.durability() == Durability::Strict
    }
}

impl RedisStore {
    /// What a 202 of this store promises.
    pub fn durability(&self) -> Durability {
        self.conn.durability()
    }
}
