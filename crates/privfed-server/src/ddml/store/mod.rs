//! Where the `k` instances live. The HTTP layer talks to a [`Store`]; the Draw-and-Discard logic
//! (uniform draw, uniform replacement, spam filter) comes from `privfed_ddml::engine`, and the
//! decision on each update — the update guard, the spam filter and the instance to overwrite —
//! from `privfed_ddml::decision` ([`decide`]): a store persists that decision
//! ([`Store::persist`]) and decides nothing itself. Ticket issue and redemption follow
//! `privfed_ddml::ticket`'s rules, and the spam filter's statistics its
//! [`SpamStats`](privfed_ddml::decision::SpamStats) transitions ([`Store::spam_stats`]).
//!
//! * [`embedded::EmbeddedStore`] (default): redb in `--data-dir`, an in-memory copy for reads, and
//!   one writer thread that group-commits every pending update in one durable transaction.
//! * [`redis::RedisStore`] (`--store redis://…`): instances in Redis, so several server processes
//!   serve one model.

pub mod embedded;
pub mod journal;
pub mod redis;

use crate::ddml::model::ModelSpec;
use crate::ddml::ticket::Ticket;
use crate::http::error::StoreError;
pub use privfed_ddml::decision::{Decision, Rejection};
use privfed_ddml::decision::{DecisionError, UpdatePolicy, decide_update};
use std::future::Future;
use std::sync::Arc;

/// What became of a submitted update.
#[derive(Debug, Clone, PartialEq)]
pub enum SubmitOutcome {
    /// Durably stored over a uniformly random instance.
    Accepted,
    /// Refused (counted durably).
    Rejected(Rejection),
    /// The ticket was used before; this is the outcome of its first use, and nothing was
    /// applied now (a retried post is applied once).
    Replayed(Box<SubmitOutcome>),
}

/// A used ticket's outcome as the stores keep it for replays: `a` (accepted), or `r` followed by
/// `s` and the spam rejection's JSON or `g` and the guard rejection's JSON. An acceptance, the
/// common outcome of an update, is a static string (no allocation per update).
pub fn encode_outcome(o: &SubmitOutcome) -> std::borrow::Cow<'static, str> {
    match o {
        SubmitOutcome::Rejected(Rejection::Spam(r)) => {
            format!("rs{}", serde_json::to_string(r).unwrap_or_default()).into()
        }
        SubmitOutcome::Rejected(Rejection::Guard(r)) => {
            format!("rg{}", serde_json::to_string(r).unwrap_or_default()).into()
        }
        SubmitOutcome::Accepted => "a".into(),
        SubmitOutcome::Replayed(first) => encode_outcome(first),
    }
}

/// Inverse of [`encode_outcome`]; `Err` if the stored outcome is unreadable.
pub fn decode_outcome(s: &str) -> Result<SubmitOutcome, StoreError> {
    let bad = |e: serde_json::Error| StoreError::Backend(format!("stored ticket outcome: {e}"));
    if let Some(json) = s.strip_prefix("rs") {
        Ok(SubmitOutcome::Rejected(Rejection::Spam(
            serde_json::from_str(json).map_err(bad)?,
        )))
    } else if let Some(json) = s.strip_prefix("rg") {
        Ok(SubmitOutcome::Rejected(Rejection::Guard(
            serde_json::from_str(json).map_err(bad)?,
        )))
    } else {
        Ok(SubmitOutcome::Accepted)
    }
}

/// Whether updates to this model must carry the ticket of their draw (those with a guard).
pub fn needs_ticket(spec: &ModelSpec) -> bool {
    spec.step_guard.is_some()
}

/// A model's rules for its updates, as the engine takes them.
pub fn policy(spec: &ModelSpec) -> UpdatePolicy<'_> {
    UpdatePolicy {
        k: spec.k,
        init_std: spec.init_std,
        guard: spec.step_guard.as_deref(),
        spam: spec.spam.as_ref(),
    }
}

/// The engine's decision on an update ([`privfed_ddml::decision::decide_update`]): the update
/// guard against the instance `base` its ticket drew, then the spam filter against `stats`
/// (which must be given when the spec has a filter), then the instance to overwrite, drawn from
/// the thread's CSPRNG-seeded generator. [`StoreError::TicketRequired`] if the model has a guard
/// and there is no base. The stores persist what it decides ([`Store::persist`]).
pub fn decide(
    spec: &ModelSpec,
    base: Option<&[f32]>,
    weights: &[f32],
    stats: Option<&privfed_ddml::engine::InstanceStats>,
) -> Result<Decision, StoreError> {
    decide_update(&policy(spec), base, stats, weights, &mut rand::rng()).map_err(|e| match e {
        DecisionError::TicketRequired => StoreError::TicketRequired,
        other => StoreError::Backend(other.to_string()),
    })
}

/// What a store's writer has committed since it was opened: how well group commit amortizes
/// its fsync (`operations / commits` updates per fsync).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Durable transactions that carried updates.
    pub commits: u64,
    /// Updates (accepted or rejected) those transactions carried.
    pub operations: u64,
    /// Checkpoints of the update journal into the tables (embedded store,
    /// [`journal`]).
    pub checkpoints: u64,
}

/// A drawn instance and its ticket.
#[derive(Debug, Clone)]
pub struct Drawn {
    /// The instance as little-endian `f32` (`4·dim` bytes: the binary wire format).
    pub weights: bytes::Bytes,
    /// The single-use ticket for the update that follows.
    pub ticket: Ticket,
}

/// An update as submitted: what the HTTP layer validated it against, and its ticket.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The generation of the model the update was validated against; a store applies it only
    /// to that incarnation of the model (a model deleted and re-created meanwhile answers
    /// not found).
    pub generation: u64,
    /// The ticket of the draw this update steps from, if the client sent one.
    pub ticket: Option<Ticket>,
    /// The weights (length `dim` of that generation, finite).
    pub weights: Vec<f32>,
}

/// What [`Store::admit`] made of an update's ticket.
#[derive(Debug)]
pub enum Admission<A> {
    /// The update may be read and applied.
    Admitted(A),
    /// The ticket was used before: this was the outcome of its first use.
    Replayed(SubmitOutcome),
}

/// A model's state as reported by `GET /v1/models/{name}`.
#[derive(Debug, Clone)]
pub struct ModelSnapshot {
    /// The spec.
    pub spec: Arc<ModelSpec>,
    /// Accepted updates.
    pub accepted: u64,
    /// Rejected updates.
    pub rejected: u64,
    /// The `k` instances.
    pub instances: Vec<Arc<[f32]>>,
}

/// Storage of models and their instances.
///
/// Contract: [`Store::submit`] returns only after the update (and the counter) is as durable as
/// the store promises; an instance is always replaced whole (a reader never sees a mix of two
/// versions); replacement indices are uniform and independent of draws.
pub trait Store: Send + Sync + 'static {
    /// Creates a model with the given initial instances (`k` of length `dim`).
    fn create_model(
        &self,
        spec: ModelSpec,
        instances: Vec<Vec<f32>>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Deletes a model.
    fn delete_model(&self, name: &str) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The spec of a model.
    fn spec(&self, name: &str) -> impl Future<Output = Result<Arc<ModelSpec>, StoreError>> + Send;

    /// A uniformly random instance, as its little-endian `f32` encoding (`4·dim` bytes: the
    /// binary wire format and the stored format, so a draw copies no weights), with a fresh
    /// ticket.
    fn draw(&self, name: &str) -> impl Future<Output = Result<Drawn, StoreError>> + Send;

    /// An update admitted by [`Store::admit`]: the model it goes to, and the ticket it holds in
    /// progress with the instance that ticket drew. Dropping it unapplied returns the ticket
    /// (or lets its hold lapse), so the client may retry with it.
    type Admitted: Send + 'static;

    /// The first half of an update, taken **before its body is read**: checks that `spec` is
    /// still the model's generation and redeems the ticket (a model whose guard is on needs one:
    /// [`StoreError::TicketRequired`]; an unknown or used-up ticket is
    /// [`StoreError::TicketInvalid`], one in use [`StoreError::TicketInUse`]). A ticket that
    /// was used before answers its first outcome ([`Admission::Replayed`]), and nothing is read
    /// or applied.
    fn admit(
        &self,
        name: &str,
        spec: &Arc<ModelSpec>,
        ticket: Option<Ticket>,
    ) -> impl Future<Output = Result<Admission<Self::Admitted>, StoreError>> + Send;

    /// The second half: applies the update guard and the spam filter and, if they pass,
    /// overwrites a uniformly random instance with `weights` (length `dim`, finite); the
    /// ticket's outcome is recorded for replays. On an error nothing was applied and the ticket
    /// is returned, except after [`StoreError::Unavailable`] from a commit past its deadline,
    /// whose ticket stays in progress until the commit completes (the update may yet apply).
    fn apply(
        &self,
        name: &str,
        admitted: Self::Admitted,
        weights: Vec<f32>,
    ) -> impl Future<Output = Result<SubmitOutcome, StoreError>> + Send;

    /// Persists a decision of the engine on an admitted update, as [`Store::apply`] does once
    /// the engine has decided ([`decide`]): [`Decision::Write`] overwrites that instance with
    /// `weights` (length `dim`, finite) and counts the update accepted, [`Decision::Reject`]
    /// counts it rejected; the ticket's outcome is recorded for replays. A store decides
    /// nothing here, so a log of decisions replayed into either store gives the same model. On
    /// an error nothing was applied, as for [`Store::apply`].
    fn persist(
        &self,
        name: &str,
        admitted: Self::Admitted,
        decision: Decision,
        weights: Vec<f32>,
    ) -> impl Future<Output = Result<SubmitOutcome, StoreError>> + Send;

    /// Returns an admitted update's ticket unused (its body could not be read), so the client
    /// may retry with it.
    fn release(&self, admitted: Self::Admitted) -> impl Future<Output = ()> + Send;

    /// [`admit`](Store::admit) then [`apply`](Store::apply), for a submission validated against
    /// generation `sub.generation` (a model deleted and re-created meanwhile answers not found).
    fn submit(
        &self,
        name: &str,
        sub: Submission,
    ) -> impl Future<Output = Result<SubmitOutcome, StoreError>> + Send {
        async move {
            let spec = self.spec(name).await?;
            if spec.generation != sub.generation || sub.weights.len() != spec.dim {
                return Err(StoreError::NotFound(name.to_string()));
            }
            match self.admit(name, &spec, sub.ticket).await? {
                Admission::Replayed(o) => Ok(SubmitOutcome::Replayed(Box::new(o))),
                Admission::Admitted(a) => self.apply(name, a, sub.weights).await,
            }
        }
    }

    /// Counters and instances.
    fn snapshot(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<ModelSnapshot, StoreError>> + Send;

    /// The spam filter's statistics ([`privfed_ddml::decision::SpamStats`]) the store decides
    /// with now; `None` for a model without a filter. The embedded store follows them write by
    /// write in memory and computes them afresh from its stored instances at start-up; the
    /// Redis store computes them afresh from the instances in Redis (each process caches them
    /// for [`redis::STATS_TTL`]; this reads them afresh).
    fn spam_stats(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<Option<privfed_ddml::decision::SpamStats>, StoreError>> + Send;

    /// Whether the backend answers.
    fn healthy(&self) -> impl Future<Output = bool> + Send;

    /// Whether an accepted update (202) survives a crash of the store's backend. `false` only
    /// for a store the operator explicitly runs without that guarantee (Redis with
    /// [`redis::Durability::BestEffort`]); the API then answers `"durable": false`.
    fn durable_acks(&self) -> bool {
        true
    }

    /// Group commits so far, for stores that batch updates into commits (`/metrics`).
    fn commit_stats(&self) -> Option<CommitStats> {
        None
    }

    /// Floats held by all models (`dim·k` summed), for the cap on total model memory.
    fn total_floats(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;
}
