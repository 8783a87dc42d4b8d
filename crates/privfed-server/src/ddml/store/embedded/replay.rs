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
        let mut versions = w.open_table(VERSIONS).map_err(backend)?;
        let mut used = w.open_table(USED).map_err(backend)?;
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
                for (n, (j, bytes)) in e.writes.iter().enumerate() {
                    if (*j as usize) < m.spec.k && bytes.len() == 4 * m.spec.dim {
                        inst.insert((name, *j), bytes.as_slice()).map_err(backend)?;
                        // A record of the first format has no versions: a new one (tickets
                        // drawn from this value before the crash then no longer verify).
                        let v = e.versions.get(n).copied().unwrap_or_else(rand::random);
                        versions.insert((name, *j), v).map_err(backend)?;
                        applied += 1;
                    } else {
                        tracing::warn!(model = %name, record = r.seq, instance = j,
                            "journal write that does not fit the model: skipped");
                        skipped += 1;
                    }
                }
                for (u, outcome) in &e.used {
                    put_used(&mut used, name, u, outcome)?;
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

/// Stores the durable record of a used ticket ([`USED`]).
pub(super) fn put_used(
    used: &mut redb::Table<(&'static str, u32, u64, u128), &'static [u8]>,
    name: &str,
    u: &UsedTicket,
    outcome: &str,
) -> Result<(), StoreError> {
    let mut v = Vec::with_capacity(8 + outcome.len());
    v.extend_from_slice(&u.expires_ms.to_le_bytes());
    v.extend_from_slice(outcome.as_bytes());
    used.insert((name, u.instance, u.version, u.ticket.0), v.as_slice())
        .map_err(backend)?;
    Ok(())
}

/// At start-up: gives every loaded instance a stored version (a store from before versions gets
/// them now), drops the records of used tickets whose instance holds another version by now or
/// that expired, and restores the others into the models' ticket books, so that a ticket used
/// before the restart answers its first outcome instead of being applied again.
pub(super) fn restore_tickets(
    db: &Database,
    models: &HashMap<String, Arc<ModelState>>,
) -> Result<(), StoreError> {
    let now = crate::ddml::ticket::wall_ms();
    let w = durable_write(db)?;
    {
        let mut versions = w.open_table(VERSIONS).map_err(backend)?;
        let mut used = w.open_table(USED).map_err(backend)?;
        for (name, m) in models {
            let current: Vec<u64> = {
                let inst = m.instances.read().map_err(|_| lock_poisoned())?;
                inst.handles.iter().map(|h| h.version).collect()
            };
            for (j, v) in current.iter().enumerate() {
                versions
                    .insert((name.as_str(), j as u32), *v)
                    .map_err(backend)?;
            }
            let mut kept = Vec::new();
            used.retain_in(
                (name.as_str(), 0u32, 0u64, 0u128)..=(name.as_str(), u32::MAX, u64::MAX, u128::MAX),
                |(_, j, version, ticket), value| {
                    let live = current.get(j as usize) == Some(&version)
                        && value.len() >= 8
                        && u64::from_le_bytes(value[..8].try_into().expect("8 bytes")) > now;
                    if live {
                        let expires = u64::from_le_bytes(value[..8].try_into().expect("8 bytes"));
                        kept.push((
                            ticket,
                            expires,
                            String::from_utf8_lossy(&value[8..]).into_owned(),
                        ));
                    }
                    live
                },
            )
            .map_err(backend)?;
            for (ticket, expires_ms, outcome) in kept {
                let outcome = crate::ddml::store::decode_outcome(&outcome)?;
                m.tickets.restore_used(Ticket(ticket), expires_ms, outcome);
            }
        }
    }
    w.commit().map_err(backend)
}

/// Reads one stored model and its instances' versions (a missing version is drawn afresh: a
/// store from before versions); `Err` with the reason when any of its records is damaged.
pub(super) fn load_model(
    name: &str,
    meta: &[u8],
    (inst, versions): (
        &impl ReadableTable<(&'static str, u32), &'static [u8]>,
        &impl ReadableTable<(&'static str, u32), u64>,
    ),
    limits: TicketLimits,
    key: &TicketKey,
    former: Option<FormerIncarnation>,
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
    let vs = (0..m.spec.k)
        .map(|i| {
            Ok(versions
                .get((name, i as u32))
                .map_err(|e| format!("instance {i}'s version: {e}"))?
                .map_or_else(rand::random, |v| v.value()))
        })
        .collect::<Result<Vec<u64>, String>>()?;
    ModelState::new(
        m.spec,
        instances,
        &vs,
        (m.accepted, m.rejected),
        limits,
        key,
        former,
    )
    .map_err(|e| e.to_string())
}

/// The incarnation of `name` deleted last, from the [`FORMER`] table, if its tickets may still
/// be presented (it was deleted less than a ticket lifetime `ttl` ago). A damaged row is
/// ignored (its tickets then answer `ticket_unknown`).
pub(super) fn former_incarnation(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
    name: &str,
    ttl: Duration,
) -> Result<Option<FormerIncarnation>, StoreError> {
    let now_ms = crate::ddml::ticket::wall_ms();
    Ok(table
        .get(name)
        .map_err(backend)?
        .and_then(|v| FormerIncarnation::from_bytes(v.value()))
        .filter(|f| f.relevant(ttl, now_ms)))
}
