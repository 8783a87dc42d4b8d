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

pub mod data;
pub mod partition;
pub mod shakespeare;
pub mod spec;
pub mod synthetic;
pub mod tabular;
