//! Gaussian differential privacy (Dong, Roth, Su 2022, "Gaussian differential privacy", JRSS B)
//! fitted to tradeoff points (docs/ALGORITHMS.md "Empirical privacy auditing", §A.5).
//!
//! A mechanism is μ-GDP when every test of `x` against `x′` has
//! `FNR ≥ G_μ(FPR) = Φ(Φ⁻¹(1 − FPR) − μ)`. A tradeoff point (FPR, FNR) therefore implies
//!
//! `μ ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR)` ([`mu_from_tradeoff`]),
//!
//! and since the right side decreases in both rates, Clopper–Pearson **upper** bounds on FPR
//! and FNR (each at `α/2`) give a lower bound `μ_lb` that holds with probability `1 − α`
//! ([`mu_lower_bound`]). μ-GDP is (ε, δ(ε))-DP for every ε with the Gaussian profile
//! `δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)` (their Corollary 2.13; the Gaussian mechanism's
//! profile of Balle & Wang 2018 with `μ = Δ/σ`, one home: [`privfed_mechanisms::gaussian`]).
//! [`epsilon_for_mu`] converts `μ_lb` to ε at δ.
//!
//! What this bounds: `μ_lb` is a rigorous lower bound on the μ of any GDP guarantee the
//! mechanism could have. The converted `ε(μ_lb, δ)` is a lower bound on ε at δ **only if the
//! mechanism's tradeoff curve is Gaussian** (true for the Gaussian mechanism, approximately for
//! compositions); for other mechanisms use [`crate::distinguish`], which assumes nothing.
//! (The same use as Nasr et al. 2023, "Tight auditing of differentially private machine
//! learning".)

use crate::clopper_pearson;
use crate::error::{AuditError, Result, check_alpha};
use privfed_mechanisms::gaussian::{gaussian_delta, gaussian_epsilon};
use privfed_special::{norm_cdf, norm_quantile};
use serde::Serialize;

fn check_rate(name: &'static str, r: f64) -> Result<f64> {
    if r > 0.0 && r < 1.0 {
        Ok(r)
    } else {
        Err(AuditError::invalid(name, r, "a rate must be in (0, 1)"))
    }
}

/// `μ = Φ⁻¹(1 − FPR) − Φ⁻¹(FNR)`: the μ of the GDP curve through the tradeoff point
/// `(FPR, FNR)`.
pub fn mu_from_tradeoff(fpr: f64, fnr: f64) -> Result<f64> {
    check_rate("fpr", fpr)?;
    check_rate("fnr", fnr)?;
    Ok(-norm_quantile(fpr) - norm_quantile(fnr))
}

/// The μ-GDP tradeoff curve `G_μ(FPR) = Φ(Φ⁻¹(1 − FPR) − μ)`.
pub fn tradeoff_fnr(mu: f64, fpr: f64) -> Result<f64> {
    check_rate("fpr", fpr)?;
    if !mu.is_finite() {
        return Err(AuditError::invalid("mu", mu, "must be finite"));
    }
    Ok(norm_cdf(-norm_quantile(fpr) - mu))
}

/// ε at δ of a μ-GDP mechanism: the smallest ε with `δ_μ(ε) ≤ δ` (0 for `μ ≤ 0`).
pub fn epsilon_for_mu(mu: f64, delta: f64) -> Result<f64> {
    if mu.is_nan() {
        return Err(AuditError::invalid("mu", mu, "must not be NaN"));
    }
    if mu <= 0.0 {
        return Ok(0.0);
    }
    Ok(gaussian_epsilon(1.0, mu, delta)?)
}

/// δ at ε of a μ-GDP mechanism, `Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`.
pub fn delta_for_mu(mu: f64, epsilon: f64) -> Result<f64> {
    let d = gaussian_delta(1.0, mu, epsilon);
    if d.is_nan() {
        return Err(AuditError::invalid(
            "mu",
            mu,
            "μ must be finite and positive, ε finite and non-negative",
        ));
    }
    Ok(d)
}

/// A GDP bound from counts (see [`mu_lower_bound`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GdpBound {
    /// `Φ⁻¹(1 − FPR_hi) − Φ⁻¹(FNR_hi)` (may be negative: then no evidence).
    pub mu_lower_bound: f64,
    /// Clopper–Pearson upper bound on FPR at `α/2`.
    pub fpr_upper: f64,
    /// Clopper–Pearson upper bound on FNR at `α/2`.
    pub fnr_upper: f64,
    /// `1 − α`.
    pub confidence: f64,
}

/// `μ_lb = Φ⁻¹(1 − FPR_hi) − Φ⁻¹(FNR_hi)` from `false_positives` of `n_x_prime` (the test says
/// "x" on samples of `M(x′)`) and `false_negatives` of `n_x`, each rate bounded above by
/// Clopper–Pearson at `α/2`: with probability `1 − α`, any GDP guarantee of the mechanism has
/// `μ ≥ μ_lb`.
pub fn mu_lower_bound(
    false_positives: u64,
    n_x_prime: u64,
    false_negatives: u64,
    n_x: u64,
    alpha: f64,
) -> Result<GdpBound> {
    check_alpha(alpha)?;
    let fpr_upper = clopper_pearson::upper(false_positives, n_x_prime, alpha / 2.0)?;
    let fnr_upper = clopper_pearson::upper(false_negatives, n_x, alpha / 2.0)?;
    let mu = if fpr_upper >= 1.0 || fnr_upper >= 1.0 {
        f64::NEG_INFINITY
    } else {
        -norm_quantile(fpr_upper) - norm_quantile(fnr_upper)
    };
    Ok(GdpBound {
        mu_lower_bound: mu,
        fpr_upper,
        fnr_upper,
        confidence: 1.0 - alpha,
    })
}

/// [`mu_lower_bound`] for the test `s ≥ t ⇒ x` with the threshold chosen on the first half of
/// each score set and the bound computed on the second half (the split of
/// [`crate::distinguish`], for the same reason). Both tests `s ≥ t ⇒ x` and `s < t ⇒ x` are
/// searched (swapping the roles of `x` and `x′` gives the same μ: a GDP tradeoff is symmetric). Returns the bound and the threshold.
pub fn split_mu_lower_bound(
    scores_x: &[f64],
    scores_x_prime: &[f64],
    alpha: f64,
) -> Result<(GdpBound, f64)> {
    check_alpha(alpha)?;
    if scores_x.len() < 2 || scores_x_prime.len() < 2 {
        return Err(AuditError::TooFewSamples(
            "the split needs at least 2 samples on each side".into(),
        ));
    }
    if let Some(bad) = scores_x.iter().chain(scores_x_prime).find(|s| s.is_nan()) {
        return Err(AuditError::invalid("score", *bad, "scores must not be NaN"));
    }
    let sorted = |s: &[f64]| {
        let mut v = s.to_vec();
        v.sort_by(f64::total_cmp);
        v
    };
    let (hx, hxp) = (scores_x.len() / 2, scores_x_prime.len() / 2);
    let (sx, sxp) = (sorted(&scores_x[..hx]), sorted(&scores_x_prime[..hxp]));
    let (ex, exp) = (sorted(&scores_x[hx..]), sorted(&scores_x_prime[hxp..]));
    let below = |v: &[f64], t: f64| v.partition_point(|&s| s < t) as u64;
    // (fp, n_x', fn, n_x) of direction `up` at t.
    let counts = |x: &[f64], xp: &[f64], t: f64, up: bool| {
        let (bx, bxp) = (below(x, t), below(xp, t));
        let (nx, nxp) = (x.len() as u64, xp.len() as u64);
        if up {
            // s ≥ t ⇒ x: false positives are samples of x′ at or above t.
            (nxp - bxp, nxp, bx, nx)
        } else {
            // s < t ⇒ x (x scores low): false positives are samples of x′ below t.
            (bxp, nxp, nx - bx, nx)
        }
    };
    let mut pool: Vec<f64> = sx.iter().chain(&sxp).copied().collect();
    pool.sort_by(f64::total_cmp);
    pool.dedup();
    let step = (pool.len() / crate::distinguish::MAX_CANDIDATES).max(1);
    // Select at α/K, as the distinguishing test does (only the choice; the bound is at α).
    let alpha_select = alpha / pool.len().div_ceil(step).max(1) as f64;
    let mut best: Option<(f64, bool, f64)> = None;
    for &t in pool.iter().step_by(step) {
        for up in [true, false] {
            let (fp, nfp, fnn, nfn) = counts(&sx, &sxp, t, up);
            let b = mu_lower_bound(fp, nfp, fnn, nfn, alpha_select)?;
            if best.is_none_or(|(m, _, _)| b.mu_lower_bound > m) {
                best = Some((b.mu_lower_bound, up, t));
            }
        }
    }
    let (_, up, t) = best.ok_or_else(|| AuditError::TooFewSamples("no thresholds".into()))?;
    let (fp, nfp, fnn, nfn) = counts(&ex, &exp, t, up);
    Ok((mu_lower_bound(fp, nfp, fnn, nfn, alpha)?, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tradeoff point of the Gaussian test at threshold t between N(μ, 1) and N(0, 1):
    /// FPR = Q(t), FNR = Φ(t − μ) recovers μ.
    #[test]
    fn tradeoff_point_of_a_gaussian_pair_recovers_mu() {
        let (mu, t) = (1.3, 0.4);
        let fpr = 1.0 - norm_cdf(t);
        let fnr = norm_cdf(t - mu);
        assert!((mu_from_tradeoff(fpr, fnr).unwrap() - mu).abs() < 1e-12);
        assert!((tradeoff_fnr(mu, fpr).unwrap() - fnr).abs() < 1e-14);
    }

    /// ε(μ, δ) inverts δ(μ, ε).
    #[test]
    fn epsilon_and_delta_are_inverse() {
        let e = epsilon_for_mu(0.8, 1e-5).unwrap();
        assert!((delta_for_mu(0.8, e).unwrap() - 1e-5).abs() < 1e-12);
        assert_eq!(epsilon_for_mu(-1.0, 1e-5).unwrap(), 0.0);
    }

    #[test]
    fn bound_is_below_the_point_estimate() {
        let b = mu_lower_bound(1000, 10000, 3000, 10000, 0.05).unwrap();
        assert!(b.mu_lower_bound < mu_from_tradeoff(0.1, 0.3).unwrap());
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(mu_from_tradeoff(0.0, 0.5).is_err());
        assert!(mu_from_tradeoff(0.5, f64::NAN).is_err());
        assert!(split_mu_lower_bound(&[1.0], &[1.0, 2.0], 0.05).is_err());
    }
}
