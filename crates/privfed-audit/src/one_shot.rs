//! The one-shot empirical ε estimate for federated learning of Andrew, Kairouz, Oh, Oprea,
//! McMahan, Suriyakumar 2024, "One-shot empirical privacy estimation for federated learning"
//! (ICLR 2024; docs/ALGORITHMS.md "Empirical privacy auditing", §A.7).
//!
//! `k` canary clients each contribute a fixed random unit direction `c_i` (isotropic in `d`
//! dimensions) to one training run. Afterwards, the cosine of each canary with the final model
//! delta `Δ` is `cos_i = ⟨c_i, Δ⟩/‖Δ‖` ([`cosine`]). For a canary that was **not** inserted the
//! cosine of an isotropic direction with any vector independent of it has mean 0 and variance
//! exactly `1/d` (about `N(0, 1/d)` in high dimension).
//!
//! **The estimate** ([`one_shot_epsilon`]) reads the two groups of cosines as a Gaussian
//! mechanism, i.e. μ-GDP (Dong, Roth, Su 2022): the included canaries' cosines are
//! `N(m_in, s²)`, the never-inserted ones' `N(m_out, s²)`, with the **same** variance, and
//!
//! `μ̂ = (m̂_in − m̂_out)/ŝ`, `ŝ² = (Σ_in (x − m̂_in)² + Σ_out (x − m̂_out)²)/(k_in + k_out − 2)`,
//! `ε̂ = ε_{μ̂}(δ)` ([`crate::gdp::epsilon_for_mu`], 0 for `μ̂ ≤ 0`).
//!
//! Why equal variances. The paper compares the fitted `N(μ̂, σ̂²)` of the inserted canaries with
//! the null `N(0, 1/d)` through the privacy profile of two Gaussians of **unequal** variances
//! ([`one_shot_epsilon_unequal_variance`]). At small δ that profile is dominated by the
//! variance ratio, not the mean shift: at δ = 10⁻⁵ a `σ̂` off by 5%, 10%, 20% (any `d`) —
//! within the sampling error of a standard deviation fitted to ~50 cosines (relative standard
//! error `1/√(2(k − 1))` ≈ 10%) — already gives ε̂ = 0.72, 1.60, 3.60 with **no** mean shift. The
//! estimate is then biased upward by noise alone. For the Gaussian mechanism the variances are
//! equal (in high dimension), so the equal-variance reading loses nothing there and its
//! sampling error enters only through the ratio `μ̂`, whose median is the true μ.
//!
//! **The known null** ([`one_shot_epsilon_known_null`]): the never-inserted canaries' cosines are
//! only needed to estimate the null, and the null is known exactly — mean 0, variance `1/d` — so
//! `μ̂ = √d·m̂_in` from the included canaries alone.
//!
//! This is an **estimate**, not a bound: it has no confidence level, and the Gaussian reading is
//! only asymptotically right (the paper proves it for the Gaussian mechanism as `d → ∞`). It
//! complements the rigorous tests of [`crate::distinguish`] and [`crate::one_run`].

use crate::error::{AuditError, Result};
use crate::gdp::epsilon_for_mu;
use privfed_special::norm_cdf;
use serde::Serialize;

/// `⟨c, Δ⟩/(‖c‖·‖Δ‖)`; errors on a length mismatch or a zero vector.
pub fn cosine(canary: &[f64], model_delta: &[f64]) -> Result<f64> {
    if canary.len() != model_delta.len() || canary.is_empty() {
        return Err(AuditError::invalid(
            "model_delta",
            model_delta.len() as f64,
            format!("must have the canary's length ({})", canary.len()),
        ));
    }
    let dot: f64 = canary.iter().zip(model_delta).map(|(a, b)| a * b).sum();
    let na = canary.iter().map(|a| a * a).sum::<f64>().sqrt();
    let nb = model_delta.iter().map(|a| a * a).sum::<f64>().sqrt();
    if !(na > 0.0 && nb > 0.0 && dot.is_finite()) {
        return Err(AuditError::invalid(
            "norm",
            na.min(nb),
            "vectors must be finite and non-zero",
        ));
    }
    Ok(dot / (na * nb))
}

/// `P(R) − e^ε Q(R)` for `R = {ln p − ln q > ε}`, `P = N(m1, s1²)`, `Q = N(m2, s2²)`.
fn hockey(m1: f64, s1: f64, m2: f64, s2: f64, eps: f64) -> f64 {
    // ln p − ln q − ε = a t² + b t + c.
    let a = 0.5 / (s2 * s2) - 0.5 / (s1 * s1);
    let b = m1 / (s1 * s1) - m2 / (s2 * s2);
    let c = m2 * m2 / (2.0 * s2 * s2) - m1 * m1 / (2.0 * s1 * s1) + (s2 / s1).ln() - eps;
    // Mass of N(m, s²) on (lo, hi).
    let mass = |m: f64, s: f64, lo: f64, hi: f64| {
        let f = |t: f64| {
            if t == f64::INFINITY {
                1.0
            } else if t == f64::NEG_INFINITY {
                0.0
            } else {
                norm_cdf((t - m) / s)
            }
        };
        (f(hi) - f(lo)).max(0.0)
    };
    let both = |lo: f64, hi: f64| mass(m1, s1, lo, hi) - eps.exp() * mass(m2, s2, lo, hi);
    let scale = 1.0 / (s1 * s1) + 1.0 / (s2 * s2);
    if a.abs() < 1e-12 * scale {
        // Linear: b t + c > 0.
        if b > 0.0 {
            return both(-c / b, f64::INFINITY).max(0.0);
        } else if b < 0.0 {
            return both(f64::NEG_INFINITY, -c / b).max(0.0);
        }
        return if c > 0.0 {
            both(f64::NEG_INFINITY, f64::INFINITY).max(0.0)
        } else {
            0.0
        };
    }
    let disc = b * b - 4.0 * a * c;
    if disc <= 0.0 {
        // The quadratic has one sign everywhere: that of a.
        return if a > 0.0 {
            both(f64::NEG_INFINITY, f64::INFINITY).max(0.0)
        } else {
            0.0
        };
    }
    let sq = disc.sqrt();
    let (r1, r2) = {
        let u = (-b - sq) / (2.0 * a);
        let v = (-b + sq) / (2.0 * a);
        (u.min(v), u.max(v))
    };
    let d = if a > 0.0 {
        both(f64::NEG_INFINITY, r1) + both(r2, f64::INFINITY)
    } else {
        both(r1, r2)
    };
    d.max(0.0)
}

/// The smallest `ε ≥ 0` with `max(δ_{P,Q}(ε), δ_{Q,P}(ε)) ≤ δ` for `P = N(m1, s1²)`,
/// `Q = N(m2, s2²)` (bisection on `[0, 200]` to `10⁻⁹`; 200 if even that is not enough).
pub fn gaussian_pair_epsilon(m1: f64, s1: f64, m2: f64, s2: f64, delta: f64) -> Result<f64> {
    for (name, v) in [("s1", s1), ("s2", s2)] {
        if !(v.is_finite() && v > 0.0) {
            return Err(AuditError::invalid(name, v, "must be finite and positive"));
        }
    }
    if !(m1.is_finite() && m2.is_finite()) {
        return Err(AuditError::invalid("mean", m1 - m2, "must be finite"));
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(AuditError::invalid("delta", delta, "must be in (0, 1)"));
    }
    let d = |e: f64| hockey(m1, s1, m2, s2, e).max(hockey(m2, s2, m1, s1, e));
    if d(0.0) <= delta {
        return Ok(0.0);
    }
    let (mut lo, mut hi) = (0.0, 200.0);
    if d(hi) > delta {
        return Ok(hi);
    }
    while hi - lo > 1e-9 {
        let mid = 0.5 * (lo + hi);
        if d(mid) > delta {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(hi)
}

/// The one-shot estimate ([module docs](self)): μ̂ and ε̂ of the equal-variance (μ-GDP) reading.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OneShotEstimate {
    /// `ε̂ = ε_{μ̂}(δ)` (0 when `μ̂ ≤ 0`).
    pub epsilon: f64,
    /// `μ̂ = (m̂_in − m̂_out)/ŝ`.
    pub mu: f64,
    /// `m̂_in`, the included canaries' mean cosine.
    pub mean_included: f64,
    /// `m̂_out`, the never-inserted canaries' mean cosine.
    pub mean_excluded: f64,
    /// `ŝ`, the pooled within-group standard deviation.
    pub sd: f64,
}

fn check_finite(cosines: &[f64]) -> Result<()> {
    match cosines.iter().find(|c| !c.is_finite()) {
        Some(bad) => Err(AuditError::invalid("cosine", *bad, "must be finite")),
        None => Ok(()),
    }
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// The one-shot estimate from the cosines of the `included` canaries and of canaries never
/// inserted (`excluded`): `μ̂ = (m̂_in − m̂_out)/ŝ` with the pooled standard deviation `ŝ`, and
/// `ε̂ = ε_{μ̂}(δ)` of μ-GDP ([module docs](self)).
///
/// # Errors
/// An empty group, fewer than 3 cosines in all (no degree of freedom for `ŝ`), a cosine that is
/// not finite, δ outside (0, 1), or no spread at all (`ŝ = 0`).
pub fn one_shot_epsilon(included: &[f64], excluded: &[f64], delta: f64) -> Result<OneShotEstimate> {
    if included.is_empty() || excluded.is_empty() || included.len() + excluded.len() < 3 {
        return Err(AuditError::TooFewSamples(format!(
            "the equal-variance fit needs at least one included and one excluded canary and 3 in \
             all (got {} and {})",
            included.len(),
            excluded.len()
        )));
    }
    check_finite(included)?;
    check_finite(excluded)?;
    if !(delta > 0.0 && delta < 1.0) {
        return Err(AuditError::invalid("delta", delta, "must be in (0, 1)"));
    }
    let (m_in, m_out) = (mean(included), mean(excluded));
    let ss = |x: &[f64], m: f64| x.iter().map(|c| (c - m).powi(2)).sum::<f64>();
    let df = (included.len() + excluded.len() - 2) as f64;
    let sd = ((ss(included, m_in) + ss(excluded, m_out)) / df).sqrt();
    if !(sd > 0.0 && sd.is_finite()) {
        return Err(AuditError::invalid(
            "sd",
            sd,
            "the cosines have no spread to fit (all equal within each group)",
        ));
    }
    let mu = (m_in - m_out) / sd;
    Ok(OneShotEstimate {
        epsilon: epsilon_for_mu(mu, delta)?,
        mu,
        mean_included: m_in,
        mean_excluded: m_out,
        sd,
    })
}

/// The known-null one-shot estimate ([`one_shot_epsilon_known_null`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KnownNullEstimate {
    /// `ε̂ = ε_{μ̂}(δ)` (0 when `μ̂ ≤ 0`).
    pub epsilon: f64,
    /// `μ̂ = √d·m̂_in`.
    pub mu: f64,
    /// `m̂_in`, the included canaries' mean cosine.
    pub mean_included: f64,
    /// `z = √k·μ̂`: standard normal (by the central limit theorem) when no canary influenced
    /// the model delta.
    pub z: f64,
    /// The one-sided p-value `1 − Φ(z)` of "the included canaries left no trace".
    pub p_value: f64,
}

/// The one-shot estimate against the **known** null. When the canary directions are
/// independent uniformly random unit vectors in `d` dimensions, the cosine of a canary that was
/// not inserted with the model delta (a vector independent of it) has mean 0 and variance
/// exactly `1/d` (`E[c₁²] = 1/d` by symmetry), so the never-inserted canaries' empirical moments
/// are not needed. With the `k` included canaries' mean cosine `m̂_in`, read as `N(m_in, 1/d)`
/// against the null `N(0, 1/d)` (equal variances: μ-GDP, as in [`one_shot_epsilon`]):
///
/// `μ̂ = (m̂_in − 0)/(1/√d) = √d·m̂_in`,  `ε̂ = ε_{μ̂}(δ)` ([`crate::gdp::epsilon_for_mu`], 0 for
/// `μ̂ ≤ 0`).
///
/// Under the null (no canary left a trace) `μ̂` has mean 0 and standard deviation exactly
/// `1/√k`, against `√(1/k_in + 1/k_out)` for the two-group estimate, which also spends the
/// excluded canaries; so `z = √k·μ̂` is approximately standard normal and `1 − Φ(z)` is a
/// one-sided p-value for "the included canaries left no trace". Like [`one_shot_epsilon`] this
/// is an estimate without a confidence level; the p-value concerns only the null.
///
/// # Errors
/// No cosines, `dim = 0`, a cosine that is not finite, or δ outside (0, 1).
pub fn one_shot_epsilon_known_null(
    included: &[f64],
    dim: usize,
    delta: f64,
) -> Result<KnownNullEstimate> {
    if included.is_empty() {
        return Err(AuditError::TooFewSamples(
            "the known-null estimate needs at least one included canary".into(),
        ));
    }
    if dim == 0 {
        return Err(AuditError::invalid("dim", 0.0, "must be at least 1"));
    }
    check_finite(included)?;
    if !(delta > 0.0 && delta < 1.0) {
        return Err(AuditError::invalid("delta", delta, "must be in (0, 1)"));
    }
    let m_in = mean(included);
    let mu = (dim as f64).sqrt() * m_in;
    let z = (included.len() as f64).sqrt() * mu;
    Ok(KnownNullEstimate {
        epsilon: epsilon_for_mu(mu, delta)?,
        mu,
        mean_included: m_in,
        z,
        p_value: privfed_special::norm_sf(z),
    })
}

/// The paper's own reading, kept for comparison with its code: fit `N(μ̂, σ̂²)` to the included
/// canaries' cosines (sample mean, sample standard deviation with `k − 1`) and return
/// [`gaussian_pair_epsilon`]`(μ̂, σ̂, 0, 1/√d, δ)` together with `(μ̂, σ̂)`. Biased upward by
/// the sampling error of `σ̂` at small δ (see the [module docs](self)); [`one_shot_epsilon`] is
/// the estimate to report.
///
/// # Errors
/// Fewer than 2 cosines, `dim = 0`, a cosine that is not finite, or from
/// [`gaussian_pair_epsilon`].
pub fn one_shot_epsilon_unequal_variance(
    cosines: &[f64],
    dim: usize,
    delta: f64,
) -> Result<(f64, f64, f64)> {
    if cosines.len() < 2 {
        return Err(AuditError::TooFewSamples(
            "the Gaussian fit needs at least 2 canaries".into(),
        ));
    }
    if dim == 0 {
        return Err(AuditError::invalid("dim", 0.0, "must be at least 1"));
    }
    check_finite(cosines)?;
    let k = cosines.len() as f64;
    let mean = mean(cosines);
    let var = cosines.iter().map(|c| (c - mean).powi(2)).sum::<f64>() / (k - 1.0);
    let sd = var.sqrt();
    let eps = gaussian_pair_epsilon(mean, sd, 0.0, 1.0 / (dim as f64).sqrt(), delta)?;
    Ok((eps, mean, sd))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal variances: the pair is the Gaussian mechanism with `μ = |m1 − m2|/s`.
    #[test]
    fn equal_variances_match_gdp() {
        let e = gaussian_pair_epsilon(1.5, 1.0, 0.0, 1.0, 1e-5).unwrap();
        let g = epsilon_for_mu(1.5, 1e-5).unwrap();
        assert!((e - g).abs() < 1e-7, "{e} {g}");
        let e2 = gaussian_pair_epsilon(0.3, 0.2, 0.0, 0.2, 1e-5).unwrap();
        assert!((e2 - g).abs() < 1e-7, "{e2} {g}");
    }

    /// Unequal variances cost privacy: larger ε than the equal-variance pair with the same means.
    #[test]
    fn unequal_variances_cost_more() {
        let e = gaussian_pair_epsilon(1.0, 1.3, 0.0, 1.0, 1e-5).unwrap();
        let g = epsilon_for_mu(1.0, 1e-5).unwrap();
        assert!(e > g);
        assert_eq!(
            gaussian_pair_epsilon(0.0, 1.0, 0.0, 1.0, 1e-5).unwrap(),
            0.0
        );
    }

    #[test]
    fn cosine_and_errors() {
        assert!((cosine(&[1.0, 0.0], &[1.0, 1.0]).unwrap() - 0.5f64.sqrt()).abs() < 1e-15);
        assert!(cosine(&[1.0], &[1.0, 2.0]).is_err());
        assert!(cosine(&[0.0], &[1.0]).is_err());
        assert!(one_shot_epsilon_unequal_variance(&[0.1], 10, 1e-5).is_err());
        assert!(one_shot_epsilon(&[0.1], &[0.2], 1e-5).is_err());
        assert!(one_shot_epsilon(&[0.1, 0.3], &[], 1e-5).is_err());
        assert!(one_shot_epsilon(&[0.1, 0.1], &[0.2], 1e-5).is_err());
        assert!(one_shot_epsilon(&[0.1, f64::NAN], &[0.2], 1e-5).is_err());
        assert!(one_shot_epsilon(&[0.1, 0.3], &[0.2], 1.0).is_err());
        assert!(gaussian_pair_epsilon(0.0, 0.0, 0.0, 1.0, 1e-5).is_err());
        assert!(one_shot_epsilon_known_null(&[], 10, 1e-5).is_err());
        assert!(one_shot_epsilon_known_null(&[0.1], 0, 1e-5).is_err());
        assert!(one_shot_epsilon_known_null(&[f64::NAN], 10, 1e-5).is_err());
        assert!(one_shot_epsilon_known_null(&[0.1], 10, 0.0).is_err());
    }

    /// The known-null formula by hand: cosines 0.1 and 0.3 in d = 100 → `m̂ = 0.2`, `μ̂ = 2`,
    /// `z = 2√2`, `ε̂ = ε_2(δ)`; a negative mean gives ε̂ = 0 and a p-value above ½.
    #[test]
    fn known_null_formula_by_hand() {
        let e = one_shot_epsilon_known_null(&[0.1, 0.3], 100, 1e-5).unwrap();
        assert!((e.mu - 2.0).abs() < 1e-12, "{e:?}");
        assert!((e.z - 2.0 * 2f64.sqrt()).abs() < 1e-12, "{e:?}");
        let g = epsilon_for_mu(2.0, 1e-5).unwrap();
        assert!((e.epsilon - g).abs() < 1e-12, "{e:?}");
        assert!((e.p_value - privfed_special::norm_sf(e.z)).abs() < 1e-15);
        let neg = one_shot_epsilon_known_null(&[-0.1], 100, 1e-5).unwrap();
        assert!(neg.epsilon == 0.0 && neg.p_value > 0.5, "{neg:?}");
    }

    /// The equal-variance reading is the GDP of the two groups: means 0.3 and 0.1, each group
    /// ±0.1 around its mean (pooled `ŝ² = 0.04/2`) → `μ = 0.2/√0.02 = √2`, `ε = ε_{√2}(δ)`; a
    /// negative shift is ε = 0.
    #[test]
    fn the_estimate_is_the_gdp_of_the_pooled_fit() {
        let e = one_shot_epsilon(&[0.2, 0.4], &[0.0, 0.2], 1e-5).unwrap();
        let sd = (0.04f64 / 2.0).sqrt();
        assert!((e.sd - sd).abs() < 1e-15, "{e:?}");
        assert!((e.mu - 0.2 / sd).abs() < 1e-12, "{e:?}");
        let g = epsilon_for_mu(0.2 / sd, 1e-5).unwrap();
        assert!((e.epsilon - g).abs() < 1e-12, "{e:?} {g}");
        let neg = one_shot_epsilon(&[0.0, 0.2], &[0.2, 0.4], 1e-5).unwrap();
        assert!(neg.mu < 0.0 && neg.epsilon == 0.0, "{neg:?}");
    }
}
