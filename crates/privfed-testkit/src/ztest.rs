//! z-tests: a sample mean against a known value (unbiasedness checks) and a sample variance
//! against a closed form.
//!
//! * Mean: `z = (x̄ − μ₀)/√(σ²/n)`, with `σ²` known ([`z_mean_known_variance`]) or estimated by
//!   the unbiased sample variance ([`z_mean`]); by the central limit theorem `z ≈ N(0,1)` under
//!   `H₀`, and the two-sided test rejects when `|z| ≥ z_{1−α/2}` ([`z_critical`]). With the
//!   estimated variance this is the large-sample form of Student's t-test: use `n` in the
//!   thousands (at `n = 10⁴` and `α = 10⁻⁶` the t and normal critical values differ by 0.2%).
//! * Variance: `z = (s² − σ²)/SE(s²)` with `Var(s²) = μ₄/n − σ⁴(n−3)/(n(n−1))` (the exact
//!   variance of the unbiased `s²` for i.i.d. samples), `μ₄` and `σ⁴` estimated by the sample's
//!   fourth central moment and `s⁴` ([`z_variance`]). It needs no distributional assumption, only
//!   a finite fourth moment (for heavy tails, `n` must be large for the CLT to apply).
//!   For normal samples the exact test is the chi-square one, `(n−1)s²/σ² ~ χ²_{n−1}`
//!   ([`normal_variance_p_value`]).

use crate::{TestkitError, check_alpha};

/// Mean and unbiased sample variance of `xs` (two-pass).
///
/// Errors: fewer than two samples or a non-finite sample.
pub fn mean_var(xs: &[f64]) -> Result<(f64, f64), TestkitError> {
    if xs.len() < 2 {
        return Err(TestkitError::TooFew {
            what: "samples",
            need: 2,
            got: xs.len(),
        });
    }
    if let Some(&x) = xs.iter().find(|x| !x.is_finite()) {
        return Err(TestkitError::Invalid {
            what: "sample",
            value: x,
        });
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Ok((mean, var))
}

/// Two-sided standard normal critical value `z_{1−α/2} = −Φ⁻¹(α/2)`: `|z| ≥` it has
/// probability `α` under `N(0,1)` (`α = 10⁻⁶` → 4.892, `5.7·10⁻⁷` → 5.0, `2·10⁻⁹` → 6.0).
pub fn z_critical(alpha: f64) -> f64 {
    -privfed_special::norm_quantile(alpha / 2.0)
}

/// `z = (mean − expected)/√(variance/n)` for a sample mean of `n` draws with known `variance`
/// (0 when `mean == expected`, also for a zero variance).
pub fn z_mean_known_variance(mean: f64, n: usize, expected: f64, variance: f64) -> f64 {
    if mean == expected {
        return 0.0;
    }
    (mean - expected) / (variance / n as f64).sqrt()
}

/// `z` of the sample mean of `xs` against `expected`, with the variance estimated from `xs`.
///
/// Errors: see [`mean_var`].
pub fn z_mean(xs: &[f64], expected: f64) -> Result<f64, TestkitError> {
    let (mean, var) = mean_var(xs)?;
    Ok(z_mean_known_variance(mean, xs.len(), expected, var))
}

/// Asserts `|z| < z_critical(alpha)` (two-sided FPR `alpha` for a `z` that is `N(0,1)` under
/// `H₀`); panics naming `what`. Returns `z`.
pub fn assert_z(z: f64, alpha: f64, what: &str) -> f64 {
    check_alpha(alpha);
    let c = z_critical(alpha);
    assert!(
        z.abs() < c,
        "{what}: |z| = {:.3} ≥ {c:.3} (α = {alpha:e})",
        z.abs()
    );
    z
}

/// Asserts that the mean of `xs` equals `expected` at two-sided level `alpha` (variance estimated
/// from `xs`, see the module doc); panics naming `what`. Returns `z`.
pub fn assert_mean(xs: &[f64], expected: f64, alpha: f64, what: &str) -> f64 {
    let z = z_mean(xs, expected).unwrap_or_else(|e| panic!("{what}: z not computable: {e}"));
    assert_z(z, alpha, what)
}

/// Asserts that the errors `e_i = M(x) − x` of a randomizer claimed unbiased with exact variance
/// `variance` at `x` agree with both claims: the mean error against 0 with the known variance,
/// and the mean squared error against `variance` with its standard error estimated from the
/// sample (its fourth moment). Each is a two-sided z-test at `alpha`: FPR `≤ 2·alpha`. Panics
/// naming `what`.
pub fn assert_unbiased_with_variance(errors: &[f64], variance: f64, alpha: f64, what: &str) {
    let mean = errors.iter().sum::<f64>() / errors.len() as f64;
    let z = z_mean_known_variance(mean, errors.len(), 0.0, variance);
    assert_z(z, alpha, &format!("{what}: mean error"));
    let squares: Vec<f64> = errors.iter().map(|e| e * e).collect();
    assert_mean(
        &squares,
        variance,
        alpha,
        &format!("{what}: mean squared error vs variance {variance}"),
    );
}

/// `z = (s² − σ²)/SE(s²)` of the unbiased sample variance of `xs` against `expected_variance`,
/// the standard error from the sample's fourth central moment (see the module doc).
///
/// Errors: fewer than four samples, a non-finite sample, or a zero standard error.
pub fn z_variance(xs: &[f64], expected_variance: f64) -> Result<f64, TestkitError> {
    if xs.len() < 4 {
        return Err(TestkitError::TooFew {
            what: "samples",
            need: 4,
            got: xs.len(),
        });
    }
    let (mean, s2) = mean_var(xs)?;
    let n = xs.len() as f64;
    let m4 = xs.iter().map(|x| (x - mean).powi(4)).sum::<f64>() / n;
    let var_s2 = m4 / n - s2 * s2 * (n - 3.0) / (n * (n - 1.0));
    if var_s2.is_nan() || var_s2 <= 0.0 {
        return Err(TestkitError::Invalid {
            what: "variance of the sample variance",
            value: var_s2,
        });
    }
    Ok((s2 - expected_variance) / var_s2.sqrt())
}

/// Asserts that the variance of `xs` equals `expected_variance` at two-sided level `alpha`
/// ([`z_variance`]); panics naming `what`. Returns `z`.
pub fn assert_variance(xs: &[f64], expected_variance: f64, alpha: f64, what: &str) -> f64 {
    let z = z_variance(xs, expected_variance)
        .unwrap_or_else(|e| panic!("{what}: variance z not computable: {e}"));
    assert_z(z, alpha, what)
}

/// Two-sided p-value of the exact variance test for **normal** samples:
/// `(n−1)s²/σ² ~ χ²_{n−1}`, `p = 2·min(P, 1 − P)` with `P = P((n−1)/2, (n−1)s²/(2σ²))`.
///
/// Errors: see [`mean_var`]; a non-positive `variance`.
pub fn normal_variance_p_value(xs: &[f64], variance: f64) -> Result<f64, TestkitError> {
    if !(variance > 0.0 && variance.is_finite()) {
        return Err(TestkitError::Invalid {
            what: "variance",
            value: variance,
        });
    }
    let (_, s2) = mean_var(xs)?;
    let k = (xs.len() - 1) as f64;
    let x = k * s2 / variance;
    let lower = privfed_special::gamma_inc(k / 2.0, x / 2.0);
    let upper = privfed_special::gamma_inc_complement(k / 2.0, x / 2.0);
    Ok((2.0 * lower.min(upper)).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn known_values() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        let (m, v) = mean_var(&xs).unwrap();
        assert_eq!((m, v), (2.5, 5.0 / 3.0));
        // z = (2.5 − 2)/√(5/3/4) = 0.5/√(5/12).
        let z = z_mean(&xs, 2.0).unwrap();
        assert!((z - 0.5 / (5.0f64 / 12.0).sqrt()).abs() < 1e-15);
        // m4 = (2·1.5⁴ + 2·0.5⁴)/4 = 2.5625; Var(s²) = m4/4 − s⁴/12.
        let var_s2 = 2.5625 / 4.0 - (5.0f64 / 3.0).powi(2) / 12.0;
        let z = z_variance(&xs, 1.0).unwrap();
        assert!((z - (5.0 / 3.0 - 1.0) / var_s2.sqrt()).abs() < 1e-14, "{z}");
        // Critical values: 2Φ(−z) = α.
        assert!((z_critical(0.05) - 1.959_963_984_540_054).abs() < 1e-12);
        assert!((z_critical(1e-6) - 4.891_638_475_699_4).abs() < 1e-9);
        for a in [1e-3, 1e-6, 1e-9] {
            assert!((2.0 * privfed_special::norm_sf(z_critical(a)) / a - 1.0).abs() < 1e-12);
        }
        assert!(mean_var(&[1.0]).is_err());
        assert!(mean_var(&[1.0, f64::NAN]).is_err());
        assert!(z_variance(&[1.0, 1.0, 1.0, 1.0], 1.0).is_err());
        assert!(normal_variance_p_value(&xs, 0.0).is_err());
    }

    #[test]
    fn normal_variance_p_value_closed_form() {
        // n = 3 (k = 2): P(χ²₂ > x) = e^{−x/2}. xs = {−1, 0, 1}: s² = 1, x = 2/σ².
        let xs = [-1.0, 0.0, 1.0];
        for s2 in [0.25f64, 1.0, 4.0] {
            let x = 2.0 / s2;
            let q = (-x / 2.0).exp();
            let want = 2.0 * q.min(1.0 - q);
            let got = normal_variance_p_value(&xs, s2).unwrap();
            assert!((got - want).abs() < 1e-14, "σ² = {s2}: {got} vs {want}");
        }
    }

    #[test]
    fn unbiased_with_variance_accepts_and_rejects() {
        // Errors −1, 1, −3, 3 in equal numbers: mean 0, mean square 5 (squares 1 and 9:
        // variance 16, so 4.5 is 12.5 standard errors off at n = 10⁴).
        let errors: Vec<f64> = (0..10_000).map(|i| [-1.0, 1.0, -3.0, 3.0][i % 4]).collect();
        assert_unbiased_with_variance(&errors, 5.0, 1e-6, "±1, ±3");
        let wrong = std::panic::catch_unwind(|| {
            assert_unbiased_with_variance(&errors, 4.5, 1e-6, "a wrong variance")
        });
        assert!(wrong.is_err());
    }

    #[test]
    #[should_panic(expected = "|z|")]
    fn assert_rejects_a_biased_mean() {
        let xs: Vec<f64> = (0..10_000).map(|i| 0.1 + (i % 7) as f64).collect();
        assert_mean(&xs, 3.0, 1e-6, "shifted");
    }

    /// Under H₀, 4000 tests at α = 0.05 reject about 200 times (Binomial(4000, 0.05), sd 13.8);
    /// bounds [150, 260] allow for the normal approximation at n = 200 (t₁₉₉ and the fourth-moment
    /// SE make the exact rates slightly above α).
    #[test]
    fn calibration_under_h0() {
        let mut rng = rand::rngs::ChaCha20Rng::seed_from_u64(3);
        let (mut mean, mut var, mut normal) = (0, 0, 0);
        let c = z_critical(0.05);
        for _ in 0..4000 {
            let xs: Vec<f64> = (0..200).map(|_| rng.random()).collect();
            mean += usize::from(z_mean(&xs, 0.5).unwrap().abs() >= c);
            var += usize::from(z_variance(&xs, 1.0 / 12.0).unwrap().abs() >= c);
            // Normal samples by Box–Muller for the exact chi-square variance test.
            let gs: Vec<f64> = xs
                .chunks(2)
                .map(|u| (-2.0 * (1.0 - u[0]).ln()).sqrt() * (std::f64::consts::TAU * u[1]).cos())
                .collect();
            normal += usize::from(normal_variance_p_value(&gs, 1.0).unwrap() < 0.05);
        }
        for (name, r) in [
            ("mean", mean),
            ("variance", var),
            ("normal variance", normal),
        ] {
            assert!((150..=260).contains(&r), "{name}: {r} of 4000");
        }
    }
}
