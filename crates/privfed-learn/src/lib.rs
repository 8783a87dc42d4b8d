//! # privfed-learn
//!
//! Models and learning for privfed: generalized linear models ([`glm`]), the noisy client step of
//! Draw-and-Discard ([`client`], paper 003 Alg. 1, `docs/ALGORITHMS.md` §4.1) and the store-agnostic
//! Draw-and-Discard server logic ([`ddml`], paper 003 Alg. 2, `docs/ALGORITHMS.md` §4.2).
//!
//! Dataset loading ([`data`]) and the in-process simulation of paper 003's experiments
//! ([`simulate`]) build on them. Apart from the file loaders in [`data`] this is pure: no I/O, no
//! clock, no global RNG. Randomness comes in as
//! `rng: &mut R` with `R: Rng + CryptoRng`.
//!
//! ## Example: one Draw-and-Discard round trip in memory
//! ```
//! use privfed_learn::{client::{ClientNoise, ClientStep, PrivacyUnit}, ddml::{DrawAndDiscard, Strategy},
//!     glm::{Example, Glm}};
//! use privfed_mechanisms::rng::seeded_rng_for_experiments;
//!
//! let mut rng = seeded_rng_for_experiments(1);
//! let glm = Glm::logistic(3).unwrap();
//! let step = ClientStep::new(0.01, ClientNoise::Laplace { epsilon: 3.0_f64.ln() },
//!     PrivacyUnit::Feature, glm.num_weights()).unwrap();
//! let k = 10;
//! let instances = privfed_learn::ddml::initialize_instances(&[0.0; 3], k,
//!     step.noise_variance(), &mut rng).unwrap();
//! let mut server = DrawAndDiscard::new(Strategy::DrawAndDiscard, instances, None).unwrap();
//! let examples = vec![Example::new(vec![1.0, 0.5, 0.0], 1.0)];
//! let drawn = server.draw(&mut rng);
//! let updated = step.apply(&glm, server.instance(drawn), &examples, &mut rng).unwrap();
//! server.submit(drawn, &updated, &mut rng).unwrap();
//! assert_eq!(server.stats().accepted, 1);
//! ```

pub mod client;
pub mod data;
pub mod ddml;
pub mod error;
pub mod glm;
pub mod simulate;

pub use error::{LearnError, Result};
