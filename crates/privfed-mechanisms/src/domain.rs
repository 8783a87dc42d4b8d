//! Input domains of the randomizers and their validation.

use crate::error::{MechanismError, Result, check_positive};
use crate::norm::sum_squares;
pub use crate::norm::{l2_norm, l2_norm_scaled, l2_norm_scaled_by};
use rand::{Rng, RngExt};
use rand_distr::{Distribution, Exp1};
use serde::Serialize;

/// The set of inputs a randomizer accepts; its privacy guarantee holds over this set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Domain {
    /// Unit vectors `‖x‖₂ = 1` in `dim` dimensions (checked to a relative tolerance of 1e-6).
    UnitSphere {
        /// Dimension.
        dim: usize,
    },
    /// Vectors with `‖x‖₂ ≤ radius`.
    L2Ball {
        /// Dimension.
        dim: usize,
        /// Radius.
        radius: f64,
    },
    /// Vectors with `‖x‖₁ ≤ radius`.
    L1Ball {
        /// Dimension.
        dim: usize,
        /// Radius.
        radius: f64,
    },
    /// The hypercube `[-radius, radius]^dim` (`‖x‖∞ ≤ radius`).
    LInfBall {
        /// Dimension.
        dim: usize,
        /// Half-width.
        radius: f64,
    },
    /// Scalars in `[lo, hi]` (dimension 1).
    Interval {
        /// Lower end.
        lo: f64,
        /// Upper end.
        hi: f64,
    },
}

/// Relative tolerance for `‖x‖ = 1` on the unit sphere and for ball radii.
pub const NORM_TOLERANCE: f64 = 1e-6;

impl Domain {
    /// Dimension of the inputs.
    pub fn dim(&self) -> usize {
        match *self {
            Domain::UnitSphere { dim }
            | Domain::L2Ball { dim, .. }
            | Domain::L1Ball { dim, .. }
            | Domain::LInfBall { dim, .. } => dim,
            Domain::Interval { .. } => 1,
        }
    }

    /// Checks that `x` is a finite vector of the right length inside the domain.
    pub fn check(&self, x: &[f64]) -> Result<()> {
        self.check_norm(x).map(|_| ())
    }

    /// [`check`](Self::check), returning the norm that defines the domain (ℓ2 for the sphere
    /// and the ℓ2 ball, ℓ1 for the ℓ1 ball, ℓ∞ for the cube, `|x|` for an interval). One pass
    /// over `x` when the input is valid.
    pub fn check_norm(&self, x: &[f64]) -> Result<f64> {
        self.check_len(x)?;
        let norm = match *self {
            Domain::UnitSphere { .. } | Domain::L2Ball { .. } => l2_norm(x),
            Domain::L1Ball { .. } => x.iter().map(|v| v.abs()).sum(),
            Domain::LInfBall { .. } => x.iter().copied().fold(0.0, linf_step),
            Domain::Interval { .. } => x[0].abs(),
        };
        self.accept_norm(x, norm)
    }

    /// The domain's norm of one block of coordinates in a form that [`Self::norm_of_blocks`]
    /// combines: `Σ v²` (ℓ2 domains), `Σ |v|` (ℓ1), `max |v|` (ℓ∞, NaN sticking), `|x₀|`
    /// (interval). Lets a pass over `x` made anyway (adding noise) validate it on every thread.
    pub(crate) fn norm_partial(&self, xs: &[f64]) -> f64 {
        match *self {
            Domain::UnitSphere { .. } | Domain::L2Ball { .. } => sum_squares(xs),
            Domain::L1Ball { .. } => xs.iter().map(|v| v.abs()).sum(),
            Domain::LInfBall { .. } | Domain::Interval { .. } => {
                xs.iter().copied().fold(0.0, linf_step)
            }
        }
    }

    /// The norm from the blocks' [`Self::norm_partial`]s, taken in block order.
    pub(crate) fn norm_of_blocks(&self, parts: &[f64]) -> f64 {
        match *self {
            Domain::UnitSphere { .. } | Domain::L2Ball { .. } => parts.iter().sum::<f64>().sqrt(),
            Domain::L1Ball { .. } => parts.iter().sum(),
            Domain::LInfBall { .. } | Domain::Interval { .. } => {
                parts.iter().copied().fold(0.0, linf_step)
            }
        }
    }

    /// `DimensionMismatch` unless `x` has the domain's dimension.
    pub(crate) fn check_len(&self, x: &[f64]) -> Result<()> {
        let dim = self.dim();
        if x.len() != dim {
            return Err(MechanismError::DimensionMismatch {
                expected: dim,
                got: x.len(),
            });
        }
        Ok(())
    }

    /// The second half of [`check_norm`](Self::check_norm): given the domain's norm of `x`
    /// (computed by the caller, e.g. inside a pass it makes anyway), the same errors and the
    /// same accepted norm.
    pub(crate) fn accept_norm(&self, x: &[f64], norm: f64) -> Result<f64> {
        // A NaN or infinite coordinate makes every one of these norms non-finite.
        if !norm.is_finite() {
            if let Some((index, &value)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
                return Err(MechanismError::NonFiniteInput { index, value });
            }
            return Err(MechanismError::OutOfDomain(format!(
                "the norm of the input overflows ({norm})"
            )));
        }
        match *self {
            Domain::UnitSphere { .. } => {
                if (norm - 1.0).abs() > NORM_TOLERANCE {
                    return Err(MechanismError::OutOfDomain(format!(
                        "expected a unit vector, got ‖x‖₂ = {norm}"
                    )));
                }
            }
            Domain::L2Ball { radius, .. } => {
                if norm > radius * (1.0 + NORM_TOLERANCE) {
                    return Err(MechanismError::OutOfDomain(format!(
                        "‖x‖₂ = {norm} exceeds the radius {radius}"
                    )));
                }
            }
            Domain::L1Ball { radius, .. } => {
                if norm > radius * (1.0 + NORM_TOLERANCE) {
                    return Err(MechanismError::OutOfDomain(format!(
                        "‖x‖₁ = {norm} exceeds the radius {radius}"
                    )));
                }
            }
            Domain::LInfBall { radius, .. } => {
                if let Some((i, v)) = x.iter().enumerate().find(|(_, v)| v.abs() > radius) {
                    return Err(MechanismError::OutOfDomain(format!(
                        "coordinate {i} = {v} is outside [-{radius}, {radius}]"
                    )));
                }
            }
            Domain::Interval { lo, hi } => {
                let v = x[0];
                if v < lo || v > hi {
                    return Err(MechanismError::OutOfDomain(format!(
                        "{v} is outside [{lo}, {hi}]"
                    )));
                }
            }
        }
        Ok(norm)
    }
}

impl Domain {
    /// Draws a point uniformly from the domain (for the unit sphere: the uniform law on it), for
    /// simulations such as distributed mean estimation.
    pub fn sample_uniform<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<f64> {
        match *self {
            Domain::UnitSphere { dim } => sphere(dim, rng),
            Domain::L2Ball { dim, radius } => {
                let r = radius * rng.random::<f64>().powf(1.0 / dim as f64);
                sphere(dim, rng).into_iter().map(|v| v * r).collect()
            }
            Domain::L1Ball { dim, radius } => {
                // (E_1, …, E_d)/(E_1 + … + E_{d+1}) with random signs is uniform in the ℓ1 ball.
                let e: Vec<f64> = (0..=dim).map(|_| Exp1.sample(rng)).collect();
                let total: f64 = e.iter().sum();
                e[..dim]
                    .iter()
                    .map(|v| {
                        let s = if rng.random::<bool>() { 1.0 } else { -1.0 };
                        s * radius * v / total
                    })
                    .collect()
            }
            Domain::LInfBall { dim, radius } => (0..dim)
                .map(|_| radius * (2.0 * rng.random::<f64>() - 1.0))
                .collect(),
            Domain::Interval { lo, hi } => vec![lo + (hi - lo) * rng.random::<f64>()],
        }
    }
}

/// Checks that a domain's own parameters are valid: dimension ≥ 1, radius finite and > 0,
/// interval end points finite with `lo < hi` and a finite width.
pub(crate) fn validate_domain(domain: &Domain) -> Result<()> {
    let dim = domain.dim();
    if dim == 0 {
        return Err(MechanismError::invalid("dim", 0.0, "must be at least 1"));
    }
    match *domain {
        Domain::UnitSphere { .. } => Ok(()),
        Domain::L2Ball { radius, .. }
        | Domain::L1Ball { radius, .. }
        | Domain::LInfBall { radius, .. } => check_positive("radius", radius).map(|_| ()),
        Domain::Interval { lo, hi } => check_range(lo, hi),
    }
}

/// Validates a range `[lo, hi]`: end points finite, `lo < hi`, and a finite width `hi − lo`.
pub(crate) fn check_range(lo: f64, hi: f64) -> Result<()> {
    if !lo.is_finite() {
        return Err(MechanismError::invalid("lo", lo, "must be finite"));
    }
    if !(hi.is_finite() && hi > lo && (hi - lo).is_finite()) {
        return Err(MechanismError::invalid(
            "hi",
            hi,
            format!("must be finite and > lo = {lo}, with a finite width"),
        ));
    }
    Ok(())
}

fn sphere<R: Rng + ?Sized>(dim: usize, rng: &mut R) -> Vec<f64> {
    // Only dim = 0 fails, and its sphere has no points to return.
    crate::sampling::uniform_on_sphere(dim, rng).unwrap_or_default()
}

/// One step of the ℓ∞ norm: the larger magnitude, a NaN sticking once seen.
fn linf_step(m: f64, v: f64) -> f64 {
    if v.abs() > m || v.is_nan() {
        v.abs()
    } else {
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_norms_agree_with_check_norm() {
        // The per-block partial norms (summed or maxed in block order) give the norm and the
        // errors of `check_norm`, for every kind of domain.
        let x: Vec<f64> = (0..1000)
            .map(|i| ((i * 37 % 101) as f64 - 50.0) / 700.0)
            .collect();
        let l2 = l2_norm(&x);
        let unit: Vec<f64> = x.iter().map(|v| v / l2).collect();
        let domains = [
            Domain::UnitSphere { dim: 1000 },
            Domain::L2Ball {
                dim: 1000,
                radius: 2.0 * l2,
            },
            Domain::L1Ball {
                dim: 1000,
                radius: 1e3,
            },
            Domain::LInfBall {
                dim: 1000,
                radius: 1.0,
            },
        ];
        for d in domains {
            let v = if matches!(d, Domain::UnitSphere { .. }) {
                &unit
            } else {
                &x
            };
            let want = d.check_norm(v).unwrap();
            let parts: Vec<f64> = v.chunks(300).map(|c| d.norm_partial(c)).collect();
            let got = d.accept_norm(v, d.norm_of_blocks(&parts)).unwrap();
            assert!((got - want).abs() <= 1e-14 * want, "{d:?}: {got} vs {want}");
            let mut bad = v.clone();
            bad[650] = f64::NAN;
            let parts: Vec<f64> = bad.chunks(300).map(|c| d.norm_partial(c)).collect();
            assert!(matches!(
                d.accept_norm(&bad, d.norm_of_blocks(&parts)),
                Err(MechanismError::NonFiniteInput { index: 650, .. })
            ));
        }
        let i = Domain::Interval { lo: -1.0, hi: 1.0 };
        assert_eq!(i.norm_of_blocks(&[i.norm_partial(&[-0.25])]), 0.25);
    }
}
