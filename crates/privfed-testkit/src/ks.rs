//! Kolmogorov–Smirnov tests.
//!
//! * One sample: `D_n = sup_x |F_n(x) − F(x)|` against a continuous CDF `F`. The critical value
//!   is the Dvoretzky–Kiefer–Wolfowitz bound with Massart's constant (Massart 1990):
//!   `P(D_n > c) ≤ 2·e^{−2nc²}` for **every** `n`, so `c = √(ln(2/α)/(2n))` gives FPR `≤ α`
//!   exactly (not only asymptotically), and is asymptotically tight: the Kolmogorov limit
//!   `2Σ_{k≥1}(−1)^{k−1}e^{−2k²λ²}` differs from `2e^{−2λ²}` by `< 2e^{−8λ²}` (`< 10⁻⁵` at `α = 0.05`).
//! * Two samples: `D_{n,m} = sup_x |F_n(x) − G_m(x)|`, rejected above
//!   `c(α)·√((n+m)/(nm))` with the same `c(α) = √(ln(2/α)/2)` (Smirnov's limit; FPR `≤ α`
//!   asymptotically, and close to `α` for `n, m` in the hundreds and more).

use crate::{TestkitError, check_alpha};

/// Sorts a non-empty sample without NaNs (the empirical CDF needs both).
fn sort_checked(samples: &mut [f64]) -> Result<(), TestkitError> {
    if samples.is_empty() {
        return Err(TestkitError::TooFew {
            what: "samples",
            need: 1,
            got: 0,
        });
    }
    if let Some(&x) = samples.iter().find(|x| x.is_nan()) {
        return Err(TestkitError::Invalid {
            what: "sample",
            value: x,
        });
    }
    samples.sort_by(f64::total_cmp);
    Ok(())
}

/// Kolmogorov–Smirnov statistic `D_n = sup |F_n − F|` of `samples` against the continuous CDF
/// `cdf` (sorts `samples` in place).
///
/// Errors: no samples, a NaN sample, or a CDF value outside `[0, 1]` by more than `10⁻⁹`
/// (smaller rounding excursions are clamped).
pub fn ks_statistic(samples: &mut [f64], cdf: impl Fn(f64) -> f64) -> Result<f64, TestkitError> {
    sort_checked(samples)?;
    let n = samples.len() as f64;
    let mut d: f64 = 0.0;
    for (i, &x) in samples.iter().enumerate() {
        let f = cdf(x);
        // Rounding may put a computed CDF a hair outside [0, 1]; more is a bug in the CDF.
        if !(-1e-9..=1.0 + 1e-9).contains(&f) {
            return Err(TestkitError::Invalid {
                what: "CDF value",
                value: f,
            });
        }
        let f = f.clamp(0.0, 1.0);
        d = d
            .max((f - i as f64 / n).abs())
            .max(((i + 1) as f64 / n - f).abs());
    }
    Ok(d)
}

/// One-sample critical value at level `alpha` (DKW–Massart, valid for every `n`):
/// `√(ln(2/α)/(2n))`.
pub fn ks_critical(n: usize, alpha: f64) -> f64 {
    ((2.0 / alpha).ln() / (2.0 * n as f64)).sqrt()
}

/// Upper bound `min(1, 2·e^{−2n·d²})` on the one-sample p-value `P(D_n ≥ d)` (DKW–Massart).
pub fn ks_p_value_bound(n: usize, d: f64) -> f64 {
    (2.0 * (-2.0 * n as f64 * d * d).exp()).min(1.0)
}

/// Asserts that `samples` follow the continuous CDF `cdf` at level `alpha` (FPR `≤ alpha`, see
/// [`ks_critical`]); panics naming `what`. Returns `D_n`.
pub fn assert_ks_fits(
    samples: &mut [f64],
    cdf: impl Fn(f64) -> f64,
    alpha: f64,
    what: &str,
) -> f64 {
    check_alpha(alpha);
    let d = ks_statistic(samples, cdf)
        .unwrap_or_else(|e| panic!("{what}: KS statistic not computable: {e}"));
    let c = ks_critical(samples.len(), alpha);
    assert!(
        d < c,
        "{what}: KS D = {d:.5} ≥ critical {c:.5} (n = {}, α = {alpha:e})",
        samples.len()
    );
    d
}

/// Two-sample Kolmogorov–Smirnov statistic `D_{n,m} = sup |F_n − G_m|` (sorts both in place;
/// ties are handled by stepping both empirical CDFs past each distinct value).
///
/// Errors: an empty sample or a NaN.
pub fn ks_two_sample_statistic(a: &mut [f64], b: &mut [f64]) -> Result<f64, TestkitError> {
    sort_checked(a)?;
    sort_checked(b)?;
    let (n, m) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / n - j as f64 / m).abs());
    }
    Ok(d)
}

/// Two-sample critical value at level `alpha`: `√(ln(2/α)/2 · (n+m)/(nm))` (Smirnov's limit).
pub fn ks_two_sample_critical(n: usize, m: usize, alpha: f64) -> f64 {
    let (n, m) = (n as f64, m as f64);
    ((2.0 / alpha).ln() / 2.0 * (n + m) / (n * m)).sqrt()
}

/// Asserts that samples `a` and `b` come from the same continuous distribution at level
/// `alpha` (asymptotic FPR `≤ alpha`); panics naming `what`. Returns `D_{n,m}`.
pub fn assert_ks_same_distribution(a: &mut [f64], b: &mut [f64], alpha: f64, what: &str) -> f64 {
    check_alpha(alpha);
    let d = ks_two_sample_statistic(a, b)
        .unwrap_or_else(|e| panic!("{what}: KS statistic not computable: {e}"));
    let c = ks_two_sample_critical(a.len(), b.len(), alpha);
    assert!(
        d < c,
        "{what}: two-sample KS D = {d:.5} ≥ critical {c:.5} (n = {}, m = {}, α = {alpha:e})",
        a.len(),
        b.len()
    );
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn known_statistics() {
        // Samples 0.1, 0.4, 0.7 against U(0,1): max(|0.1−0|, |1/3−0.1|, |0.4−1/3|, |2/3−0.4|,
        // |0.7−2/3|, |1−0.7|) = 0.3.
        let d = ks_statistic(&mut [0.7, 0.1, 0.4], |x| x).unwrap();
        assert!((d - 0.3).abs() < 1e-15, "{d}");
        // Two samples {1,2,3} and {2.5,4}: after 2 F=2/3, G=0 → 2/3.
        let d = ks_two_sample_statistic(&mut [3.0, 1.0, 2.0], &mut [4.0, 2.5]).unwrap();
        assert!((d - 2.0 / 3.0).abs() < 1e-15, "{d}");
        // Ties across samples: identical samples give 0.
        let d = ks_two_sample_statistic(&mut [1.0, 2.0, 2.0], &mut [2.0, 1.0, 2.0]).unwrap();
        assert_eq!(d, 0.0);
        // Critical values: n = 1000, α = 1e-6 → √(ln(2e6)/2000) = 0.08518...
        assert!((ks_critical(1000, 1e-6) - (2e6f64.ln() / 2000.0).sqrt()).abs() < 1e-15);
        assert!((ks_p_value_bound(1000, ks_critical(1000, 1e-6)) / 1e-6 - 1.0).abs() < 1e-9);
        assert_eq!(ks_p_value_bound(10, 0.0), 1.0);
    }

    #[test]
    fn invalid_inputs_are_errors() {
        assert!(ks_statistic(&mut [], |x| x).is_err());
        assert!(ks_statistic(&mut [f64::NAN], |x| x).is_err());
        assert!(ks_statistic(&mut [0.5], |_| 1.5).is_err());
        assert!(ks_two_sample_statistic(&mut [], &mut [1.0]).is_err());
    }

    #[test]
    #[should_panic(expected = "KS D")]
    fn assert_rejects_a_wrong_distribution() {
        let mut xs: Vec<f64> = (0..1000).map(|i| (i as f64 / 1000.0).powi(2)).collect();
        assert_ks_fits(&mut xs, |x| x, 1e-6, "squared uniforms");
    }

    /// Under H₀, 2000 tests at α = 0.05 reject about 100 times (one sample: at most α by DKW,
    /// close to it for n = 200; two samples: asymptotically). Binomial(2000, 0.05) has sd 9.7;
    /// the bounds [50, 140] are > 4 sd from 100 on the upper side and allow for conservatism.
    #[test]
    fn calibration_under_h0() {
        let mut rng = rand::rngs::ChaCha20Rng::seed_from_u64(2);
        let (mut one, mut two) = (0, 0);
        for _ in 0..2000 {
            let mut xs: Vec<f64> = (0..200).map(|_| rng.random()).collect();
            let d = ks_statistic(&mut xs, |x| x).unwrap();
            one += usize::from(d >= ks_critical(200, 0.05));
            let mut ys: Vec<f64> = (0..300).map(|_| rng.random()).collect();
            let d = ks_two_sample_statistic(&mut xs, &mut ys).unwrap();
            two += usize::from(d >= ks_two_sample_critical(200, 300, 0.05));
        }
        assert!((50..=140).contains(&one), "one-sample: {one} of 2000");
        assert!((50..=140).contains(&two), "two-sample: {two} of 2000");
    }
}
