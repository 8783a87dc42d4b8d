//! The Skellam mechanism (paper 001; docs/ALGORITHMS.md §2.1–2.2): the RDP bound and the exact
//! one-dimensional pmf, RDP and privacy-loss atoms.

use crate::error::{AccountingError, Result, check_positive};
use privfed_special::log_sum_exp;

/// RDP bound of adding `Sk(μ)` to each coordinate of an integer query with ℓ1 sensitivity `Δ₁`
/// and ℓ2 sensitivity `Δ₂` (001 Thm. 3.5 / Cor. 3.6 / Cor. 4.1, docs/ALGORITHMS.md §2.2, exactly as
/// given there; integer `α > 1`, all quantities in the integer domain):
/// `ε(α) = α·Δ₂²/(2μ) + min( ((2α−1)·Δ₂² + 6·Δ₁)/(4μ²), 3·Δ₁/(2μ) )`.
///
/// Callers must pass an integer order; non-integer orders should be rounded **up** (RDP is
/// non-decreasing in α), which is what the accountants do.
pub fn skellam_rdp_bound(mu: f64, l1: f64, l2: f64, alpha: f64) -> f64 {
    let gauss = alpha * l2 * l2 / (2.0 * mu);
    let extra_a = ((2.0 * alpha - 1.0) * l2 * l2 + 6.0 * l1) / (4.0 * mu * mu);
    let extra_b = 3.0 * l1 / (2.0 * mu);
    gauss + extra_a.min(extra_b)
}

/// `ln pmf(k)` of `Sk(μ) = Poisson(μ/2) − Poisson(μ/2)` for `k = 0..=kmax` (the pmf is
/// symmetric), from `pmf(k) = e^{−μ} I_k(μ)`: the ratios `r_k = I_k/I_{k−1} = 1/(2k/μ + r_{k+1})`
/// by the backward recurrence (stable for the minimal solution `I_k`), started at 0 far beyond
/// `kmax`, then normalized by `Σ_k pmf(k) = 1` — no Bessel function evaluation, no overflow.
pub fn skellam_ln_pmf(mu: f64, kmax: usize) -> Result<Vec<f64>> {
    check_positive("mu", mu)?;
    // Start far enough that I_K/I_kmax is negligible (e^{-800} relative at the normal scale).
    let start = kmax + 60 + (40.0 * mu.sqrt()).ceil() as usize;
    if start > 50_000_000 {
        return Err(AccountingError::invalid(
            "mu",
            mu,
            "too large for the exact Skellam pmf (table over 5e7 entries)",
        ));
    }
    let mut r = vec![0.0f64; start + 2];
    for k in (1..=start).rev() {
        r[k] = 1.0 / (2.0 * k as f64 / mu + r[k + 1]);
    }
    // ln(I_k/I_0) = Σ_{j≤k} ln r_j.
    let mut ln_rel = Vec::with_capacity(start + 1);
    let mut acc = 0.0;
    ln_rel.push(0.0);
    for &rk in r.iter().take(start + 1).skip(1) {
        acc += rk.ln();
        ln_rel.push(acc);
    }
    // Σ_{k∈ℤ} I_|k|/I_0 = 1 + 2 Σ_{k≥1}.
    let tail = log_sum_exp(&ln_rel[1..]);
    let ln_total = privfed_special::log_add_exp(0.0, std::f64::consts::LN_2 + tail);
    ln_rel.truncate(kmax + 1);
    Ok(ln_rel.into_iter().map(|v| v - ln_total).collect())
}

/// Exact Rényi divergence `D_α(Δ + Sk(μ) ‖ Sk(μ))` of the one-dimensional Skellam mechanism
/// with integer sensitivity `Δ`, by summation over the pmf (docs/ALGORITHMS.md §2.2):
/// `1/(α−1)·ln Σ_k pmf(k−Δ)^α pmf(k)^{1−α}` for real `α > 1`. The sum is taken over a window
/// that covers the peak of the summand (near `k = αΔ`) plus 40 standard deviations.
pub fn skellam_exact_rdp_1d(mu: f64, sensitivity: u64, alpha: f64) -> Result<f64> {
    check_positive("mu", mu)?;
    if sensitivity == 0 {
        return Err(AccountingError::invalid(
            "sensitivity",
            0.0,
            "must be a positive integer",
        ));
    }
    if !(alpha > 1.0 && alpha.is_finite()) {
        return Err(AccountingError::invalid(
            "alpha",
            alpha,
            "must be finite and > 1",
        ));
    }
    let d = sensitivity as f64;
    let kmax = (alpha * d + 40.0 * mu.sqrt() + 60.0 + d).ceil() as usize;
    let lp = skellam_ln_pmf(mu, kmax)?;
    let ln_p = |k: i64| lp[k.unsigned_abs() as usize];
    let km = kmax as i64;
    let s = sensitivity as i64;
    let terms: Vec<f64> = ((-km + s)..=km)
        .map(|k| alpha * ln_p(k - s) + (1.0 - alpha) * ln_p(k))
        .collect();
    Ok((log_sum_exp(&terms) / (alpha - 1.0)).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmf_matches_poisson_difference() {
        // Independent computation: convolve two Poisson(μ/2) pmfs directly.
        let mu: f64 = 3.0;
        let lam = mu / 2.0;
        let pois: Vec<f64> = (0..80)
            .map(|n| (-lam + n as f64 * lam.ln() - libm::lgamma(n as f64 + 1.0)).exp())
            .collect();
        let lp = skellam_ln_pmf(mu, 20).unwrap();
        for k in 0..20usize {
            let direct: f64 = (0..60).map(|n| pois[n + k] * pois[n]).sum();
            assert!((lp[k].exp() / direct - 1.0).abs() < 1e-12, "k={k}");
        }
    }

    #[test]
    fn exact_rdp_fixtures_and_bound() {
        // docs/ALGORITHMS.md §2.2 checked values.
        let cases = [
            (2.0, 2.0, 0.475421, 1.0625),
            (10.0, 4.0, 0.195408, 0.2325),
            (100.0, 16.0, 0.079540, 0.080925),
        ];
        for (mu, a, exact, bound) in cases {
            let e = skellam_exact_rdp_1d(mu, 1, a).unwrap();
            assert!((e - exact).abs() < 2e-6, "μ={mu} α={a}: {e}");
            let b = skellam_rdp_bound(mu, 1.0, 1.0, a);
            assert!((b - bound).abs() < 1e-12, "{b}");
        }
        let e = skellam_exact_rdp_1d(2.0, 1, 16.0).unwrap();
        assert!((e - 1.496).abs() < 1e-3, "{e}");
    }

    #[test]
    fn bound_is_never_below_exact() {
        // The §2.2 bound vs the exact 1-D RDP, Δ₁ = Δ₂ = Δ (the 1-D case), over a grid.
        for &mu in &[0.5, 1.0, 2.0, 5.0, 20.0, 100.0, 1000.0] {
            for d in [1u64, 2, 5] {
                for a in [2u64, 3, 4, 8, 16, 32, 64] {
                    let df = d as f64;
                    let exact = skellam_exact_rdp_1d(mu, d, a as f64).unwrap();
                    let bound = skellam_rdp_bound(mu, df, df, a as f64);
                    assert!(
                        bound >= exact,
                        "μ={mu} Δ={d} α={a}: bound {bound} < exact {exact}"
                    );
                }
            }
        }
    }
}
