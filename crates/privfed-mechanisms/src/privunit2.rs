//! **PrivUnit2**: spherical-cap randomizer for unit vectors (paper 000 Alg. 1; paper 002 Alg. 1;
//! docs/ALGORITHMS.md §1.1).
//!
//! With probability `p` the output direction `V` is uniform on the cap `{v : ⟨v,u⟩ ≥ γ}`, otherwise
//! on its complement; the output is `Ẑ = V/m`, unbiased for the input `u`.
//!
//! * `α = (d−1)/2`, `τ = (1+γ)/2`, cap probability `q = P(⟨U,u⟩ ≥ γ) = 1 − I_τ(α, α)` for `U`
//!   uniform on the sphere;
//! * `K = (1−γ²)^α / ((d−1)·2^{d−2}·B(α,α)) = E[⟨U,u⟩·1{⟨U,u⟩ ≥ γ}]`, computed in log space;
//! * `m = K·(p/q − (1−p)/(1−q))`;
//! * exact privacy (paper 002 Thm. 1): `ε = ln( p(1−q) / ((1−p)q) )`;
//! * error: `‖Ẑ‖ = 1/m`, so `E‖Ẑ − u‖² = 1/m² − 1` for every input.
//!
//! Sampling is exact without rejection over the whole sphere: the inner product `t = ⟨V,u⟩` is
//! drawn from its law truncated to the cap or complement ([`SphereCapSampler`]), then
//! `V = t·u + √(1−t²)·w` with `w` uniform on the unit sphere orthogonal to `u`.
//!
//! Two parameterizations: [`PrivUnit2::optimized`] (the default: exact ε, optimal budget split —
//! the optimal unbiased randomizer of paper 002) and [`PrivUnit2::paper000`] (the sufficient
//! conditions 16a/16b of paper 000 Thm. 1, for reproducing that paper).

use crate::domain::Domain;
use crate::error::{MechanismError, Result, check_epsilon_budget, check_sphere_dim};
use crate::rng::{StreamKey, Threads};
use crate::sampling::{SphereCapSampler, combine_blocks, gaussian_with_dot_blocks};
use crate::special::{
    self, ln_one_minus_exp as ln_1m_exp, logistic, minimize_on_interval, softplus,
};
use crate::{CryptoRng, Guarantee, LocalRandomizer, Rng, check_out_len};
use rand::RngExt;
use serde::Serialize;

/// How a [`PrivUnit2`]'s parameters were chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PrivUnit2Parameterization {
    /// `(γ, p)` given explicitly.
    Explicit,
    /// Exact ε with the budget split `ε₀` for `p` chosen to minimize the variance (paper 002).
    Optimized {
        /// The chosen split: `p = e^{ε₀}/(1+e^{ε₀})`.
        epsilon0: f64,
    },
    /// Paper 000: `p = e^{ε₀}/(1+e^{ε₀})` and γ the largest value meeting 16a or 16b for `ε − ε₀`.
    Paper000 {
        /// The requested total ε (the exact ε is computed and may be smaller).
        requested_epsilon: f64,
        /// The split for `p`.
        epsilon0: f64,
        /// Which sufficient condition gave γ (`"16a"` or `"16b"`).
        condition: &'static str,
    },
}

/// The PrivUnit2 randomizer (see the [module docs](self)).
#[derive(Debug, Clone, Serialize)]
pub struct PrivUnit2 {
    dim: usize,
    gamma: f64,
    p: f64,
    /// Cap probability `q` under the uniform law.
    q: f64,
    /// Scale `m`: the output is `V/m`.
    m: f64,
    epsilon: f64,
    parameterization: PrivUnit2Parameterization,
    #[serde(skip)]
    sampler: SphereCapSampler,
}

/// Exact quantities of PrivUnit2 at `(d, γ, p)`: `(ln q, ln m, ε)`.
fn exact_quantities(dim: usize, gamma: f64, p: f64) -> (f64, f64, f64) {
    let d = dim as f64;
    let alpha = (d - 1.0) / 2.0;
    let tau = (1.0 + gamma) / 2.0;
    let ln_q = special::ln_beta_inc_complement(alpha, alpha, tau);
    let ln_1mq = ln_1m_exp(ln_q);
    let ln_k = alpha * (-(gamma * gamma)).ln_1p()
        - (d - 1.0).ln()
        - (d - 2.0) * std::f64::consts::LN_2
        - special::ln_beta(alpha, alpha);
    let q = ln_q.exp();
    // m = K (p − q)/(q(1 − q)); p > q is checked by the caller.
    let ln_m = ln_k + (p - q).ln() - ln_q - ln_1mq;
    let epsilon = p.ln() - (-p).ln_1p() + ln_1mq - ln_q;
    (ln_q, ln_m, epsilon)
}

fn check_dim(dim: usize) -> Result<()> {
    check_sphere_dim(dim, "PrivUnit2")
}

impl PrivUnit2 {
    /// PrivUnit2 with explicit cap height `γ ∈ [0, 1)` and cap probability `p ∈ [½, 1)`; its
    /// exact ε is computed. Requires `d ≥ 2` and `p > q` (else the output would not be unbiased
    /// with a positive scale).
    pub fn new(dim: usize, gamma: f64, p: f64) -> Result<Self> {
        Self::build(dim, gamma, p, PrivUnit2Parameterization::Explicit)
    }

    fn build(
        dim: usize,
        gamma: f64,
        p: f64,
        parameterization: PrivUnit2Parameterization,
    ) -> Result<Self> {
        check_dim(dim)?;
        if !(gamma.is_finite() && (0.0..1.0).contains(&gamma)) {
            return Err(MechanismError::invalid(
                "gamma",
                gamma,
                "must lie in [0, 1)",
            ));
        }
        if !(p.is_finite() && (0.5..1.0).contains(&p)) {
            return Err(MechanismError::invalid("p", p, "must lie in [0.5, 1)"));
        }
        let (ln_q, ln_m, epsilon) = exact_quantities(dim, gamma, p);
        let q = ln_q.exp();
        if p <= q || q.is_nan() || !ln_m.is_finite() || !epsilon.is_finite() {
            return Err(MechanismError::Infeasible(format!(
                "PrivUnit2 with d = {dim}, γ = {gamma}, p = {p}: the cap probability {q:e} must be \
                 below p and the scale finite"
            )));
        }
        Ok(Self {
            dim,
            gamma,
            p,
            q,
            m: ln_m.exp(),
            epsilon,
            parameterization,
            sampler: SphereCapSampler::new(dim, gamma)?,
        })
    }

    /// The exact-ε PrivUnit2 with budget split `ε₀`: `p = e^{ε₀}/(1+e^{ε₀})`, and the cap chosen
    /// so that `q = 1/(1+e^{ε−ε₀})`, i.e. the exact privacy is `ε`. The computed ε never exceeds
    /// the request (p is adjusted to the cap actually obtained).
    pub fn with_budget_split(epsilon: f64, epsilon0: f64, dim: usize) -> Result<Self> {
        let epsilon = check_epsilon_budget(epsilon)?;
        check_dim(dim)?;
        if !(epsilon0.is_finite() && epsilon0 > 0.0 && epsilon0 < epsilon) {
            return Err(MechanismError::invalid(
                "epsilon0",
                epsilon0,
                format!("must lie in (0, ε) = (0, {epsilon})"),
            ));
        }
        let gamma = gamma_for_split(epsilon, epsilon0, dim)?;
        Self::with_gamma_exhausting(
            epsilon,
            gamma,
            dim,
            PrivUnit2Parameterization::Optimized { epsilon0 },
        )
    }

    /// Given γ, the largest `p` with exact privacy ≤ ε: `p/(1−p) = e^ε·q/(1−q)`.
    fn with_gamma_exhausting(
        epsilon: f64,
        gamma: f64,
        dim: usize,
        parameterization: PrivUnit2Parameterization,
    ) -> Result<Self> {
        let alpha = (dim as f64 - 1.0) / 2.0;
        let ln_q = special::ln_beta_inc_complement(alpha, alpha, (1.0 + gamma) / 2.0);
        let mut p = logistic(epsilon + ln_q - ln_1m_exp(ln_q));
        if p < 0.5 {
            return Err(MechanismError::Infeasible(format!(
                "cap height γ = {gamma} is too small for ε = {epsilon} at d = {dim}"
            )));
        }
        // Guarantee ε(γ, p) ≤ ε despite rounding: step p down by ulps if needed.
        for _ in 0..64 {
            let (_, _, eps) = exact_quantities(dim, gamma, p);
            if eps <= epsilon {
                break;
            }
            p = f64::from_bits(p.to_bits() - 1);
        }
        let mut mech = Self::build(dim, gamma, p, parameterization)?;
        if let PrivUnit2Parameterization::Optimized { epsilon0 } = &mut mech.parameterization {
            *epsilon0 = p.ln() - (-p).ln_1p();
        }
        Ok(mech)
    }

    /// **Optimized PrivUnit2** (paper 002): exact privacy ε and the budget split that minimizes
    /// the variance `1/m² − 1`, found by a grid over `ε₀ ∈ (0, ε)` refined by golden-section
    /// search. This is the optimal unbiased ε-LDP randomizer for unit vectors (paper 002).
    pub fn optimized(epsilon: f64, dim: usize) -> Result<Self> {
        let epsilon = check_epsilon_budget(epsilon)?;
        check_dim(dim)?;
        let var = |e0: f64| -> f64 {
            match Self::with_budget_split(epsilon, e0, dim) {
                Ok(m) => m.worst_case_variance(),
                Err(_) => f64::INFINITY,
            }
        };
        let e0 = minimize_on_interval(var, 0.0, epsilon, 40, 1e-7 * epsilon.max(1.0));
        let best = Self::with_budget_split(epsilon, e0, dim)?;
        let (eps0, gamma) = (e0, best.gamma);
        Self::with_gamma_exhausting(
            epsilon,
            gamma,
            dim,
            PrivUnit2Parameterization::Optimized { epsilon0: eps0 },
        )
    }

    /// **Paper 000's parameterization** (Thm. 1): `p = e^{ε₀}/(1+e^{ε₀})` and γ the largest cap
    /// height meeting one of the sufficient conditions for `ε₁ = ε − ε₀`:
    /// (16a) `γ ≤ (e^{ε₁}−1)/(e^{ε₁}+1)·√(π/(2(d−1)))`, or
    /// (16b) `ε₁ ≥ ½ ln d + ln 6 − ((d−1)/2)·ln(1−γ²) + ln γ` with `γ ≥ √(2/d)`.
    /// The exact ε of the result is computed and is at most the requested ε (usually below it:
    /// these conditions are sufficient, not tight).
    pub fn paper000(epsilon: f64, epsilon0: f64, dim: usize) -> Result<Self> {
        let epsilon = check_epsilon_budget(epsilon)?;
        check_dim(dim)?;
        if !(epsilon0.is_finite() && epsilon0 > 0.0 && epsilon0 < epsilon) {
            return Err(MechanismError::invalid(
                "epsilon0",
                epsilon0,
                format!("must lie in (0, ε) = (0, {epsilon})"),
            ));
        }
        let d = dim as f64;
        let e1 = epsilon - epsilon0;
        let gamma_a = (e1 / 2.0).tanh() * (std::f64::consts::PI / (2.0 * (d - 1.0))).sqrt();
        // 16b: g(γ) = ½ ln d + ln 6 − ((d−1)/2) ln(1−γ²) + ln γ is increasing; largest γ ≤ 1 with g ≤ ε₁.
        let g = |gam: f64| {
            0.5 * d.ln() + 6f64.ln() - (d - 1.0) / 2.0 * (-(gam * gam)).ln_1p() + gam.ln()
        };
        let lo = (2.0 / d).sqrt();
        let gamma_b = if lo < 1.0 && g(lo) <= e1 {
            let (mut a, mut b) = (lo, 1.0);
            for _ in 0..200 {
                let mid = 0.5 * (a + b);
                if g(mid) <= e1 { a = mid } else { b = mid }
            }
            Some(a)
        } else {
            None
        };
        let (gamma, condition) = match gamma_b {
            Some(gb) if gb > gamma_a => (gb, "16b"),
            _ => (gamma_a.min(1.0 - f64::EPSILON), "16a"),
        };
        let p = logistic(epsilon0);
        Self::build(
            dim,
            gamma,
            p,
            PrivUnit2Parameterization::Paper000 {
                requested_epsilon: epsilon,
                epsilon0,
                condition,
            },
        )
    }

    /// Cap height γ.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }
    /// Probability `p` of sampling from the cap.
    pub fn p(&self) -> f64 {
        self.p
    }
    /// Cap probability `q` under the uniform law on the sphere.
    pub fn q(&self) -> f64 {
        self.q
    }
    /// Output scale `m` (`‖Ẑ‖ = 1/m`).
    pub fn m(&self) -> f64 {
        self.m
    }
    /// How the parameters were chosen.
    pub fn parameterization(&self) -> PrivUnit2Parameterization {
        self.parameterization
    }

    /// Draws the cap inner product `t = ⟨V, u⟩` (cap with probability `p`).
    pub fn sample_inner_product<R: Rng + CryptoRng + ?Sized>(&self, rng: &mut R) -> f64 {
        if rng.random::<f64>() < self.p {
            self.sampler.sample_cap(rng)
        } else {
            self.sampler.sample_complement(rng)
        }
    }
}

/// γ such that `P(⟨U,u⟩ ≥ γ) = q = 1/(1+e^{ε−ε₀})`.
fn gamma_for_split(epsilon: f64, epsilon0: f64, dim: usize) -> Result<f64> {
    let alpha = (dim as f64 - 1.0) / 2.0;
    let ln_q = -softplus(epsilon - epsilon0);
    let tau = special::beta_inc_complement_inv_ln(alpha, alpha, ln_q);
    let gamma = 2.0 * tau - 1.0;
    if gamma.is_finite() && (0.0..1.0).contains(&gamma) {
        Ok(gamma)
    } else {
        Err(MechanismError::Numerical(format!(
            "cap height for d = {dim}, ln q = {ln_q} came out as {gamma}"
        )))
    }
}

impl LocalRandomizer for PrivUnit2 {
    fn name(&self) -> &'static str {
        "privunit2"
    }

    fn domain(&self) -> Domain {
        Domain::UnitSphere { dim: self.dim }
    }

    fn guarantee(&self) -> Guarantee {
        Guarantee::Pure {
            epsilon: self.epsilon,
        }
    }

    fn variance_at(&self, x: &[f64]) -> Result<f64> {
        self.domain().check(x)?;
        Ok(self.worst_case_variance())
    }

    fn worst_case_variance(&self) -> f64 {
        1.0 / (self.m * self.m) - 1.0
    }

    fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        self.privatize_into_threads(x, out, rng, Threads::ONE)
    }

    /// The Gaussian direction is drawn in blocks from streams of a fresh [`StreamKey`], so the
    /// output is the same for every thread count.
    fn privatize_into_threads<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
        threads: Threads,
    ) -> Result<()> {
        let domain = self.domain();
        domain.check_len(x)?;
        check_out_len(out, self.dim)?;
        let t = self.sample_inner_product(rng);
        let s = ((1.0 - t) * (1.0 + t)).max(0.0).sqrt();
        loop {
            let key = StreamKey::draw(rng);
            // ‖x‖ comes out of the (parallel) Gaussian pass, which reads x anyway; an input
            // outside the domain is refused before anything depends on it.
            let (dot_raw, norm2, x2) = gaussian_with_dot_blocks(&key, x, out, threads);
            let norm = domain.accept_norm(x, x2.sqrt())?;
            // Work with the exactly normalized direction û = x/‖x‖ (x is unit up to 1e-6).
            let inv_norm = 1.0 / norm;
            let dot = dot_raw * inv_norm;
            let perp2 = norm2 - dot * dot;
            if perp2 > 0.0 {
                // out = (t·û + s·(g − c û)/‖g − c û‖)/m = a·û + b·g
                let b = s / (perp2.sqrt() * self.m);
                let a = (t / self.m - b * dot) * inv_norm;
                combine_blocks(x, out, a, b, threads);
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanity_values_d50() {
        // docs/ALGORITHMS.md §1.1: d=50, γ=0.2, p=0.8 → m = 0.204836, ε = 3.832820, variance 22.8335.
        let m = PrivUnit2::new(50, 0.2, 0.8).unwrap();
        assert!((m.m() - 0.204836).abs() < 5e-7, "m = {}", m.m());
        assert!((m.guarantee().epsilon() - 3.832820).abs() < 5e-7);
        assert!((m.worst_case_variance() - 22.8335).abs() < 5e-4);
    }

    #[test]
    fn optimized_reaches_reference_optimum() {
        // docs/ALGORITHMS.md §1.1 (grid of 4000 splits): d=1000, ε=4 → 434.60, p=0.7912, γ=0.04792;
        // ε=8 → 132.35, p=0.9013, γ=0.08661. Our optimum must match to the quoted digits and
        // never be worse than the grid.
        for &(eps, var, p, gamma) in &[
            (4.0, 434.60, 0.7912, 0.04792),
            (8.0, 132.35, 0.9013, 0.08661),
        ] {
            let m = PrivUnit2::optimized(eps, 1000).unwrap();
            assert!((m.guarantee().epsilon() - eps).abs() < 1e-9);
            assert!(m.guarantee().epsilon() <= eps);
            assert!(
                m.worst_case_variance() <= var + 0.005,
                "{}",
                m.worst_case_variance()
            );
            assert!(m.worst_case_variance() >= var - 0.05);
            assert!((m.p() - p).abs() < 2e-3, "p = {}", m.p());
            assert!((m.gamma() - gamma).abs() < 2e-4, "γ = {}", m.gamma());
        }
    }
}
