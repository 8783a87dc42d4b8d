//! Start-up of the embedded store: replaying the update journal into redb, and loading models.

use super::*;

/// A write transaction that is durable once committed (`Durability::Immediate`: fsynced).
pub(super) fn durable_write(db: &Database) -> Result<redb::WriteTransaction, StoreError> {
    let mut w = db.begin_write().map_err(backend)?;
    w.set_durability(Durability::Immediate).map_err(backend)?;
    Ok(w)
}

/// Stores a model's metadata record (spec and counters).
pub(super) fn put_meta(
    meta: &mut redb::Table<&'static str, &'static [u8]>,
    name: &str,
    m: &StoredMeta,
) -> Result<(), StoreError> {
    meta.insert(name, serde_json::to_vec(m).map_err(backend)?.as_slice())
        .map_err(backend)?;
    Ok(())
}

/// At start-up: writes the journal's records after checkpoint `checkpointed` (carrying the
/// store's `tag`) into the tables in
/// one durable transaction that records the last of them as checkpointed; returns the last
/// sequence number the tables cover. A record's entry for a model that is not stored under that
/// generation, or a write that does not fit the stored model, is skipped and logged (a delete
/// checkpoints first, so neither happens unless the records or the tables were damaged).
pub(super) fn replay(
    db: &Database,
    path: &Path,
    checkpointed: u64,
    tag: u64,
) -> Result<u64, StoreError> {
    let records = journal::read_after(path, checkpointed, tag).map_err(backend)?;
    let Some(last) = records.last().map(|r| r.seq) else {
        return Ok(checkpointed);
    };
    let (mut applied, mut skipped) = (0u64, 0u64);
    let w = durable_write(db)?;
    {
        let mut meta = w.open_table(META).map_err(backend)?;
        let mut inst = w.open_table(INSTANCES).map_err(backend)?;
        for r in &records {
            for e in &r.entries {
                let name = e.name.as_str();
                let stored = meta
                    .get(name)
                    .map_err(backend)?
                    .map(|v| serde_json::from_slice::<StoredMeta>(v.value()));
                let mut m = match stored {
                    Some(Ok(m)) if m.spec.generation == e.generation => m,
                    _ => {
                        tracing::warn!(model = %name, record = r.seq,
                            "journal entry for a model not stored under its generation: skipped");
                        skipped += e.writes.len() as u64;
                        continue;
                    }
                };
                for (j, bytes) in &e.writes {
                    if (*j as usize) < m.spec.k && bytes.len() == 4 * m.spec.dim {
                        inst.insert((name, *j), bytes.as_slice()).map_err(backend)?;
                        applied += 1;
                    } else {
                        tracing::warn!(model = %name, record = r.seq, instance = j,
                            "journal write that does not fit the model: skipped");
                        skipped += 1;
                    }
                }
                m.accepted += e.accepted;
                m.rejected += e.rejected;
                put_meta(&mut meta, name, &m)?;
            }
        }
        w.open_table(JOURNAL)
            .map_err(backend)?
            .insert(CHECKPOINTED, last)
            .map_err(backend)?;
    }
    w.commit().map_err(backend)?;
    tracing::info!(
        records = records.len(),
        instance_writes = applied,
        skipped,
        "update journal replayed"
    );
    Ok(last)
}

/// Reads one stored model; `Err` with the reason when any of its records is damaged.
pub(super) fn load_model(
    name: &str,
    meta: &[u8],
    inst: &impl ReadableTable<(&'static str, u32), &'static [u8]>,
    limits: TicketLimits,
) -> Result<ModelState, String> {
    let mut m: StoredMeta =
        serde_json::from_slice(meta).map_err(|e| format!("unreadable metadata: {e}"))?;
    m.spec = m.spec.prepared()?;
    if m.spec.name != name {
        return Err(format!("metadata names `{}`", m.spec.name));
    }
    let mut instances = Vec::with_capacity(m.spec.k);
    for i in 0..m.spec.k {
        let blob = inst
            .get((name, i as u32))
            .map_err(|e| format!("instance {i}: {e}"))?
            .ok_or_else(|| format!("instance {i} is missing"))?;
        let w = decode_f32(blob.value())
            .filter(|w| w.len() == m.spec.dim && w.iter().all(|x| x.is_finite()))
            .ok_or_else(|| {
                format!(
                    "instance {i} has {} bytes, not {} finite weights",
                    blob.value().len(),
                    m.spec.dim
                )
            })?;
        instances.push(Arc::from(w));
    }
    ModelState::new(m.spec, instances, m.accepted, m.rejected, limits).map_err(|e| e.to_string())
}
