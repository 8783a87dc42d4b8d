//! The one-run audit against a Gaussian (μ-GDP) claim: Mahloujifar, Melis, Chaudhuri 2025,
//! "Auditing f-Differential Privacy in One Run" (ICML 2025, arXiv 2410.22235), specialised to the
//! Gaussian tradeoff curve (docs/ALGORITHMS.md "Empirical privacy auditing", §A.4).
//!
//! The game is [`crate::one_run`]'s: `m` canaries, each included independently with probability
//! ½; the auditor makes `k` guesses, `c` of them right. Steinke et al. bound the number of correct
//! guesses through an (ε, δ) claim; this analysis uses the whole tradeoff curve of an f-DP claim
//! instead, which is tighter for mechanisms whose curve is Gaussian (the Gaussian mechanism,
//! DP-SGD, FL with central DP). For the μ-GDP curve the inverse blow-up function is
//! `f̄(x) = Φ(Φ⁻¹(x) − μ)`, and the observation "`c` correct out of `k`" is impossible for a μ-GDP
//! mechanism at significance `α` when the paper's recursion (their reconstruction bound with a
//! cap) ends with `r + h > k/m`:
//!
//! `r ← α·c/m`, `h ← α·(k − c)/m`; for `i = c − 1, …, 0`:
//! `h′ = max(h, f̄(r))`, `r′ = min(1, r + i/(k − i)·(h′ − h))`, stopping once `h′ = h`.
//!
//! [`mu_lower_bound`] is the largest μ so rejected (a stronger claim, smaller μ, is rejected
//! whenever a weaker one is), a lower bound on the μ of any GDP guarantee the mechanism has, at
//! confidence `1 − α`. [`epsilon_lower_bound`] converts it to ε at δ with the Gaussian profile
//! ([`crate::gdp::epsilon_for_mu`]); as with [`crate::gdp`], that ε is a lower bound on the
//! mechanism's ε **only if its tradeoff curve is Gaussian**; for any other mechanism use
//! [`crate::one_run`], which assumes nothing about the curve.
//!
//! Checked against jax_privacy 2.0.0's implementation of the same analysis
//! (`_epsilon_one_run_fdp`) in `tests/it/reference.rs`.

use crate::error::{AuditError, Result, check_alpha, check_delta};
use crate::gdp::epsilon_for_mu;
use crate::one_run;
use privfed_special::{norm_cdf, norm_quantile};

/// [`crate::one_run`]'s count check, and at least one canary.
fn check_counts(m: u64, k: u64, c: u64) -> Result<()> {
    if m == 0 {
        return Err(AuditError::invalid("m", 0.0, "need at least one canary"));
    }
    one_run::check_counts(m, k, c)
}

/// `f̄(x) = Φ(Φ⁻¹(x) − μ)`, the inverse blow-up function of the μ-GDP tradeoff curve.
fn inverse_blow_up(mu: f64, x: f64) -> f64 {
    if x <= 0.0 {
        0.0
    } else if x >= 1.0 {
        1.0
    } else {
        norm_cdf(norm_quantile(x) - mu)
    }
}

/// Whether observing `c` correct guesses out of `k` with `m` canaries rejects the claim that the
/// mechanism is μ-GDP with respect to each canary, at significance `alpha` (see the
/// [module docs](self)).
pub fn rejects(m: u64, k: u64, c: u64, mu: f64, alpha: f64) -> Result<bool> {
    check_counts(m, k, c)?;
    check_alpha(alpha)?;
    if !(mu >= 0.0 && mu.is_finite()) {
        return Err(AuditError::invalid("mu", mu, "must be finite and ≥ 0"));
    }
    let mf = m as f64;
    // The paper's r (mass of correct guesses) and h (mass of wrong ones), scaled by α.
    let mut r = alpha * c as f64 / mf;
    let mut h = alpha * (k - c) as f64 / mf;
    for i in (0..c).rev() {
        let h_next = h.max(inverse_blow_up(mu, r));
        if h_next == h {
            break;
        }
        r = (r + (i as f64 / (k - i) as f64) * (h_next - h)).min(1.0);
        h = h_next;
    }
    Ok(r + h > k as f64 / mf)
}

/// The largest `μ ≥ 0` that [`rejects`] rejects: a lower bound on μ at confidence `1 − alpha` (0
/// when even `μ = 0`, perfect privacy, is not rejected). Bisection to an absolute width of
/// `10⁻⁹`, returning the lower end; capped at `μ = 64` (a Gaussian curve with μ = 64 is
/// indistinguishable from no privacy at any count this game can produce).
pub fn mu_lower_bound(m: u64, k: u64, c: u64, alpha: f64) -> Result<f64> {
    check_counts(m, k, c)?;
    check_alpha(alpha)?;
    const CAP: f64 = 64.0;
    Ok(one_run::largest_rejected(CAP, |mu| rejects(m, k, c, mu, alpha))?.min(CAP))
}

/// ε at `delta` of the Gaussian curve at [`mu_lower_bound`]: a lower bound on ε at δ for a
/// mechanism whose tradeoff curve is Gaussian (see the [module docs](self)). `delta` must be
/// positive (a Gaussian curve with μ > 0 has no finite ε at δ = 0).
pub fn epsilon_lower_bound(m: u64, k: u64, c: u64, delta: f64, alpha: f64) -> Result<f64> {
    check_delta(delta)?;
    if delta == 0.0 {
        return Err(AuditError::invalid(
            "delta",
            delta,
            "a Gaussian (GDP) claim has no finite ε at δ = 0; give δ > 0",
        ));
    }
    epsilon_for_mu(mu_lower_bound(m, k, c, alpha)?, delta)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chance_level_guesses_reject_nothing() {
        // Half right is what a blind guesser gets: no μ is rejected.
        assert_eq!(mu_lower_bound(1000, 200, 100, 0.05).unwrap(), 0.0);
        assert_eq!(
            epsilon_lower_bound(1000, 200, 100, 1e-5, 0.05).unwrap(),
            0.0
        );
    }

    #[test]
    fn more_correct_guesses_give_a_larger_bound() {
        let mut last = 0.0;
        for c in [120, 140, 160, 180, 200] {
            let mu = mu_lower_bound(1000, 200, c, 0.05).unwrap();
            assert!(mu > last, "c = {c}: μ_lb = {mu} after {last}");
            last = mu;
        }
    }

    #[test]
    fn the_bound_is_where_rejection_stops() {
        let mu = mu_lower_bound(1000, 100, 90, 0.05).unwrap();
        assert!(mu > 0.0);
        assert!(rejects(1000, 100, 90, mu, 0.05).unwrap());
        assert!(!rejects(1000, 100, 90, mu + 1e-6, 0.05).unwrap());
    }

    #[test]
    fn a_gaussian_claim_is_tighter_than_an_epsilon_delta_claim() {
        // The same counts: the f-DP analysis uses the whole curve, so its ε bound is larger
        // (jax_privacy gives 2.456 against 1.626 for these counts).
        let gdp = epsilon_lower_bound(1000, 100, 90, 1e-5, 0.05).unwrap();
        let plain = crate::one_run::epsilon_lower_bound(1000, 100, 90, 1e-5, 0.05).unwrap();
        assert!(gdp > plain, "GDP {gdp} ≤ (ε, δ) {plain}");
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        assert!(rejects(10, 11, 1, 1.0, 0.05).is_err());
        assert!(rejects(10, 5, 6, 1.0, 0.05).is_err());
        assert!(rejects(10, 5, 3, -1.0, 0.05).is_err());
        assert!(rejects(10, 5, 3, f64::NAN, 0.05).is_err());
        assert!(rejects(10, 5, 3, 1.0, 0.0).is_err());
        assert!(epsilon_lower_bound(10, 5, 3, 0.0, 0.05).is_err());
        assert!(mu_lower_bound(0, 0, 0, 0.05).is_err());
    }
}
