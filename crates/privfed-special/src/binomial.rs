//! Binomial coefficients and probabilities in log space.

use super::gamma::{STIRLING_MIN, ln_beta, stirling_delta};

/// `ln C(n, k)` for real `n ≥ k ≥ 0`, as `−ln(n+1) − ln B(k+1, n−k+1)`
/// (`B(k+1, n−k+1) = k!(n−k)!/(n+1)!`), so that the large `ln Γ` terms cancel analytically in
/// [`ln_beta`] rather than in floating point; exactly 0 at `k = 0` and `k = n`.
///
/// Internal numerics: `k < 0`, `k > n`, non-finite or NaN arguments return NaN.
pub fn ln_binomial(n: f64, k: f64) -> f64 {
    if !(n.is_finite() && k.is_finite() && k >= 0.0 && k <= n) {
        return f64::NAN;
    }
    if k == 0.0 || k == n {
        return 0.0;
    }
    -(n + 1.0).ln() - ln_beta(k + 1.0, n - k + 1.0)
}

/// `ln P(Bin(n, ½) = k)` by Loader's saddle-point expansion (C. Loader, "Fast and accurate
/// computation of binomial probabilities", 2000):
/// `ln b(k) = δ(n) − δ(k) − δ(n−k) − D(k; n/2) − D(n−k; n/2) − ½·ln(2π·k(n−k)/n)`, where `δ` is
/// the Stirling remainder and `D(x; μ) = x·ln(x/μ) + μ − x` the deviance term. Relative accuracy
/// about `10⁻¹⁴` for every `n`, where differences of `ln Γ` lose `|ln n!|·2⁻⁵³`.
///
/// `−n·ln 2` at `k ∈ {0, n}`; `−∞` for `k > n`.
pub fn ln_binomial_half_pmf(n: u64, k: u64) -> f64 {
    if k > n {
        return f64::NEG_INFINITY;
    }
    let nf = n as f64;
    if k == 0 || k == n {
        return -nf * std::f64::consts::LN_2;
    }
    let x = k as f64;
    let half = 0.5 * nf;
    let lc = stirling_remainder(n)
        - stirling_remainder(k)
        - stirling_remainder(n - k)
        - deviance(x, half)
        - deviance(nf - x, half);
    let lf = (2.0 * std::f64::consts::PI).ln() + x.ln() + (-x / nf).ln_1p();
    lc - 0.5 * lf
}

/// Stirling remainder `δ(n) = ln n! − (n+½)·ln n + n − ½·ln 2π` at an integer `n ≥ 0` (0 at 0):
/// an mpmath table for `n ≤ 15`, the asymptotic series of `δ` above (valid from `STIRLING_MIN`).
fn stirling_remainder(n: u64) -> f64 {
    // δ(1..=15), computed with mpmath at 40 digits, rounded to the nearest f64.
    const SMALL: [f64; 15] = [
        0.08106146679532726,
        0.0413406959554093,
        0.02767792568499834,
        0.020790672103765093,
        0.016644691189821193,
        0.013876128823070748,
        0.01189670994589177,
        0.010411265261972096,
        0.009255462182712733,
        0.00833056343336287,
        0.007573675487951841,
        0.00694284010720953,
        0.006408994188004207,
        0.0059513701127588475,
        0.005554733551962801,
    ];
    match n {
        0 => 0.0,
        1..=15 => SMALL[n as usize - 1],
        _ => {
            debug_assert!(n as f64 >= STIRLING_MIN);
            stirling_delta(n as f64)
        }
    }
}

/// Deviance term `D(x; μ) = x·ln(x/μ) + μ − x`, by the series
/// `D = (x−μ)·v + 2x·Σ_{j≥1} v^{2j+1}/(2j+1)`, `v = (x−μ)/(x+μ)`, when `x ≈ μ` (no cancellation).
fn deviance(x: f64, mu: f64) -> f64 {
    if (x - mu).abs() < 0.1 * (x + mu) {
        let mut v = (x - mu) / (x + mu);
        let mut s = (x - mu) * v;
        let mut ej = 2.0 * x * v;
        v *= v;
        // |v| < 0.1: each term is < 1% of the previous; converges in < 20 terms.
        for j in 1..200 {
            ej *= v;
            let s1 = s + ej / f64::from(2 * j + 1);
            if s1 == s {
                break;
            }
            s = s1;
        }
        return s;
    }
    x * (x / mu).ln() + mu - x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_binomial_small_and_large() {
        assert_eq!(ln_binomial(7.0, 0.0), 0.0);
        assert_eq!(ln_binomial(7.0, 7.0), 0.0);
        assert!((ln_binomial(5.0, 2.0) - 10f64.ln()).abs() < 1e-15);
        assert!((ln_binomial(52.0, 5.0) - 2_598_960f64.ln()).abs() < 1e-14);
        // Real arguments: C(2.5, 1) = 2.5.
        assert!((ln_binomial(2.5, 1.0) - 2.5f64.ln()).abs() < 1e-15);
        // Symmetry and Pascal's rule at n = 10⁶ (where ln Γ differences would lose ~1e-9).
        let n = 1e6;
        assert_eq!(ln_binomial(n, 3e5), ln_binomial(n, 7e5));
        let lhs = ln_binomial(n, 3e5);
        let rhs = crate::log_add_exp(ln_binomial(n - 1.0, 3e5), ln_binomial(n - 1.0, 3e5 - 1.0));
        assert!((lhs - rhs).abs() < 1e-12 * lhs, "{lhs} {rhs}");
        assert!(ln_binomial(3.0, 4.0).is_nan());
        assert!(ln_binomial(3.0, -1.0).is_nan());
        assert!(ln_binomial(f64::NAN, 1.0).is_nan());
    }

    #[test]
    fn binomial_half_pmf_agrees_with_ln_binomial() {
        for &(n, k) in &[
            (1u64, 0u64),
            (2, 1),
            (17, 5),
            (100, 50),
            (1000, 3),
            (100_000, 49_000),
        ] {
            let want = ln_binomial(n as f64, k as f64) - n as f64 * std::f64::consts::LN_2;
            let got = ln_binomial_half_pmf(n, k);
            // ln_binomial's terms are of size n (absolute error ~n·2⁻⁵³); Loader's are O(1).
            let tol = 1e-14 * want.abs().max(1.0) + 4e-16 * n as f64;
            assert!((got - want).abs() <= tol, "{n} {k}: {got} {want}");
        }
        assert_eq!(ln_binomial_half_pmf(3, 4), f64::NEG_INFINITY);
    }

    #[test]
    fn stirling_remainder_table_joins_series() {
        // The table at 15 and the series at 16 follow δ(n) ≈ 1/(12n).
        for n in 1..40u64 {
            let d = stirling_remainder(n);
            assert!((d * 12.0 * n as f64 - 1.0).abs() < 0.03, "n={n}: {d}");
        }
        // Where both apply (10 ≤ n ≤ 15) the mpmath table and the series agree.
        for n in 10..=15u64 {
            let (t, s) = (stirling_remainder(n), stirling_delta(n as f64));
            assert!((t - s).abs() <= 2e-16 * t, "n={n}: {t} {s}");
        }
    }
}
