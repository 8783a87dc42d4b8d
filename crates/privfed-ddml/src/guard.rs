//! The update guard: a server-side check that a posted model is a plausible honest client step
//! from the instance the client drew (paper 003 Alg. 1; `docs/ALGORITHMS.md` §4.1).
//!
//! An honest client that drew instance `B` posts `B' = B + Δ` with
//!
//! `Δ = −γ·clip(G) + z`, `clip(G) ∈ [−1, 1]^d`, `z` i.i.d. Laplace(`b`) or `N(0, σ²)`,
//!
//! with the learning rate `γ` and the noise scale `s` (`b` or `σ`) of [`ClientStep::new`] (the one
//! home of the calibration: a [`StepGuard`] builds its [`ClientStep`] from the declared
//! [`GuardSpec`]). The guard accepts `B'` only if it passes three tests; with `α` the declared
//! false-rejection probability ([`GuardSpec::false_rejection`], default
//! [`DEFAULT_FALSE_REJECTION`]) an honest step fails with probability at most `α` (`α/2` for each
//! of the two statistical tests, union bound), whatever its gradient:
//!
//! 1. **Absolute bound** `|B'_i| ≤ A` ([`GuardSpec::max_abs_weight`], default
//!    [`DEFAULT_MAX_ABS_WEIGHT`]), a declaration rather than a statistic: it stops a single post
//!    of `f32::MAX` or `1e30` whatever the step bounds.
//! 2. **Per-coordinate bound** `|Δ_i| ≤ C = γ + t·s`, with `t` such that the largest of `d`
//!    noise coordinates exceeds `t·s` with probability exactly `α/2`:
//!    `P(max_i |z_i| > t·s) = 1 − (1 − p)^d = α/2`, so `p = 1 − (1 − α/2)^{1/d}` and
//!    * Laplace: `P(|z_i| > t·b) = e^{−t}`, `t = −ln p`;
//!    * Gaussian: `P(|z_i| > t·σ) = 2·Q(t)` (`Q` the standard normal survival function),
//!      `t = Q⁻¹(p/2)`.
//! 3. **Norm bound** (triangle inequality) `‖Δ‖ ≤ N = γ·‖1‖ + q`, with `q` the `(1 − α/2)`
//!    quantile of `‖z‖`:
//!    * Laplace, ℓ1: `‖z‖₁/b ~ Gamma(d, 1)`, `q = b·x` with `Q(d, x) = α/2` (`Q` the regularized
//!      upper incomplete gamma function), `N = γ·d + q`;
//!    * Gaussian, ℓ2: `‖z‖₂²/σ² ~ χ²_d`, `q = σ·√x` with `Q(d/2, x/2) = α/2`, `N = γ·√d + q`.
//!
//!    Both quantiles are found by bisection on `ln Q` (so `α` down to `1e-300` works).
//! 4. Without noise ([`ClientNoise::None`]): `|Δ_i| ≤ γ` exactly (`t = 0`), and `N = γ·d` in ℓ1
//!    (implied by the per-coordinate test).
//!
//! **What the norm test buys.** The per-coordinate test alone lets an attacker move every
//! coordinate by `C` at once: `‖Δ‖₁ ≤ d·C`. The norm test caps the total: an ℓ1 budget of `N`
//! spread over the coordinates (at most `C` each), i.e. `⌈N/C⌉` coordinates at the maximum, or
//! every coordinate by `N/d`. With Laplace `ε = ln 32`, `γ = 0.005`, `d = 387` and `α = 1e-9`
//! (the BENCHMARKS setting) `C ≈ 0.084`, `N ≈ 3.43` against `d·C ≈ 32.5`: a ninefold cut, and
//! of `N`, `γ·d = 1.94` is the honest gradient's share and `q ≈ 1.50` the noise's (an honest step
//! has `E‖z‖₁ = d·b ≈ 1.12`). Clients must use the declared step: a client with a larger `γ` or
//! less noise than declared is rejected.
//!
//! **Rounding.** Clients post `f32` weights: an honest client computes `B + Δ` in `f64` and rounds
//! it, which moves `B'_i` by up to half an `f32` ulp (`≤ |B'_i|·2⁻²⁴`). The guard subtracts
//! `|B'_i|·2⁻²³` from each `|Δ_i|` (never below 0) before both statistical tests, so rounding
//! never makes an honest step fail (and an attacker gains at most that slack).
//!
//! What an attacker with draw access can still do, measured: `docs/SERVER_THREAT_MODEL.md`
//! (example `poisoning`).

use crate::client::{ClientNoise, ClientStep, PrivacyUnit};
use privfed_learn::error::{LearnError, Result, check_positive};
use privfed_special::{bisect_smallest, ln_gamma_inc_complement, norm_sf_inv_ln};
use serde::{Deserialize, Serialize};

/// Default absolute bound on every posted weight, `|w| ≤ 1e6` (see [`GuardSpec::max_abs_weight`]).
pub const DEFAULT_MAX_ABS_WEIGHT: f64 = 1e6;

/// Default probability that an honest step is rejected, `α = 1e-9` (see
/// [`GuardSpec::false_rejection`]).
pub const DEFAULT_FALSE_REJECTION: f64 = 1e-9;

/// The rounding allowance of the [module documentation](self): `|Δ_i|` is reduced by
/// `|B'_i|·2⁻²³` (twice an `f32` half-ulp) before the statistical tests.
const F32_ROUNDING: f64 = 1.0 / 8_388_608.0;

/// Independent accumulators of [`StepGuard::check`]'s single pass.
const LANES: usize = 8;

/// `|Δ_i|` of a posted weight `u` over its drawn `b`, less the rounding allowance, at least 0.
fn step_excess(b: f32, u: f32) -> f64 {
    let (b, u) = (f64::from(b), f64::from(u));
    ((u - b).abs() - u.abs() * F32_ROUNDING).max(0.0)
}

fn default_unit() -> PrivacyUnit {
    PrivacyUnit::Feature
}

/// What a model declares at creation about its clients' step (the JSON of `update_guard`):
/// `{"learning_rate": 0.005, "noise": {"kind": "laplace", "epsilon": 3.4657}}` plus the optional
/// keys below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardSpec {
    /// The clients' learning rate `γ`.
    pub learning_rate: f64,
    /// The clients' noise (`{"kind": "laplace", "epsilon": ..}`, `{"kind": "gaussian",
    /// "epsilon": .., "delta": ..}` or `{"kind": "none"}`).
    pub noise: ClientNoise,
    /// The clients' privacy unit (default [`PrivacyUnit::Feature`], the paper's).
    #[serde(default = "default_unit")]
    pub unit: PrivacyUnit,
    /// Absolute bound on every posted weight (default [`DEFAULT_MAX_ABS_WEIGHT`]). Choose it well
    /// above every weight an honest model can reach, including the initialization
    /// (`N(0, init_std²)`): an honest step from an instance near the bound can fail this test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_abs_weight: Option<f64>,
    /// Probability `α` that an honest step is rejected (default [`DEFAULT_FALSE_REJECTION`]),
    /// in `(0, 1)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub false_rejection: Option<f64>,
}

impl GuardSpec {
    /// A declaration with the defaults for the optional keys.
    pub fn new(learning_rate: f64, noise: ClientNoise) -> Self {
        Self {
            learning_rate,
            noise,
            unit: PrivacyUnit::Feature,
            max_abs_weight: None,
            false_rejection: None,
        }
    }
}

/// The explicit "no guard" value of `update_guard`: serializes as the string `"off"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardOff {
    /// `"off"`.
    Off,
}

/// The body field `update_guard` of a model creation: a declaration of the clients' step, or
/// the explicit string `"off"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UpdateGuard {
    /// `"off"`: no guard.
    Off(GuardOff),
    /// A declaration: updates are checked by a [`StepGuard`].
    Step(GuardSpec),
}

/// The norm of the guard's norm test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardNorm {
    /// `‖Δ‖₁ = Σ|Δ_i|` (Laplace noise, and no noise).
    L1,
    /// `‖Δ‖₂ = √(Σ Δ_i²)` (Gaussian noise).
    L2,
}

/// Which test of the guard an update failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardTest {
    /// `|B'_i| ≤` [`StepGuard::max_abs_weight`] (also a non-finite weight).
    MaxAbsWeight,
    /// `|Δ_i| ≤` [`StepGuard::coordinate_bound`].
    Coordinate,
    /// `‖Δ‖ ≤` [`StepGuard::norm_bound`].
    Norm,
}

/// Why the guard refused an update; travels in the HTTP server's 422 answer as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error(
    "the update is not a plausible client step from the drawn instance: {test:?} test failed{}: {value} > {bound}",
    index.map(|i| format!(" at weight {i}")).unwrap_or_default()
)]
pub struct GuardRejection {
    /// The test that failed (the first in the order absolute, per-coordinate, norm).
    pub test: GuardTest,
    /// The weight concerned (the worst one for the per-coordinate test; `None` for the norm
    /// test).
    pub index: Option<usize>,
    /// The offending value: `|B'_i|`, `|Δ_i|` (after the rounding allowance) or `‖Δ‖`.
    pub value: f64,
    /// The bound it exceeded.
    pub bound: f64,
}

/// A validated update guard for `dim` weights (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct StepGuard {
    step: ClientStep,
    alpha: f64,
    max_abs: f64,
    t: f64,
    coordinate: f64,
    norm: GuardNorm,
    noise_quantile: f64,
    norm_bound: f64,
}

/// The two-sided per-coordinate tail probability `p` with `1 − (1 − p)^d = a`.
fn per_coordinate_tail(a: f64, dim: usize) -> f64 {
    -((-a).ln_1p() / dim as f64).exp_m1()
}

/// Smallest `x` with `ln Q(shape, x) ≤ ln_a` (`Q` the regularized upper incomplete gamma).
fn gamma_upper_quantile(shape: f64, ln_a: f64) -> Result<f64> {
    let ok = |x: f64| ln_gamma_inc_complement(shape, x) <= ln_a;
    let mut hi = shape + 10.0 * shape.sqrt() + 4.0 * (-ln_a) + 10.0;
    let mut n = 0;
    while !ok(hi) {
        hi *= 2.0;
        n += 1;
        if n > 60 || !hi.is_finite() {
            return Err(LearnError::invalid(
                "false_rejection",
                ln_a.exp(),
                "the noise quantile cannot be computed",
            ));
        }
    }
    bisect_smallest::<std::convert::Infallible>(0.0, hi, 1e-13, |x| Ok(ok(x)))
        .map_err(|e| match e {})
}

impl StepGuard {
    /// The guard for a model with `dim` weights. Errors (like [`ClientStep::new`]) unless `γ > 0`,
    /// ε > 0, δ ∈ (0, 1) and `dim ≥ 1`, and unless `max_abs_weight > 0` is finite and
    /// `false_rejection ∈ (0, 1)`.
    pub fn new(spec: &GuardSpec, dim: usize) -> Result<Self> {
        let step = ClientStep::new(spec.learning_rate, spec.noise, spec.unit, dim)?;
        let max_abs = check_positive(
            "max_abs_weight",
            spec.max_abs_weight.unwrap_or(DEFAULT_MAX_ABS_WEIGHT),
        )?;
        let alpha = spec.false_rejection.unwrap_or(DEFAULT_FALSE_REJECTION);
        if !(alpha > 0.0 && alpha < 1.0) {
            return Err(LearnError::invalid(
                "false_rejection",
                alpha,
                "must lie in (0, 1)",
            ));
        }
        let gamma = step.learning_rate();
        let s = step.noise_scale();
        let d = dim as f64;
        let half = 0.5 * alpha;
        let p = per_coordinate_tail(half, dim);
        let (t, norm, noise_quantile) = match spec.noise {
            ClientNoise::None => (0.0, GuardNorm::L1, 0.0),
            ClientNoise::Laplace { .. } => {
                let x = gamma_upper_quantile(d, half.ln())?;
                (-p.ln(), GuardNorm::L1, s * x)
            }
            ClientNoise::Gaussian { .. } => {
                let x = gamma_upper_quantile(0.5 * d, half.ln())?;
                (
                    norm_sf_inv_ln(p.ln() - std::f64::consts::LN_2),
                    GuardNorm::L2,
                    s * (2.0 * x).sqrt(),
                )
            }
        };
        let ones = match norm {
            GuardNorm::L1 => d,
            GuardNorm::L2 => d.sqrt(),
        };
        let coordinate = gamma + t * s;
        let norm_bound = gamma * ones + noise_quantile;
        if !(t.is_finite() && coordinate.is_finite() && norm_bound.is_finite()) {
            return Err(LearnError::invalid(
                "false_rejection",
                alpha,
                "the guard's bounds overflow",
            ));
        }
        Ok(Self {
            step,
            alpha,
            max_abs,
            t,
            coordinate,
            norm,
            noise_quantile,
            norm_bound,
        })
    }

    /// The client step the guard was built from.
    pub fn step(&self) -> &ClientStep {
        &self.step
    }

    /// Number of weights `d`.
    pub fn dim(&self) -> usize {
        self.step.num_weights()
    }

    /// The false-rejection probability `α`.
    pub fn false_rejection(&self) -> f64 {
        self.alpha
    }

    /// The absolute bound `A` on every posted weight.
    pub fn max_abs_weight(&self) -> f64 {
        self.max_abs
    }

    /// The per-coordinate multiplier `t` (the bound is `γ + t·s`).
    pub fn coordinate_multiplier(&self) -> f64 {
        self.t
    }

    /// The largest honest `|Δ_i|` allowed, `C = γ + t·s`.
    pub fn coordinate_bound(&self) -> f64 {
        self.coordinate
    }

    /// The norm of the norm test: ℓ1 for Laplace noise and no noise, ℓ2 for Gaussian noise.
    pub fn norm(&self) -> GuardNorm {
        self.norm
    }

    /// The `(1 − α/2)` quantile `q` of the noise's norm `‖z‖` (0 without noise).
    pub fn noise_norm_quantile(&self) -> f64 {
        self.noise_quantile
    }

    /// The largest honest `‖Δ‖` allowed, `N = γ·‖1‖ + q`, in the norm [`StepGuard::norm`].
    pub fn norm_bound(&self) -> f64 {
        self.norm_bound
    }

    /// The three tests on `update` against `base`: (absolute failure, worst coordinate excess
    /// `(index, |Δ_i|)`, norm); the index is 0 unless the coordinate test fails.
    ///
    /// One branch-free pass over [`LANES`] independent accumulators (vectorized: ≈ 2× faster than
    /// a sequential sum at 387 weights, and the guard runs on every update); the norm is the sum
    /// of the lanes, so its rounding differs from a sequential sum only in the last bits. The
    /// indices of a failure are found by a second pass, only when there is one.
    fn evaluate(&self, base: &[f32], update: &[f32]) -> (Option<(usize, f64)>, (usize, f64), f64) {
        let n = base.len().min(update.len());
        let (base, update) = (&base[..n], &update[..n]);
        let mut largest = [0.0f64; LANES];
        let mut worst = [0.0f64; LANES];
        let mut acc = [0.0f64; LANES];
        let mut lane = |j: usize, b: f32, u: f32| {
            let a = f64::from(u).abs();
            // NaN wins: it must fail the absolute test.
            largest[j] = if a > largest[j] || a.is_nan() {
                a
            } else {
                largest[j]
            };
            let excess = step_excess(b, u);
            worst[j] = worst[j].max(excess);
            acc[j] += match self.norm {
                GuardNorm::L1 => excess,
                GuardNorm::L2 => excess * excess,
            };
        };
        let whole = n - n % LANES;
        for (b, u) in base[..whole]
            .chunks_exact(LANES)
            .zip(update[..whole].chunks_exact(LANES))
        {
            for j in 0..LANES {
                lane(j, b[j], u[j]);
            }
        }
        for (j, (&b, &u)) in base[whole..].iter().zip(&update[whole..]).enumerate() {
            lane(j, b, u);
        }
        let sum: f64 = acc.iter().sum();
        let norm = match self.norm {
            GuardNorm::L1 => sum,
            GuardNorm::L2 => sum.sqrt(),
        };
        let largest = largest
            .iter()
            .fold(0.0f64, |m, &a| if a > m || a.is_nan() { a } else { m });
        let worst = worst.iter().fold(0.0f64, |m, &w| m.max(w));
        let abs_fail = if largest.is_nan() || largest > self.max_abs {
            // The first weight that fails.
            update
                .iter()
                .map(|&u| f64::from(u).abs())
                .enumerate()
                .find(|(_, a)| a.is_nan() || *a > self.max_abs)
        } else {
            None
        };
        let worst_at = if worst > self.coordinate || worst.is_nan() {
            // The first coordinate with the worst excess; only a rejection reports it.
            base.iter()
                .zip(update)
                .position(|(&b, &u)| step_excess(b, u) == worst)
                .unwrap_or(0)
        } else {
            0
        };
        (abs_fail, (worst_at, worst), norm)
    }

    /// `Ok` if `update` is a plausible honest step from `base` (the instance the client drew):
    /// every `|update_i| ≤ A`, every `|Δ_i| ≤ C` and `‖Δ‖ ≤ N` (see the
    /// [module documentation](self)). Both have length [`StepGuard::dim`] and are finite
    /// (validated by the caller; a non-finite weight fails the absolute test, and extra weights
    /// of the longer slice are ignored).
    pub fn check(&self, base: &[f32], update: &[f32]) -> std::result::Result<(), GuardRejection> {
        let (abs_fail, (index, worst), norm) = self.evaluate(base, update);
        if let Some((index, value)) = abs_fail {
            return Err(GuardRejection {
                test: GuardTest::MaxAbsWeight,
                index: Some(index),
                value,
                bound: self.max_abs,
            });
        }
        if worst > self.coordinate || worst.is_nan() {
            return Err(GuardRejection {
                test: GuardTest::Coordinate,
                index: Some(index),
                value: worst,
                bound: self.coordinate,
            });
        }
        if norm > self.norm_bound || norm.is_nan() {
            return Err(GuardRejection {
                test: GuardTest::Norm,
                index: None,
                value: norm,
                bound: self.norm_bound,
            });
        }
        Ok(())
    }

    /// The strongest update the guard accepts in the direction `sign` (each entry's sign is used;
    /// 0 leaves the weight alone) from `base`: the norm budget `N` spread over the chosen
    /// weights, at most `C` each, clamped to `±A`. What a poisoning client posts (the
    /// `poisoning` example and the threat model's numbers).
    pub fn strongest_step(&self, base: &[f32], sign: &[f64]) -> Vec<f32> {
        let chosen = sign.iter().filter(|s| **s != 0.0).count().max(1) as f64;
        let per = match self.norm {
            GuardNorm::L1 => self.norm_bound / chosen,
            GuardNorm::L2 => self.norm_bound / chosen.sqrt(),
        }
        .min(self.coordinate);
        // Stay a hair inside the bounds so that f32 rounding cannot push the step out.
        let per = per * (1.0 - 1e-6);
        base.iter()
            .zip(sign)
            .map(|(&b, &s)| {
                let b = f64::from(b);
                let w = if s > 0.0 {
                    b + per
                } else if s < 0.0 {
                    b - per
                } else {
                    b
                };
                w.clamp(-self.max_abs, self.max_abs) as f32
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_mechanisms::rng::seeded_rng_for_experiments;
    use privfed_special::{gamma_inc_complement, norm_sf};
    use privfed_testkit::assert_z;

    fn laplace(eps: f64) -> ClientNoise {
        ClientNoise::Laplace { epsilon: eps }
    }

    fn gaussian(eps: f64, delta: f64) -> ClientNoise {
        ClientNoise::Gaussian {
            epsilon: eps,
            delta,
        }
    }

    /// A binomial z-test at level 1e-6: `k` events in `n` trials against probability `p`.
    fn assert_rate(k: u64, n: u64, p: f64, what: &str) {
        let n_f = n as f64;
        let z = (k as f64 / n_f - p) / (p * (1.0 - p) / n_f).sqrt();
        eprintln!(
            "{what}: {k}/{n} = {:.5} vs {p:.5} (z = {z:.2})",
            k as f64 / n_f
        );
        assert_z(z, 1e-6, what);
    }

    /// The bounds follow the closed forms of the module documentation.
    #[test]
    fn bounds_follow_the_closed_forms() {
        let d = 387;
        let mut spec = GuardSpec::new(0.005, laplace(32f64.ln()));
        let g = StepGuard::new(&spec, d).unwrap();
        let b = 2.0 * 0.005 / 32f64.ln();
        assert_eq!(g.step().noise_scale(), b);
        assert_eq!(g.max_abs_weight(), DEFAULT_MAX_ABS_WEIGHT);
        assert_eq!(g.false_rejection(), DEFAULT_FALSE_REJECTION);
        assert_eq!(g.norm(), GuardNorm::L1);
        // P(max |z_i| > t b) = 1 − (1 − e^{−t})^d = α/2.
        let p = (-g.coordinate_multiplier()).exp();
        let tail = -(d as f64 * (-p).ln_1p()).exp_m1();
        assert!((tail / 5e-10 - 1.0).abs() < 1e-9, "{tail}");
        assert!((g.coordinate_bound() - (0.005 + g.coordinate_multiplier() * b)).abs() < 1e-15);
        // Q(d, q/b) = α/2 and N = γd + q.
        let q = g.noise_norm_quantile();
        assert!((gamma_inc_complement(d as f64, q / b) / 5e-10 - 1.0).abs() < 1e-6);
        assert!((g.norm_bound() - (0.005 * d as f64 + q)).abs() < 1e-12);
        eprintln!(
            "BENCHMARKS setting: C = {}, N = {}, t = {}",
            g.coordinate_bound(),
            g.norm_bound(),
            g.coordinate_multiplier()
        );
        assert!(g.coordinate_bound() > 0.08 && g.coordinate_bound() < 0.09);
        assert!(g.norm_bound() > 3.0 && g.norm_bound() < 4.0);

        // Gaussian: 2 Q(t) = p, Q_{χ²}(d/2, q²/(2σ²)) = α/2, N = γ√d + q.
        spec.noise = gaussian(1.0, 1e-6);
        spec.false_rejection = Some(1e-3);
        let g = StepGuard::new(&spec, d).unwrap();
        let s = g.step().noise_scale();
        assert_eq!(g.norm(), GuardNorm::L2);
        let p = 2.0 * norm_sf(g.coordinate_multiplier());
        let tail = -(d as f64 * (-p).ln_1p()).exp_m1();
        assert!((tail / 5e-4 - 1.0).abs() < 1e-9, "{tail}");
        let q = g.noise_norm_quantile();
        let x = (q / s).powi(2);
        assert!((gamma_inc_complement(d as f64 / 2.0, x / 2.0) / 5e-4 - 1.0).abs() < 1e-6);
        assert!((g.norm_bound() - (0.005 * (d as f64).sqrt() + q)).abs() < 1e-12);

        // No noise: exactly γ per coordinate, γd in ℓ1.
        let g = StepGuard::new(&GuardSpec::new(0.1, ClientNoise::None), 4).unwrap();
        assert_eq!(g.coordinate_bound(), 0.1);
        assert!((g.norm_bound() - 0.4).abs() < 1e-15);
        // Tiny α still works (log-space quantiles).
        let mut spec = GuardSpec::new(0.01, laplace(1.0));
        spec.false_rejection = Some(1e-300);
        let g = StepGuard::new(&spec, 10).unwrap();
        assert!(g.coordinate_multiplier() > 690.0 && g.norm_bound().is_finite());
    }

    #[test]
    fn invalid_declarations_are_errors() {
        let ok = GuardSpec::new(0.01, laplace(1.0));
        assert!(StepGuard::new(&ok, 0).is_err());
        for bad in [
            GuardSpec::new(0.0, laplace(1.0)),
            GuardSpec::new(f64::NAN, laplace(1.0)),
            GuardSpec::new(0.01, laplace(-1.0)),
            GuardSpec::new(0.01, gaussian(1.0, 1.0)),
            GuardSpec {
                max_abs_weight: Some(0.0),
                ..ok.clone()
            },
            GuardSpec {
                max_abs_weight: Some(f64::INFINITY),
                ..ok.clone()
            },
            GuardSpec {
                false_rejection: Some(0.0),
                ..ok.clone()
            },
            GuardSpec {
                false_rejection: Some(1.0),
                ..ok.clone()
            },
            GuardSpec {
                false_rejection: Some(f64::NAN),
                ..ok.clone()
            },
        ] {
            assert!(StepGuard::new(&bad, 5).is_err(), "{bad:?}");
        }
    }

    /// Edge cases: the absolute bound (item 4's `f32::MAX` and item 3's `1e30` are refused
    /// whatever the base), a non-finite weight, one coordinate just over `C`, every coordinate
    /// at `C` (passes the per-coordinate test, fails the norm test), the strongest step passes,
    /// rounding of large weights, and the error's JSON.
    #[test]
    fn edge_cases() {
        let d = 100;
        let g = StepGuard::new(&GuardSpec::new(0.005, laplace(32f64.ln())), d).unwrap();
        let base = vec![0.25f32; d];
        assert!(g.check(&base, &base).is_ok());
        let mut u = base.clone();
        u[7] = f32::MAX;
        let r = g.check(&base, &u).unwrap_err();
        assert_eq!((r.test, r.index), (GuardTest::MaxAbsWeight, Some(7)));
        let huge = vec![1e30f32; d];
        assert_eq!(
            g.check(&huge, &huge).unwrap_err().test,
            GuardTest::MaxAbsWeight
        );
        u[7] = f32::NAN;
        assert_eq!(
            g.check(&base, &u).unwrap_err().test,
            GuardTest::MaxAbsWeight
        );
        let c = g.coordinate_bound();
        let mut u = base.clone();
        u[3] = (0.25 + c * 1.001) as f32;
        let r = g.check(&base, &u).unwrap_err();
        assert_eq!((r.test, r.index), (GuardTest::Coordinate, Some(3)));
        assert!(r.to_string().contains("at weight 3"), "{r}");
        u[3] = (0.25 - c * 0.999) as f32;
        assert!(g.check(&base, &u).is_ok());
        let all: Vec<f32> = base
            .iter()
            .map(|b| (f64::from(*b) + 0.999 * c) as f32)
            .collect();
        let r = g.check(&base, &all).unwrap_err();
        assert_eq!((r.test, r.index), (GuardTest::Norm, None));
        let sign: Vec<f64> = (0..d)
            .map(|i| if i % 2 == 0 { 1.0 } else { -1.0 })
            .collect();
        let strong = g.strongest_step(&base, &sign);
        assert!(g.check(&base, &strong).is_ok());
        let l1: f64 = strong
            .iter()
            .zip(&base)
            .map(|(u, b)| f64::from(u - b).abs())
            .sum();
        assert!(l1 > 0.999 * g.norm_bound(), "{l1} vs {}", g.norm_bound());
        // Concentrated: ⌈N/C⌉ weights at C.
        let mut one = vec![0.0; d];
        one[..5].iter_mut().for_each(|s| *s = 1.0);
        let strong = g.strongest_step(&base, &one);
        assert!(g.check(&base, &strong).is_ok());
        assert!((f64::from(strong[0] - base[0]) - c).abs() < 1e-6);
        // Rounding: a step of γ from a weight near 1e5 (f32 ulp 0.0078) is still accepted.
        let big = vec![123_456.7f32; d];
        let stepped: Vec<f32> = big.iter().map(|b| (f64::from(*b) + 0.005) as f32).collect();
        assert!(g.check(&big, &stepped).is_ok());
        // JSON of a rejection.
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["test"], "norm");
        assert!(v["index"].is_null());
        assert_eq!(serde_json::from_value::<GuardRejection>(v).unwrap(), r);
        // Without noise: exactly γ.
        let g = StepGuard::new(&GuardSpec::new(0.5, ClientNoise::None), 2).unwrap();
        assert!(g.check(&[1.0, 1.0], &[1.5, 0.5]).is_ok());
        assert_eq!(
            g.check(&[1.0, 1.0], &[1.5, 0.49]).unwrap_err().test,
            GuardTest::Coordinate
        );
    }

    /// The single lane-wise pass finds what a sequential pass over the weights finds: the same
    /// first failing weight, the same worst excess and where it first occurs, and the norm to
    /// rounding; for lengths around multiples of the lane count and failures anywhere.
    #[test]
    fn the_lane_wise_pass_agrees_with_a_sequential_one() {
        use rand::RngExt;
        fn sequential(
            g: &StepGuard,
            base: &[f32],
            update: &[f32],
        ) -> (Option<(usize, f64)>, (usize, f64), f64) {
            let mut abs_fail = None;
            let mut worst = (0usize, 0.0f64);
            let mut acc = 0.0f64;
            for (i, (&b, &u)) in base.iter().zip(update).enumerate() {
                let (b, u) = (f64::from(b), f64::from(u));
                if abs_fail.is_none() && (u.is_nan() || u.abs() > g.max_abs) {
                    abs_fail = Some((i, u.abs()));
                }
                let excess = ((u - b).abs() - u.abs() * F32_ROUNDING).max(0.0);
                if excess > worst.1 {
                    worst = (i, excess);
                }
                acc += match g.norm {
                    GuardNorm::L1 => excess,
                    GuardNorm::L2 => excess * excess,
                };
            }
            let norm = match g.norm {
                GuardNorm::L1 => acc,
                GuardNorm::L2 => acc.sqrt(),
            };
            (abs_fail, worst, norm)
        }
        let mut rng = seeded_rng_for_experiments(41);
        let mut accepted = 0u64;
        for noise in [laplace(1.0), gaussian(1.0, 1e-6)] {
            for d in [1, 7, 8, 9, 16, 387] {
                let g = StepGuard::new(&GuardSpec::new(0.01, noise), d).unwrap();
                let c = g.coordinate_bound();
                for trial in 0..200 {
                    let base: Vec<f32> = (0..d).map(|_| rng.random_range(-1.0..1.0)).collect();
                    let mut u: Vec<f32> = base
                        .iter()
                        .map(|b| b + rng.random_range(-0.5 * c..0.5 * c) as f32)
                        .collect();
                    // Some trials break a test at a random weight (twice, to check "first").
                    for _ in 0..2 {
                        let i = rng.random_range(0..d);
                        match trial % 4 {
                            1 => u[i] = base[i] + (2.0 * c) as f32,
                            2 => u[i] = 2e6,
                            3 => u[i] = f32::NAN,
                            _ => {}
                        }
                    }
                    let (a, (wi, w), n) = g.evaluate(&base, &u);
                    let (ra, (rwi, rw), rn) = sequential(&g, &base, &u);
                    assert_eq!(a.map(|x| x.0), ra.map(|x| x.0), "d {d} trial {trial}");
                    assert_eq!(w.to_bits(), rw.to_bits(), "d {d} trial {trial}");
                    if w > g.coordinate_bound() {
                        assert_eq!(wi, rwi, "d {d} trial {trial}");
                    }
                    assert!((n - rn).abs() <= 1e-12 * rn, "{n} vs {rn}");
                    let passes = ra.is_none() && rw <= g.coordinate_bound() && rn <= g.norm_bound();
                    assert_eq!(g.check(&base, &u).is_ok(), passes, "d {d} trial {trial}");
                    accepted += u64::from(passes);
                }
            }
        }
        // Both outcomes were exercised.
        assert!(accepted > 100 && accepted < 2 * 6 * 200, "{accepted}");
    }

    #[test]
    fn update_guard_serde() {
        let off: UpdateGuard = serde_json::from_str(r#""off""#).unwrap();
        assert_eq!(off, UpdateGuard::Off(GuardOff::Off));
        assert_eq!(serde_json::to_string(&off).unwrap(), r#""off""#);
        let s: UpdateGuard = serde_json::from_str(
            r#"{"learning_rate":0.005,"noise":{"kind":"laplace","epsilon":3.4657}}"#,
        )
        .unwrap();
        let UpdateGuard::Step(spec) = &s else {
            panic!("{s:?}")
        };
        assert_eq!(spec, &GuardSpec::new(0.005, laplace(3.4657)));
        assert_eq!(
            serde_json::from_str::<UpdateGuard>(&serde_json::to_string(&s).unwrap()).unwrap(),
            s
        );
        let full: UpdateGuard = serde_json::from_str(
            r#"{"learning_rate":0.1,"noise":{"kind":"gaussian","epsilon":1,"delta":1e-6},
                "unit":"model","max_abs_weight":50,"false_rejection":1e-6}"#,
        )
        .unwrap();
        let UpdateGuard::Step(spec) = full else {
            panic!()
        };
        assert_eq!(spec.unit, PrivacyUnit::Model);
        assert_eq!(spec.max_abs_weight, Some(50.0));
        assert_eq!(spec.false_rejection, Some(1e-6));
        for bad in [
            r#""on""#,
            r#""OFF""#,
            r#"{"learning_rate":0.1,"noise":{"kind":"none"},"extra":1}"#,
            r#"{"noise":{"kind":"none"}}"#,
            r#"{"learning_rate":0.1,"noise":{"kind":"laplace"}}"#,
            "null",
            "1",
        ] {
            assert!(serde_json::from_str::<UpdateGuard>(bad).is_err(), "{bad}");
        }
    }

    /// With `G = 0` and a large α each statistical test rejects at its closed-form rate.
    /// Per coordinate: `1 − (1 − p_C)^d` with `p_C = P(|z_i| > C)` (`e^{−C/b}` for Laplace,
    /// `2Q(C/σ)` for Gaussian). Norm: `P(‖z‖ > N)` (`Q(d, N/b)` for ℓ1 Laplace, `Q(d/2,
    /// N²/(2σ²))` for ℓ2 Gaussian); with a small ε the gradient's share `γ‖1‖` of `N` is small
    /// enough that this rate is measurable. And the noise-norm quantile itself: `P(‖z‖ > q) = α/2`.
    /// n = 40,000 steps of d = 100 weights per setting (fixed seeds); binomial z-tests at level
    /// 1e-6 each (5 per setting, 2 settings: family-wise FPR ≤ 1e-5).
    #[test]
    fn rejection_rates_match_the_closed_forms() {
        let (d, n) = (100usize, 40_000u64);
        for (noise, seed) in [(laplace(0.02), 31u64), (gaussian(0.05, 1e-3), 32)] {
            let mut spec = GuardSpec::new(0.01, noise);
            spec.false_rejection = Some(0.05);
            let g = StepGuard::new(&spec, d).unwrap();
            let s = g.step().noise_scale();
            let (c, nb, q) = (
                g.coordinate_bound(),
                g.norm_bound(),
                g.noise_norm_quantile(),
            );
            let (p_c, p_norm) = match noise {
                ClientNoise::Laplace { .. } => {
                    ((-c / s).exp(), gamma_inc_complement(d as f64, nb / s))
                }
                _ => (
                    2.0 * norm_sf(c / s),
                    gamma_inc_complement(d as f64 / 2.0, (nb / s).powi(2) / 2.0),
                ),
            };
            let p_coord = 1.0 - (1.0 - p_c).powi(d as i32);
            let mut rng = seeded_rng_for_experiments(seed);
            let base = vec![0.0f32; d];
            let zero = vec![0.0; d];
            let (mut n_coord, mut n_norm, mut n_q, mut n_any) = (0u64, 0u64, 0u64, 0u64);
            for _ in 0..n {
                let out = g
                    .step()
                    .privatize_step(&vec![0.0; d], &zero, &mut rng)
                    .unwrap();
                let u: Vec<f32> = out.iter().map(|x| *x as f32).collect();
                let (abs, (_, worst), norm) = g.evaluate(&base, &u);
                assert!(abs.is_none());
                n_coord += u64::from(worst > c);
                n_norm += u64::from(norm > nb);
                let zn = match g.norm() {
                    GuardNorm::L1 => out.iter().map(|x| x.abs()).sum::<f64>(),
                    GuardNorm::L2 => out.iter().map(|x| x * x).sum::<f64>().sqrt(),
                };
                n_q += u64::from(zn > q);
                n_any += u64::from(g.check(&base, &u).is_err());
            }
            let name = format!("{noise:?}");
            assert_rate(n_coord, n, p_coord, &format!("{name}: coordinate"));
            assert_rate(n_norm, n, p_norm, &format!("{name}: norm"));
            assert_rate(n_q, n, 0.025, &format!("{name}: noise norm quantile"));
            assert!(n_any <= n_coord + n_norm && n_any >= n_coord.max(n_norm));
            // The per-coordinate quantile alone (γ removed): P(max|z_i| > t·s) = α/2.
            let mut n_t = 0u64;
            let tt = g.coordinate_multiplier() * s;
            for _ in 0..n {
                let out = g
                    .step()
                    .privatize_step(&vec![0.0; d], &zero, &mut rng)
                    .unwrap();
                n_t += u64::from(out.iter().any(|x| x.abs() > tt));
            }
            assert_rate(n_t, n, 0.025, &format!("{name}: max-coordinate quantile"));
        }
    }

    /// No honest step is rejected at the default α = 1e-9: 10^5 steps per setting (Laplace ε =
    /// ln 32 and Gaussian ε = 1, δ = 1e-6; γ = 0.005, d = 100), gradients uniform on [−2, 2]
    /// (so clipping is active) at bases of every magnitude up to 1e4 (f32 rounding). Each step
    /// is rejected with probability ≤ 1e-9, so the assertion's false-positive probability is
    /// ≤ 2·10^5·1e-9 = 2e-4.
    #[test]
    fn no_honest_step_is_rejected_at_the_default_alpha() {
        use rand::RngExt;
        let d = 100;
        for (noise, seed) in [(laplace(32f64.ln()), 41u64), (gaussian(1.0, 1e-6), 42)] {
            let g = StepGuard::new(&GuardSpec::new(0.005, noise), d).unwrap();
            let mut rng = seeded_rng_for_experiments(seed);
            let mut rejected = 0u64;
            for n in 0..100_000u64 {
                let mag = 10f64.powi((n % 9) as i32 - 4);
                let base: Vec<f32> = (0..d)
                    .map(|_| (mag * rng.random_range(-1.0..1.0)) as f32)
                    .collect();
                let base64: Vec<f64> = base.iter().map(|b| f64::from(*b)).collect();
                let grad: Vec<f64> = (0..d).map(|_| rng.random_range(-2.0..2.0)).collect();
                let out = g.step().privatize_step(&base64, &grad, &mut rng).unwrap();
                let u: Vec<f32> = out.iter().map(|x| *x as f32).collect();
                if let Err(r) = g.check(&base, &u) {
                    eprintln!("{noise:?}: honest step {n} rejected: {r}");
                    rejected += 1;
                }
            }
            assert_eq!(rejected, 0, "{noise:?}");
        }
    }
}
