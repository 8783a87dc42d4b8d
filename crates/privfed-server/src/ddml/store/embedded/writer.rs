//! The committer: group commits into the update journal, checkpoints into redb, model creation
//! and deletion, and what a commit changes in memory.

use super::*;

/// The writer thread's state: group commit.
pub(super) struct Writer {
    pub(super) db: Database,
    pub(super) journal: Journal,
    /// What the journal holds since the last checkpoint, per model: the instances written, and
    /// the tickets its updates used (the record, the outcome), written into the tables at the
    /// checkpoint.
    pub(super) dirty: HashMap<String, Dirty>,
    /// The key of the tickets' tags, for the models it creates.
    pub(super) key: TicketKey,
    pub(super) models: Models,
    pub(super) quarantine: Quarantine,
    pub(super) failure: Failure,
    pub(super) file: FileIdentity,
    pub(super) limits: TicketLimits,
    pub(super) counters: Arc<CommitCounters>,
}

/// One model's part of what the journal holds since the last checkpoint.
pub(super) struct Dirty {
    pub(super) model: Arc<ModelState>,
    /// The instances written.
    pub(super) written: BTreeSet<usize>,
    /// The tickets its updates used, with their outcomes as replays answer them.
    pub(super) used: Vec<(UsedTicket, std::borrow::Cow<'static, str>)>,
}

impl Writer {
    pub(super) fn failed(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// After a commit: the commit went to the file that will be opened again.
    pub(super) fn committed(&self, r: Result<(), StoreError>) -> Result<(), StoreError> {
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
    pub(super) fn commit(&mut self, batch: Vec<WriteOp>, rng: &mut rand::rngs::ChaCha20Rng) {
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
    pub(super) fn shut_down(&mut self) {
        if self.failed().is_none()
            && let Err(e) = self.checkpoint()
        {
            tracing::error!(error = %e, "the final checkpoint failed; the journal will be replayed");
        }
    }

    /// Writes every instance the journal holds (their current values and versions, which are
    /// the journal's last ones), the counters of the models it names, and the records of the
    /// tickets its updates used (those whose instance still holds the version drawn; the
    /// records of overwritten values are dropped) into the tables, in one durable transaction
    /// that records the journal's last record as checkpointed; the journal then starts over
    /// from offset 0.
    pub(super) fn checkpoint(&mut self) -> Result<(), StoreError> {
        if self.journal.is_empty() {
            return Ok(());
        }
        let r = (|| -> Result<(), StoreError> {
            let w = durable_write(&self.db)?;
            {
                let mut meta = w.open_table(META).map_err(backend)?;
                let mut inst = w.open_table(INSTANCES).map_err(backend)?;
                let mut versions = w.open_table(VERSIONS).map_err(backend)?;
                let mut used = w.open_table(USED).map_err(backend)?;
                for (
                    name,
                    Dirty {
                        model,
                        written,
                        used: used_here,
                    },
                ) in &self.dirty
                {
                    // A delete checkpoints first, so this is only a guard.
                    if model.deleted.load(Ordering::Acquire) {
                        continue;
                    }
                    {
                        let instances = model.instances.read().unwrap_or_else(|e| e.into_inner());
                        for &j in written {
                            let key = (name.as_str(), j as u32);
                            inst.insert(key, instances.encoded[j].as_ref())
                                .map_err(backend)?;
                            let version = instances.handles[j].version;
                            versions.insert(key, version).map_err(backend)?;
                            drop_stale_used(&mut used, name, j as u32, version)?;
                        }
                        for (u, outcome) in used_here {
                            if instances
                                .handles
                                .get(u.instance as usize)
                                .is_some_and(|h| h.version == u.version)
                            {
                                put_used(&mut used, name, u, outcome)?;
                            }
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

    pub(super) fn create(
        &self,
        spec: ModelSpec,
        instances: Vec<Vec<f32>>,
    ) -> Result<(), StoreError> {
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
        let versions: Vec<u64> = (0..instances.len()).map(|_| rand::random()).collect();
        let former = {
            let r = self.db.begin_read().map_err(backend)?;
            let t = r.open_table(FORMER).map_err(backend)?;
            former_incarnation(&t, &spec.name, self.limits.ttl)?
        };
        let r = (|| -> Result<(), StoreError> {
            let w = durable_write(&self.db)?;
            {
                let mut meta = w.open_table(META).map_err(backend)?;
                let mut inst = w.open_table(INSTANCES).map_err(backend)?;
                let mut vt = w.open_table(VERSIONS).map_err(backend)?;
                let stored = StoredMeta {
                    spec: spec.clone(),
                    accepted: 0,
                    rejected: 0,
                };
                put_meta(&mut meta, &spec.name, &stored)?;
                for (i, v) in instances.iter().enumerate() {
                    let key = (spec.name.as_str(), i as u32);
                    inst.insert(key, encode_f32(v).as_slice())
                        .map_err(backend)?;
                    vt.insert(key, versions[i]).map_err(backend)?;
                }
            }
            w.commit().map_err(backend)
        })();
        self.committed(r)?;
        let instances: Vec<Arc<[f32]>> = instances.into_iter().map(Arc::from).collect();
        let name = spec.name.clone();
        let state = ModelState::new(
            spec,
            instances,
            &versions,
            (0, 0),
            self.limits,
            &self.key,
            former,
        )?;
        self.models
            .write()
            .map_err(|_| lock_poisoned())?
            .insert(name, Arc::new(state));
        Ok(())
    }

    pub(super) fn delete(&mut self, name: &str) -> Result<(), StoreError> {
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
        // What the next incarnation of the name needs to recognize this one's tickets.
        let now_ms = crate::ddml::ticket::wall_ms();
        let former = match &model {
            Some(m) => Some(FormerIncarnation {
                generation: m.spec.generation,
                versions: m
                    .instances
                    .read()
                    .map_err(|_| lock_poisoned())?
                    .handles
                    .iter()
                    .map(|h| h.version)
                    .collect(),
                deleted_ms: now_ms,
            }),
            None => None,
        };
        let ttl = self.limits.ttl;
        let r = (|| -> Result<(), StoreError> {
            let w = durable_write(&self.db)?;
            {
                let mut ft = w.open_table(FORMER).map_err(backend)?;
                ft.retain(|_, v| {
                    FormerIncarnation::from_bytes(v).is_some_and(|f| f.relevant(ttl, now_ms))
                })
                .map_err(backend)?;
                match &former {
                    Some(f) => ft.insert(name, f.to_bytes().as_slice()).map_err(backend)?,
                    None => ft.remove(name).map_err(backend)?,
                };
            }
            {
                let mut meta = w.open_table(META).map_err(backend)?;
                let mut inst = w.open_table(INSTANCES).map_err(backend)?;
                meta.remove(name).map_err(backend)?;
                // Every instance record of the name, whatever k the (maybe damaged) metadata says.
                inst.retain_in((name, 0u32)..=(name, u32::MAX), |_, _| false)
                    .map_err(backend)?;
                w.open_table(VERSIONS)
                    .map_err(backend)?
                    .retain_in((name, 0u32)..=(name, u32::MAX), |_, _| false)
                    .map_err(backend)?;
                w.open_table(USED)
                    .map_err(backend)?
                    .retain_in(
                        (name, 0u32, 0u64, 0u128)..=(name, u32::MAX, u64::MAX, u128::MAX),
                        |_, _| false,
                    )
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

    pub(super) fn commit_updates(&mut self, ops: Vec<WriteOp>, rng: &mut rand::rngs::ChaCha20Rng) {
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
            let (model, ack, outcome, write, used) = match op {
                WriteOp::Update {
                    model,
                    instance,
                    weights,
                    used,
                    ack,
                } => (
                    model,
                    ack,
                    SubmitOutcome::Accepted,
                    Some((instance, weights)),
                    used,
                ),
                WriteOp::Reject {
                    model,
                    rejection,
                    used,
                    ack,
                } => (model, ack, SubmitOutcome::Rejected(rejection), None, used),
                WriteOp::Create { ack, .. } | WriteOp::Delete { ack, .. } => {
                    let _ = ack.send(Err(StoreError::Backend("misrouted write".into())));
                    continue;
                }
            };
            if model.deleted.load(Ordering::Acquire) {
                let _ = ack.send(Err(StoreError::NotFound(model.spec.name.clone())));
                continue;
            }
            if let Some((_, w)) = &write
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
                        used: Vec::new(),
                        accepted: 0,
                        rejected: 0,
                    });
                    plans.last_mut().expect("just pushed")
                }
            };
            match write {
                Some((j, w)) => {
                    // The engine decided which instance (`decide_and_queue` checked j < k).
                    plan.writes.push((j, w));
                    plan.accepted += 1;
                }
                None => plan.rejected += 1,
            }
            if let Some(u) = used {
                plan.used
                    .push((u, crate::ddml::store::encode_outcome(&outcome)));
            }
            acks.push((ack, outcome));
        }
        if plans.is_empty() {
            // Every operation was answered already (a deleted model, a wrong length).
            return;
        }
        let finals: Vec<Vec<Final>> = plans.iter().map(|p| p.finals(rng)).collect();
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
                        .map(|(j, _, le, _)| (*j as u32, le.as_ref()))
                        .collect(),
                    versions: f.iter().map(|(_, _, _, v)| *v).collect(),
                    used: p.used.clone(),
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
                        let name = &p.model.spec.name;
                        // The name is copied once per checkpoint interval, not per batch.
                        if !self.dirty.contains_key(name) {
                            self.dirty.insert(
                                name.clone(),
                                Dirty {
                                    model: p.model.clone(),
                                    written: BTreeSet::new(),
                                    used: Vec::new(),
                                },
                            );
                        }
                        if let Some(d) = self.dirty.get_mut(name) {
                            d.written.extend(f.iter().map(|(j, _, _, _)| *j));
                            // An acceptance's outcome is a static string: no copy per update.
                            d.used.extend(p.used.iter().cloned());
                        }
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

    /// One durable transaction with the batch's last values and their versions, the models'
    /// counters, and the records of the tickets used (those whose instance still holds the
    /// version drawn after the batch).
    pub(super) fn store_directly(&self, batch: &[Batch]) -> Result<(), StoreError> {
        let w = durable_write(&self.db)?;
        {
            let mut meta = w.open_table(META).map_err(backend)?;
            let mut inst = w.open_table(INSTANCES).map_err(backend)?;
            let mut versions = w.open_table(VERSIONS).map_err(backend)?;
            let mut used = w.open_table(USED).map_err(backend)?;
            for (p, finals) in batch {
                let name = p.model.spec.name.as_str();
                for (j, _, le, v) in finals.iter() {
                    inst.insert((name, *j as u32), le.as_ref())
                        .map_err(backend)?;
                    versions.insert((name, *j as u32), *v).map_err(backend)?;
                    drop_stale_used(&mut used, name, *j as u32, *v)?;
                }
                {
                    let instances = p.model.instances.read().unwrap_or_else(|e| e.into_inner());
                    for (u, outcome) in &p.used {
                        let j = u.instance as usize;
                        let version_after = finals
                            .iter()
                            .find(|f| f.0 == j)
                            .map(|f| f.3)
                            .or_else(|| instances.handles.get(j).map(|h| h.version));
                        if version_after == Some(u.version) {
                            put_used(&mut used, name, u, outcome)?;
                        }
                    }
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
    pub(super) fn inline(&self) -> bool {
        match self {
            WriteOp::Update { model, .. } | WriteOp::Reject { model, .. } => {
                journaled_model(&model.spec)
            }
            WriteOp::Create { .. } | WriteOp::Delete { .. } => false,
        }
    }

    /// Answers the operation with the store's failure.
    pub(super) fn refuse(self, why: &str) {
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
pub(super) struct Planned {
    pub(super) model: Arc<ModelState>,
    /// Overwrites in order (instance index, new value).
    pub(super) writes: Vec<(usize, Vec<f32>)>,
    /// The tickets the batch's updates of this model used, with their outcomes.
    pub(super) used: Vec<(UsedTicket, std::borrow::Cow<'static, str>)>,
    pub(super) accepted: u64,
    pub(super) rejected: u64,
}

/// An instance's last value in a batch: (index, value, its encoding, its new version).
pub(super) type Final = (usize, Arc<[f32]>, Bytes, u64);

/// A model's part of a batch: what it plans and its last values.
pub(super) type Batch<'a> = (&'a Planned, &'a [Final]);

/// The largest instance (in bytes) of a model whose updates go to the journal. A larger one's
/// go straight into redb: a batch of them is mostly data, which redb writes once while the
/// journal would write it twice (the record, then the checkpoint); measured at 50,000 weights,
/// the journal was 7–19% slower (docs/history/BENCHMARKS-history.md, "Session 18").
pub const JOURNAL_MAX_INSTANCE_BYTES: usize = 64 << 10;

/// Drops the records of used tickets of instance `j` of `name` that drew another version than
/// `version` (its value now): those tickets can never verify again.
pub(super) fn drop_stale_used(
    used: &mut redb::Table<(&'static str, u32, u64, u128), &'static [u8]>,
    name: &str,
    j: u32,
    version: u64,
) -> Result<(), StoreError> {
    used.retain_in(
        (name, j, 0u64, 0u128)..=(name, j, u64::MAX, u128::MAX),
        |(_, _, v, _), _| v == version,
    )
    .map_err(backend)
}

/// Whether the model's updates go to the journal ([`JOURNAL_MAX_INSTANCE_BYTES`]).
pub(super) fn journaled_model(spec: &ModelSpec) -> bool {
    spec.dim.saturating_mul(4) <= JOURNAL_MAX_INSTANCE_BYTES
}

impl Planned {
    /// The batch's last value of each overwritten instance: what is stored and becomes visible.
    /// Earlier values of the same instance in the batch are never seen by a draw (memory changes
    /// only after the commit, under one lock), so only these are encoded, stored and given
    /// ticket handles, each with a new random version from `rng`.
    pub(super) fn finals(&self, rng: &mut impl rand::Rng) -> Vec<Final> {
        let mut last: HashMap<usize, usize> = HashMap::with_capacity(self.writes.len());
        for (n, (j, _)) in self.writes.iter().enumerate() {
            last.insert(*j, n);
        }
        last.into_iter()
            .map(|(j, n)| {
                let w = &self.writes[n].1;
                (
                    j,
                    Arc::from(w.as_slice()),
                    Bytes::from(encode_f32(w)),
                    rng.next_u64(),
                )
            })
            .collect()
    }
}

/// After the commit: installs `finals` (from [`Planned::finals`]), keeping the instances they
/// replace for the tickets that still refer to them, and counts the batch.
pub(super) fn apply_to_memory(p: &Planned, finals: &[Final]) {
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
        .is_some_and(|s| track_overwrites(s, &inst.weights, &p.writes));
    for (j, w, le, version) in finals {
        inst.weights[*j] = w.clone();
        inst.encoded[*j] = le.clone();
        let old_handle = std::mem::replace(&mut inst.handles[*j], handle(w, *version));
        m.retired.retire(old_handle);
    }
    if stale && let Some(s) = stats.as_deref_mut() {
        // Stored instances are finite and of one length: this cannot fail.
        let _ = s.recompute(&inst.weights);
    }
    m.accepted.fetch_add(p.accepted, Ordering::AcqRel);
    m.rejected.fetch_add(p.rejected, Ordering::AcqRel);
}

/// Follows every overwrite of `writes`, in order and intermediate values included, in the
/// spam filter's statistics ([`SpamStats::on_write`]) of `instances` (the values before the
/// batch); `true` if they must be recomputed once the batch is installed.
pub(super) fn track_overwrites(
    stats: &mut SpamStats,
    instances: &[Arc<[f32]>],
    writes: &[(usize, Vec<f32>)],
) -> bool {
    let mut current: HashMap<usize, &[f32]> = HashMap::new();
    let mut stale = false;
    for (j, w) in writes {
        let old = current.insert(*j, w).unwrap_or(&instances[*j]);
        stale |= stats.on_write(old, w);
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
        let m = Arc::new(
            ModelState::new(
                spec,
                start,
                &[1, 2, 3],
                (0, 0),
                TicketLimits::default(),
                &TicketKey::random(),
                None,
            )
            .unwrap(),
        );
        // A ticket on instance 1 from before the batch.
        let ticket = {
            let inst = m.instances.read().unwrap();
            m.tickets.issue(&inst.handles[1], 1).unwrap()
        };
        let p = Planned {
            model: m.clone(),
            writes: vec![
                (1, vec![5.0, 5.0]),
                (2, vec![7.0, -1.0]),
                (1, vec![6.0, 4.0]),
                (1, vec![8.0, 3.0]),
            ],
            used: Vec::new(),
            accepted: 4,
            rejected: 0,
        };
        let finals = p.finals(&mut rand::rng());
        assert_eq!(finals.len(), 2);
        apply_to_memory(&p, &finals);

        let inst = m.instances.read().unwrap();
        let want: [&[f32]; 3] = [&[0.0, 0.0], &[8.0, 3.0], &[7.0, -1.0]];
        for (j, w) in want.iter().enumerate() {
            assert_eq!(&*inst.weights[j], *w, "instance {j}");
            assert_eq!(decode_f32(&inst.encoded[j]).unwrap(), *w);
            assert_eq!(&*inst.handles[j].weights, *w);
        }
        let fresh = privfed_ddml::engine::InstanceStats::from_instances(&inst.weights).unwrap();
        let stats = m.stats.read().unwrap();
        let stats = stats.instances();
        for d in 0..2 {
            assert!((stats.mean(d) - fresh.mean(d)).abs() < 1e-12, "mean {d}");
            assert!(
                (stats.variance(d) - fresh.variance(d)).abs() < 1e-9,
                "variance {d}"
            );
        }
        assert_eq!(m.stats.read().unwrap().overwrites(), 4);
        assert_eq!(m.accepted.load(Ordering::Acquire), 4);
        // The instance the ticket drew was kept for it; nothing else was.
        assert_eq!(m.retired.len(), 1);
        match m.tickets.redeem(ticket, |_| None) {
            privfed_ddml::ticket::Redeem::Fresh(base) => {
                assert_eq!(&*base.weights, &[1.0f32, -1.0][..])
            }
            _ => panic!("the ticket lost its instance"),
        }
    }
}
