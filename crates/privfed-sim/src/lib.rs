//! # privfed-sim
//!
//! Simulations and experiments (systems layer: may read data files and write results):
//!
//! * [`dme`]: the distributed-mean-estimation engine (chunked, reproducible parallel trials; the
//!   MSE with its 95% interval against the exact prediction);
//! * [`experiments`]: paper 003's Draw-and-Discard grids and paper 004's MVU experiments;
//! * [`mechanism`]: building a mechanism from options ([`mechanism::MechanismSpec`]), including
//!   designing or loading an MVU design.
//!
//! Progress is reported through callbacks ([`experiments::Observer`]); drawing it is the front
//! end's job.

pub mod dme;
pub mod experiments;
pub mod mechanism;
