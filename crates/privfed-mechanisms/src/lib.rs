//! # privfed-mechanisms
//!
//! Local randomizers of privfed: the mechanisms that run on a device before anything leaves it.
//! Formulas are restored in `docs/ALGORITHMS.md` §1; each type names its paper.
//!
//! | mechanism | module | input domain | guarantee |
//! |---|---|---|---|
//! | PrivUnit2 (papers 000, 002) | [`privunit2`] | unit sphere | ε-LDP, unbiased |
//! | PrivUnitG (paper 002) | [`privunitg`] | unit sphere | ε-LDP, unbiased |
//! | PrivUnitInf (paper 000) | [`privunit_inf`] | `[-1,1]^d` | ε-LDP, unbiased |
//! | ScalarDP, ScalarRelDP, unbiased generalized RR (papers 000, 004) | [`grid_rr`] | interval | ε-LDP, unbiased |
//! | Separated direction × magnitude (paper 000) | [`separated`] | ℓ2 ball | ε-LDP, unbiased |
//! | Dithering to a b-bit grid (paper 004) | [`dither`] | interval / vectors | unbiased (conditional: biased) |
//! | Unbiased bitwise RR (paper 004) | [`bitwise_rr`] | interval | ε-LDP, unbiased |
//! | MVU mechanism, metric DP, vectors (paper 004) | [`mvu`] | interval / ℓp ball | ε-LDP / metric DP, unbiased |
//! | Laplace, Gaussian baselines | [`laplace`], [`gaussian`] | balls | ε-DP / (ε,δ)-DP |
//! | Central projection + Gaussian noise (paper 000) | [`central`] | any | (aggregate) |
//! | Skellam noise, exact Poisson (paper 001) | [`skellam`], its table sampler [`poisson_table`] | integers | (aggregate, RDP) |
//! | Discrete Gaussian, exact (DDG baseline of paper 001) | [`discrete_gaussian`] | integers | (aggregate) |
//! | Randomized Hadamard rotation (paper 001) | [`hadamard`] | vectors | (pre-processing) |
//! | Batched exact samplers: ziggurat normals / exponentials, Laplace, uniform mod `2^b` | [`batch`] | buffers | (samplers) |
//!
//! ## Conventions
//! * A mechanism is a validated, immutable value: its constructor checks every parameter and
//!   returns a [`MechanismError`]; it computes its exact ε from its own parameters
//!   ([`LocalRandomizer::guarantee`]) and knows its exact variance.
//! * This crate does no I/O and has no global state (beyond the ziggurat tables of [`batch`],
//!   computed once). Randomness is passed in, and must be a cryptographically secure generator
//!   (`R: Rng + CryptoRng`). In production seed it from the operating system
//!   (`rand::make_rng::<privfed_mechanisms::rng::NoiseRng>()` with rand's `sys_rng` feature);
//!   for tests and reproducible experiments use the explicitly named
//!   [`rng::seeded_rng_for_experiments`]. The generator choice (AES-256-CTR) and why it is
//!   adequate: `docs/RANDOMNESS.md`.
//! * Long vectors are drawn in blocks, each from its own stream of a fresh per-vector key, so
//!   [`LocalRandomizer::privatize_into_threads`] can use several cores and still return the
//!   same bits for every thread count.
//! * Floating-point caveats are documented in `docs/FLOATING_POINT.md`.
//!
//! ## Example
//! ```
//! use privfed_mechanisms::{LocalRandomizer, privunit2::PrivUnit2, rng::seeded_rng_for_experiments};
//!
//! let mech = PrivUnit2::optimized(4.0, 1000).unwrap();
//! assert!((mech.guarantee().epsilon() - 4.0).abs() < 1e-9);
//! let mut x = vec![0.0; 1000];
//! x[0] = 1.0;
//! let mut rng = seeded_rng_for_experiments(7);
//! let z = mech.privatize(&x, &mut rng).unwrap();
//! assert_eq!(z.len(), 1000);
//! ```

mod additive;
pub mod any;
pub mod batch;
pub mod bitwise_rr;
pub mod central;
pub mod discrete_gaussian;
pub mod dither;
pub mod domain;
pub mod error;
pub mod gaussian;
pub mod grid_rr;
pub mod hadamard;
pub mod laplace;
pub mod mvu;
mod norm;
pub mod poisson_table;
pub mod privunit2;
pub mod privunit_inf;
pub mod privunitg;
pub mod rng;
pub mod sampling;
pub mod separated;
pub mod skellam;
pub mod spec;
/// The shared numerics: the base crate [`privfed_special`], also used by the accountants.
pub use privfed_special as special;

pub use any::{AnyRandomizer, RandomizerReport};
pub use domain::Domain;
pub use error::{MechanismError, Result};
pub use rand::{CryptoRng, Rng};

use serde::Serialize;

/// The differential-privacy guarantee of a randomizer, computed from its parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Guarantee {
    /// Pure ε-(local) differential privacy.
    Pure {
        /// ε, natural log.
        epsilon: f64,
    },
    /// Approximate (ε, δ)-differential privacy.
    Approximate {
        /// ε, natural log.
        epsilon: f64,
        /// δ.
        delta: f64,
    },
}

impl Guarantee {
    /// The ε of the guarantee.
    pub fn epsilon(&self) -> f64 {
        match *self {
            Guarantee::Pure { epsilon } | Guarantee::Approximate { epsilon, .. } => epsilon,
        }
    }

    /// The δ of the guarantee (0 for pure DP).
    pub fn delta(&self) -> f64 {
        match *self {
            Guarantee::Pure { .. } => 0.0,
            Guarantee::Approximate { delta, .. } => delta,
        }
    }
}

/// A local randomizer: maps an input vector from its [`Domain`] to a randomized,
/// unbiased estimate of it (`E[M(x)] = x`), with a computed privacy guarantee.
///
/// Scalar mechanisms are randomizers of dimension 1.
pub trait LocalRandomizer {
    /// Short stable name (the CLI's mechanism name, e.g. `privunit2`).
    fn name(&self) -> &'static str;

    /// The inputs over which the guarantee holds.
    fn domain(&self) -> Domain;

    /// Dimension of inputs and outputs.
    fn dim(&self) -> usize {
        self.domain().dim()
    }

    /// The exact privacy guarantee, computed from the mechanism's own parameters.
    fn guarantee(&self) -> Guarantee;

    /// Exact `E‖M(x) − x‖²` at input `x` (validated against the domain).
    fn variance_at(&self, x: &[f64]) -> Result<f64>;

    /// `sup_x E‖M(x) − x‖²` over the domain, exactly.
    fn worst_case_variance(&self) -> f64;

    /// Privatizes `x` into `out` (both of length [`dim`](Self::dim)).
    fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<()>;

    /// Privatizes `x` into `out` using up to `threads` threads for the large passes.
    ///
    /// The output is **bit-for-bit the same for every thread count**: mechanisms that split the
    /// work draw a fresh 256-bit [`rng::StreamKey`] from `rng` and fill each block of
    /// [`rng::BLOCK_LEN`] coordinates from its own stream. The default runs
    /// [`privatize_into`](Self::privatize_into) on the caller's thread.
    fn privatize_into_threads<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
        threads: rng::Threads,
    ) -> Result<()> {
        let _ = threads;
        self.privatize_into(x, out, rng)
    }

    /// Privatizes `x` into a new vector.
    fn privatize<R: Rng + CryptoRng + ?Sized>(&self, x: &[f64], rng: &mut R) -> Result<Vec<f64>> {
        let mut out = vec![0.0; self.dim()];
        self.privatize_into(x, &mut out, rng)?;
        Ok(out)
    }
}

/// Checks the output buffer length for [`LocalRandomizer::privatize_into`].
pub(crate) fn check_out_len(out: &[f64], dim: usize) -> Result<()> {
    if out.len() == dim {
        Ok(())
    } else {
        Err(MechanismError::DimensionMismatch {
            expected: dim,
            got: out.len(),
        })
    }
}
