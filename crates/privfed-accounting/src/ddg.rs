//! The distributed discrete Gaussian (DDG; Kairouz, Liu and Steinke, "The Distributed Discrete
//! Gaussian Mechanism for Federated Learning with Secure Aggregation", ICML 2021): paper 001's
//! baseline. Each of `n` clients adds `N_ℤ(0, σ_local²)` to every coordinate of its integer
//! vector; the sum of discrete Gaussians is not exactly a discrete Gaussian, and `τ` bounds the
//! difference.
//!
//! RDP of the sum (their Prop. 14 / eq. 17, in the form their reference code uses), with the
//! central standard deviation `σ = √n·σ_local` and the ℓ1/ℓ2 sensitivities of one client's
//! integer vector in `d` coordinates, `r₂ = Δ₂/σ`, `r₁ = Δ₁/σ`:
//! `ε(α) = min( α/2·r₂² + τ·d,  α/2·(r₂² + 2·r₁·τ + τ²·d),  α/2·(r₂ + √d·τ)² )`, with
//! `τ = 10·Σ_{k=1}^{n−1} exp(−2π²σ_local²·k/(k+1))` (their Thm. 1). All in the integer domain.

use crate::error::{AccountingError, Result, check_positive};
use std::f64::consts::PI;

/// `τ = 10·Σ_{k=1}^{n−1} e^{−2π²σ_local²·k/(k+1)}` for `n` clients each adding
/// `N_ℤ(0, σ_local²)` (integer domain). `0` for one client.
pub fn ddg_tau(clients: u64, local_sigma: f64) -> Result<f64> {
    check_positive("local_sigma", local_sigma)?;
    if clients == 0 {
        return Err(AccountingError::invalid(
            "clients",
            0.0,
            "must be at least 1",
        ));
    }
    let a = 2.0 * PI * PI * local_sigma * local_sigma;
    let mut tau = 0.0;
    for k in 1..clients {
        let term = (-a * k as f64 / (k as f64 + 1.0)).exp();
        tau += term;
        // Terms only grow towards e^{−a}; stop summing once they cannot change the total.
        if term == 0.0 && k > 1 {
            break;
        }
    }
    Ok(10.0 * tau)
}

/// The DDG RDP bound at order `α > 1` (module docs): `sigma` is the central standard deviation,
/// `l1`, `l2` one client's sensitivities, `tau` from [`ddg_tau`], `dim` the number of
/// coordinates.
pub fn ddg_rdp_bound(sigma: f64, l1: f64, l2: f64, tau: f64, dim: f64, alpha: f64) -> f64 {
    let r2 = l2 / sigma;
    let r1 = l1 / sigma;
    let t1 = alpha / 2.0 * r2 * r2 + tau * dim;
    let t2 = alpha / 2.0 * (r2 * r2 + 2.0 * r1 * tau + tau * tau * dim);
    let t3 = alpha / 2.0 * (r2 + dim.sqrt() * tau).powi(2);
    t1.min(t2).min(t3)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// τ against its sum written out term by term (n = 10, σ_local = 0.5: the terms
    /// e^{−π²/2·k/(k+1)} of the authors' `ddgauss_epsilon` loop), τ → 0 for large σ_local, where
    /// the bound is the Gaussian's, and the bound against each of its three branches.
    #[test]
    fn tau_and_bound_by_hand() {
        let tau = ddg_tau(10, 0.5).unwrap();
        let want: f64 = 10.0
            * (1..10)
                .map(|k| (-(PI * PI / 2.0) * k as f64 / (k as f64 + 1.0)).exp())
                .sum::<f64>();
        assert!((tau - want).abs() < 1e-15, "{tau} vs {want}");
        assert_eq!(ddg_tau(1, 3.0).unwrap(), 0.0);
        // Large σ_local: τ vanishes and the bound is the Gaussian's α·r₂²/2.
        let tau = ddg_tau(100, 10.0).unwrap();
        assert!(tau < 1e-300, "{tau}");
        let g = ddg_rdp_bound(20.0, 50.0, 5.0, tau, 1024.0, 8.0);
        assert!((g - 8.0 * 0.0625 / 2.0).abs() < 1e-15, "{g}");
        // Each branch can be the minimum; the result never exceeds any branch.
        let (s, l1, l2, t, d, a) = (3.0, 40.0, 4.0, 0.01, 256.0, 4.0);
        let b = ddg_rdp_bound(s, l1, l2, t, d, a);
        let r2: f64 = l2 / s;
        assert!(b <= a / 2.0 * r2 * r2 + t * d);
        assert!(b <= a / 2.0 * (r2 + d.sqrt() * t).powi(2));
        assert!(b >= a / 2.0 * r2 * r2);
        assert!(ddg_tau(0, 1.0).is_err());
        assert!(ddg_tau(3, 0.0).is_err());
    }

    /// With τ = 0 the DDG event is accounted exactly like the Gaussian with noise multiplier
    /// σ/Δ₂, sampled or not; τ > 0 only costs more.
    #[test]
    fn accountant_reduces_to_the_gaussian_when_tau_vanishes() {
        use crate::{DpEvent, RdpAccountant};
        let eps = |e: DpEvent| {
            let mut a = RdpAccountant::new();
            a.compose(&DpEvent::SelfComposed {
                event: Box::new(e),
                count: 50,
            })
            .unwrap();
            a.get_epsilon(1e-6).unwrap()
        };
        let ddg = |tau: f64| DpEvent::DistributedDiscreteGaussian {
            sigma: 12.0,
            l1_sensitivity: 30.0,
            l2_sensitivity: 6.0,
            tau,
            dim: 128,
        };
        let gauss = DpEvent::Gaussian {
            noise_multiplier: 2.0,
        };
        assert!((eps(ddg(0.0)) - eps(gauss.clone())).abs() < 1e-12);
        assert!(eps(ddg(1e-3)) > eps(ddg(0.0)));
        // Poisson-sampled: the generic (Zhu–Wang) amplification is never below the exact
        // subsampled Gaussian's.
        let sampled = |e: DpEvent| DpEvent::PoissonSampled {
            rate: 0.05,
            event: Box::new(e),
        };
        let (d, g) = (eps(sampled(ddg(0.0))), eps(sampled(gauss)));
        assert!(d >= g - 1e-12 && d < eps(ddg(0.0)), "{d} vs exact {g}");
    }
}
