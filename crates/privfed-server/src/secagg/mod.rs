//! The secure-aggregation round coordinator: rounds of [`privfed_secagg`] served over HTTP.
//!
//! A round lives in a [`RoundStore`] (its record and every accepted client message) and, in this
//! process, as a replica of the protocol's [`Server`] state machine rebuilt by replaying those
//! messages. A message is validated by the replica, stored durably, and only then acknowledged;
//! so after a crash (even `kill -9` mid-round) replaying the store gives the same state and the
//! round completes or aborts cleanly — never with a wrong sum.
//!
//! ## Several processes, one round
//! With a shared store ([`store::redis::RedisRoundStore`]) several coordinators serve one round;
//! the store is the only shared state, and a replica is trusted only at the store's version:
//! * every request first compares the replica's version with the stored one; if they differ,
//!   the replica catches up — the messages of its current stage it has not seen, or a full
//!   replay when the stage changed;
//! * a message is stored only while the round still collects its stage (the store checks), and
//!   each stored message advances the version;
//! * a stage closes only through a compare-and-set of the record on the version the replica was
//!   built at, so exactly one process closes a stage, from exactly the stored messages; the
//!   others see the new version and replay;
//! * a task per round re-reads the version every [`REFRESH_INTERVAL`], so long polls here learn
//!   of a stage closed by another process, and closes stages at their deadline (whichever
//!   process gets there first).
//!
//! A stage closes when every expected client has answered or when its deadline passes (the
//! state machine itself has no clock). Clients join a round to get an id and a bearer token;
//! every message they send must carry that id and token. Routes: [`api`].

pub mod api;
pub mod store;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use privfed_secagg::messages::{decode, encode, max_client_message_len};
use privfed_secagg::{
    Aggregate, ClientId, ClientMessage, Receipt, Roster, RoundConfig, RoundStatus, SecAggError,
    Server, ServerMessage, Stage, ThreatModel,
};
use rand::Rng;
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, watch};

use crate::http::error::{ApiError, StoreError};
pub use store::redis::RedisRoundStore;
pub use store::{
    EmbeddedRoundStore, JoinTicket, PutOutcome, RoundRecord, RoundStore, StoredStatus,
};

/// Longest a client's long poll for its next message waits.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// Default time a stage stays open.
pub const DEFAULT_STAGE_TIMEOUT: Duration = Duration::from_secs(60);

/// How often a round's task re-reads the stored version to learn of changes made by other
/// server processes (its long polls then answer within about this delay).
pub const REFRESH_INTERVAL: Duration = Duration::from_millis(200);

/// Compare-and-set attempts of a join or a stage close before answering 503 (each failed one
/// means another process changed the round meanwhile; the next starts from the new state).
const CAS_ATTEMPTS: usize = 16;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The stage's index among the round's stages ([`RoundConfig::stages`]): what the store keeps.
fn stage_index(config: &RoundConfig, stage: Stage) -> u8 {
    config
        .stages()
        .iter()
        .position(|&s| s == stage)
        .unwrap_or(0) as u8
}

/// A bound on the version a round with this configuration reaches by honest changes: its
/// creation (0), one join and at most one message per stage from each client, and one
/// compare-and-set per stage close.
fn version_ceiling(config: &RoundConfig) -> u64 {
    let stages = config.stages().len() as u64;
    u64::from(config.clients)
        .saturating_mul(1 + stages)
        .saturating_add(stages)
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

/// The index of the first digest equal to `d`, comparing every one in constant time (no early
/// exit), so the time taken does not tell where, or whether, a bearer secret matched.
fn find_digest<'a>(digests: impl IntoIterator<Item = &'a [u8; 32]>, d: &[u8; 32]) -> Option<usize> {
    let mut found = None;
    for (i, h) in digests.into_iter().enumerate() {
        if same_digest(h, d) && found.is_none() {
            found = Some(i);
        }
    }
    found
}

/// A fresh 256-bit bearer secret from the OS-seeded CSPRNG, hex (join tokens and tickets).
fn fresh_secret() -> String {
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    hex(&secret)
}

fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::Unavailable(m) => ApiError::Unavailable(m),
        StoreError::NotFound(m) => ApiError::NotFound(format!("no round `{m}`")),
        // The round is aborted (see `Coordinator::abort_rewound`): it is over for the client.
        e @ StoreError::WentBackInTime { .. } => {
            ApiError::Conflict(format!("the round aborted: {e}"))
        }
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// `Some`: an active-mode round over this roster (its digest goes into the configuration;
    /// joining needs an enrolled device's signature). `None`: honest-but-curious, joined with
    /// one of the round's join tickets unless `open`.
    pub roster: Option<Roster>,
    /// An honest-but-curious round anyone may join, without a ticket: Sybils can fill it and
    /// count as noise contributors (for experiments on a closed network only).
    pub open: bool,
}

/// A round as created: its id, its configuration, and (honest-but-curious rounds that are not
/// open) one join ticket per client, which the administrator hands to the devices it admits.
#[derive(Debug)]
pub struct CreatedRound {
    /// The round's id.
    pub id: String,
    /// Its configuration.
    pub config: RoundConfig,
    /// One single-use join ticket per client (256 bits from the OS CSPRNG, hex; only their
    /// SHA-256 is stored); empty for active and open rounds.
    pub join_tickets: Vec<String>,
}

/// An enrolled device's credential for joining an active round: its verifying key and its
/// signature of the round ([`privfed_secagg::DeviceKey::sign_join`]).
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct JoinCredential {
    /// The device's Ed25519 verifying key.
    pub device: [u8; 32],
    /// Its signature of the round id and the configuration's binding (64 bytes).
    pub signature: Vec<u8>,
}

/// What a client presents to join a round.
#[derive(Debug, Clone)]
pub enum JoinWith {
    /// Nothing: enough for an open round only.
    Nothing,
    /// An enrolled device's signature of the round (active rounds).
    Device(JoinCredential),
    /// One of the round's join tickets (honest-but-curious rounds), hex.
    Ticket(String),
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
    /// The round was deleted (here or by another process).
    deleted: bool,
}

/// One round in this process.
pub struct Round {
    id: String,
    replica: Mutex<Replica>,
    /// Bumped when the round's status changes (or it is deleted): wakes long polls and the
    /// deadline task.
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

fn corrupt(id: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("round {id}: {e}"))
}

/// Feeds stored messages to a replica. A stored message was validated by a replica in the same
/// state before it was stored, so one that does not replay means a damaged store: logged.
fn replay(server: &mut Server, id: &str, stage: u8, messages: Vec<(ClientId, Vec<u8>)>) {
    for (client, bytes) in messages {
        let replayed = decode::<ClientMessage>(&bytes).and_then(|m| server.receive(&m));
        if let Err(e) = replayed {
            tracing::error!(round = id, stage, client, error = %e, "stored message does not replay");
        }
    }
}

/// Rebuilds a round's state machine from its stored messages (read after `record`, so they
/// include every message that `record.version` counts).
async fn rebuild(
    store: &dyn RoundStore,
    id: &str,
    record: &RoundRecord,
) -> Result<Replica, StoreError> {
    let mut server = Server::new(record.config.clone()).map_err(|e| corrupt(id, e))?;
    let upto = match &record.status {
        StoredStatus::Collecting { stage } => *stage,
        StoredStatus::Finished => {
            let stored = store
                .messages(id, store::result_stage(&record.config))
                .await?;
            let (_, bytes) = stored
                .first()
                .ok_or_else(|| corrupt(id, "result missing"))?;
            let result = decode::<Aggregate>(bytes).map_err(|e| corrupt(id, e))?;
            return Ok(Replica {
                record: record.clone(),
                server,
                result: Some(result),
                deleted: false,
            });
        }
        StoredStatus::Aborted { .. } => {
            return Ok(Replica {
                record: record.clone(),
                server,
                result: None,
                deleted: false,
            });
        }
    };
    let stages = record.config.stages();
    if upto as usize >= stages.len() {
        return Err(corrupt(id, format!("stage {upto} does not exist")));
    }
    for stage in 0..=upto {
        replay(&mut server, id, stage, store.messages(id, stage).await?);
        if stage < upto {
            server.close_stage().map_err(|e| corrupt(id, e))?;
        }
    }
    if *server.status() != RoundStatus::Collecting(stages[upto as usize]) {
        return Err(corrupt(
            id,
            format!(
                "replay ends at {:?}, the record says stage {upto}",
                server.status()
            ),
        ));
    }
    Ok(Replica {
        record: record.clone(),
        server,
        result: None,
        deleted: false,
    })
}

/// Brings a replica (whose state machine matches its record) to the stored `record`: only the
/// new messages of its stage when the status is unchanged (a stage's messages are only ever
/// added), a full replay otherwise.
async fn catch_up(
    store: &dyn RoundStore,
    id: &str,
    r: &mut Replica,
    record: RoundRecord,
) -> Result<(), StoreError> {
    match (&r.record.status, &record.status) {
        (StoredStatus::Collecting { stage: a }, StoredStatus::Collecting { stage: b })
            if a == b =>
        {
            let pending = r.server.pending();
            let new: Vec<ClientId> = store
                .message_clients(id, *a)
                .await?
                .into_iter()
                .filter(|c| pending.contains(c))
                .collect();
            if !new.is_empty() {
                let messages = store.messages_of(id, *a, &new).await?;
                replay(&mut r.server, id, *a, messages);
            }
            r.record = record;
        }
        _ => *r = rebuild(store, id, &record).await?,
    }
    Ok(())
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
        for (id, record) in store.rounds().await? {
            let replica = rebuild(store.as_ref(), &id, &record).await?;
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

    /// Whether an accepted message (202) survives a crash of the store's backend (see
    /// [`RoundStore::durable_acks`]).
    pub fn durable_acks(&self) -> bool {
        self.store.durable_acks()
    }

    /// Adds a round to this process (or returns the one another request added first) and
    /// starts its task.
    fn insert(self: &Arc<Self>, id: String, replica: Replica) -> Arc<Round> {
        let round = {
            let mut rounds = self.rounds.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(existing) = rounds.get(&id) {
                return existing.clone();
            }
            let (changed, _) = watch::channel(replica.record.version);
            let round = Arc::new(Round {
                id: id.clone(),
                replica: Mutex::new(replica),
                changed,
            });
            rounds.insert(id, round.clone());
            round
        };
        let me = self.clone();
        let watched = round.clone();
        tokio::spawn(async move { me.watch_round(watched).await });
        round
    }

    /// The round in this process, loaded from the store if another process created it.
    async fn round(self: &Arc<Self>, id: &str) -> Result<Arc<Round>, ApiError> {
        let known = self
            .rounds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned();
        if let Some(round) = known {
            return Ok(round);
        }
        let no_round = || ApiError::NotFound(format!("no round `{id}`"));
        let record = self
            .store
            .round(id)
            .await
            .map_err(store_error)?
            .ok_or_else(no_round)?;
        let replica = rebuild(self.store.as_ref(), id, &record)
            .await
            .map_err(store_error)?;
        tracing::info!(round = %id, status = ?replica.record.status, "secure-aggregation round loaded from the store");
        Ok(self.insert(id.to_string(), replica))
    }

    /// Wakes the round's waiters if its status changed (or it was deleted).
    fn notify(round: &Round, before: &StoredStatus, r: &Replica) {
        if r.deleted || r.record.status != *before {
            round.changed.send_modify(|n| *n += 1);
        }
    }

    /// The round was deleted: this process forgets it.
    fn forget(&self, round: &Round, r: &mut Replica) {
        r.deleted = true;
        round.changed.send_modify(|n| *n += 1);
        let mut rounds = self.rounds.lock().unwrap_or_else(|p| p.into_inner());
        if rounds
            .get(&round.id)
            .is_some_and(|known| std::ptr::eq(known.as_ref(), round))
        {
            rounds.remove(&round.id);
        }
    }

    /// Makes a locked replica current: compares its version with the stored one and catches
    /// up if another process (or a failed write here) changed the round.
    async fn sync(&self, round: &Round, r: &mut Replica) -> Result<(), ApiError> {
        let no_round = || ApiError::NotFound(format!("no round `{}`", round.id));
        if r.deleted {
            return Err(no_round());
        }
        let stored = self.store.version(&round.id).await.map_err(store_error)?;
        if stored == Some(r.record.version) {
            return Ok(());
        }
        if let Some(stored) = stored.filter(|&v| v < r.record.version) {
            let e = StoreError::WentBackInTime {
                round: round.id.clone(),
                stored,
                seen: r.record.version,
            };
            tracing::error!(round = %round.id, error = %e, "aborting the round");
            self.abort_rewound(round, r, &e).await?;
            return Err(store_error(e));
        }
        let before = r.record.status.clone();
        match self.store.round(&round.id).await.map_err(store_error)? {
            Some(record) => {
                catch_up(self.store.as_ref(), &round.id, r, record)
                    .await
                    .map_err(store_error)?;
                Self::notify(round, &before, r);
                Ok(())
            }
            None => {
                self.forget(round, r);
                Err(no_round())
            }
        }
    }

    /// Aborts a round whose store went back in time (`why`): its clients hold acknowledgments,
    /// and perhaps messages of later stages, that the stored history no longer has, so it must
    /// not continue. The aborted record's version is past any this round can reach by honest
    /// changes ([`version_ceiling`]), so no process's replica can take it for its own state;
    /// and an aborted round never changes again. Then rebuilds the replica from the store.
    async fn abort_rewound(
        &self,
        round: &Round,
        r: &mut Replica,
        why: &StoreError,
    ) -> Result<(), ApiError> {
        for _ in 0..CAS_ATTEMPTS {
            let Some(current) = self.store.round(&round.id).await.map_err(store_error)? else {
                break;
            };
            if !matches!(current.status, StoredStatus::Collecting { .. }) {
                break;
            }
            let mut record = current.clone();
            record.status = StoredStatus::Aborted {
                reason: why.to_string(),
            };
            record.stage_opened_ms = now_ms();
            record.version = version_ceiling(&current.config)
                .max(current.version)
                .max(r.record.version)
                .saturating_add(1);
            let swapped = self
                .store
                .update_round(&round.id, current.version, &record, None)
                .await
                .map_err(store_error)?;
            if swapped {
                break;
            }
        }
        self.reload(round, r).await
    }

    /// Rebuilds a locked replica from the store (after its state machine took a step that was
    /// not stored).
    async fn reload(&self, round: &Round, r: &mut Replica) -> Result<(), ApiError> {
        let before = r.record.status.clone();
        match self.store.round(&round.id).await.map_err(store_error)? {
            Some(record) => {
                *r = rebuild(self.store.as_ref(), &round.id, &record)
                    .await
                    .map_err(store_error)?;
                Self::notify(round, &before, r);
                Ok(())
            }
            None => {
                self.forget(round, r);
                Err(ApiError::NotFound(format!("no round `{}`", round.id)))
            }
        }
    }

    /// Creates a round: validates the configuration, draws its 256-bit session id from the OS
    /// CSPRNG, stores it.
    pub async fn create_round(self: &Arc<Self>, new: NewRound) -> Result<CreatedRound, ApiError> {
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
            threat_model: match &new.roster {
                Some(r) => ThreatModel::Active {
                    roster: Some(r.digest()),
                },
                None => ThreatModel::HonestButCurious,
            },
        };
        let server = Server::new(config.clone()).map_err(protocol_error)?;
        if new.stage_timeout.is_zero() || new.stage_timeout > Duration::from_secs(24 * 3600) {
            return Err(ApiError::BadRequest(
                "stage_timeout_ms must be in 1..=86400000".into(),
            ));
        }
        if new.open && new.roster.is_some() {
            return Err(ApiError::BadRequest(
                "an active round is joined by enrolled devices: it cannot be open".into(),
            ));
        }
        let id = hex(&round_id);
        let ticketed = new.roster.is_none() && !new.open;
        let join_tickets: Vec<String> = if ticketed {
            (0..new.clients).map(|_| fresh_secret()).collect()
        } else {
            Vec::new()
        };
        let stored_tickets = ticketed.then(|| {
            join_tickets
                .iter()
                .map(|t| JoinTicket {
                    digest: token_hash(t),
                    used: false,
                })
                .collect()
        });
        let record = RoundRecord {
            config: config.clone(),
            status: StoredStatus::Collecting { stage: 0 },
            stage_opened_ms: now_ms(),
            stage_timeout_ms: new.stage_timeout.as_millis() as u64,
            joined: Vec::new(),
            roster: new.roster,
            devices: Vec::new(),
            join_tickets: stored_tickets,
            version: 0,
        };
        self.store
            .create_round(&id, &record)
            .await
            .map_err(store_error)?;
        tracing::info!(round = %id, clients = new.clients, dim = new.dim, bits = new.bits, "secure-aggregation round created");
        self.insert(
            id.clone(),
            Replica {
                record,
                server,
                result: None,
                deleted: false,
            },
        );
        Ok(CreatedRound {
            id,
            config,
            join_tickets,
        })
    }

    /// Joins a round during its first stage: the next free client id and a fresh bearer token
    /// (256 bits; only its SHA-256 is stored). The id is taken by compare-and-set, so clients
    /// joining through different processes get different ids.
    ///
    /// The credential is checked before anything is stored: an active round admits only
    /// enrolled devices, each once, with a signature of this round; an honest-but-curious round
    /// with join tickets admits one client per unused ticket (every stored digest is compared,
    /// in constant time each); an open round admits anyone. No credential where one is needed
    /// is 401, a wrong one 403, a used ticket or a device that already joined 409.
    pub async fn join(
        self: &Arc<Self>,
        id: &str,
        credential: &JoinWith,
    ) -> Result<(ClientId, String, RoundConfig), ApiError> {
        let round = self.round(id).await?;
        let mut r = round.replica.lock().await;
        if let Some(roster) = &r.record.roster {
            let JoinWith::Device(c) = credential else {
                return Err(ApiError::Unauthorized);
            };
            let binding = r.record.config.binding();
            let signature: [u8; 64] = c
                .signature
                .as_slice()
                .try_into()
                .map_err(|_| ApiError::BadRequest("a signature has 64 bytes".into()))?;
            if roster.devices.binary_search(&c.device).is_err()
                || !privfed_secagg::identity::verify_join(&c.device, &binding, id, &signature)
            {
                return Err(ApiError::Forbidden);
            }
        }
        let ticket_digest = match (&r.record.join_tickets, credential) {
            (None, _) => None,
            (Some(_), JoinWith::Ticket(t)) => Some(token_hash(t)),
            (Some(_), _) => return Err(ApiError::Unauthorized),
        };
        let token = fresh_secret();
        for _ in 0..CAS_ATTEMPTS {
            self.sync(&round, &mut r).await?;
            if r.record.status != (StoredStatus::Collecting { stage: 0 }) {
                return Err(ApiError::Conflict(
                    "the round no longer accepts new clients".into(),
                ));
            }
            if r.record.joined.len() >= r.record.config.clients as usize {
                return Err(ApiError::Conflict("the round is full".into()));
            }
            let mut record = r.record.clone();
            if record.roster.is_some()
                && let JoinWith::Device(c) = credential
            {
                if record.devices.contains(&c.device) {
                    return Err(ApiError::Conflict(
                        "this device has already joined the round".into(),
                    ));
                }
                record.devices.push(c.device);
            }
            if let (Some(tickets), Some(digest)) = (record.join_tickets.as_mut(), &ticket_digest) {
                let i = find_digest(tickets.iter().map(|t| &t.digest), digest)
                    .ok_or(ApiError::Forbidden)?;
                if tickets[i].used {
                    return Err(ApiError::Conflict(
                        "this join ticket has been used (a ticket admits one client)".into(),
                    ));
                }
                tickets[i].used = true;
            }
            record.joined.push(token_hash(&token));
            record.version += 1;
            let client = record.joined.len() as ClientId;
            let swapped = self
                .store
                .update_round(&round.id, r.record.version, &record, None)
                .await
                .map_err(store_error)?;
            if swapped {
                r.record = record;
                return Ok((client, token, r.record.config.clone()));
            }
        }
        Err(ApiError::Unavailable(
            "the round kept changing while joining; retry".into(),
        ))
    }

    fn authenticate(r: &Replica, client: ClientId, token: &str) -> Result<(), ApiError> {
        let ok = client
            .checked_sub(1)
            .and_then(|i| r.record.joined.get(i as usize))
            .is_some_and(|h| same_digest(h, &token_hash(token)));
        if ok { Ok(()) } else { Err(ApiError::Forbidden) }
    }

    /// Resolves the round and the joined client whose bearer token this is — before a byte of
    /// the message body is read — and returns that client's id and the largest message an
    /// honest client of the round sends ([`max_client_message_len`]). An unknown round is 404,
    /// a token that no client of it holds 403. A token not found in this replica is looked up
    /// once more after catching up with the store (a join through another process).
    pub async fn admit_message(
        self: &Arc<Self>,
        id: &str,
        token: &str,
    ) -> Result<(ClientId, usize), ApiError> {
        let round = self.round(id).await?;
        let mut r = round.replica.lock().await;
        let hash = token_hash(token);
        let find = |r: &Replica| find_digest(&r.record.joined, &hash);
        let index = match find(&r) {
            Some(i) => i,
            None => {
                self.sync(&round, &mut r).await?;
                find(&r).ok_or(ApiError::Forbidden)?
            }
        };
        Ok((
            index as ClientId + 1,
            max_client_message_len(&r.record.config),
        ))
    }

    /// Handles a client's message (postcard bytes) sent with its bearer token: validated by the
    /// current replica, stored (only while its stage is open), then acknowledged. Closes the
    /// stage when it was the last one expected.
    /// `client` is the id [`Coordinator::admit_message`] found for the token; a message under
    /// another client's id is refused.
    pub async fn post_message(
        self: &Arc<Self>,
        id: &str,
        client: ClientId,
        token: &str,
        bytes: &[u8],
    ) -> Result<Receipt, ApiError> {
        let round = self.round(id).await?;
        let message: ClientMessage = decode(bytes).map_err(protocol_error)?;
        if message.header.client != client {
            return Err(ApiError::Forbidden);
        }
        let mut r = round.replica.lock().await;
        self.sync(&round, &mut r).await?;
        Self::authenticate(&r, client, token)?;
        let stage = message.payload.stage();
        if *r.server.status() != RoundStatus::Collecting(stage)
            && r.server.already_received(&message)
        {
            // A retry of a message stored before its stage closed (its acknowledgment was lost,
            // e.g. the server that stored it was killed): the replica, current with the store,
            // replayed exactly these bytes, so the first write stands and is acknowledged again.
            // Any other message for a closed stage is refused below.
            return Ok(Receipt::Duplicate);
        }
        if !matches!(r.record.status, StoredStatus::Collecting { .. }) {
            return Err(ApiError::Conflict("the round is over".into()));
        }
        let mut receipt = r.server.receive(&message).map_err(protocol_error)?;
        // A duplicate goes to the store too: its acknowledgment promises the first write, whose
        // durability the store confirms again.
        let stored = self
            .store
            .put_message(
                &round.id,
                stage_index(&r.record.config, stage),
                client,
                bytes,
            )
            .await;
        match stored {
            Ok(PutOutcome::Stored { version })
                if receipt == Receipt::Accepted && version == r.record.version + 1 =>
            {
                // Nobody else changed the round meanwhile: the replica is current.
                r.record.version = version;
            }
            // Stored, and other processes stored messages too: the replica holds this one, so
            // catching up with the others' is enough.
            Ok(PutOutcome::Stored { .. }) if receipt == Receipt::Accepted => {
                self.sync(&round, &mut r).await?;
            }
            // The replica had it but the store had not (a change lost by the store): rebuild.
            Ok(PutOutcome::Stored { .. }) => self.reload(&round, &mut r).await?,
            Ok(PutOutcome::Duplicate) => {
                if receipt == Receipt::Accepted {
                    // Another process stored the same bytes first (a retry through another
                    // server): the replica took exactly the stored message; catch up.
                    self.sync(&round, &mut r).await?;
                }
                receipt = Receipt::Duplicate;
            }
            Ok(PutOutcome::Conflict) => {
                self.reload(&round, &mut r).await?;
                return Err(ApiError::Conflict(format!(
                    "client {client} already sent a different message for this stage"
                )));
            }
            Ok(PutOutcome::StageClosed) => {
                self.reload(&round, &mut r).await?;
                return Err(ApiError::Conflict(format!(
                    "stage {} is closed",
                    stage.name()
                )));
            }
            Err(e) => {
                // The replica took a message the store may not hold: rebuild it from the store
                // (best effort: the next request syncs anyway).
                let _ = self.reload(&round, &mut r).await;
                return Err(store_error(e));
            }
        }
        let index = stage_index(&r.record.config, stage);
        if *r.server.status() == RoundStatus::Collecting(stage)
            && r.server.pending().is_empty()
            && let Err(e) = self.close_locked(&round, &mut r, Some(index)).await
        {
            // The message is stored (its receipt is true); the round's task closes the stage.
            tracing::warn!(round = %round.id, error = %e, "closing a complete stage failed; retrying");
        }
        Ok(receipt)
    }

    /// Closes the current stage of a locked round — only if it is `stage` when given — and
    /// stores the outcome by compare-and-set. A stage another process closed first is left
    /// closed (`Ok`).
    async fn close_locked(
        &self,
        round: &Round,
        r: &mut Replica,
        stage: Option<u8>,
    ) -> Result<(), ApiError> {
        for _ in 0..CAS_ATTEMPTS {
            self.sync(round, r).await?;
            let current = match r.record.status {
                StoredStatus::Collecting { stage: s } if stage.is_none_or(|want| want == s) => s,
                _ => return Ok(()),
            };
            let before = r.record.status.clone();
            let closed = r.server.close_stage().cloned();
            let status = match closed {
                Ok(s) => s,
                Err(e) => {
                    let _ = self.reload(round, r).await;
                    return Err(protocol_error(e));
                }
            };
            let (new_status, result) = match &status {
                RoundStatus::Collecting(s) => (
                    StoredStatus::Collecting {
                        stage: stage_index(&r.record.config, *s),
                    },
                    None,
                ),
                RoundStatus::Finished => {
                    let Some(aggregate) = r.server.output().cloned() else {
                        let _ = self.reload(round, r).await;
                        return Err(ApiError::Internal("finished without output".into()));
                    };
                    (StoredStatus::Finished, Some(aggregate))
                }
                RoundStatus::Aborted(reason) => (
                    StoredStatus::Aborted {
                        reason: reason.clone(),
                    },
                    None,
                ),
            };
            let mut record = r.record.clone();
            record.status = new_status;
            record.stage_opened_ms = now_ms();
            record.version += 1;
            let encoded = result.as_ref().map(encode);
            let swapped = self
                .store
                .update_round(&round.id, r.record.version, &record, encoded.as_deref())
                .await;
            match swapped {
                Ok(true) => {
                    r.record = record;
                    r.result = result;
                    Self::notify(round, &before, r);
                    tracing::info!(round = %round.id, closed = r.record.config.stages().get(current as usize).map_or("?", |s| s.name()), status = ?r.record.status, "secure-aggregation stage closed");
                    return Ok(());
                }
                // The round changed since this replica's version (a message stored or the stage
                // closed by another process): start again from the store.
                Ok(false) => self.reload(round, r).await?,
                Err(e) => {
                    let _ = self.reload(round, r).await;
                    return Err(store_error(e));
                }
            }
        }
        Err(ApiError::Unavailable(
            "the round kept changing while closing its stage; retry".into(),
        ))
    }

    /// The round's task: closes stages whose deadline passed (or that are complete but were not
    /// closed, e.g. after a failed write), and re-reads the store every [`REFRESH_INTERVAL`] so
    /// changes made by other processes reach this process's waiters. Ends with the round.
    async fn watch_round(self: Arc<Self>, round: Arc<Round>) {
        let mut changes = round.changed.subscribe();
        let mut closing = self.closing.subscribe();
        loop {
            if *closing.borrow_and_update() {
                return;
            }
            let deadline = {
                let r = round.replica.lock().await;
                if r.deleted || !matches!(r.record.status, StoredStatus::Collecting { .. }) {
                    return;
                }
                r.record.stage_opened_ms + r.record.stage_timeout_ms
            };
            let wait = Duration::from_millis(deadline.saturating_sub(now_ms()));
            tokio::select! {
                _ = tokio::time::sleep(wait.min(REFRESH_INTERVAL)) => {
                    let mut r = round.replica.lock().await;
                    if let Err(e) = self.sync(&round, &mut r).await {
                        tracing::debug!(round = %round.id, error = %e, "refreshing a round failed");
                        continue;
                    }
                    let StoredStatus::Collecting { stage } = r.record.status else { continue };
                    let due = r.record.stage_opened_ms + r.record.stage_timeout_ms <= now_ms();
                    if (due || r.server.pending().is_empty())
                        && let Err(e) = self.close_locked(&round, &mut r, Some(stage)).await
                    {
                        tracing::warn!(round = %round.id, error = %e, "closing a stage failed; retrying");
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
        self: &Arc<Self>,
        id: &str,
        client: ClientId,
        token: &str,
        wait: Duration,
    ) -> Result<Next, ApiError> {
        let round = self.round(id).await?;
        let mut changes = round.changed.subscribe();
        let mut closing = self.closing.subscribe();
        let deadline = tokio::time::Instant::now() + wait.min(MAX_WAIT);
        let mut synced = false;
        loop {
            if *closing.borrow_and_update() {
                return Ok(Next::NotYet);
            }
            {
                let mut r = round.replica.lock().await;
                // Later wake-ups come from this process's changes to the replica, which the
                // round's task keeps current.
                if !synced {
                    self.sync(&round, &mut r).await?;
                    synced = true;
                }
                if r.deleted {
                    return Err(ApiError::NotFound(format!("no round `{id}`")));
                }
                Self::authenticate(&r, client, token)?;
                // The record first: a replica rebuilt for a round that is over has a fresh
                // state machine (its messages are not replayed).
                match &r.record.status {
                    StoredStatus::Finished => return Ok(Next::Over("finished".into())),
                    StoredStatus::Aborted { reason } => {
                        return Ok(Next::Over(format!("aborted: {reason}")));
                    }
                    StoredStatus::Collecting { .. } => {}
                }
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
    pub async fn view(self: &Arc<Self>, id: &str) -> Result<serde_json::Value, ApiError> {
        let round = self.round(id).await?;
        let mut r = round.replica.lock().await;
        self.sync(&round, &mut r).await?;
        let pending = r.server.pending();
        let (status, stage, reason) = match &r.record.status {
            StoredStatus::Collecting { stage } => (
                "collecting",
                r.record
                    .config
                    .stages()
                    .get(*stage as usize)
                    .map(|s| s.name()),
                None,
            ),
            StoredStatus::Finished => ("finished", None, None),
            StoredStatus::Aborted { reason } => ("aborted", None, Some(reason.clone())),
        };
        Ok(serde_json::json!({
            "round": round.id,
            "status": status,
            "stage": stage,
            "reason": reason,
            "config": r.record.config,
            "threat_model": r.record.config.threat_model.name(),
            "roster": r.record.roster,
            "joined": r.record.joined.len(),
            "pending": pending.len(),
            "pending_clients": pending,
            "stage_deadline_ms": r.record.stage_opened_ms + r.record.stage_timeout_ms,
            "survivors": r.result.as_ref().map(|a| a.survivors.len()),
            "version": r.record.version,
        }))
    }

    /// Closes the current stage now (an operator's deadline): the clients that have not answered
    /// are treated as dropped. If another process closes that stage first, it stays closed and
    /// the next one is not touched.
    pub async fn close_now(self: &Arc<Self>, id: &str) -> Result<(), ApiError> {
        let round = self.round(id).await?;
        let mut r = round.replica.lock().await;
        self.sync(&round, &mut r).await?;
        let StoredStatus::Collecting { stage } = r.record.status else {
            return Err(ApiError::Conflict("the round is over".into()));
        };
        self.close_locked(&round, &mut r, Some(stage)).await
    }

    /// A finished round's sum and survivors.
    pub async fn result(self: &Arc<Self>, id: &str) -> Result<Aggregate, ApiError> {
        let round = self.round(id).await?;
        let mut r = round.replica.lock().await;
        self.sync(&round, &mut r).await?;
        match (&r.result, &r.record.status) {
            (Some(a), _) => Ok(a.clone()),
            (None, StoredStatus::Aborted { reason }) => {
                Err(ApiError::Conflict(format!("the round aborted: {reason}")))
            }
            _ => Err(ApiError::Conflict("the round is not finished".into())),
        }
    }

    /// Deletes a round and its messages (for every process: the others notice at their next
    /// look at the store).
    pub async fn delete(self: &Arc<Self>, id: &str) -> Result<(), ApiError> {
        let round = self.round(id).await?;
        let mut r = round.replica.lock().await;
        let deleted = self.store.delete_round(id).await;
        match deleted {
            Ok(()) | Err(StoreError::NotFound(_)) => {
                // Ends the round's task and any long poll.
                self.forget(&round, &mut r);
                deleted.map_err(store_error)
            }
            Err(e) => Err(store_error(e)),
        }
    }
}
