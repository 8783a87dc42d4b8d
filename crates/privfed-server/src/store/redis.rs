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

use super::{ModelSnapshot, Store, SubmitOutcome};
use crate::error::StoreError;
use crate::model::{ModelSpec, decode_f32, encode_f32};
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

const UPDATE: &str = r"
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('HINCRBY', KEYS[1], 'accepted', 1)
return 1";

const REJECT: &str = r"
if redis.call('HGET', KEYS[1], 'gen') ~= ARGV[1] then return 0 end
redis.call('HINCRBY', KEYS[1], 'rejected', 1)
return 1";

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

    async fn draw(&self, name: &str) -> Result<Bytes, StoreError> {
        let spec = self.spec(name).await?;
        let i = replacement_index(spec.k, &mut rand::rng());
        let mut con = self.con.clone();
        let blob: Option<Vec<u8>> = redis::cmd("GET")
            .arg(inst_key(name, i))
            .query_async(&mut con)
            .await
            .map_err(backend)?;
        match blob {
            // Stored as the wire format: answer it as is.
            Some(b) if b.len() == 4 * spec.dim => Ok(Bytes::from(b)),
            _ => {
                self.forget(name);
                Err(StoreError::NotFound(name.to_string()))
            }
        }
    }

    async fn submit(&self, name: &str, weights: Vec<f32>) -> Result<SubmitOutcome, StoreError> {
        let spec = self.spec(name).await?;
        if weights.len() != spec.dim {
            // The model changed under a stale cache: treat as gone.
            self.forget(name);
            return Err(StoreError::NotFound(name.to_string()));
        }
        let verdict = match &spec.spam {
            None => Ok(()),
            Some(f) => f.check(&*self.stats(&spec).await?, &weights),
        };
        let mut con = self.con.clone();
        let gen_arg = spec.generation.to_string();
        let (ok, outcome): (i64, SubmitOutcome) = match verdict {
            Ok(()) => {
                let j = replacement_index(spec.k, &mut rand::rng());
                let r = self
                    .update
                    .key(meta_key(name))
                    .key(inst_key(name, j))
                    .arg(gen_arg)
                    .arg(encode_f32(&weights))
                    .invoke_async(&mut con)
                    .await
                    .map_err(backend)?;
                (r, SubmitOutcome::Accepted)
            }
            Err(rej) => {
                let r = self
                    .reject
                    .key(meta_key(name))
                    .arg(gen_arg)
                    .invoke_async(&mut con)
                    .await
                    .map_err(backend)?;
                (r, SubmitOutcome::Rejected(rej))
            }
        };
        if ok == 1 {
            Ok(outcome)
        } else {
            self.forget(name);
            Err(StoreError::NotFound(name.to_string()))
        }
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

    async fn total_floats(&self) -> Result<u64, StoreError> {
        // SCAN the model metadata keys (admin path only: runs when a model is created).
        let mut con = self.con.clone();
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
}
