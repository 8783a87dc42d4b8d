<<<<<<< HEAD
//! Federated learning simulation (issue 13): federated datasets ([`data`]), the run config
//! ([`config`]), the privacy side of a round ([`privacy`]) and the training loop with accounting
//! and checkpoints ([`train`]). Local randomizers, central DP, distributed DP and real secure
//! aggregation run in one loop with the ε of every round accounted.
=======
//! Federated learning simulation (issue 13): federated datasets ([`data`]), and the training loop
//! that runs local randomizers, central DP, distributed DP and real secure aggregation with the ε
//! of every round accounted.
//!
//! Federated data:
//! * [`data`]: the shard types ([`data::Shard`], [`data::FederatedData`]);
//! * [`partition`]: seeded iid, label-shard (McMahan et al.) and Dirichlet(α) partitions;
//! * [`tabular`]: MNIST and UCI Adult over clients (the loaders of [`crate::data`]);
//! * [`shakespeare`]: Tiny Shakespeare with one client per speaking role, character vocabulary;
//! * [`synthetic`]: paper 000 §5.1's synthetic logistic problem with `θ*` and its population loss;
//! * [`spec`]: [`spec::DataSpec`], the dataset of a TOML run config, and subsampling.
>>>>>>> fl-data

pub mod config;
pub mod data;
<<<<<<< HEAD
pub mod privacy;
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
    /// From the models or data.
    #[error(transparent)]
    Learn(#[from] privfed_learn::LearnError),
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
    /// A checkpoint could not be written, read or used.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
}

#[cfg(test)]
mod tests;
=======
pub mod partition;
pub mod shakespeare;
pub mod spec;
pub mod synthetic;
pub mod tabular;
>>>>>>> fl-data
