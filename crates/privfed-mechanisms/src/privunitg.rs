//! **PrivUnitG**: the Gaussian variant of PrivUnit (paper 002 Alg. 2; docs/ALGORITHMS.md §1.2).
//!
//! For a unit input `x` and `σ = 1/√d`:
//! 1. with probability `p` draw `a ~ N(0, σ²)` conditioned on `a ≥ γ`, else conditioned on `a < γ`;
//! 2. draw `V⊥ ~ N(0, σ²(I − x xᵀ))`;
//! 3. output `(a·x + V⊥)/m`, with `z = γ/σ` and `m = σ·φ(z)·(p/(1−Φ(z)) − (1−p)/Φ(z))`.
//!
//! Exact privacy, with `q = Φ(z)`: `ε = ln( p·q / ((1−p)(1−q)) )`.
//! Error: `E‖out − x‖² = (E[a²] + (d−1)σ²)/m² − 1`, where
//! `E[a²|a≥γ] = σ²(1 + zφ(z)/(1−Φ(z)))` and `E[a²|a<γ] = σ²(1 − zφ(z)/Φ(z))`.
//!
//! The normalized parameters `(p, z)` that maximize `m/σ` depend on ε only (paper 002's point):
//! [`PrivUnitG::dimension_free`] uses them; [`PrivUnitG::optimized`] minimizes the exact variance
//! at the given `d` (never worse; the two coincide as `d → ∞`).
//! The truncated normal is sampled exactly in both tails
//! ([`truncated_standard_normal_above`]).

use crate::domain::Domain;
use crate::error::{MechanismError, Result, check_epsilon_budget, check_sphere_dim};
use crate::rng::{StreamKey, Threads};
use crate::sampling::{
    combine_blocks, gaussian_with_dot_blocks, truncated_standard_normal_above,
    truncated_standard_normal_below,
};
use crate::special::{self, logistic, minimize_on_interval};
use crate::{CryptoRng, Guarantee, LocalRandomizer, Rng, check_out_len};
use rand::RngExt;
use serde::Serialize;

/// How a [`PrivUnitG`]'s parameters were chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PrivUnitGParameterization {
    /// `(γ, p)` given explicitly.
    Explicit,
    /// Exact ε; `z` minimizes the exact variance at this dimension.
    Optimized,
    /// Exact ε; `z` maximizes `m/σ`, which depends on ε only.
    DimensionFree,
}

/// The PrivUnitG randomizer (see the [module docs](self)).
#[derive(Debug, Clone, Serialize)]
pub struct PrivUnitG {
    dim: usize,
    gamma: f64,
    /// Normalized threshold `z = γ/σ = γ√d`.
    z: f64,
    p: f64,
    m: f64,
    epsilon: f64,
    variance: f64,
    parameterization: PrivUnitGParameterization,
}

/// Exact `(ln-odds of p needed for ε, m/σ, E[a²]/σ²)` helpers at normalized threshold `z`.
struct Normalized {
    /// `ln Φ(z)`.
    ln_cdf: f64,
    /// `ln(1 − Φ(z))`.
    ln_sf: f64,
    /// `φ(z)/(1−Φ(z))`.
    hazard_up: f64,
    /// `φ(z)/Φ(z)`.
    hazard_down: f64,
}

impl Normalized {
    fn at(z: f64) -> Self {
        let ln_cdf = special::ln_norm_cdf(z);
        let ln_sf = special::ln_norm_sf(z);
        let ln_pdf = -0.5 * z * z - 0.5 * (2.0 * std::f64::consts::PI).ln();
        Self {
            ln_cdf,
            ln_sf,
            hazard_up: (ln_pdf - ln_sf).exp(),
            hazard_down: (ln_pdf - ln_cdf).exp(),
        }
    }

    /// `m/σ = p·φ/(1−Φ) − (1−p)·φ/Φ`.
    fn m_over_sigma(&self, p: f64) -> f64 {
        p * self.hazard_up - (1.0 - p) * self.hazard_down
    }

    /// `E[a²]/σ²` under the mixture.
    fn second_moment(&self, z: f64, p: f64) -> f64 {
        p * (1.0 + z * self.hazard_up) + (1.0 - p) * (1.0 - z * self.hazard_down)
    }

    /// ε = ln(p q/((1−p)(1−q))) with q = Φ(z).
    fn epsilon(&self, p: f64) -> f64 {
        p.ln() - (-p).ln_1p() + self.ln_cdf - self.ln_sf
    }

    /// The p that exhausts ε: ln-odds(p) = ε + ln(1−Φ) − ln Φ.
    fn p_for(&self, epsilon: f64) -> f64 {
        logistic(epsilon + self.ln_sf - self.ln_cdf)
    }
}

fn check_dim(dim: usize) -> Result<()> {
    check_sphere_dim(dim, "PrivUnitG")
}

impl PrivUnitG {
    /// PrivUnitG with explicit threshold `γ ≥ 0` and cap probability `p ∈ [½, 1)`; its exact ε is
    /// computed. Requires `m > 0`.
    pub fn new(dim: usize, gamma: f64, p: f64) -> Result<Self> {
        check_dim(dim)?;
        if !(gamma.is_finite() && gamma >= 0.0) {
            return Err(MechanismError::invalid(
                "gamma",
                gamma,
                "must be finite and ≥ 0",
            ));
        }
        let z = gamma * (dim as f64).sqrt();
        Self::from_z(dim, z, p, PrivUnitGParameterization::Explicit)
    }

    fn from_z(
        dim: usize,
        z: f64,
        p: f64,
        parameterization: PrivUnitGParameterization,
    ) -> Result<Self> {
        if !(p.is_finite() && (0.5..1.0).contains(&p)) {
            return Err(MechanismError::invalid("p", p, "must lie in [0.5, 1)"));
        }
        if !(z.is_finite() && z <= 38.0) {
            return Err(MechanismError::invalid(
                "gamma",
                z / (dim as f64).sqrt(),
                "γ·√d must be at most 38 (beyond it the cap has probability < 1e-300)",
            ));
        }
        let n = Normalized::at(z);
        let m_tilde = n.m_over_sigma(p);
        let epsilon = n.epsilon(p);
        if m_tilde.is_nan() || m_tilde <= 0.0 || !epsilon.is_finite() {
            return Err(MechanismError::Infeasible(format!(
                "PrivUnitG with z = {z}, p = {p} has no positive scale m (needs p > Φ(−z)...)"
            )));
        }
        let sigma = 1.0 / (dim as f64).sqrt();
        let d = dim as f64;
        let variance = (n.second_moment(z, p) + (d - 1.0)) / (m_tilde * m_tilde) - 1.0;
        Ok(Self {
            dim,
            gamma: z * sigma,
            z,
            p,
            m: m_tilde * sigma,
            epsilon,
            variance,
            parameterization,
        })
    }

    /// Exact-ε PrivUnitG at normalized threshold `z`: `p` exhausts ε (and the computed ε never
    /// exceeds it).
    pub fn with_threshold(epsilon: f64, z: f64, dim: usize) -> Result<Self> {
        Self::exhausting(
            check_epsilon_budget(epsilon)?,
            z,
            dim,
            PrivUnitGParameterization::Explicit,
        )
    }

    fn exhausting(
        epsilon: f64,
        z: f64,
        dim: usize,
        par: PrivUnitGParameterization,
    ) -> Result<Self> {
        check_dim(dim)?;
        let n = Normalized::at(z);
        let mut p = n.p_for(epsilon);
        for _ in 0..64 {
            if n.epsilon(p) <= epsilon {
                break;
            }
            p = f64::from_bits(p.to_bits() - 1);
        }
        Self::from_z(dim, z, p, par)
    }

    /// Largest `z` with `p ≥ ½` at this ε: `Φ(z) = e^ε/(1+e^ε)`.
    fn z_max(epsilon: f64) -> f64 {
        // ln(1 − Φ(z)) = −ln(1 + e^ε)
        special::norm_sf_inv_ln(-special::softplus(epsilon))
    }

    /// **Optimized PrivUnitG**: exact privacy ε, threshold minimizing the exact variance at `d`.
    pub fn optimized(epsilon: f64, dim: usize) -> Result<Self> {
        let epsilon = check_epsilon_budget(epsilon)?;
        check_dim(dim)?;
        let zmax = Self::z_max(epsilon);
        let var = |z: f64| match Self::exhausting(
            epsilon,
            z,
            dim,
            PrivUnitGParameterization::Optimized,
        ) {
            Ok(m) => m.variance,
            Err(_) => f64::INFINITY,
        };
        let z = minimize_on_interval(var, 0.0, zmax, 40, 1e-9 * zmax.max(1.0));
        Self::exhausting(epsilon, z, dim, PrivUnitGParameterization::Optimized)
    }

    /// **Dimension-free PrivUnitG** (paper 002): the threshold `z(ε)` maximizing `m/σ`, which
    /// does not depend on `d`; `γ = z/√d`.
    pub fn dimension_free(epsilon: f64, dim: usize) -> Result<Self> {
        let z = Self::dimension_free_threshold(epsilon)?;
        Self::exhausting(epsilon, z, dim, PrivUnitGParameterization::DimensionFree)
    }

    /// The dimension-free normalized threshold `z(ε) = argmax m/σ`.
    pub fn dimension_free_threshold(epsilon: f64) -> Result<f64> {
        let epsilon = check_epsilon_budget(epsilon)?;
        let zmax = Self::z_max(epsilon);
        let neg_m = |z: f64| {
            let n = Normalized::at(z);
            -n.m_over_sigma(n.p_for(epsilon))
        };
        Ok(minimize_on_interval(
            neg_m,
            0.0,
            zmax,
            40,
            1e-10 * zmax.max(1.0),
        ))
    }

    /// Threshold γ.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }
    /// Normalized threshold `z = γ√d`.
    pub fn z(&self) -> f64 {
        self.z
    }
    /// Probability of the upper region.
    pub fn p(&self) -> f64 {
        self.p
    }
    /// Output scale `m`.
    pub fn m(&self) -> f64 {
        self.m
    }
    /// How the parameters were chosen.
    pub fn parameterization(&self) -> PrivUnitGParameterization {
        self.parameterization
    }
}

impl LocalRandomizer for PrivUnitG {
    fn name(&self) -> &'static str {
        "privunitg"
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
        Ok(self.variance)
    }

    fn worst_case_variance(&self) -> f64 {
        self.variance
    }

    fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        self.privatize_into_threads(x, out, rng, Threads::ONE)
    }

    /// The Gaussian vector is drawn in blocks from streams of a fresh [`StreamKey`], so the
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
        let sigma = 1.0 / (self.dim as f64).sqrt();
        let a = sigma
            * if rng.random::<f64>() < self.p {
                truncated_standard_normal_above(self.z, rng)
            } else {
                truncated_standard_normal_below(self.z, rng)
            };
        let key = StreamKey::draw(rng);
        // ‖x‖ comes out of the (parallel) Gaussian pass, which reads x anyway.
        let (dot_raw, _, x2) = gaussian_with_dot_blocks(&key, x, out, threads);
        let norm = domain.accept_norm(x, x2.sqrt())?;
        let inv_norm = 1.0 / norm;
        let c = dot_raw * inv_norm;
        // out = (a·x̂ + σ(g − c x̂))/m = coef_x·x + coef_g·g
        let coef_g = sigma / self.m;
        let coef_x = (a / self.m - coef_g * c) * inv_norm;
        combine_blocks(x, out, coef_x, coef_g, threads);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanity_values_d50() {
        // docs/ALGORITHMS.md §1.2: d=50, γ=0.2, p=0.8 → m = 0.206612, ε = 3.847132.
        let m = PrivUnitG::new(50, 0.2, 0.8).unwrap();
        assert!((m.m() - 0.206612).abs() < 5e-7, "m = {}", m.m());
        assert!(
            (m.guarantee().epsilon() - 3.847132).abs() < 5e-7,
            "{}",
            m.guarantee().epsilon()
        );
    }

    #[test]
    fn optimized_reaches_reference_values() {
        // docs/ALGORITHMS.md §1.2: optimized at d=1000: ε=4 → 435.32 (z=1.5150), ε=8 → 132.91 (z=2.7418).
        for &(eps, var, z) in &[(4.0, 435.32, 1.5150), (8.0, 132.91, 2.7418)] {
            let m = PrivUnitG::optimized(eps, 1000).unwrap();
            let e = m.guarantee().epsilon();
            assert!(e <= eps && (e - eps).abs() < 1e-9);
            assert!(
                m.worst_case_variance() <= var + 0.005,
                "{}",
                m.worst_case_variance()
            );
            assert!(
                m.worst_case_variance() >= var - 0.05,
                "{}",
                m.worst_case_variance()
            );
            assert!((m.z() - z).abs() < 2e-3, "z = {}", m.z());
            let df = PrivUnitG::dimension_free(eps, 1000).unwrap();
            assert!(df.worst_case_variance() >= m.worst_case_variance() - 1e-9);
            assert!(df.worst_case_variance() <= m.worst_case_variance() * 1.001);
        }
    }
}
