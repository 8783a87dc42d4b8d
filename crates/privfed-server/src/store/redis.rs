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
//! lock-free design of paper 003 allows anyway). An acknowledged update is as durable as the
//! Redis deployment makes it (its AOF/RDB and replication settings).

use super::{Drawn, ModelSnapshot, Rejection, Store, Submission, SubmitOutcome};
use crate::error::StoreError;
use crate::model::{ModelSpec, decode_f32, encode_f32};
use crate::ticket::{Ticket, TicketLimits};
use bytes::Bytes;
use privfed_ddml::engine::{InstanceStats, replacement_index};
use redis::aio::ConnectionManager;
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
    con: ConnectionManager,
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

/// How a used ticket's outcome is stored for replays: `a` (accepted) or `r` + the rejection.
fn encode_outcome(o: &SubmitOutcome) -> String {
    match o {
        SubmitOutcome::Rejected(Rejection::Spam(r)) => serde_json::to_string(r).unwrap_or_default(),
        _ => String::new(),
    }
}

fn decode_outcome(s: &str) -> SubmitOutcome {
    match s.strip_prefix('r') {
        Some(json) => match serde_json::from_str(json) {
            Ok(r) => SubmitOutcome::Rejected(Rejection::Spam(r)),
            Err(_) => SubmitOutcome::Accepted,
        },
        None => SubmitOutcome::Accepted,
    }
}

impl RedisStore {
    /// Connects to `url` (`redis://HOST:PORT[/DB]`) and checks the connection with a `PING`.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let client = redis::Client::open(url).map_err(backend)?;
        let mut con = ConnectionManager::new(client).await.map_err(backend)?;
        let _: String = redis::cmd("PING")
            .query_async(&mut con)
            .await
            .map_err(backend)?;
        Ok(Self {
            con,
            cache: Arc::new(Mutex::new(HashMap::new())),
            create: Arc::new(redis::Script::new(CREATE)),
            delete: Arc::new(redis::Script::new(DELETE)),
            update: Arc::new(redis::Script::new(UPDATE)),
            reject: Arc::new(redis::Script::new(REJECT)),
            draw: Arc::new(redis::Script::new(DRAW)),
            redeem: Arc::new(redis::Script::new(REDEEM)),
            release: Arc::new(redis::Script::new(RELEASE)),
            limits: TicketLimits::default(),
        })
    }

    fn forget(&self, name: &str) {
        if let Ok(mut c) = self.cache.lock() {
            c.remove(name);
        }
    }

    async fn fetch_spec(&self, name: &str) -> Result<Arc<ModelSpec>, StoreError> {
        let mut con = self.con.clone();
        let raw: Option<String> = redis::cmd("HGET")
            .arg(meta_key(name))
            .arg("spec")
            .query_async(&mut con)
            .await
            .map_err(backend)?;
        let raw = raw.ok_or_else(|| StoreError::NotFound(name.to_string()))?;
        let spec: ModelSpec = serde_json::from_str(&raw).map_err(backend)?;
        Ok(Arc::new(spec))
    }

    async fn fetch_instances(&self, spec: &ModelSpec) -> Result<Vec<Arc<[f32]>>, StoreError> {
        let mut con = self.con.clone();
        let keys: Vec<String> = (0..spec.k).map(|i| inst_key(&spec.name, i)).collect();
        let blobs: Vec<Option<Vec<u8>>> = redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut con)
            .await
            .map_err(backend)?;
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

impl RedisStore {
    /// Checks and writes an update whose ticket (if any) this call holds.
    async fn apply(
        &self,
        name: &str,
        spec: &Arc<ModelSpec>,
        ticket: Option<Ticket>,
        weights: Vec<f32>,
        base: Option<&[f32]>,
    ) -> Result<SubmitOutcome, StoreError> {
        let stats = match &spec.spam {
            Some(_) => Some(self.stats(spec).await?),
            None => None,
        };
        let verdict = crate::store::check_update(spec, base, &weights, stats.as_deref());
        let mut con = self.con.clone();
        let gen_arg = spec.generation.to_string();
        let ticket_key_or_dummy = match ticket {
            Some(t) => ticket_key(name, t),
            None => format!("{}t:none", prefix(name)),
        };
        let has_ticket = if ticket.is_some() { "1" } else { "0" };
        let (ok, outcome): (i64, SubmitOutcome) = match verdict {
            None => {
                let j = replacement_index(spec.k, &mut rand::rng());
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
                    .map_err(backend)?;
                (r, SubmitOutcome::Accepted)
            }
            Some(rej) => {
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
                    .map_err(backend)?;
                (r, outcome)
            }
        };
        match ok {
            1 => Ok(outcome),
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

impl Store for RedisStore {
    async fn create_model(
        &self,
        spec: ModelSpec,
        instances: Vec<Vec<f32>>,
    ) -> Result<(), StoreError> {
        let mut con = self.con.clone();
        let mut inv = self.create.key(meta_key(&spec.name));
        for i in 0..spec.k {
            inv.key(inst_key(&spec.name, i));
        }
        inv.arg(serde_json::to_string(&spec).map_err(backend)?)
            .arg(spec.generation.to_string());
        for w in &instances {
            inv.arg(encode_f32(w));
        }
        let created: i64 = inv.invoke_async(&mut con).await.map_err(backend)?;
        if created == 1 {
            self.forget(&spec.name);
            Ok(())
        } else {
            Err(StoreError::Conflict(spec.name))
        }
    }

    async fn delete_model(&self, name: &str) -> Result<(), StoreError> {
        let spec = self.fetch_spec(name).await?;
        let mut con = self.con.clone();
        let mut inv = self.delete.key(meta_key(name));
        for i in 0..spec.k {
            inv.key(inst_key(name, i));
        }
        let deleted: i64 = inv.invoke_async(&mut con).await.map_err(backend)?;
        self.forget(name);
        if deleted == 1 {
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
        let mut con = self.con.clone();
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
            .map_err(backend)?;
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

    async fn submit(&self, name: &str, sub: Submission) -> Result<SubmitOutcome, StoreError> {
        let spec = self.spec(name).await?;
        if spec.generation != sub.generation || sub.weights.len() != spec.dim {
            // The model the update was validated against is gone (or the cache is stale).
            self.forget(name);
            return Err(StoreError::NotFound(name.to_string()));
        }
        let mut con = self.con.clone();
        let gen_arg = sub.generation.to_string();
        let base: Option<Vec<f32>> =
            match sub.ticket {
                None if crate::store::needs_ticket(&spec) => {
                    return Err(StoreError::TicketRequired);
                }
                None => None,
                Some(t) => {
                    let r: Vec<redis::Value> = self
                        .redeem
                        .key(meta_key(name))
                        .key(ticket_key(name, t))
                        .arg(&gen_arg)
                        .arg(prefix(name))
                        .arg(TICKET_HOLD_MS)
                        .invoke_async(&mut con)
                        .await
                        .map_err(backend)?;
                    let tag: String = r
                        .first()
                        .map(redis::from_redis_value_ref)
                        .transpose()
                        .map_err(backend)?
                        .unwrap_or_default();
                    match tag.as_str() {
                        "fresh" => {
                            let b: Vec<u8> = r
                                .get(1)
                                .map(redis::from_redis_value_ref)
                                .transpose()
                                .map_err(backend)?
                                .unwrap_or_default();
                            Some(decode_f32(&b).filter(|w| w.len() == spec.dim).ok_or_else(
                                || StoreError::Backend(format!("corrupt instance of `{name}`")),
                            )?)
                        }
                        "used" => {
                            let o: String = r
                                .get(1)
                                .map(redis::from_redis_value_ref)
                                .transpose()
                                .map_err(backend)?
                                .unwrap_or_default();
                            return Ok(SubmitOutcome::Replayed(Box::new(decode_outcome(&o))));
                        }
                        "busy" => return Err(StoreError::TicketInUse),
                        _ => return Err(StoreError::TicketInvalid),
                    }
                }
            };
        let ticket = sub.ticket;
        let result = self
            .apply(name, &spec, ticket, sub.weights, base.as_deref())
            .await;
        if let (Err(_), Some(t)) = (&result, ticket) {
            // Not applied: let the client retry with the same ticket (best effort; otherwise
            // the hold lapses after TICKET_HOLD_MS).
            let mut con = self.con.clone();
            let _: Result<i64, _> = self
                .release
                .key(ticket_key(name, t))
                .invoke_async(&mut con)
                .await;
        }
        result
    }

    async fn snapshot(&self, name: &str) -> Result<ModelSnapshot, StoreError> {
        let mut con = self.con.clone();
        let meta: HashMap<String, String> = redis::cmd("HGETALL")
            .arg(meta_key(name))
            .query_async(&mut con)
            .await
            .map_err(backend)?;
        let raw = meta
            .get("spec")
            .ok_or_else(|| StoreError::NotFound(name.to_string()))?;
        let spec: Arc<ModelSpec> = Arc::new(serde_json::from_str(raw).map_err(backend)?);
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
        let mut con = self.con.clone();
        redis::cmd("PING")
            .query_async::<String>(&mut con)
            .await
            .is_ok()
    }
}
