//! **Separated direction × magnitude** mechanism (paper 000 eq. 22; docs/ALGORITHMS.md §1.5).
//!
//! A vector `g` with `‖g‖₂ ≤ r_max` is privatized as
//! `R̂·Û` with `Û = PrivUnit2(g/‖g‖; ε₁)` and `R̂ = ScalarDP(‖g‖; ε₂)`, independently, so the
//! output is unbiased (`E[R̂Û] = E[R̂]·E[Û] = ‖g‖·g/‖g‖`) and ε₁ + ε₂-LDP. For `g = 0` the direction
//! is the first basis vector (any fixed choice is private and unbiased, since `E[R̂] = 0`).
//!
//! Exact variance: since `‖Û‖ = 1/m` always, `E‖R̂Û − g‖² = E[R̂²]/m² − r²` with `r = ‖g‖`, where
//! `E[R̂²] = Var(R̂) + r²` comes from the scalar mechanism's exact variance. On each grid
//! interval of the scalar mechanism `E[R̂²]` is linear in `r`, so the worst case over the ball is
//! the maximum of a concave quadratic per interval, taken in closed form.
//!
//! The guarantee `ε₁ + ε₂` is exact, not only an upper bound: inputs `r_max·u` and `0` (whose
//! direction is `e₁ ≠ u`) attain both factors' worst ratios on the same output.

use crate::domain::{Domain, l2_norm};
use crate::error::{MechanismError, Result, check_positive};
use crate::grid_rr::GridRr;
use crate::privunit2::PrivUnit2;
use crate::{CryptoRng, Guarantee, LocalRandomizer, Rng, check_out_len};
use serde::Serialize;

/// The separated mechanism (see the [module docs](self)).
#[derive(Debug, Clone, Serialize)]
pub struct Separated {
    dim: usize,
    r_max: f64,
    direction: PrivUnit2,
    magnitude: GridRr,
    worst_case_variance: f64,
}

impl Separated {
    /// Separated mechanism from its two parts: `direction` on the unit sphere of dimension `d`
    /// and `magnitude` a scalar grid mechanism covering exactly `[0, r_max]`.
    pub fn from_parts(direction: PrivUnit2, magnitude: GridRr) -> Result<Self> {
        let Domain::Interval { lo, hi } = magnitude.domain() else {
            return Err(MechanismError::invalid(
                "magnitude",
                f64::NAN,
                "must be a scalar mechanism",
            ));
        };
        if lo != 0.0 {
            return Err(MechanismError::invalid(
                "magnitude",
                lo,
                "the magnitude mechanism's grid must start at 0",
            ));
        }
        let dim = direction.dim();
        let m2 = direction.m() * direction.m();
        // Worst case of E[R̂²](r)/m² − r² over r ∈ [0, r_max]: concave on each grid interval.
        let g = magnitude.grid();
        let second = |r: f64| -> Result<f64> { Ok(magnitude.variance_scalar(r)? + r * r) };
        let mut worst: f64 = 0.0;
        for w in g.windows(2) {
            let (a, b) = (w[0], w[1]);
            let (sa, sb) = (second(a)?, second(b)?);
            let slope = (sb - sa) / (b - a);
            // f(r) = (sa + slope (r − a))/m² − r², f'(r) = slope/m² − 2r.
            let vertex = (slope / (2.0 * m2)).clamp(a, b);
            for r in [a, b, vertex] {
                let f = (sa + slope * (r - a)) / m2 - r * r;
                worst = worst.max(f);
            }
        }
        Ok(Self {
            dim,
            r_max: hi,
            direction,
            magnitude,
            worst_case_variance: worst,
        })
    }

    /// Optimized PrivUnit2 at `ε₁ = epsilon_direction` and ScalarDP on `[0, r_max]` at
    /// `ε₂ = epsilon_magnitude` (its grid size chosen to minimize the scalar worst-case variance).
    pub fn new(
        epsilon_direction: f64,
        epsilon_magnitude: f64,
        dim: usize,
        r_max: f64,
    ) -> Result<Self> {
        check_positive("epsilon_direction", epsilon_direction)?;
        check_positive("epsilon_magnitude", epsilon_magnitude)?;
        check_positive("r_max", r_max)?;
        Self::from_parts(
            PrivUnit2::optimized(epsilon_direction, dim)?,
            GridRr::scalar_dp(epsilon_magnitude, r_max)?,
        )
    }

    /// The direction randomizer.
    pub fn direction(&self) -> &PrivUnit2 {
        &self.direction
    }

    /// The magnitude randomizer.
    pub fn magnitude(&self) -> &GridRr {
        &self.magnitude
    }
}

impl LocalRandomizer for Separated {
    fn name(&self) -> &'static str {
        "separated"
    }

    fn domain(&self) -> Domain {
        Domain::L2Ball {
            dim: self.dim,
            radius: self.r_max,
        }
    }

    fn guarantee(&self) -> Guarantee {
        Guarantee::Pure {
            epsilon: self.direction.guarantee().epsilon() + self.magnitude.guarantee().epsilon(),
        }
    }

    fn variance_at(&self, x: &[f64]) -> Result<f64> {
        self.domain().check(x)?;
        let r = l2_norm(x).min(self.r_max);
        let m2 = self.direction.m().powi(2);
        Ok((self.magnitude.variance_scalar(r)? + r * r) / m2 - r * r)
    }

    fn worst_case_variance(&self) -> f64 {
        self.worst_case_variance
    }

    fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        self.domain().check(x)?;
        check_out_len(out, self.dim)?;
        let norm = l2_norm(x);
        let r = norm.min(self.r_max);
        let unit: Vec<f64> = if norm > 0.0 {
            x.iter().map(|v| v / norm).collect()
        } else {
            let mut e1 = vec![0.0; self.dim];
            e1[0] = 1.0;
            e1
        };
        self.direction.privatize_into(&unit, out, rng)?;
        let r_hat = self.magnitude.privatize_scalar(r, rng)?;
        out.iter_mut().for_each(|v| *v *= r_hat);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_rng_for_experiments;
    use privfed_testkit::{assert_mean, assert_z, z_mean_known_variance};

    #[test]
    fn variance_formula_matches_monte_carlo() {
        // E‖out − g‖² by Monte Carlo vs the exact formula: two-sided z-test at α = 4e-8
        // (|z| < 5.49) at 3 inputs, and the same for each of the 8 coordinates' means.
        let mech = Separated::new(4.0, 1.0, 8, 2.0).unwrap();
        let mut rng = seeded_rng_for_experiments(5);
        for r in [0.0, 0.7, 2.0] {
            let mut g = vec![0.0; 8];
            g[3] = r;
            let n = 200_000;
            let mut errs = Vec::with_capacity(n);
            let mut sum = [0.0; 8];
            for _ in 0..n {
                let o = mech.privatize(&g, &mut rng).unwrap();
                errs.push(o.iter().zip(&g).map(|(a, b)| (a - b).powi(2)).sum::<f64>());
                sum.iter_mut().zip(&o).for_each(|(s, v)| *s += v);
            }
            let exact = mech.variance_at(&g).unwrap();
            assert_mean(
                &errs,
                exact,
                4e-8,
                &format!("r = {r}: squared error vs {exact}"),
            );
            // Unbiasedness of every coordinate: per-coordinate variance ≤ exact total variance.
            for (j, s) in sum.iter().enumerate() {
                let zj = z_mean_known_variance(s / n as f64, n, g[j], exact);
                assert_z(zj, 4e-8, &format!("r = {r}, coordinate {j}"));
            }
            assert!(exact <= mech.worst_case_variance() + 1e-9);
        }
    }

    #[test]
    fn worst_case_dominates_a_dense_scan_and_budget_adds_up() {
        let mech = Separated::new(3.0, 0.5, 20, 1.0).unwrap();
        assert!((mech.guarantee().epsilon() - 3.5).abs() < 1e-9);
        let mut best: f64 = 0.0;
        for i in 0..=10_000 {
            let mut g = vec![0.0; 20];
            g[0] = i as f64 / 10_000.0;
            best = best.max(mech.variance_at(&g).unwrap());
        }
        assert!(best <= mech.worst_case_variance() + 1e-9);
        assert!(best >= mech.worst_case_variance() * (1.0 - 1e-6));
    }

    #[test]
    fn bad_inputs() {
        let mech = Separated::new(3.0, 0.5, 4, 1.0).unwrap();
        let mut rng = seeded_rng_for_experiments(1);
        assert!(mech.privatize(&[2.0, 0.0, 0.0, 0.0], &mut rng).is_err());
        assert!(mech.privatize(&[0.0, 0.0, 0.0], &mut rng).is_err());
        assert!(
            mech.privatize(&[f64::NAN, 0.0, 0.0, 0.0], &mut rng)
                .is_err()
        );
        assert!(Separated::new(0.0, 0.5, 4, 1.0).is_err());
        assert!(Separated::new(1.0, 0.5, 4, -1.0).is_err());
        assert!(Separated::new(1.0, 0.5, 1, 1.0).is_err());
    }
}
