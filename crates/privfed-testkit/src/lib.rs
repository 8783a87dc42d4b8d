//! # privfed-testkit
//!
//! The statistical tests privfed's own test suites use, in one place: chi-square goodness of fit
//! against exact probabilities ([`chi2`]), one- and two-sample Kolmogorov–Smirnov ([`ks`]), and
//! z-tests for a mean and for a variance ([`ztest`]), and where the shared datasets are
//! ([`shared_data`]), the build-time probes that decide which tests can run ([`probe`]), and the
//! support of system tests ([`sys`]: temporary directories, loopback ports and bounded waits, a
//! Redis server per test, the Python reference oracles). A dev- and build-dependency only
//! (`publish = false`).
//!
//! Every test takes its significance level `α` explicitly and every assert helper states what it
//! rejects, so each call site says its false-positive rate (FPR).
//!
//! ## Choosing α
//! The tests run at **fixed seeds**, so a test that passes at its seed passes every time: there
//! is no flakiness to budget for. `α` states something else: how unlucky the seed would have to
//! be for a *correct* implementation to fail — i.e. the probability that changing the seed (or an
//! innocent change in the order random numbers are drawn) turns the test red when the code is
//! right. Guidelines used across the workspace:
//! * `α = 10⁻⁶` per assertion is the default (normal critical value `|z| < 4.89`); a suite of a
//!   few hundred statistical assertions then has a family-wise FPR `≤ Σ α ≈ 10⁻⁴` (Bonferroni:
//!   the FPRs add up at most). When one test makes `m` assertions, say so and state `m·α`.
//! * Smaller `α` (down to `10⁻⁹`) only buys robustness to reseeding at the cost of power: the
//!   critical values grow like `√(2 ln(1/α))`, so `10⁻⁹` instead of `10⁻⁶` needs about 1.5 times
//!   the samples to detect the same bias.
//! * Pick the sample size for **power**: a bug of the size you care about must move the
//!   statistic far past the critical value (e.g. a bias `b` in a mean with standard deviation `σ`
//!   is detected when `b·√n/σ ≫ z_crit`). A test that cannot fail is not a test.
//!
//! The kit's own unit tests check known statistics for fixed inputs, p-values against closed
//! forms, and calibration: under `H₀`, over many seeds, each test rejects at a rate near `α`.

pub mod chi2;
mod data;
pub mod ks;
pub mod probe;
pub mod sys;
pub mod ztest;

pub use chi2::{
    ChiSquare, MIN_EXPECTED, assert_chi_square_gof, assert_chi_square_statistic, chi_square_gof,
    chi_square_sf,
};
pub use data::shared_data;
pub use ks::{
    assert_ks_fits, assert_ks_same_distribution, ks_critical, ks_p_value_bound, ks_statistic,
    ks_two_sample_critical, ks_two_sample_statistic,
};
pub use ztest::{
    assert_mean, assert_unbiased_with_variance, assert_variance, assert_z, mean_var,
    normal_variance_p_value, z_critical, z_mean, z_mean_known_variance, z_variance,
};

/// Why a statistic could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// Too few observations or cells for the statistic.
    #[error("{what}: need at least {need}, got {got}")]
    TooFew {
        /// What was counted (samples, cells).
        what: &'static str,
        /// The minimum.
        need: usize,
        /// What was given.
        got: usize,
    },
    /// Two inputs that must have the same length do not.
    #[error("length mismatch: {left} observed counts vs {right} probabilities")]
    LengthMismatch {
        /// Length of the first input.
        left: usize,
        /// Length of the second input.
        right: usize,
    },
    /// A value is NaN, infinite or out of its range.
    #[error("invalid {what}: {value}")]
    Invalid {
        /// Which input.
        what: &'static str,
        /// The offending value.
        value: f64,
    },
}

/// Checks `0 < α < 1`; the assert helpers panic otherwise (a test bug, not a sample property).
pub(crate) fn check_alpha(alpha: f64) {
    assert!(
        alpha > 0.0 && alpha < 1.0,
        "significance level α must be in (0, 1), got {alpha}"
    );
}
