//! # privfed-learn
//!
//! Models and learning for privfed: generalized linear models with their losses, gradients and
//! predictions ([`glm`]), models with gradients over flat parameter vectors for federated training
//! ([`nn`]), and the typed errors shared by the crates built on them ([`error`]).
//!
//! Pure and deterministic: no I/O (no files, no environment variables, no sockets), no clock;
//! randomness only where passed in (model initialization). The Draw-and-Discard protocol built on
//! these models (noisy client step, server engine) is `privfed-ddml`; dataset loading and the
//! simulations are `privfed-sim`.
//!
//! ## Example: a logistic model's prediction and gradient
//! ```
//! use privfed_learn::glm::{Example, Glm};
//!
//! let glm = Glm::logistic(2).unwrap();
//! let w = vec![0.0; glm.num_weights()];
//! let ex = Example::new(vec![1.0, -1.0], 1.0);
//! let g = glm.average_gradient(&w, std::slice::from_ref(&ex)).unwrap();
//! assert_eq!(g.len(), glm.num_weights());
//! ```

pub mod error;
pub mod glm;
pub mod nn;

pub use error::{LearnError, Result};
