//! The default store: redb (an embedded ACID database) in `--data-dir`.
//!
//! Reads are served from an in-memory copy of every instance. All writes go through one writer
//! thread: it takes every pending operation, applies the updates in one write transaction with
//! `Durability::Immediate` (group commit: one fsync for the batch, and at most `k` instance
//! values written however many updates the batch holds), and only after the commit returns does
//! it update the in-memory copy and acknowledge the requests. Hence after a crash:
//! * every instance is a whole model that was initialized or written by an acknowledged-or-in-flight
//!   update (redb commits are atomic; an instance is one value);
//! * the `accepted`/`rejected` counters live in the same transaction as the instances, so they
//!   match what was applied;
//! * every acknowledged update was committed before its acknowledgement.

use super::{ModelSnapshot, Store, SubmitOutcome};
use crate::error::StoreError;
use crate::model::{ModelSpec, decode_f32, encode_f32};
use bytes::Bytes;
use privfed_ddml::engine::{InstanceStats, replacement_index};
use rand::SeedableRng;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use tokio::sync::{mpsc, oneshot};

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("models");
const INSTANCES: TableDefinition<(&str, u32), &[u8]> = TableDefinition::new("instances");

/// The most operations folded into one commit.
const MAX_BATCH: usize = 4096;
/// Running sums are recomputed from scratch after this many overwrites.
const RECOMPUTE_EVERY: u64 = 4096;

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
}

struct ModelState {
    spec: Arc<ModelSpec>,
    instances: RwLock<Instances>,
    stats: RwLock<InstanceStats>,
    accepted: AtomicU64,
    rejected: AtomicU64,
    overwrites: AtomicU64,
    deleted: AtomicBool,
}

impl ModelState {
    fn new(spec: ModelSpec, instances: Vec<Arc<[f32]>>, accepted: u64, rejected: u64) -> Self {
        let stats = InstanceStats::from_instances(&instances)
            .expect("instances validated before building the state");
        Self {
            spec: Arc::new(spec),
            instances: RwLock::new(Instances {
                encoded: instances
                    .iter()
                    .map(|w| Bytes::from(encode_f32(w)))
                    .collect(),
                weights: instances,
            }),
            stats: RwLock::new(stats),
            accepted: AtomicU64::new(accepted),
            rejected: AtomicU64::new(rejected),
            overwrites: AtomicU64::new(0),
            deleted: AtomicBool::new(false),
        }
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
        weights: Arc<[f32]>,
        ack: Ack<SubmitOutcome>,
    },
    Reject {
        model: Arc<ModelState>,
        rejection: privfed_ddml::engine::SpamRejection,
        ack: Ack<SubmitOutcome>,
    },
}

type Models = Arc<RwLock<HashMap<String, Arc<ModelState>>>>;

/// The redb-backed store (see the [module documentation](self)).
#[derive(Clone)]
pub struct EmbeddedStore {
    models: Models,
    tx: mpsc::UnboundedSender<WriteOp>,
}

fn backend<E: std::fmt::Display>(e: E) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn lock_poisoned() -> StoreError {
    StoreError::Backend("a lock was poisoned by a panic".into())
}

impl EmbeddedStore {
    /// Opens (or creates) `DIR/privfed.redb`, loads every model and starts the writer thread.
    /// Errors if the directory cannot be created, the database cannot be opened (e.g. another
    /// process holds it) or a stored instance has the wrong length.
    pub fn open(data_dir: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(data_dir).map_err(backend)?;
        let db = Database::create(data_dir.join("privfed.redb")).map_err(backend)?;
        {
            let w = db.begin_write().map_err(backend)?;
            w.open_table(META).map_err(backend)?;
            w.open_table(INSTANCES).map_err(backend)?;
            w.commit().map_err(backend)?;
        }
        let mut map = HashMap::new();
        {
            let r = db.begin_read().map_err(backend)?;
            let meta = r.open_table(META).map_err(backend)?;
            let inst = r.open_table(INSTANCES).map_err(backend)?;
            for entry in meta.iter().map_err(backend)? {
                let (_, v) = entry.map_err(backend)?;
                let m: StoredMeta = serde_json::from_slice(v.value()).map_err(backend)?;
                let mut instances = Vec::with_capacity(m.spec.k);
                for i in 0..m.spec.k {
                    let blob = inst
                        .get((m.spec.name.as_str(), i as u32))
                        .map_err(backend)?
                        .ok_or_else(|| {
                            StoreError::Backend(format!(
                                "model `{}` is missing instance {i}",
                                m.spec.name
                            ))
                        })?;
                    let w = decode_f32(blob.value())
                        .filter(|w| w.len() == m.spec.dim && w.iter().all(|x| x.is_finite()))
                        .ok_or_else(|| {
                            StoreError::Backend(format!(
                                "model `{}` instance {i} is corrupt",
                                m.spec.name
                            ))
                        })?;
                    instances.push(Arc::from(w));
                }
                let name = m.spec.name.clone();
                map.insert(
                    name,
                    Arc::new(ModelState::new(m.spec, instances, m.accepted, m.rejected)),
                );
            }
        }
        let models: Models = Arc::new(RwLock::new(map));
        let (tx, rx) = mpsc::unbounded_channel();
        let writer_models = models.clone();
        std::thread::Builder::new()
            .name("privfed-redb-writer".into())
            .spawn(move || writer_loop(db, writer_models, rx))
            .map_err(backend)?;
        Ok(Self { models, tx })
    }

    fn get(&self, name: &str) -> Result<Arc<ModelState>, StoreError> {
        self.models
            .read()
            .map_err(|_| lock_poisoned())?
            .get(name)
            .cloned()
            .ok_or_else(|| StoreError::NotFound(name.to_string()))
    }

    async fn send<T>(&self, make: impl FnOnce(Ack<T>) -> WriteOp) -> Result<T, StoreError> {
        let (ack, rx) = oneshot::channel();
        self.tx
            .send(make(ack))
            .map_err(|_| StoreError::Backend("the writer thread has stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Backend("the writer thread dropped a request".into()))?
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

    async fn draw(&self, name: &str) -> Result<Bytes, StoreError> {
        let m = self.get(name)?;
        let i = replacement_index(m.spec.k, &mut rand::rng());
        let inst = m.instances.read().map_err(|_| lock_poisoned())?;
        Ok(inst.encoded[i].clone())
    }

    async fn submit(&self, name: &str, weights: Vec<f32>) -> Result<SubmitOutcome, StoreError> {
        let model = self.get(name)?;
        let verdict = match &model.spec.spam {
            None => Ok(()),
            Some(f) => f.check(&*model.stats.read().map_err(|_| lock_poisoned())?, &weights),
        };
        match verdict {
            Ok(()) => {
                let weights: Arc<[f32]> = Arc::from(weights);
                self.send(|ack| WriteOp::Update {
                    model,
                    weights,
                    ack,
                })
                .await
            }
            Err(rejection) => {
                self.send(|ack| WriteOp::Reject {
                    model,
                    rejection,
                    ack,
                })
                .await
            }
        }
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
        !self.tx.is_closed()
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

/// The writer thread: group commit.
fn writer_loop(db: Database, models: Models, mut rx: mpsc::UnboundedReceiver<WriteOp>) {
    let mut rng = rand::rngs::ChaCha20Rng::from_rng(&mut rand::rng());
    while let Some(first) = rx.blocking_recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        // Creates and deletes get their own transactions; runs of updates share one.
        let mut updates = Vec::new();
        for op in batch {
            match op {
                WriteOp::Create {
                    spec,
                    instances,
                    ack,
                } => {
                    commit_updates(&db, std::mem::take(&mut updates), &mut rng);
                    let _ = ack.send(create(&db, &models, spec, instances));
                }
                WriteOp::Delete { name, ack } => {
                    commit_updates(&db, std::mem::take(&mut updates), &mut rng);
                    let _ = ack.send(delete(&db, &models, &name));
                }
                other => updates.push(other),
            }
        }
        commit_updates(&db, updates, &mut rng);
    }
}

fn create(
    db: &Database,
    models: &Models,
    spec: ModelSpec,
    instances: Vec<Vec<f32>>,
) -> Result<(), StoreError> {
    if models
        .read()
        .map_err(|_| lock_poisoned())?
        .contains_key(&spec.name)
    {
        return Err(StoreError::Conflict(spec.name));
    }
    let mut w = db.begin_write().map_err(backend)?;
    w.set_durability(Durability::Immediate).map_err(backend)?;
    {
        let mut meta = w.open_table(META).map_err(backend)?;
        let mut inst = w.open_table(INSTANCES).map_err(backend)?;
        let stored = StoredMeta {
            spec: spec.clone(),
            accepted: 0,
            rejected: 0,
        };
        let bytes = serde_json::to_vec(&stored).map_err(backend)?;
        meta.insert(spec.name.as_str(), bytes.as_slice())
            .map_err(backend)?;
        for (i, v) in instances.iter().enumerate() {
            inst.insert((spec.name.as_str(), i as u32), encode_f32(v).as_slice())
                .map_err(backend)?;
        }
    }
    w.commit().map_err(backend)?;
    let instances: Vec<Arc<[f32]>> = instances.into_iter().map(Arc::from).collect();
    let name = spec.name.clone();
    models
        .write()
        .map_err(|_| lock_poisoned())?
        .insert(name, Arc::new(ModelState::new(spec, instances, 0, 0)));
    Ok(())
}

fn delete(db: &Database, models: &Models, name: &str) -> Result<(), StoreError> {
    let model = models
        .read()
        .map_err(|_| lock_poisoned())?
        .get(name)
        .cloned()
        .ok_or_else(|| StoreError::NotFound(name.to_string()))?;
    let mut w = db.begin_write().map_err(backend)?;
    w.set_durability(Durability::Immediate).map_err(backend)?;
    {
        let mut meta = w.open_table(META).map_err(backend)?;
        let mut inst = w.open_table(INSTANCES).map_err(backend)?;
        meta.remove(name).map_err(backend)?;
        for i in 0..model.spec.k {
            inst.remove((name, i as u32)).map_err(backend)?;
        }
    }
    w.commit().map_err(backend)?;
    model.deleted.store(true, Ordering::Release);
    models.write().map_err(|_| lock_poisoned())?.remove(name);
    Ok(())
}

/// One planned change to a model within a batch.
struct Planned {
    model: Arc<ModelState>,
    /// Final value of each overwritten instance in this batch (encoded).
    finals: HashMap<usize, Bytes>,
    /// Overwrites in order (index, new value, its encoding).
    writes: Vec<(usize, Arc<[f32]>, Bytes)>,
    accepted: u64,
    rejected: u64,
}

fn commit_updates(db: &Database, ops: Vec<WriteOp>, rng: &mut rand::rngs::ChaCha20Rng) {
    if ops.is_empty() {
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
            WriteOp::Create { .. } | WriteOp::Delete { .. } => unreachable!("handled by caller"),
        };
        if model.deleted.load(Ordering::Acquire) {
            let _ = ack.send(Err(StoreError::NotFound(model.spec.name.clone())));
            continue;
        }
        let plan = match plans.iter_mut().position(|p| Arc::ptr_eq(&p.model, &model)) {
            Some(i) => &mut plans[i],
            None => {
                plans.push(Planned {
                    model: model.clone(),
                    finals: HashMap::new(),
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
                let le = Bytes::from(encode_f32(&w));
                plan.finals.insert(j, le.clone());
                plan.writes.push((j, w, le));
                plan.accepted += 1;
            }
            None => plan.rejected += 1,
        }
        acks.push((ack, outcome));
    }
    let result = (|| -> Result<(), StoreError> {
        let mut w = db.begin_write().map_err(backend)?;
        w.set_durability(Durability::Immediate).map_err(backend)?;
        {
            let mut meta = w.open_table(META).map_err(backend)?;
            let mut inst = w.open_table(INSTANCES).map_err(backend)?;
            for p in &plans {
                let name = p.model.spec.name.as_str();
                for (&j, le) in &p.finals {
                    inst.insert((name, j as u32), le.as_ref())
                        .map_err(backend)?;
                }
                let stored = StoredMeta {
                    spec: (*p.model.spec).clone(),
                    accepted: p.model.accepted.load(Ordering::Acquire) + p.accepted,
                    rejected: p.model.rejected.load(Ordering::Acquire) + p.rejected,
                };
                meta.insert(
                    name,
                    serde_json::to_vec(&stored).map_err(backend)?.as_slice(),
                )
                .map_err(backend)?;
            }
        }
        w.commit().map_err(backend)
    })();
    match result {
        Ok(()) => {
            for p in plans {
                apply_to_memory(&p);
            }
            for (ack, outcome) in acks {
                let _ = ack.send(Ok(outcome));
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "group commit failed");
            for (ack, _) in acks {
                let _ = ack.send(Err(StoreError::Backend(e.to_string())));
            }
        }
    }
}

fn apply_to_memory(p: &Planned) {
    let m = &p.model;
    // Poisoning cannot happen (no panics while holding these locks); recover anyway.
    let mut inst = m.instances.write().unwrap_or_else(|e| e.into_inner());
    let mut stats = m.stats.write().unwrap_or_else(|e| e.into_inner());
    for (j, w, le) in &p.writes {
        let old = std::mem::replace(&mut inst.weights[*j], w.clone());
        inst.encoded[*j] = le.clone();
        let n = m.overwrites.fetch_add(1, Ordering::AcqRel) + 1;
        if n.is_multiple_of(RECOMPUTE_EVERY) {
            if let Ok(s) = InstanceStats::from_instances(&inst.weights) {
                *stats = s;
            }
        } else {
            stats.replace(&old, w);
        }
    }
    m.accepted.fetch_add(p.accepted, Ordering::AcqRel);
    m.rejected.fetch_add(p.rejected, Ordering::AcqRel);
}
