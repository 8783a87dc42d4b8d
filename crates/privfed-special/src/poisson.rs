//! The Poisson log-pmf without cancellation, for any mean (Loader 2000, "Fast and accurate
//! computation of binomial probabilities").
//!
//! `ln P(K = k) = k·ln λ − λ − ln k!` loses all its digits to cancellation when `k` and `λ` are
//! large (at `λ = 10⁸` each term is ~10⁹). Loader's saddle-point form keeps full relative accuracy:
//! `ln P(K = k) = −bd0(k, λ) − ½·ln(2πk) − δ(k)` for `k ≥ 1`, where
//! `bd0(k, λ) = k·ln(k/λ) + λ − k ≥ 0` is evaluated by a series when `k ≈ λ`, and
//! `δ(k) = ln k! − (k·ln k − k + ½·ln 2πk)` is the Stirling correction.

use crate::gamma::{STIRLING_MIN, stirling_delta};
use std::f64::consts::PI;

/// `bd0(x, m) = x·ln(x/m) + m − x`, the deviance term of Loader's algorithm, accurate when
/// `x ≈ m` (series in `v = (x−m)/(x+m)`: `bd0 = (x−m)·v + 2x·Σ_{j≥1} v^{2j+1}/(2j+1)`).
pub fn bd0(x: f64, m: f64) -> f64 {
    if !(x.is_finite() && m.is_finite()) || m <= 0.0 || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return m;
    }
    if (x - m).abs() < 0.1 * (x + m) {
        let v = (x - m) / (x + m);
        let mut s = (x - m) * v;
        let mut ej = 2.0 * x * v;
        let v2 = v * v;
        let mut j = 1.0;
        loop {
            ej *= v2;
            let s1 = s + ej / (2.0 * j + 1.0);
            if s1 == s {
                return s;
            }
            s = s1;
            j += 1.0;
        }
    }
    x * (x / m).ln() + m - x
}

/// `δ(k) = ln k! − (k·ln k − k + ½·ln 2πk)` for integer `k ≥ 1` (exact `ln k!` below
/// the Stirling range).
fn stirling_error(k: f64) -> f64 {
    if k >= STIRLING_MIN {
        // ln k! = ln Γ(k+1) = ln Γ(k) + ln k, and δ here is that of Γ(k+1) expressed at k:
        // ln Γ(k) = (k−½)ln k − k + ½ln 2π + δ_Γ(k) ⇒ ln k! − (k ln k − k + ½ ln 2πk) = δ_Γ(k).
        stirling_delta(k)
    } else {
        let mut ln_fact = 0.0;
        let mut i = 2.0;
        while i <= k {
            ln_fact += f64::ln(i);
            i += 1.0;
        }
        ln_fact - (k * k.ln() - k + 0.5 * (2.0 * PI * k).ln())
    }
}

/// `ln P(K = k)` for `K ~ Poisson(λ)`, with full relative accuracy for any `λ > 0` and integer
/// `k ≥ 0` (including `λ ≥ 10⁸`, where the direct formula cancels). NaN for invalid `λ`.
pub fn ln_poisson_pmf(k: u64, lambda: f64) -> f64 {
    if !(lambda.is_finite() && lambda > 0.0) {
        return f64::NAN;
    }
    if k == 0 {
        return -lambda;
    }
    let kf = k as f64;
    -bd0(kf, lambda) - 0.5 * (2.0 * PI * kf).ln() - stirling_error(kf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct `k ln λ − λ − ln k!` summed exactly in small cases.
    fn direct(k: u64, lambda: f64) -> f64 {
        let mut ln_fact = 0.0;
        for i in 2..=k {
            ln_fact += (i as f64).ln();
        }
        k as f64 * lambda.ln() - lambda - ln_fact
    }

    #[test]
    fn matches_direct_formula_where_it_is_accurate() {
        for &lambda in &[0.01, 0.5, 1.0, 3.7, 9.99, 10.0, 25.0, 100.0] {
            for k in 0..200u64 {
                let a = ln_poisson_pmf(k, lambda);
                let b = direct(k, lambda);
                assert!(
                    (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                    "k={k} λ={lambda}: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn sums_to_one_for_large_means() {
        // Σ_k P(k) over ±40 standard deviations: 1 to 1e-12 at λ = 1e3, 1e6, 1e8.
        for &lambda in &[1e3, 1e6, 1e8] {
            let sd = f64::sqrt(lambda);
            let lo = (lambda - 40.0 * sd).max(0.0) as u64;
            let hi = (lambda + 40.0 * sd) as u64;
            let s: f64 = (lo..=hi).map(|k| ln_poisson_pmf(k, lambda).exp()).sum();
            assert!((s - 1.0).abs() < 1e-12, "λ={lambda}: Σ = {s}");
        }
    }

    #[test]
    fn mode_value_against_stirling_closed_form() {
        // At k = λ (integer), bd0 = 0 and P = e^{-δ(k)}/√(2πk); at λ = 1e8 that is
        // 1/√(2π·1e8)·e^{-1/(12e8)} to 1e-15 relative.
        let lambda = 1e8;
        let want = -0.5 * (2.0 * PI * lambda).ln() - 1.0 / (12.0 * lambda);
        let got = ln_poisson_pmf(lambda as u64, lambda);
        assert!((got - want).abs() < 1e-14 * want.abs(), "{got} vs {want}");
    }

    #[test]
    fn invalid_inputs_are_nan() {
        assert!(ln_poisson_pmf(1, 0.0).is_nan());
        assert!(ln_poisson_pmf(1, -1.0).is_nan());
        assert!(ln_poisson_pmf(1, f64::NAN).is_nan());
        assert!(ln_poisson_pmf(1, f64::INFINITY).is_nan());
        assert!(bd0(-1.0, 1.0).is_nan());
    }
}
