//! # privfed-special
//!
//! The numerics shared by the randomizers (`privfed-mechanisms`, which re-exports this crate as
//! `privfed_mechanisms::special`) and the accountants (`privfed-accounting`): the base of the
//! layer diagram, below both, so that each function exists once.
//!
//! * `ln Γ`, `ln B` ([`ln_gamma`], [`ln_beta`]) and log binomials ([`ln_binomial`],
//!   [`ln_binomial_half_pmf`]);
//! * the regularized incomplete beta function `I_x(a,b)`, both tails, in log space (also at a
//!   point given as `(x, 1 − x)`: [`ln_beta_inc_xy`]), and their inverses;
//! * the standard normal distribution (`Φ`, `ln Φ`, tails, quantiles, `erfcx`, hazard, and
//!   differences `Φ(b) − Φ(a)` from the nearer tail: [`NormPoint`]);
//! * sums in log space ([`log_add_exp`], [`log_sum_exp`], [`log_sum_exp_iter`],
//!   [`ln_one_minus_exp`], [`softplus`], [`logistic`]);
//! * the boundary of a monotone predicate by bisection ([`bisect_smallest`]) and the minimum of
//!   a function on an interval by grid and golden-section search ([`minimize_on_interval`]);
//! * [`floor`] without the baseline target's software-floor call (the samplers' hot loops).
//!
//! Why our own: PrivUnit2 (docs/ALGORITHMS.md §1.1) needs `I_x(α,α)` with `α = (d−1)/2` up to
//! `5·10⁵`, in log space, in far tails, and its inverse; the reconstruction bound (§1.6) needs
//! `I_x((k−1)/2, ½)` at `x = 1 − t²`; PrivUnitG (§1.2) and Gaussian accounting (§5) need `Φ` and
//! `ln Φ` far into the tails. Of the crates measured before this one was written, statrs 0.19
//! (`beta_reg`, 2.4·10⁻³ relative error at `a = 5·10⁵`) and puruspe 0.4 (`betai`, 0 once both
//! parameters exceed 3000) are inaccurate there, and special 0.14 (`inc_beta`) is accurate but
//! takes 0.8 ms a call.
//!
//! ## Methods
//! * `ln Γ`: Stirling's series `ln Γ(x) = (x−½)ln x − x + ½ln 2π + δ(x)` for `x ≥ 10`
//!   (`δ(x) = Σ B_{2k}/(2k(2k−1)x^{2k−1})`), fdlibm's `lgamma` below.
//! * `ln B(a,b)`: the large `ln Γ` terms are combined analytically (see [`ln_beta`]).
//! * `I_x(a,b)`: smaller tail directly, the other as its complement; continued fraction
//!   (A&S 26.5.8) times the prefactor `x^a y^b/B(a,b)` in log space; the prefactor is evaluated
//!   as `−a·rlog1(e₁) − b·rlog1(e₂) + ½ln(ab/(a+b)) − ½ln 2π − (δ(a)+δ(b)−δ(a+b))` for large
//!   `a, b` (DiDonato & Morris 1992, ACM TOMS 708, `brcomp`), which in the symmetric case is
//!   `(1−t²)^a·√(a/π)/2·e^{δ(2a)−2δ(a)}` with `t = 1−2x`; Temme's uniform asymptotic expansion
//!   for `a = b ≥ 100` near the median, and the incomplete-gamma expansion of `I_x(a, ½)` for
//!   large `a` and `x` near 1 (module `temme`).
//! * Inverses: Newton in the log-odds `ln(x/(1−x))`, where the log tails are concave.
//! * Normal: `erfc`/`erfcx` based, never `1 − erf`; quantiles by Halley/Newton refinement in log
//!   space.
//! * Binomial: `ln C(n,k) = −ln(n+1) − ln B(k+1, n−k+1)`; `ln P(Bin(n,½) = k)` by Loader's
//!   saddle-point expansion.
//! * Log-sum-exp: maximum factored out, Neumaier-compensated sum.
//!
//! ## Conventions
//! These are internal numerics: arguments are `f64`, results `f64`, and invalid arguments
//! (`a ≤ 0`, `b ≤ 0`, non-finite parameters, `x ∉ [0, 1]`, NaN, log-probabilities `> 0`)
//! return NaN. Callers validate their user-facing parameters (and map NaN to a typed error, e.g.
//! `privfed_mechanisms::MechanismError::Numerical`, if it ever appears).
//!
//! Accuracy is checked against mpmath at 60 digits by `tests/it/special_reference.rs` (fixtures
//! from `scripts/reference/special_mpmath.py`): `ln Γ`, `ln B` to `10⁻¹²` relative; `I_x` and
//! its complement to `10⁻¹⁰` relative wherever the value is `≥ 10⁻³⁰⁰`; their logs to
//! `10⁻¹⁰·max(1, |ln I|)` absolute (including `ln I ≈ −2·10⁵`); the normal functions from
//! `z = −10⁵` to `40`, quantiles from `p = 10⁻³⁰⁰` to `1 − 10⁻¹⁶`; and the spherical-cap
//! probability `½·I_{1−t²}((k−1)/2, ½)` of §1.6 against mpmath at 50 digits (fixtures from
//! `scripts/reference/cap_probability_mpmath.py`) to `10⁻¹¹` relative in its log.
//!
//! ## Example
//! ```
//! use privfed_special::{ln_beta_inc, ln_norm_cdf, log_sum_exp, norm_cdf};
//!
//! // Φ(−40) underflows; its logarithm is ≈ −804.608.
//! assert_eq!(norm_cdf(-40.0), 0.0);
//! assert!((ln_norm_cdf(-40.0) + 804.608).abs() < 1e-3);
//! // I_½(a, a) = ½ by symmetry, even at PrivUnit2's a ≈ 5·10⁵ (d = 10⁶).
//! assert!((ln_beta_inc(499_999.5, 499_999.5, 0.5) - 0.5f64.ln()).abs() < 1e-12);
//! // Sums of terms far below the smallest double.
//! assert!((log_sum_exp(&[-1000.0, -1000.0]) - (-1000.0 + 2f64.ln())).abs() < 1e-12);
//! ```
//! `examples/log_space.rs` checks more of these against closed forms
//! (`cargo run -p privfed-special --example log_space`).

mod beta;
mod beta_inv;
mod binomial;
mod erfcx_pieces;
mod float;
mod gamma;
mod gamma_inc;
mod logspace;
mod normal;
mod point;
mod poisson;
mod solve;
mod temme;

pub use beta::{
    beta_inc, beta_inc_complement, ln_beta_inc, ln_beta_inc_complement, ln_beta_inc_xy,
    ln_beta_pdf, ln_one_minus_exp, logistic, softplus,
};
pub use beta_inv::{
    beta_inc_complement_inv_ln, beta_inc_complement_inv_ln_xy, beta_inc_inv_ln, beta_inc_inv_ln_xy,
};
pub use binomial::{ln_binomial, ln_binomial_half_pmf};
pub use float::floor;
pub use gamma::{ln_beta, ln_gamma};
pub use gamma_inc::{gamma_inc, gamma_inc_complement, ln_gamma_inc_complement};
pub use logspace::{NeumaierSum, log_add_exp, log_sum_exp, log_sum_exp_iter};
pub use normal::{
    NormPoint, erfcx, ln_norm_cdf, ln_norm_sf, norm_cdf, norm_hazard, norm_pdf, norm_quantile,
    norm_sf, norm_sf_inv_ln,
};
pub use poisson::{bd0, ln_poisson_pmf};
pub use solve::{bisect_smallest, falsi_smallest, falsi_smallest_from, minimize_on_interval};

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    #[test]
    fn reflection_symmetry() {
        // I_x(a,b) = 1 − I_{1−x}(b,a), on both evaluation paths and in log space.
        let cases = [
            (0.5, 0.5, 0.3),
            (2.0, 5.0, 0.2),
            (24.5, 24.5, 0.6),
            (30.0, 7.0, 0.9),
            (499.5, 499.5, 0.47),
            (4999.5, 4999.5, 0.2),
            (1e5, 0.5, 0.99999),
        ];
        for &(a, b, x) in &cases {
            let lhs = beta_inc(a, b, x);
            let rhs = beta_inc_complement(b, a, 1.0 - x);
            assert!(
                (lhs - rhs).abs() <= 1e-13 * lhs,
                "{a} {b} {x}: {lhs} vs {rhs}"
            );
            let sum = beta_inc(a, b, x) + beta_inc_complement(a, b, x);
            assert!((sum - 1.0).abs() < 1e-14, "{a} {b} {x}: sum {sum}");
            let l = ln_beta_inc(a, b, x);
            let r = ln_beta_inc_complement(b, a, 1.0 - x);
            assert!(
                (l - r).abs() <= 1e-12 * l.abs().max(1.0),
                "{a} {b} {x}: {l} vs {r}"
            );
        }
    }

    #[test]
    fn closed_forms() {
        for &x in &[1e-300, 1e-9, 0.1, 0.37, 0.5, 0.8, 0.999_999] {
            // Values come from exp(ln I): relative error ~ |ln I|·ε.
            let tol = |v: f64| 2e-16 * (v.ln().abs() + 50.0) * v;
            // I_x(1,1) = x.
            assert!((beta_inc(1.0, 1.0, x) - x).abs() <= tol(x), "x={x}");
            // I_x(a,1) = x^a.
            for &a in &[0.3, 2.5, 40.0] {
                let want = f64::powf(x, a);
                let got = beta_inc(a, 1.0, x);
                if want > 1e-300 {
                    assert!(
                        (got - want).abs() <= tol(want),
                        "a={a} x={x}: {got} vs {want}"
                    );
                }
                let got = ln_beta_inc(a, 1.0, x);
                let want = a * x.ln();
                assert!(
                    (got - want).abs() <= 1e-14 * want.abs(),
                    "a={a} x={x}: {got} vs {want}"
                );
            }
            // I_x(½,½) = (2/π)·asin(√x).
            // (For x near 1 use 1 − (2/π)·asin(√(1−x)): asin(√x) is ill-conditioned there.)
            let want = if x <= 0.5 {
                2.0 / PI * x.sqrt().asin()
            } else {
                1.0 - 2.0 / PI * (1.0 - x).sqrt().asin()
            };
            let got = beta_inc(0.5, 0.5, x);
            assert!((got - want).abs() <= tol(want), "x={x}: {got} vs {want}");
            // 1 − I_x(1,b) = (1−x)^b.
            let want = (5.5 * (-x).ln_1p()).exp();
            let got = beta_inc_complement(1.0, 5.5, x);
            assert!((got - want).abs() <= tol(want), "x={x}: {got} vs {want}");
        }
        assert_eq!(beta_inc(3.0, 4.0, 0.0), 0.0);
        assert_eq!(beta_inc(3.0, 4.0, 1.0), 1.0);
        assert_eq!(ln_beta_inc_complement(3.0, 4.0, 1.0), f64::NEG_INFINITY);
        assert_eq!(norm_cdf(0.0), 0.5);
        // Beta(2,3) density 12·x·(1−x)².
        let x: f64 = 0.3;
        let want = (12.0 * x * (1.0 - x) * (1.0 - x)).ln();
        assert!((ln_beta_pdf(2.0, 3.0, x) - want).abs() < 1e-14);
    }

    #[test]
    fn invalid_arguments_are_nan() {
        for f in [
            beta_inc,
            beta_inc_complement,
            ln_beta_inc,
            ln_beta_inc_complement,
            ln_beta_pdf,
        ] {
            assert!(f(0.0, 1.0, 0.5).is_nan());
            assert!(f(1.0, -1.0, 0.5).is_nan());
            assert!(f(1.0, 1.0, 1.5).is_nan());
            assert!(f(1.0, 1.0, -0.1).is_nan());
            assert!(f(f64::NAN, 1.0, 0.5).is_nan());
            assert!(f(1.0, 1.0, f64::NAN).is_nan());
            assert!(f(f64::INFINITY, 1.0, 0.5).is_nan());
        }
        assert!(beta_inc_inv_ln(1.0, 1.0, 0.1).is_nan());
        assert!(beta_inc_complement_inv_ln(-1.0, 1.0, -1.0).is_nan());
        assert!(beta_inc_complement_inv_ln(1.0, 1.0, f64::NAN).is_nan());
        assert_eq!(beta_inc_complement_inv_ln(2.0, 3.0, 0.0), 0.0);
        assert_eq!(beta_inc_inv_ln(2.0, 3.0, 0.0), 1.0);
    }

    /// docs/ALGORITHMS.md §1.1 sanity value: d = 50, γ = 0.2, p = 0.8 gives ε = 3.832820, with
    /// q = P(⟨U,u⟩ ≥ γ) = 1 − I_{0.6}(24.5, 24.5).
    #[test]
    fn privunit2_sanity_epsilon() {
        let d = 50.0;
        let gamma = 0.2;
        let alpha = (d - 1.0) / 2.0;
        let tau = (1.0 + gamma) / 2.0;
        let q = beta_inc_complement(alpha, alpha, tau);
        let p = 0.8;
        let eps = (p * (1.0 - q) / ((1.0 - p) * q)).ln();
        assert!((eps - 3.832_820).abs() < 5e-7, "eps = {eps}");
        // And the inverse recovers τ from q.
        let back = beta_inc_complement_inv_ln(alpha, alpha, q.ln());
        assert!((back - tau).abs() < 1e-14, "tau = {back}");
    }

    #[test]
    fn inverse_round_trips() {
        let cases = [
            (0.5, 0.5),
            (1.0, 1.0),
            (2.0, 7.5),
            (24.5, 24.5),
            (499.5, 499.5),
            (499_999.5, 499_999.5),
            (499_999.5, 0.5),
            (0.3, 40.0),
        ];
        for &(a, b) in &cases {
            for &lq in &[-5000.0, -700.0, -30.0, -2.0, -0.7, -0.1, -1e-6] {
                let x = beta_inc_complement_inv_ln(a, b, lq);
                if x == 1.0 {
                    // 1 − x below the f64 spacing at 1: covered by the `_xy` variant's tests.
                    continue;
                }
                let back = ln_beta_inc_complement(a, b, x);
                // Slack for the f64 spacing of x: |d ln(1−I)/dx|·ulp(x).
                let slope = (ln_beta_pdf(a, b, x) - back).exp();
                let tol = 1e-12 * lq.abs().max(1.0) + 2.0 * slope * f64::EPSILON * x;
                assert!(
                    (back - lq).abs() <= tol,
                    "a={a} b={b} ln_q={lq}: x={x}, back={back}"
                );
                let x = beta_inc_inv_ln(a, b, lq);
                if x == 1.0 {
                    continue;
                }
                let back = ln_beta_inc(a, b, x);
                let slope = (ln_beta_pdf(a, b, x) - back).exp();
                let tol = 1e-12 * lq.abs().max(1.0) + 2.0 * slope * f64::EPSILON * x;
                assert!(
                    (back - lq).abs() <= tol,
                    "a={a} b={b} ln_p={lq}: x={x}, back={back}"
                );
            }
        }
    }

    /// Sweep over extreme parameters: every result is finite where it should be, the two tails
    /// add up to 1, the log versions agree with the values, and `I_x` is monotone in `x`.
    #[test]
    fn extreme_parameter_sweep() {
        let params = [
            1e-8, 1e-3, 0.1, 0.5, 1.0, 3.0, 10.0, 99.5, 100.0, 1e3, 1e5, 499_999.5, 1e7, 1e9,
        ];
        let xs = [
            5e-324,
            1e-300,
            1e-50,
            1e-10,
            1e-3,
            0.1,
            0.3,
            0.5 - 1e-9,
            0.5,
            0.7,
            0.9,
            1.0 - 1e-10,
            1.0 - f64::EPSILON,
        ];
        for &a in &params {
            for &b in &params {
                let mut prev = -1.0;
                for &x in &xs {
                    let lo = ln_beta_inc(a, b, x);
                    let up = ln_beta_inc_complement(a, b, x);
                    assert!(lo <= 0.0 && up <= 0.0, "a={a} b={b} x={x}: {lo} {up}");
                    assert!(!lo.is_nan() && !up.is_nan(), "a={a} b={b} x={x}");
                    let total = lo.exp() + up.exp();
                    assert!((total - 1.0).abs() < 1e-13, "a={a} b={b} x={x}: {total}");
                    let v = beta_inc(a, b, x);
                    // (up to rounding: for a = b = 1e-8, I_x is ½ within 1e-8 on the whole interior)
                    assert!(v >= prev * (1.0 - 1e-14), "a={a} b={b} x={x}: {v} < {prev}");
                    prev = v;
                    assert!(!ln_beta_pdf(a, b, x).is_nan(), "a={a} b={b} x={x}");
                }
                for &lq in &[-1e4, -50.0, -0.7, -1e-3] {
                    let (x, y) = beta_inc_complement_inv_ln_xy(a, b, lq);
                    assert!(
                        x >= 0.0 && y >= 0.0 && (x + y - 1.0).abs() < 1e-15,
                        "a={a} b={b} ln_q={lq}: ({x}, {y})"
                    );
                }
            }
        }
    }
}
