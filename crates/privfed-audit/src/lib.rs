//! # privfed-audit
//!
//! Empirical privacy auditing: statistical tests that check from the outside that a mechanism
//! delivers the ε it claims, and that would catch one that does not. Formulas:
//! `docs/ALGORITHMS.md`, section "Empirical privacy auditing"; results: `docs/AUDIT.md`.
//!
//! | module | what | reference |
//! |---|---|---|
//! | [`clopper_pearson`] | exact binomial confidence bounds | Clopper & Pearson 1934 |
//! | [`distinguish`] | `ε_lb = ln(TPR_lo − δ) − ln(FPR_hi)` with honest threshold selection | Jagielski et al. 2020 |
//! | [`histogram`] | `δ̂(ε)` of finite outputs, its tolerance, the exact `δ(ε)` | Weissman et al. 2003 |
//! | [`one_run`] | the one-run audit's p-value and ε bound | Steinke, Nasr, Jagielski 2023 |
//! | [`one_run_gdp`] | the one-run audit against a Gaussian (μ-GDP) claim: μ and ε bounds | Mahloujifar, Melis, Chaudhuri 2025 |
//! | [`gdp`] | μ of μ-GDP from tradeoff points, and ε at δ | Dong, Roth, Su 2022 |
//! | [`one_shot`] | one-shot FL estimate from canary cosines | Andrew et al. 2024 |
//! | [`randomizer`] | worst-case neighbours and statistics for privfed's randomizers, the verdict | — |
//! | [`replay`] | gray-box replay: declared against measured sensitivity with identical randomness | — |
//!
//! Pure: no I/O, no clock; randomness is passed in (`rng: &mut R`, `R: Rng + CryptoRng`).
//!
//! ## Example
//! ```
//! use privfed_audit::randomizer::{Claim, Side, evaluate, sample, worst_case_pair};
//! use privfed_mechanisms::{AnyRandomizer, LocalRandomizer, grid_rr::GridRr};
//! use privfed_mechanisms::rng::seeded_rng_for_experiments;
//!
//! // GRR run at ε = 2 but claimed to be ε = 1: caught.
//! let mech = AnyRandomizer::GridRr(GridRr::unbiased_grr(2.0, 3, -1.0, 1.0).unwrap());
//! let pair = worst_case_pair(&mech).unwrap();
//! let mut rng = seeded_rng_for_experiments(1);
//! let run = |x: &[f64], out: &mut [f64], r: &mut _| mech.privatize_into(x, out, r);
//! let ox = sample(&pair, Side::X, 20_000, run, &mut rng).unwrap();
//! let oxp = sample(&pair, Side::XPrime, 20_000, run, &mut rng).unwrap();
//! let report = evaluate(&pair, &ox, &oxp, Claim { epsilon: 1.0, delta: 0.0 }, 0.05).unwrap();
//! assert!(report.violation && report.epsilon_lower_bound > 1.0);
//! ```
#![forbid(unsafe_code)]

pub mod clopper_pearson;
pub mod distinguish;
pub mod error;
pub mod gdp;
pub mod histogram;
pub mod one_run;
pub mod one_run_gdp;
pub mod one_shot;
pub mod randomizer;
pub mod replay;

pub use error::{AuditError, Result};
