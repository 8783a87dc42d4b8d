//! # privfed-sim
//!
//! Simulations and experiments of privfed deployments (systems layer: this crate may read data
//! files and write results):
//! * [`simulate`]: the Draw-and-Discard training simulation (paper 003 §V, `docs/ALGORITHMS.md`
//!   §4.4) over any [`simulate::ModelServer`]: in memory ([`simulate::InProcessServer`]) or a live
//!   server over HTTP ([`http::HttpModelServer`], through the device-side `privfed-client`);
//! * [`adversary`]: the three-adversary report of a simulated deployment, computed by
//!   `privfed_accounting::analysis::draw_and_discard`;
//! * [`dme`]: the distributed-mean-estimation engine (chunked, reproducible parallel trials; the
//!   MSE with its 95% interval against the exact prediction);
//! * [`distributed_dme`]: the same with distributed DP (paper 001): Skellam encoding, modular
//!   sum, decoding, dropouts, wraps and per-trial ε; the continuous-Gaussian baseline;
//! * [`experiments`]: paper 003's Draw-and-Discard grids, paper 004's MVU experiments and
//!   papers 000 and 001's federated-learning experiments (grids of `privfed-fl` runs);
//! * [`mechanism`]: building a mechanism from options ([`mechanism::MechanismSpec`]), including
//!   designing or loading an MVU design;
//! * [`secagg`]: secure-aggregation rounds in process, over HTTP and against a lying server.
//!
//! The protocol itself (client step, server engine) is `privfed-ddml`; models are
//! `privfed-learn`. Randomness comes in as `rng: &mut R` with `R: Rng + CryptoRng`; a seeded
//! generator (`privfed_mechanisms::rng::seeded_rng_for_experiments`) makes runs reproducible.
//! Progress is reported through callbacks ([`experiments::Observer`]); drawing it is the front
//! end's job.
//!
//! ## Example: a short in-process simulation on synthetic data
//! ```
//! use privfed_ddml::client::ClientNoise;
//! use privfed_mechanisms::rng::seeded_rng_for_experiments;
//! use privfed_fl::datasets::synthetic_production;
//! use privfed_sim::simulate::{SimConfig, simulate_in_process};
//!
//! let mut rng = seeded_rng_for_experiments(7);
//! let dataset = synthetic_production(2_000, 500, &mut rng).unwrap();
//! let mut config = SimConfig::paper_defaults(10);
//! config.noise = ClientNoise::Laplace { epsilon: 8.0 };
//! let report = simulate_in_process(&dataset, &config, &mut rng, |_| {}).unwrap();
//! assert!((0.0..=1.0).contains(&report.accuracy));
//! assert!(report.privacy.is_some());
//! ```

pub mod adversary;
pub mod distributed_dme;
pub mod dme;
// The guides' Rust blocks as doctests (compiled only by `cargo test --doc`).
#[cfg(doctest)]
mod doc_blocks;
pub mod experiments;
#[cfg(feature = "http")]
pub mod http;
pub mod mechanism;
pub mod secagg;
pub mod simulate;
