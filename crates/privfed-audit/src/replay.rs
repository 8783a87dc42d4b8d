//! Gray-box replay: run a mechanism on two neighbouring inputs with **identical** seeded
//! randomness and compare the sensitivity it declares with the one it shows
//! (docs/ALGORITHMS.md "Empirical privacy auditing", §A.8).
//!
//! For an additive mechanism `M(x) = f(x) + N` whose noise `N` does not depend on the input,
//! replaying the same random stream on `x` and `x′` cancels the noise: `M(x) − M(x′) = f(x) −
//! f(x′)`, and its norm must be at most the sensitivity `Δ` the noise was calibrated to (ℓ1 for
//! Laplace, ℓ2 for Gaussian and Skellam). A measured difference above `Δ` means either a wrong
//! declared sensitivity (e.g. the radius used where the diameter belongs) or a pre-processing
//! step whose output moves more than the accounting assumes (e.g. a rounding step, measured at
//! the point where the noise is added). Noise that depends on the input shows up too: the
//! difference then varies from seed to seed ([`ReplayReport::spread`]).
//!
//! This is a white-box check of one noise addition, not a privacy bound: it needs the seed, and
//! it says nothing about the noise distribution (the black-box tests of
//! [`crate::randomizer`] do).

use crate::error::{AuditError, Result};
use serde::Serialize;

/// Which norm the sensitivity is measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Norm {
    /// `Σ|v_i|` (Laplace).
    L1,
    /// `√Σv_i²` (Gaussian, Skellam).
    L2,
}

impl Norm {
    /// The norm of `v`.
    pub fn of(self, v: &[f64]) -> f64 {
        match self {
            Norm::L1 => v.iter().map(|a| a.abs()).sum(),
            Norm::L2 => v.iter().map(|a| a * a).sum::<f64>().sqrt(),
        }
    }
}

/// The result of [`replay_sensitivity`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    /// The sensitivity the mechanism declares (and calibrates its noise to).
    pub declared: f64,
    /// The largest `‖M(x) − M(x′)‖` over the pairs and seeds.
    pub measured: f64,
    /// The largest spread of `‖M(x) − M(x′)‖` over the seeds of one pair (0 when the noise
    /// cancels exactly, i.e. it does not depend on the input).
    pub spread: f64,
    /// Pairs × seeds replayed.
    pub replays: usize,
    /// The norm.
    pub norm: Norm,
    /// `measured ≤ declared·(1 + rel_tol)`.
    pub holds: bool,
}

/// Replays `run(input, seed)` — which must build its generator from `seed` alone — on every
/// pair of `pairs` for every seed in `seeds`, measures `‖run(x, s) − run(x′, s)‖` in `norm`, and
/// compares the largest with `declared` up to the relative tolerance `rel_tol` (floating-point
/// rounding of `x + N` is of order `2^{−52}·|N|`; say how much you allow).
pub fn replay_sensitivity<F>(
    pairs: &[(Vec<f64>, Vec<f64>)],
    seeds: &[u64],
    mut run: F,
    norm: Norm,
    declared: f64,
    rel_tol: f64,
) -> Result<ReplayReport>
where
    F: FnMut(&[f64], u64) -> Result<Vec<f64>>,
{
    if pairs.is_empty() || seeds.is_empty() {
        return Err(AuditError::TooFewSamples(
            "a replay needs at least one pair and one seed".into(),
        ));
    }
    if !(declared.is_finite() && declared >= 0.0) {
        return Err(AuditError::invalid(
            "declared",
            declared,
            "must be finite and non-negative",
        ));
    }
    if !(rel_tol.is_finite() && rel_tol >= 0.0) {
        return Err(AuditError::invalid(
            "rel_tol",
            rel_tol,
            "must be finite and non-negative",
        ));
    }
    let (mut measured, mut spread) = (0.0f64, 0.0f64);
    for (x, xp) in pairs {
        let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
        for &s in seeds {
            let (a, b) = (run(x, s)?, run(xp, s)?);
            if a.len() != b.len() {
                return Err(AuditError::invalid(
                    "output",
                    b.len() as f64,
                    format!(
                        "outputs of one mechanism must have one length ({})",
                        a.len()
                    ),
                ));
            }
            let diff: Vec<f64> = a.iter().zip(&b).map(|(u, v)| u - v).collect();
            let d = norm.of(&diff);
            lo = lo.min(d);
            hi = hi.max(d);
        }
        measured = measured.max(hi);
        spread = spread.max(hi - lo);
    }
    Ok(ReplayReport {
        declared,
        measured,
        spread,
        replays: pairs.len() * seeds.len(),
        norm,
        holds: measured <= declared * (1.0 + rel_tol),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_mechanisms::LocalRandomizer;
    use privfed_mechanisms::domain::Domain;
    use privfed_mechanisms::gaussian::Gaussian;
    use privfed_mechanisms::laplace::Laplace;
    use privfed_mechanisms::rng::seeded_rng_for_experiments;

    /// Relative tolerance for `x + N` rounding: |N| is below ~40 scales here and x is O(1).
    const REL_TOL: f64 = 1e-12;

    /// Pairs on an ℓ2 ball of radius r in d dims: the diameter pair ±r·e₁, and a random-looking
    /// fixed pair.
    fn l2_pairs(d: usize, r: f64) -> Vec<(Vec<f64>, Vec<f64>)> {
        let mut e = vec![0.0; d];
        e[0] = r;
        let neg: Vec<f64> = e.iter().map(|v| -v).collect();
        let a: Vec<f64> = (0..d)
            .map(|i| r * ((i as f64 + 1.0).sin()) / (d as f64).sqrt())
            .collect();
        let b: Vec<f64> = (0..d)
            .map(|i| r * ((i as f64 * 3.0).cos()) / (d as f64).sqrt())
            .collect();
        vec![(e, neg), (a, b)]
    }

    #[test]
    fn gaussian_shows_its_declared_l2_sensitivity() {
        let ball = Domain::L2Ball {
            dim: 5,
            radius: 1.0,
        };
        let g = Gaussian::new(1.0, 1e-5, ball).unwrap();
        let run = |x: &[f64], s: u64| Ok(g.privatize(x, &mut seeded_rng_for_experiments(s))?);
        let r = replay_sensitivity(
            &l2_pairs(5, 1.0),
            &[1, 2, 3],
            run,
            Norm::L2,
            g.sensitivity(),
            REL_TOL,
        )
        .unwrap();
        assert!(r.holds, "{r:?}");
        // The diameter pair attains it, and the noise cancels exactly up to rounding.
        assert!(
            (r.measured - 2.0).abs() < 1e-12 && r.spread < 1e-12,
            "{r:?}"
        );
    }

    #[test]
    fn laplace_shows_its_declared_l1_sensitivity() {
        let ball = Domain::L1Ball {
            dim: 4,
            radius: 1.0,
        };
        let m = Laplace::new(1.0, ball).unwrap();
        let run = |x: &[f64], s: u64| Ok(m.privatize(x, &mut seeded_rng_for_experiments(s))?);
        let pairs = vec![
            (vec![1.0, 0.0, 0.0, 0.0], vec![-1.0, 0.0, 0.0, 0.0]),
            (vec![0.25, -0.25, 0.25, -0.25], vec![0.0, 0.5, 0.0, 0.5]),
        ];
        let r =
            replay_sensitivity(&pairs, &[4, 5], run, Norm::L1, m.sensitivity(), REL_TOL).unwrap();
        assert!(r.holds && (r.measured - 2.0).abs() < 1e-12, "{r:?}");
    }

    /// Planted bugs in test code: noise calibrated to the radius (declared Δ = r, inputs at
    /// distance 2r), and noise that scales with the input; both are flagged.
    #[test]
    fn wrong_declarations_and_input_dependent_noise_are_caught() {
        let ball = Domain::L2Ball {
            dim: 3,
            radius: 1.0,
        };
        let g = Gaussian::new(1.0, 1e-5, ball).unwrap();
        let run = |x: &[f64], s: u64| Ok(g.privatize(x, &mut seeded_rng_for_experiments(s))?);
        let r = replay_sensitivity(&l2_pairs(3, 1.0), &[1], run, Norm::L2, 1.0, REL_TOL).unwrap();
        assert!(!r.holds, "{r:?}");
        let scaled = |x: &[f64], s: u64| {
            let z = g.privatize(x, &mut seeded_rng_for_experiments(s))?;
            Ok(z.iter()
                .zip(x)
                .map(|(zi, xi)| xi + (zi - xi) * (1.0 + xi.abs()))
                .collect())
        };
        let r = replay_sensitivity(
            &l2_pairs(3, 1.0),
            &[1, 2, 3, 4],
            scaled,
            Norm::L2,
            2.0,
            REL_TOL,
        )
        .unwrap();
        assert!(!r.holds && r.spread > 0.1, "{r:?}");
    }
}
