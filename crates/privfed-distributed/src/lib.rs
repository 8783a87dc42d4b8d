//! # privfed-distributed
//!
//! Distributed differential privacy with the Skellam mechanism (paper 001, Agarwal, Kairouz and
//! Liu 2021; formulas in docs/ALGORITHMS.md §2): every client adds a share of integer noise to its
//! quantized vector, secure aggregation sums the vectors modulo `2^b`, and the server decodes a
//! private mean without ever seeing one client's contribution in the clear.
//!
//! | step | who | item |
//! |---|---|---|
//! | clip to `c`, scale by `s`, pad to `d'`, rotate `H·D`, round (conditionally, bias `β`), add `Sk(s²σ²)`, wrap mod `2^b` | client | [`SkellamEncoder`] |
//! | sum mod `2^b` (in process; secure aggregation later carries the same vectors) | aggregator | [`ModularSum`] |
//! | signed map, unscale, inverse rotation, unpad, wrap report | server | [`SkellamDecoder`] |
//! | `s`, σ, wrap probability, MSE split, ε — or a typed `Infeasible` naming the knob | anyone | [`plan`] |
//! | the round's [`DpEvent`](privfed_accounting::DpEvent) from the clients that contributed | server | [`round_event`] |
//!
//! The rotation's sign diagonal is shared randomness: a 256-bit seed derived with HKDF from the
//! session id and the round ([`rotation_seed`]). The noise and the rounding use the caller's
//! cryptographically secure generator (`R: Rng + CryptoRng`). Everything is pure: no I/O, no
//! clock. The output that leaves a client is an integer vector; `docs/FLOATING_POINT.md` says
//! which steps before it use floating point and why that is safe.
//!
//! ## Example
//! ```
//! use privfed_distributed::{plan, NoiseTarget, PlanRequest, SkellamEncoder, SkellamDecoder,
//!     ModularSum, rotation_seed, round_event};
//! use privfed_mechanisms::rng::seeded_rng_for_experiments;
//!
//! let p = plan(&PlanRequest { dim: 100, clip: 1.0, bits: 16, clients: 10, max_contributors: None,
//!     k: 4.0, beta: 0.0, noise: NoiseTarget::Epsilon(1.0), delta: Some(1e-5), sampling_rate: 1.0, rounds: 1, share: Default::default(),
//!     colluding_fraction: 0.0 }).unwrap();
//! assert!(p.epsilon.unwrap() <= 1.0);
//! let seed = rotation_seed(b"session", 0);
//! let enc = SkellamEncoder::new(p.params, seed).unwrap();
//! let mut rng = seeded_rng_for_experiments(1);
//! let mut sum = ModularSum::new(16, p.padded_dim).unwrap();
//! for _ in 0..10 {
//!     let (v, _) = enc.encode(&vec![0.05; 100], &mut rng).unwrap();
//!     sum.add(&v).unwrap();
//! }
//! let dec = SkellamDecoder::new(p.params, seed).unwrap().decode(sum.value(), 10).unwrap();
//! assert!(!dec.wrap_suspected);
//! let event = round_event(&p.params, sum.contributions()).unwrap();
//! # let _ = (dec.mean, event);
//! ```

pub mod accounting;
pub mod decoder;
pub mod encoder;
pub mod error;
pub mod modular;
pub mod params;
pub mod planner;
pub mod policy;
pub mod seed;

pub use accounting::{
    EpsilonReport, colluders, ddg_round_event, epsilon_for_rounds, epsilon_for_rounds_with,
    honest_contributors, round_event, round_event_for,
};
pub use decoder::{DecodeReport, Decoded, SkellamDecoder};
pub use encoder::{EncodeStats, NoiseShare, SkellamEncoder};
pub use error::{DistributedError, Result};
pub use modular::ModularSum;
pub use params::{SkellamConfig, SkellamParams};
pub use planner::{NoiseTarget, Plan, PlanRequest, PredictedMse, plan};
pub use policy::PlanPolicy;
pub use seed::rotation_seed;

#[cfg(test)]
mod pipeline_tests;
