//! Deployment analyses: Draw-and-Discard adversaries (paper 003 §IV, docs/ALGORITHMS.md §4.3),
//! reconstruction protection (paper 000 §2.3, docs/ALGORITHMS.md §1.6) and the analytic Gaussian
//! mechanism (Balle & Wang 2018, docs/ALGORITHMS.md §2.5).

use serde::Serialize;

use crate::error::{AccountingError, Result, check_delta, check_nonnegative, check_positive};

/// Privacy of one client update in a Draw-and-Discard deployment against the three adversaries
/// of paper 003 §IV (docs/ALGORITHMS.md §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DrawAndDiscardReport {
    /// Adversary I (channel listener, sees the model sent and the one returned): the client's
    /// local ε.
    pub adversary_i_epsilon: f64,
    /// Adversary II (internal threat, sees the k instances but not which one was the
    /// pre-image): expected privacy loss `((k−1)/k)·(ε/2)` (003 Lemma 1).
    pub adversary_ii_expected_loss: f64,
    /// Adversary III (opportunistic, sees an instance after about T further updates): the
    /// probability `1 − 1/k` that the contribution was discarded (paper's approximation).
    pub adversary_iii_discard_probability: f64,
    /// Adversary III otherwise: `ε_T = min(ε, (ε/√(2T))·√(ln(1/(2δ_T))))` at `δ_T`. The second
    /// term is the paper's noise-accumulation approximation (not a formal bound). The cap at the
    /// local ε is always valid: what adversary III sees is a post-processing of the client's
    /// ε-LDP update, and post-processing never costs more than the local guarantee. So at small
    /// `T` (where the approximation exceeds ε: `T < ln(1/(2δ_T))/2`, i.e. `T ≤ 8` at
    /// `δ_T = 10⁻⁸`) and at `T = 0` (the instance right after the contribution) it is ε.
    pub adversary_iii_epsilon: f64,
    /// The δ_T at which `adversary_iii_epsilon` holds.
    pub adversary_iii_delta: f64,
}

/// Draw-and-Discard analysis for local ε, `k` instances, `t_updates` further updates of the
/// observed instance and `delta_t` ∈ (0, ½) (paper 003 §IV, docs/ALGORITHMS.md §4.3; II and III
/// are the paper's expected-loss and approximate statements, III capped at ε as explained at
/// [`DrawAndDiscardReport::adversary_iii_epsilon`]). This is the one home of the analysis: both
/// `privfed analyze ddml` and the simulator's report (`privfed ddml simulate`) call it. Errors
/// unless ε > 0 is finite, `k ≥ 1` and `δ_T ∈ (0, ½)`; any `T ≥ 0` is accepted.
pub fn draw_and_discard(
    local_epsilon: f64,
    k: u64,
    t_updates: u64,
    delta_t: f64,
) -> Result<DrawAndDiscardReport> {
    check_positive("local_epsilon", local_epsilon)?;
    if k == 0 {
        return Err(AccountingError::invalid(
            "k",
            0.0,
            "need at least one instance",
        ));
    }
    if !(delta_t > 0.0 && delta_t < 0.5) {
        return Err(AccountingError::invalid(
            "delta_t",
            delta_t,
            "must lie in (0, 0.5)",
        ));
    }
    let kf = k as f64;
    // T = 0: no further noise has accumulated; the observation is the client's update itself.
    let eps_t = if t_updates == 0 {
        local_epsilon
    } else {
        local_epsilon / (2.0 * t_updates as f64).sqrt() * (1.0 / (2.0 * delta_t)).ln().sqrt()
    };
    Ok(DrawAndDiscardReport {
        adversary_i_epsilon: local_epsilon,
        adversary_ii_expected_loss: (kf - 1.0) / kf * local_epsilon / 2.0,
        adversary_iii_discard_probability: 1.0 - 1.0 / kf,
        adversary_iii_epsilon: eps_t.min(local_epsilon),
        adversary_iii_delta: delta_t,
    })
}

/// `ln P₀` for the spherical cap: `P₀ = P(⟨ĥ, Y⟩ ≥ t) = ½·I_{1−t²}((k−1)/2, ½)` for `Y`
/// uniform on `S^{k−1}` (docs/ALGORITHMS.md §1.6), `k ≥ 2`, `t ∈ (0, 1)`. The incomplete beta is a
/// continued fraction with a log-space prefactor, so caps far below `f64`'s range (e.g.
/// `k = 10⁶`, `t = 0.5`, `ln P₀ ≈ −1.4·10⁵`) are returned in log form.
pub fn ln_cap_probability(k: u64, t: f64) -> Result<f64> {
    if k < 2 {
        return Err(AccountingError::invalid(
            "k",
            k as f64,
            "dimension must be at least 2",
        ));
    }
    if !(t > 0.0 && t < 1.0) {
        return Err(AccountingError::invalid("t", t, "must lie in (0, 1)"));
    }
    // x = 1 − t² and 1 − x = t² passed separately, so neither loses relative accuracy.
    let a = (k as f64 - 1.0) / 2.0;
    let ln_i = privfed_special::ln_beta_inc_xy(a, 0.5, (1.0 - t) * (1.0 + t), t * t);
    if ln_i.is_nan() {
        return Err(AccountingError::Numerical(format!(
            "ln I_x({a}, 1/2) did not converge at t = {t}"
        )));
    }
    Ok(ln_i - std::f64::consts::LN_2)
}

/// Result of the reconstruction-protection calculator.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReconstructionReport {
    /// `ln P₀`, the prior probability of the reconstruction event (cap probability).
    pub ln_prior_probability: f64,
    /// `P₀` (may underflow to 0; see `ln_prior_probability`).
    pub prior_probability: f64,
    /// `min(0, ε + ln P₀)`: ln of the bound on the success probability.
    pub ln_success_bound: f64,
    /// `min(1, e^ε·P₀)` (000 Lemma 2.2).
    pub success_bound: f64,
    /// The ε used.
    pub epsilon: f64,
}

/// Bound on the probability that an adversary reconstructs `ĥ` with `⟨ĥ, Y⟩ ≥ t` from the output
/// of an ε-DP randomizer, for data uniform on `S^{k−1}` (000 Lemmas 2.1–2.2, docs/ALGORITHMS.md §1.6):
/// `min(1, e^ε·P₀)`.
pub fn reconstruction_bound(k: u64, t: f64, epsilon: f64) -> Result<ReconstructionReport> {
    check_nonnegative("epsilon", epsilon)?;
    let lp = ln_cap_probability(k, t)?;
    let lb = (epsilon + lp).min(0.0);
    Ok(ReconstructionReport {
        ln_prior_probability: lp,
        prior_probability: lp.exp(),
        ln_success_bound: lb,
        success_bound: lb.exp(),
        epsilon,
    })
}

/// The largest ε for which the reconstruction bound is at most `target` ∈ (0, 1]:
/// `ε = ln(target) − ln P₀` (0 if even ε = 0 exceeds the target).
pub fn max_epsilon_for_reconstruction(k: u64, t: f64, target: f64) -> Result<f64> {
    if !(target > 0.0 && target <= 1.0) {
        return Err(AccountingError::invalid(
            "target",
            target,
            "must lie in (0, 1]",
        ));
    }
    let lp = ln_cap_probability(k, t)?;
    Ok((target.ln() - lp).max(0.0))
}

/// Analytic Gaussian mechanism (Balle & Wang 2018; docs/ALGORITHMS.md §2.5): the smallest σ with
/// `Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ) ≤ δ`. The mechanism owns its calibration: this is
/// [`privfed_mechanisms::gaussian::analytic_gaussian_sigma`] (log-space δ, bisection to a
/// relative width of `4·2^{−52}`, σ rounded up) with its errors as [`AccountingError`]s.
pub fn analytic_gaussian_sigma(epsilon: f64, delta: f64, sensitivity: f64) -> Result<f64> {
    check_positive("epsilon", epsilon)?;
    check_delta(delta)?;
    check_positive("sensitivity", sensitivity)?;
    Ok(privfed_mechanisms::gaussian::analytic_gaussian_sigma(
        epsilon,
        delta,
        sensitivity,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draw_and_discard_formulas() {
        let r = draw_and_discard(3f64.ln() * 2.0, 10, 100, 1e-8).unwrap();
        let e = 3f64.ln() * 2.0;
        assert_eq!(r.adversary_i_epsilon, e);
        assert!((r.adversary_ii_expected_loss - 0.9 * e / 2.0).abs() < 1e-15);
        assert!((r.adversary_iii_discard_probability - 0.9).abs() < 1e-15);
        // ≈ 3ε/√T at δ_T = 1e-8 (docs/ALGORITHMS.md §4.3).
        assert!((r.adversary_iii_epsilon / (3.0 * e / 10.0) - 1.0).abs() < 0.01);
        assert!(draw_and_discard(1.0, 0, 1, 1e-8).is_err());
        assert!(draw_and_discard(f64::NAN, 3, 1, 1e-8).is_err());
        assert!(draw_and_discard(1.0, 3, 1, 0.7).is_err());
    }

    /// At small T the approximation exceeds ε and is capped there; T = 0 is ε (not +∞).
    #[test]
    fn draw_and_discard_small_t_and_t_zero() {
        let e = 2.0;
        // At δ_T = 1e-8, √(ln(5e7)/(2T)) ≥ 1 exactly for T ≤ 8.
        for t in [0u64, 1, 2, 8] {
            let r = draw_and_discard(e, 10, t, 1e-8).unwrap();
            assert_eq!(r.adversary_iii_epsilon, e, "T = {t}");
        }
        let r9 = draw_and_discard(e, 10, 9, 1e-8).unwrap();
        let approx = e / 18f64.sqrt() * 5e7f64.ln().sqrt();
        assert_eq!(r9.adversary_iii_epsilon, approx);
        assert!(approx < e);
        // Not monotone the wrong way: more further updates never cost more.
        let mut last = f64::INFINITY;
        for t in 0..40 {
            let v = draw_and_discard(e, 10, t, 1e-8)
                .unwrap()
                .adversary_iii_epsilon;
            assert!(v.is_finite() && v <= last && v <= e, "T = {t}: {v}");
            last = v;
        }
    }

    #[test]
    fn cap_probability_simple_cases() {
        // k = 3: Y·e₁ is uniform on [−1, 1] (Archimedes), so P₀ = (1 − t)/2.
        for t in [0.1, 0.5, 0.9] {
            let v = ln_cap_probability(3, t).unwrap().exp();
            assert!((v - (1.0 - t) / 2.0).abs() < 1e-14, "{t}: {v}");
        }
        assert!(ln_cap_probability(1, 0.5).is_err());
        assert!(ln_cap_probability(10, 1.0).is_err());
        assert!(ln_cap_probability(10, f64::NAN).is_err());
    }

    #[test]
    fn reconstruction_both_ways() {
        let r = reconstruction_bound(1000, 0.5, 50.0).unwrap();
        assert!(r.success_bound < 1e-40);
        let e = max_epsilon_for_reconstruction(1000, 0.5, 1e-3).unwrap();
        let back = reconstruction_bound(1000, 0.5, e).unwrap();
        assert!((back.success_bound / 1e-3 - 1.0).abs() < 1e-9);
        assert!(max_epsilon_for_reconstruction(1000, 0.5, 0.0).is_err());
    }

    #[test]
    fn analytic_gaussian_matches_dp_accounting() {
        // Reference values from dp_accounting 0.6.0 `gaussian_mechanism.get_sigma_gaussian`
        // (an independent implementation of Balle & Wang 2018, tol 1e-12).
        for (eps, delta, want) in [
            (1.0, 1e-5, 3.730_631_634_815_937_4),
            (0.1, 1e-6, 36.304_690_426_195_194),
            (5.0, 1e-8, 1.139_012_781_604_200_6),
            (20.0, 1e-10, 0.375_145_426_171_787_8),
        ] {
            let s = analytic_gaussian_sigma(eps, delta, 1.0).unwrap();
            assert!((s / want - 1.0).abs() < 1e-9, "ε={eps}: {s} vs {want}");
        }
        // Sensitivity scales σ linearly.
        let s2 = analytic_gaussian_sigma(1.0, 1e-5, 2.0).unwrap();
        assert!((s2 / 3.730_631_634_815_937_4 / 2.0 - 1.0).abs() < 1e-9);
        assert!(analytic_gaussian_sigma(0.0, 1e-5, 1.0).is_err());
        assert!(analytic_gaussian_sigma(1.0, 0.0, 1.0).is_err());
    }
}
