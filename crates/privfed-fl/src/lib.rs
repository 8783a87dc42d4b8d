//! # privfed-fl
//!
//! Federated learning (systems layer): local randomizers, central DP, distributed DP and real
//! secure aggregation in one training loop, with the ε of every round accounted
//! (`docs/FEDERATED_LEARNING.md`). The CLI (`privfed fl train`) and the Python bindings
//! (`privfed.fl.train`) drive the same [`run::Run`]; papers 000 and 001's experiment grids are in
//! `privfed-sim`.
//!
//! Data:
//! * [`datasets`]: MNIST (IDX), UCI Adult and paper 003's synthetic production model, read from a
//!   data directory (`$PRIVFED_DATA_DIR`, else `../shared/data`); never downloaded;
//! * [`data`]: the shard types ([`data::Shard`], [`data::FederatedData`]);
//! * [`partition`]: seeded iid, label-shard (McMahan et al.) and Dirichlet(α) partitions;
//! * [`tabular`]: MNIST and UCI Adult over clients;
//! * [`shakespeare`]: Tiny Shakespeare with one client per speaking role, character vocabulary;
//! * [`synthetic`]: paper 000 §5.1's synthetic logistic problem with `θ*` and its population loss;
//! * [`spec`]: [`spec::DataSpec`], the dataset of a TOML run config, and subsampling.
//!
//! Training:
//! * [`config`]: the training sections of a run config, every field checked; the privacy section
//!   read once into a [`config::CheckedPrivacy`] (every parameter checked, defaults filled in);
//! * [`privacy`]: the mechanisms the checked privacy section resolves to
//!   ([`privacy::PrivacyPlan::new`], for the model's dimension and the data's clients), the
//!   client side, aggregation, events;
//! * [`train`]: the round loop, accounting, budgets, checkpoints ([`Trainer`]);
//! * [`run`]: a whole TOML run config (data + training) and a run's figure.
//!
//! Randomness comes in as a seed in the config or from the OS; the secure-aggregation rounds
//! draw their secrets from the OS.

pub mod audit;
pub mod config;
pub mod data;
pub mod datasets;
pub mod partition;
pub mod privacy;
pub mod run;
pub mod shakespeare;
pub mod spec;
pub mod synthetic;
pub mod tabular;
pub mod train;

pub use config::TrainConfig;
pub use train::{RoundMetrics, StepOutcome, Summary, Trainer};

/// Why a training run failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlError {
    /// A bad config field (the message names it as in the TOML file).
    #[error("config: {0}")]
    Config(String),
    /// From the models.
    #[error(transparent)]
    Learn(#[from] privfed_learn::LearnError),
    /// From a data set's files or its partition.
    #[error(transparent)]
    Dataset(#[from] datasets::DataError),
    /// From a mechanism.
    #[error(transparent)]
    Mechanism(#[from] privfed_mechanisms::MechanismError),
    /// From the accountant or calibration.
    #[error(transparent)]
    Accounting(#[from] privfed_accounting::AccountingError),
    /// From the distributed-DP pipeline or planner.
    #[error(transparent)]
    Distributed(#[from] privfed_distributed::DistributedError),
    /// The secure-aggregation round failed.
    #[error("secure aggregation: {0}")]
    SecAgg(String),
    /// The run's data could not be loaded: which directory, and the [`datasets::DataError`] or
    /// config error, as text.
    #[error("{0}")]
    Data(String),
    /// A run's directory or file could not be created, read or written (which, and why).
    #[error("{0}")]
    Io(String),
    /// A checkpoint could not be written, read or used.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// One run of an experiment's grid failed (which one, and why). The reason is part of the
    /// message and deliberately not an error `source`, so a printed chain says it once.
    #[error("run {run}: {error}")]
    Run {
        /// Its position and labels, e.g. `3/11 (epsilon=1000, p=0.622)`.
        run: String,
        /// Why.
        error: Box<FlError>,
    },
}

#[cfg(test)]
mod tests;
