//! Where the `k` instances live. The HTTP layer talks to a [`Store`]; the Draw-and-Discard logic
//! (uniform draw, uniform replacement, spam filter) comes from `privfed_ddml::engine`.
//!
//! * [`embedded::EmbeddedStore`] (default): redb in `--data-dir`, an in-memory copy for reads, and
//!   one writer thread that group-commits every pending update in one durable transaction.
//! * [`redis::RedisStore`] (`--store redis://…`): instances in Redis, so several server processes
//!   serve one model.

pub mod embedded;
pub mod redis;

use crate::error::StoreError;
use crate::model::ModelSpec;
use privfed_ddml::engine::SpamRejection;
use std::future::Future;
use std::sync::Arc;

/// What became of a submitted update.
#[derive(Debug, Clone, PartialEq)]
pub enum SubmitOutcome {
    /// Durably stored over a uniformly random instance.
    Accepted,
    /// Rejected by the spam filter (counted durably).
    Rejected(SpamRejection),
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
    /// binary wire format and the stored format, so a draw copies no weights).
    fn draw(&self, name: &str) -> impl Future<Output = Result<bytes::Bytes, StoreError>> + Send;

    /// Applies the spam filter and, if it passes, overwrites a uniformly random instance with
    /// `weights` (already validated: length `dim`, finite).
    fn submit(
        &self,
        name: &str,
        weights: Vec<f32>,
    ) -> impl Future<Output = Result<SubmitOutcome, StoreError>> + Send;

    /// Counters and instances.
    fn snapshot(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<ModelSnapshot, StoreError>> + Send;

    /// Whether the backend answers.
    fn healthy(&self) -> impl Future<Output = bool> + Send;

    /// Floats held by all models (`dim·k` summed), for the cap on total model memory.
    fn total_floats(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;
}
