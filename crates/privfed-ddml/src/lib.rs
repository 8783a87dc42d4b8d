//! # privfed-ddml
//!
//! The Draw-and-Discard protocol of paper 003 (`docs/ALGORITHMS.md` §4): the noisy client step
//! ([`client`], Alg. 1, §4.1), the store-agnostic server engine with its strategies and spam
//! filter ([`engine`], Alg. 2, §4.2), the update guard that accepts only plausible client steps
//! from the drawn instance ([`guard`]), the server's decision on an update as data — overwrite
//! instance `j`, or count a rejection — that the stores of `privfed-server` only persist
//! ([`decision`]), the rules of draw tickets ([`ticket`]), and the plain-data wire types that a
//! server and a device both need ([`wire`]). Models and gradients come from `privfed-learn`,
//! noise from `privfed-mechanisms`.
//!
//! This is a protocol crate: no I/O, no clock, no global RNG. Randomness comes in as
//! `rng: &mut R` with `R: Rng + CryptoRng`. The HTTP server (`privfed-server`), the device-side
//! client (`privfed-client`) and the simulator (`privfed-sim`) build on it. The privacy analysis
//! of a deployment (paper 003 §IV, §4.3) lives in `privfed_accounting::analysis::draw_and_discard`.
//!
//! ## Example: one Draw-and-Discard round trip in memory
//! ```
//! use privfed_ddml::{client::{ClientNoise, ClientStep, PrivacyUnit}, engine::{DrawAndDiscard, Strategy}};
//! use privfed_learn::glm::{Example, Glm};
//! use privfed_mechanisms::rng::seeded_rng_for_experiments;
//!
//! let mut rng = seeded_rng_for_experiments(1);
//! let glm = Glm::logistic(3).unwrap();
//! let step = ClientStep::new(0.01, ClientNoise::Laplace { epsilon: 3.0_f64.ln() },
//!     PrivacyUnit::Feature, glm.num_weights()).unwrap();
//! let k = 10;
//! let instances = privfed_ddml::engine::initialize_instances(&[0.0; 3], k,
//!     step.noise_variance(), &mut rng).unwrap();
//! let mut server = DrawAndDiscard::new(Strategy::DrawAndDiscard, instances, None).unwrap();
//! let examples = vec![Example::new(vec![1.0, 0.5, 0.0], 1.0)];
//! let drawn = server.draw(&mut rng);
//! let updated = step.apply(&glm, server.instance(drawn), &examples, &mut rng).unwrap();
//! server.submit(drawn, &updated, &mut rng).unwrap();
//! assert_eq!(server.stats().accepted, 1);
//! ```

pub mod client;
pub mod decision;
pub mod engine;
pub mod guard;
pub mod ticket;
pub mod wire;

pub use privfed_learn::{LearnError, Result};
