//! The secure-aggregation round coordinator: rounds of [`privfed_secagg`] served over HTTP.
//!
//! A round lives in a [`RoundStore`] (its record and every accepted client message) and, in this
//! process, as a replica of the protocol's [`Server`] state machine rebuilt by replaying those
//! messages. A message is validated by the replica, stored durably, and only then acknowledged;
//! so after a crash (even `kill -9` mid-round) replaying the store gives the same state and the
//! round completes or aborts cleanly — never with a wrong sum.
//!
//! A stage closes when every expected client has answered or when its deadline passes (a task
//! per round watches the clock; the state machine itself has none). Clients join a round to get
//! an id and a bearer token; every message they send must carry that id and token. Routes:
//! [`api`].

pub mod api;
pub mod store;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use privfed_secagg::messages::{decode, encode};
use privfed_secagg::{
    Aggregate, ClientId, ClientMessage, Receipt, RoundConfig, RoundStatus, SecAggError, Server,
    ServerMessage, Stage,
};
use rand::Rng;
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, watch};

use crate::error::{ApiError, StoreError};
pub use store::{EmbeddedRoundStore, PutOutcome, RoundRecord, RoundStore, StoredStatus};

/// Longest a client's long poll for its next message waits.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// Default time a stage stays open.
pub const DEFAULT_STAGE_TIMEOUT: Duration = Duration::from_secs(60);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn stage_index(stage: Stage) -> u8 {
    Stage::ALL.iter().position(|&s| s == stage).unwrap_or(0) as u8
}

fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// Constant-time equality of two digests.
fn same_digest(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Unavailable(m) => ApiError::Unavailable(m),
        StoreError::NotFound(m) => ApiError::NotFound(format!("no round `{m}`")),
        other => ApiError::Internal(other.to_string()),
    }
}

/// A protocol error as an HTTP error: stale or misdirected messages are conflicts, malformed
/// ones bad requests, messages that break the protocol unprocessable.
pub fn protocol_error(e: SecAggError) -> ApiError {
    match e {
        SecAggError::Malformed(_)
        | SecAggError::Version { .. }
        | SecAggError::InvalidConfig { .. } => ApiError::BadRequest(e.to_string()),
        SecAggError::WrongStage { .. }
        | SecAggError::WrongSession
        | SecAggError::Conflict(_)
        | SecAggError::State(_)
        | SecAggError::UnexpectedParty { .. } => ApiError::Conflict(e.to_string()),
        other => ApiError::Protocol(other.to_string()),
    }
}

/// What a round creation asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewRound {
    /// Cohort size, threshold, ring, length, graph (the session id is drawn here).
    pub clients: u32,
    /// Threshold t.
    pub threshold: u32,
    /// Bits b.
    pub bits: u32,
    /// Vector length d.
    pub dim: usize,
    /// The graph.
    pub graph: privfed_secagg::GraphSpec,
    /// How long each stage stays open at most.
    pub stage_timeout: Duration,
}

/// What a client's poll for its next message found.
#[derive(Debug)]
pub enum Next {
    /// The message that starts the client's next stage (postcard bytes).
    Message(Vec<u8>),
    /// Nothing for this client yet (its stage has not opened).
    NotYet,
    /// The round is over for this client: finished, aborted, or it was left out.
    Over(String),
}

struct Replica {
    record: RoundRecord,
    server: Server,
    result: Option<Aggregate>,
}

/// One round in this process.
pub struct Round {
    id: String,
    replica: Mutex<Replica>,
    changed: watch::Sender<u64>,
}

/// Serves the rounds of one [`RoundStore`].
pub struct Coordinator {
    store: Arc<dyn RoundStore>,
    /// Set when the server shuts down: long polls return, deadline tasks stop.
    closing: watch::Sender<bool>,
    rounds: std::sync::Mutex<HashMap<String, Arc<Round>>>,
    admin_token: String,
}

impl std::fmt::Debug for Coordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordinator").finish_non_exhaustive()
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Backend(format!("store task failed: {e}")))?
}

/// Rebuilds a round's state machine from its stored messages.
fn rebuild(store: &dyn RoundStore, id: &str, record: &RoundRecord) -> Result<Replica, StoreError> {
    let mut server = Server::new(record.config.clone())
        .map_err(|e| StoreError::Backend(format!("round {id}: {e}")))?;
    let mut result = None;
    let upto = match &record.status {
        StoredStatus::Collecting { stage } => *stage,
        StoredStatus::Finished => {
            let stored = store.messages(id, store::RESULT_STAGE)?;
            let (_, bytes) = stored
                .first()
                .ok_or_else(|| StoreError::Backend(format!("round {id}: result missing")))?;
            result = Some(
                decode::<Aggregate>(bytes)
                    .map_err(|e| StoreError::Backend(format!("round {id}: {e}")))?,
            );
            return Ok(Replica {
                record: record.clone(),
                server,
                result,
            });
        }
        StoredStatus::Aborted { .. } => {
            return Ok(Replica {
                record: record.clone(),
                server,
                result,
            });
        }
    };
    for stage in 0..=upto {
        for (client, bytes) in store.messages(id, stage)? {
            let replayed = decode::<ClientMessage>(&bytes).and_then(|m| server.receive(&m));
            if let Err(e) = replayed {
                tracing::error!(round = id, stage, client, error = %e, "stored message does not replay");
            }
        }
        if stage < upto {
            server
                .close_stage()
                .map_err(|e| StoreError::Backend(format!("round {id}: {e}")))?;
        }
    }
    if *server.status() != RoundStatus::Collecting(Stage::ALL[upto as usize]) {
        return Err(StoreError::Backend(format!(
            "round {id}: replay ends at {:?}, the record says stage {upto}",
            server.status()
        )));
    }
    Ok(Replica {
        record: record.clone(),
        server,
        result,
    })
}

impl Coordinator {
    /// Opens the coordinator over `store`: rebuilds every stored round and resumes its stage
    /// deadlines. Must run inside a Tokio runtime.
    pub async fn open(
        store: Arc<dyn RoundStore>,
        admin_token: String,
    ) -> Result<Arc<Self>, StoreError> {
        let c = Arc::new(Coordinator {
            store: store.clone(),
            closing: watch::channel(false).0,
            rounds: std::sync::Mutex::new(HashMap::new()),
            admin_token,
        });
        let loaded = blocking(move || {
            let mut out = Vec::new();
            for (id, record) in store.rounds()? {
                let replica = rebuild(store.as_ref(), &id, &record)?;
                out.push((id, replica));
            }
            Ok(out)
        })
        .await?;
        for (id, replica) in loaded {
            tracing::info!(round = %id, status = ?replica.record.status, "secure-aggregation round resumed");
            c.insert(id, replica);
        }
        Ok(c)
    }

    /// Stops this process's work on the rounds (the server is shutting down): long polls answer
    /// "not yet", deadline tasks end. The stored rounds are untouched; reopening resumes them.
    pub fn shutdown(&self) {
        self.closing.send_replace(true);
    }

    /// The admin token of the routes that need one.
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    fn insert(self: &Arc<Self>, id: String, replica: Replica) -> Arc<Round> {
        let (changed, _) = watch::channel(replica.record.version);
        let round = Arc::new(Round {
            id: id.clone(),
            replica: Mutex::new(replica),
            changed,
        });
        self.rounds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, round.clone());
        let me = self.clone();
        let watched = round.clone();
        tokio::spawn(async move { me.watch_deadlines(watched).await });
        round
    }

    fn round(&self, id: &str) -> Result<Arc<Round>, ApiError> {
        self.rounds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| ApiError::NotFound(format!("no round `{id}`")))
    }

    /// Creates a round: validates the configuration, draws its 256-bit session id from the OS
    /// CSPRNG, stores it.
    pub async fn create_round(
        self: &Arc<Self>,
        new: NewRound,
    ) -> Result<(String, RoundConfig), ApiError> {
        let mut session_id = [0u8; 32];
        let mut round_id = [0u8; 16];
        {
            let mut rng = rand::rng();
            rng.fill_bytes(&mut session_id);
            rng.fill_bytes(&mut round_id);
        }
        let config = RoundConfig {
            session_id,
            clients: new.clients,
            threshold: new.threshold,
            bits: new.bits,
            dim: new.dim,
            graph: new.graph,
        };
        let server = Server::new(config.clone()).map_err(protocol_error)?;
        if new.stage_timeout.is_zero() || new.stage_timeout > Duration::from_secs(24 * 3600) {
            return Err(ApiError::BadRequest(
                "stage_timeout_ms must be in 1..=86400000".into(),
            ));
        }
        let id = hex(&round_id);
        let record = RoundRecord {
            config: config.clone(),
            status: StoredStatus::Collecting { stage: 0 },
            stage_opened_ms: now_ms(),
            stage_timeout_ms: new.stage_timeout.as_millis() as u64,
            joined: Vec::new(),
            version: 0,
        };
        let (store, rid, rec) = (self.store.clone(), id.clone(), record.clone());
        blocking(move || store.create_round(&rid, &rec))
            .await
            .map_err(store_error)?;
        tracing::info!(round = %id, clients = new.clients, dim = new.dim, bits = new.bits, "secure-aggregation round created");
        self.insert(
            id.clone(),
            Replica {
                record,
                server,
                result: None,
            },
        );
        Ok((id, config))
    }

    /// Joins a round during its first stage: the next free client id and a fresh bearer token
    /// (256 bits; only its SHA-256 is stored).
    pub async fn join(&self, id: &str) -> Result<(ClientId, String, RoundConfig), ApiError> {
        let round = self.round(id)?;
        let mut r = round.replica.lock().await;
        if r.record.status != (StoredStatus::Collecting { stage: 0 }) {
            return Err(ApiError::Conflict(
                "the round no longer accepts new clients".into(),
            ));
        }
        if r.record.joined.len() >= r.record.config.clients as usize {
            return Err(ApiError::Conflict("the round is full".into()));
        }
        let mut secret = [0u8; 32];
        rand::rng().fill_bytes(&mut secret);
        let token = hex(&secret);
        let mut record = r.record.clone();
        record.joined.push(token_hash(&token));
        record.version += 1;
        let client = record.joined.len() as ClientId;
        self.save(&round, &mut r, record).await?;
        Ok((client, token, r.record.config.clone()))
    }

    async fn save(
        &self,
        round: &Round,
        r: &mut Replica,
        record: RoundRecord,
    ) -> Result<(), ApiError> {
        let (store, id, rec, expected) = (
            self.store.clone(),
            round.id.clone(),
            record.clone(),
            r.record.version,
        );
        let swapped = blocking(move || store.update_round(&id, expected, &rec))
            .await
            .map_err(store_error)?;
        if !swapped {
            return Err(ApiError::Unavailable(
                "the round was changed by another server process; retry".into(),
            ));
        }
        r.record = record;
        round.changed.send_replace(r.record.version);
        Ok(())
    }

    fn authenticate(r: &Replica, client: ClientId, token: &str) -> Result<(), ApiError> {
        let ok = client
            .checked_sub(1)
            .and_then(|i| r.record.joined.get(i as usize))
            .is_some_and(|h| same_digest(h, &token_hash(token)));
        if ok { Ok(()) } else { Err(ApiError::Forbidden) }
    }

    /// Handles a client's message (postcard bytes) sent with its bearer token: validated by the
    /// replica, stored, then acknowledged. Closes the stage when it was the last one expected.
    pub async fn post_message(
        &self,
        id: &str,
        token: &str,
        bytes: &[u8],
    ) -> Result<Receipt, ApiError> {
        let round = self.round(id)?;
        let message: ClientMessage = decode(bytes).map_err(protocol_error)?;
        let client = message.header.client;
        let mut r = round.replica.lock().await;
        Self::authenticate(&r, client, token)?;
        let stage = message.payload.stage();
        let receipt = r.server.receive(&message).map_err(protocol_error)?;
        if receipt == Receipt::Accepted {
            let (store, rid, body) = (self.store.clone(), round.id.clone(), bytes.to_vec());
            let stored =
                blocking(move || store.put_message(&rid, stage_index(stage), client, &body)).await;
            match stored {
                Ok(PutOutcome::Stored) | Ok(PutOutcome::Duplicate) => {}
                Ok(PutOutcome::Conflict) | Err(_) => {
                    // The replica took a message the store does not hold: rebuild it from the
                    // store so the two agree again.
                    self.reload(&round, &mut r).await?;
                    return Err(match stored {
                        Err(e) => store_error(e),
                        _ => ApiError::Conflict(format!(
                            "client {client} already sent a different message for this stage"
                        )),
                    });
                }
            }
            if r.server.pending().is_empty() {
                self.close(&round, &mut r).await?;
            }
        }
        Ok(receipt)
    }

    async fn reload(&self, round: &Round, r: &mut Replica) -> Result<(), ApiError> {
        let (store, rid, rec) = (self.store.clone(), round.id.clone(), r.record.clone());
        let fresh = blocking(move || rebuild(store.as_ref(), &rid, &rec))
            .await
            .map_err(store_error)?;
        *r = fresh;
        Ok(())
    }

    /// Closes the current stage of a locked round and persists the outcome.
    async fn close(&self, round: &Round, r: &mut Replica) -> Result<(), ApiError> {
        let RoundStatus::Collecting(stage) = r.server.status().clone() else {
            return Ok(());
        };
        let status = r.server.close_stage().map_err(protocol_error)?.clone();
        let new_status = match &status {
            RoundStatus::Collecting(s) => StoredStatus::Collecting {
                stage: stage_index(*s),
            },
            RoundStatus::Finished => {
                let aggregate = r
                    .server
                    .output()
                    .cloned()
                    .ok_or_else(|| ApiError::Internal("finished without output".into()))?;
                let (store, rid, body) = (self.store.clone(), round.id.clone(), encode(&aggregate));
                let stored =
                    blocking(move || store.put_message(&rid, store::RESULT_STAGE, 0, &body)).await;
                if let Err(e) = stored {
                    self.reload(round, r).await?;
                    return Err(store_error(e));
                }
                r.result = Some(aggregate);
                StoredStatus::Finished
            }
            RoundStatus::Aborted(reason) => StoredStatus::Aborted {
                reason: reason.clone(),
            },
        };
        let mut record = r.record.clone();
        record.status = new_status;
        record.stage_opened_ms = now_ms();
        record.version += 1;
        if let Err(e) = self.save(round, r, record).await {
            self.reload(round, r).await?;
            return Err(e);
        }
        tracing::info!(round = %round.id, closed = stage.name(), status = ?r.record.status, "secure-aggregation stage closed");
        Ok(())
    }

    /// Closes stages whose deadline passed, until the round is over.
    async fn watch_deadlines(self: Arc<Self>, round: Arc<Round>) {
        let mut changes = round.changed.subscribe();
        let mut closing = self.closing.subscribe();
        loop {
            if *closing.borrow_and_update() {
                return;
            }
            let deadline = {
                let r = round.replica.lock().await;
                if !matches!(r.record.status, StoredStatus::Collecting { .. }) {
                    return;
                }
                r.record.stage_opened_ms + r.record.stage_timeout_ms
            };
            let wait = Duration::from_millis(deadline.saturating_sub(now_ms()));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {
                    let mut r = round.replica.lock().await;
                    let due = r.record.stage_opened_ms + r.record.stage_timeout_ms <= now_ms();
                    if due && matches!(r.record.status, StoredStatus::Collecting { .. })
                        && let Err(e) = self.close(&round, &mut r).await
                    {
                        tracing::warn!(round = %round.id, error = %e, "closing a stage at its deadline failed; retrying");
                        drop(r);
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
                _ = closing.changed() => return,
            }
        }
    }

    /// The message that starts the client's next stage, waiting up to `wait` for it.
    pub async fn next_message(
        &self,
        id: &str,
        client: ClientId,
        token: &str,
        wait: Duration,
    ) -> Result<Next, ApiError> {
        let round = self.round(id)?;
        let mut changes = round.changed.subscribe();
        let mut closing = self.closing.subscribe();
        let deadline = tokio::time::Instant::now() + wait.min(MAX_WAIT);
        loop {
            if *closing.borrow_and_update() {
                return Ok(Next::NotYet);
            }
            {
                let r = round.replica.lock().await;
                Self::authenticate(&r, client, token)?;
                match r.server.status() {
                    RoundStatus::Finished => return Ok(Next::Over("finished".into())),
                    RoundStatus::Aborted(reason) => {
                        return Ok(Next::Over(format!("aborted: {reason}")));
                    }
                    RoundStatus::Collecting(Stage::AdvertiseKeys) => {}
                    RoundStatus::Collecting(_) => {
                        if r.server.pending().contains(&client) {
                            let m: ServerMessage =
                                r.server.message_for(client).map_err(protocol_error)?;
                            return Ok(Next::Message(encode(&m)));
                        }
                        if r.server.message_for(client).is_err() {
                            return Ok(Next::Over(
                                "left out of the round (it missed a stage or its neighbours did)"
                                    .into(),
                            ));
                        }
                    }
                }
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return Ok(Next::NotYet),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(Next::NotYet);
                    }
                }
                _ = closing.changed() => return Ok(Next::NotYet),
            }
        }
    }

    /// The public state of a round.
    pub async fn view(&self, id: &str) -> Result<serde_json::Value, ApiError> {
        let round = self.round(id)?;
        let r = round.replica.lock().await;
        let pending = r.server.pending();
        let (status, stage, reason) = match &r.record.status {
            StoredStatus::Collecting { stage } => {
                ("collecting", Some(Stage::ALL[*stage as usize].name()), None)
            }
            StoredStatus::Finished => ("finished", None, None),
            StoredStatus::Aborted { reason } => ("aborted", None, Some(reason.clone())),
        };
        Ok(serde_json::json!({
            "round": round.id,
            "status": status,
            "stage": stage,
            "reason": reason,
            "config": r.record.config,
            "joined": r.record.joined.len(),
            "pending": pending.len(),
            "pending_clients": pending,
            "stage_deadline_ms": r.record.stage_opened_ms + r.record.stage_timeout_ms,
            "survivors": r.result.as_ref().map(|a| a.survivors.len()),
        }))
    }

    /// Closes the current stage now (an operator's deadline): the clients that have not answered
    /// are treated as dropped.
    pub async fn close_now(&self, id: &str) -> Result<(), ApiError> {
        let round = self.round(id)?;
        let mut r = round.replica.lock().await;
        if !matches!(r.record.status, StoredStatus::Collecting { .. }) {
            return Err(ApiError::Conflict("the round is over".into()));
        }
        self.close(&round, &mut r).await
    }

    /// A finished round's sum and survivors.
    pub async fn result(&self, id: &str) -> Result<Aggregate, ApiError> {
        let round = self.round(id)?;
        let r = round.replica.lock().await;
        match (&r.result, &r.record.status) {
            (Some(a), _) => Ok(a.clone()),
            (None, StoredStatus::Aborted { reason }) => {
                Err(ApiError::Conflict(format!("the round aborted: {reason}")))
            }
            _ => Err(ApiError::Conflict("the round is not finished".into())),
        }
    }

    /// Deletes a round and its messages.
    pub async fn delete(&self, id: &str) -> Result<(), ApiError> {
        let round = self.round(id)?;
        let mut _r = round.replica.lock().await;
        let (store, rid) = (self.store.clone(), id.to_string());
        blocking(move || store.delete_round(&rid))
            .await
            .map_err(store_error)?;
        // Ends the deadline task and any long poll.
        _r.record.status = StoredStatus::Aborted {
            reason: "deleted".into(),
        };
        _r.record.version += 1;
        round.changed.send_replace(_r.record.version);
        self.rounds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        Ok(())
    }
}
