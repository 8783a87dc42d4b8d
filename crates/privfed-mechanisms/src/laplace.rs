//! The Laplace mechanism as a local randomizer (baseline; `docs/ALGORITHMS.md` §2.5, paper 003's
//! client noise): `M(x) = x + b·(L_1, …, L_d)` with `L_i` i.i.d. standard Laplace and
//! `b = Δ₁/ε`, where `Δ₁` is the ℓ1 diameter of the input domain (see [`l1_diameter`]).
//!
//! Pure ε-LDP: for any two inputs `x, x'` of the domain the density ratio is at most
//! `exp(‖x − x'‖₁/b) ≤ exp(Δ₁/b) = e^ε`. Unbiased, with `E‖M(x) − x‖² = 2b²·d` for every input.
//!
//! **Floating point.** This is the textbook real-valued mechanism evaluated in `f64`; Mironov
//! (CCS 2012) showed that the low-order bits of naive floating-point Laplace samples can leak the
//! input. The guarantee stated here is that of the ideal real-valued mechanism (see
//! `docs/FLOATING_POINT.md`).

use crate::additive::privatize_additive;
use crate::domain::validate_domain;
use crate::error::{MechanismError, Result, check_positive};
use crate::{CryptoRng, Domain, Guarantee, LocalRandomizer, Rng};
use serde::Serialize;

/// The ℓ1 diameter `Δ₁ = sup ‖x − x'‖₁` of a domain — the sensitivity of the identity map under
/// local DP, where any two inputs are neighbours:
///
/// | domain | `Δ₁` | attained at |
/// |---|---|---|
/// | ℓ1 ball of radius r | `2r` | `±r·e₁` |
/// | ℓ2 ball of radius r, dim d | `2r√d` (`‖v‖₁ ≤ √d‖v‖₂`) | `±r·(1,…,1)/√d` |
/// | unit sphere, dim d | `2√d` | `±(1,…,1)/√d` |
/// | ℓ∞ ball of radius r, dim d | `2rd` | `±r·(1,…,1)` |
/// | interval `[lo, hi]` | `hi − lo` | `lo, hi` |
///
/// Errors if the domain's parameters are invalid or the diameter overflows.
pub fn l1_diameter(domain: &Domain) -> Result<f64> {
    validate_domain(domain)?;
    let d = domain.dim() as f64;
    let diam = match *domain {
        Domain::L1Ball { radius, .. } => 2.0 * radius,
        Domain::L2Ball { radius, .. } => 2.0 * radius * d.sqrt(),
        Domain::UnitSphere { .. } => 2.0 * d.sqrt(),
        Domain::LInfBall { radius, .. } => 2.0 * radius * d,
        Domain::Interval { lo, hi } => hi - lo,
    };
    if diam.is_finite() {
        Ok(diam)
    } else {
        Err(MechanismError::Infeasible(format!(
            "the ℓ1 diameter of the domain overflows ({domain:?})"
        )))
    }
}

/// One Laplace(0, `scale`) sample (density `exp(−|z|/scale)/(2·scale)`): a uniformly random sign
/// times `scale` times an Exp(1) variate, both from one 64-bit word on the fast path
/// ([`crate::batch::laplace`]: exponential ziggurat, exact tail by memorylessness). Generic over
/// the generator; `scale` is not validated (a non-positive or NaN scale gives a meaningless value
/// — validate before calling, as [`Laplace`] does).
pub fn sample_laplace<R: Rng + ?Sized>(rng: &mut R, scale: f64) -> f64 {
    crate::batch::laplace(rng, scale)
}

/// The Laplace mechanism on a [`Domain`], calibrated to pure ε-LDP with `b = Δ₁/ε`
/// (see the [module documentation](self)). Name `"laplace"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Laplace {
    /// The requested ε.
    epsilon: f64,
    domain: Domain,
    /// `Δ₁`, the ℓ1 diameter of the domain.
    sensitivity: f64,
    /// `b = Δ₁/ε`.
    scale: f64,
}

impl Laplace {
    /// Laplace mechanism with scale `b = Δ₁/ε` on `domain` (`Δ₁` from [`l1_diameter`]).
    /// Errors on a non-positive or non-finite ε or an invalid domain.
    pub fn new(epsilon: f64, domain: Domain) -> Result<Laplace> {
        check_positive("epsilon", epsilon)?;
        let sensitivity = l1_diameter(&domain)?;
        let scale = check_positive("scale", sensitivity / epsilon)?;
        Ok(Laplace {
            epsilon,
            domain,
            sensitivity,
            scale,
        })
    }

    /// The noise scale `b = Δ₁/ε`.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The ℓ1 sensitivity `Δ₁` (diameter of the domain).
    pub fn sensitivity(&self) -> f64 {
        self.sensitivity
    }
}

impl LocalRandomizer for Laplace {
    fn name(&self) -> &'static str {
        "laplace"
    }

    fn domain(&self) -> Domain {
        self.domain
    }

    /// `Pure { ε = Δ₁/b }`, recomputed from the scale.
    fn guarantee(&self) -> Guarantee {
        Guarantee::Pure {
            epsilon: self.sensitivity / self.scale,
        }
    }

    /// `2b²·d` (the same for every input).
    fn variance_at(&self, x: &[f64]) -> Result<f64> {
        self.domain.check(x)?;
        Ok(self.worst_case_variance())
    }

    /// `2b²·d`.
    fn worst_case_variance(&self) -> f64 {
        2.0 * self.scale * self.scale * self.domain.dim() as f64
    }

    fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        self.privatize_into_threads(x, out, rng, crate::rng::Threads::ONE)
    }

    /// `x + Lap(b)` per coordinate, the noise drawn in blocks from streams of a fresh key (the
    /// same output for every thread count).
    fn privatize_into_threads<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
        threads: crate::rng::Threads,
    ) -> Result<()> {
        let scale = self.scale;
        privatize_additive(self.domain, x, out, rng, threads, |stream, xs, chunk| {
            crate::batch::add_laplace(stream, scale, xs, chunk)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_rng_for_experiments;
    use privfed_testkit::{
        assert_ks_fits, assert_z, ks_critical, ks_statistic, z_mean_known_variance,
    };
    use rand::RngExt;

    fn l1(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
    }

    #[test]
    fn l1_diameters_are_attained_and_not_exceeded() {
        let d = 7usize;
        let s = (d as f64).sqrt();
        let cases: Vec<(Domain, Vec<f64>, f64)> = vec![
            (
                Domain::L1Ball {
                    dim: d,
                    radius: 1.5,
                },
                {
                    let mut v = vec![0.0; d];
                    v[0] = 1.5;
                    v
                },
                3.0,
            ),
            (
                Domain::L2Ball {
                    dim: d,
                    radius: 2.0,
                },
                vec![2.0 / s; d],
                4.0 * s,
            ),
            (Domain::UnitSphere { dim: d }, vec![1.0 / s; d], 2.0 * s),
            (
                Domain::LInfBall {
                    dim: d,
                    radius: 0.5,
                },
                vec![0.5; d],
                0.5 * 2.0 * d as f64,
            ),
        ];
        let mut rng = seeded_rng_for_experiments(3);
        for (dom, x, expected) in cases {
            let xm: Vec<f64> = x.iter().map(|v| -v).collect();
            dom.check(&x).unwrap();
            dom.check(&xm).unwrap();
            let diam = l1_diameter(&dom).unwrap();
            assert!((diam - expected).abs() < 1e-12 * expected, "{dom:?}");
            assert!(
                (l1(&x, &xm) - diam).abs() < 1e-12 * diam,
                "{dom:?} not attained"
            );
            // Random points of the domain (scaled Gaussian directions) never exceed it.
            for _ in 0..2000 {
                let pt = |rng: &mut crate::rng::ExperimentRng| -> Vec<f64> {
                    let g: Vec<f64> = (0..d)
                        .map(|_| rng.sample::<f64, _>(rand_distr::StandardNormal))
                        .collect();
                    let u: f64 = rng.random();
                    match dom {
                        Domain::L1Ball { radius, .. } => {
                            let n: f64 = g.iter().map(|v| v.abs()).sum();
                            g.iter().map(|v| v / n * radius * u).collect()
                        }
                        Domain::L2Ball { radius, .. } => {
                            let n = crate::domain::l2_norm(&g);
                            g.iter().map(|v| v / n * radius * u).collect()
                        }
                        Domain::UnitSphere { .. } => {
                            let n = crate::domain::l2_norm(&g);
                            g.iter().map(|v| v / n).collect()
                        }
                        Domain::LInfBall { radius, .. } => g
                            .iter()
                            .map(|v| (v / 3.0).clamp(-1.0, 1.0) * radius)
                            .collect(),
                        Domain::Interval { .. } => unreachable!(),
                    }
                };
                let (a, b) = (pt(&mut rng), pt(&mut rng));
                assert!(l1(&a, &b) <= diam * (1.0 + 1e-12));
            }
        }
        let iv = Domain::Interval { lo: -1.0, hi: 2.5 };
        assert_eq!(l1_diameter(&iv).unwrap(), 3.5);
        // d = 1 sphere is {−1, 1}.
        assert_eq!(l1_diameter(&Domain::UnitSphere { dim: 1 }).unwrap(), 2.0);
    }

    #[test]
    fn guarantee_and_variance() {
        let m = Laplace::new(
            2.0,
            Domain::L2Ball {
                dim: 4,
                radius: 1.0,
            },
        )
        .unwrap();
        assert_eq!(m.sensitivity(), 4.0);
        assert_eq!(m.scale(), 2.0);
        assert!((m.guarantee().epsilon() - 2.0).abs() < 1e-15);
        assert_eq!(m.worst_case_variance(), 2.0 * 4.0 * 4.0);
        assert_eq!(m.variance_at(&[0.5, 0.0, 0.0, 0.0]).unwrap(), 32.0);
        assert_eq!(m.name(), "laplace");
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["scale"], 2.0);
        assert_eq!(json["domain"]["kind"], "l2_ball");
    }

    #[test]
    fn monte_carlo_mean_and_variance() {
        // Per coordinate: two-sided z-tests at α = 6e-7 (|z| < 4.99) on the mean (variance 2b²)
        // and on the mean square (Var(Z²) = E Z⁴ − (E Z²)² = 24b⁴ − 4b⁴ = 20b⁴), 2·3 tests.
        let m = Laplace::new(
            1.0,
            Domain::LInfBall {
                dim: 3,
                radius: 0.5,
            },
        )
        .unwrap();
        let b = m.scale();
        let x = [0.5, -0.2, 0.0];
        let n = 300_000;
        let mut rng = seeded_rng_for_experiments(17);
        let mut s1 = [0.0; 3];
        let mut s2 = [0.0; 3];
        let mut out = [0.0; 3];
        for _ in 0..n {
            m.privatize_into(&x, &mut out, &mut rng).unwrap();
            for i in 0..3 {
                let z = out[i] - x[i];
                s1[i] += z;
                s2[i] += z * z;
            }
        }
        let nf = n as f64;
        for i in 0..3 {
            let z = z_mean_known_variance(s1[i] / nf, n, 0.0, 2.0 * b * b);
            assert_z(z, 6e-7, &format!("coordinate {i}: mean"));
            let z = z_mean_known_variance(s2[i] / nf, n, 2.0 * b * b, 20.0 * b.powi(4));
            assert_z(z, 6e-7, &format!("coordinate {i}: mean square"));
        }
    }

    #[test]
    fn sampler_kolmogorov_smirnov() {
        // One-sample KS against the Laplace(0, 1.7) CDF at α = 1e-6 (DKW–Massart critical
        // value, valid for every n): FPR ≤ 1e-6.
        let scale = 1.7;
        let n = 200_000;
        let mut rng = seeded_rng_for_experiments(23);
        let mut v: Vec<f64> = (0..n).map(|_| sample_laplace(&mut rng, scale)).collect();
        let cdf_with = |s: f64| {
            move |z: f64| {
                if z < 0.0 {
                    0.5 * (z / s).exp()
                } else {
                    1.0 - 0.5 * (-z / s).exp()
                }
            }
        };
        assert_ks_fits(&mut v, cdf_with(scale), 1e-6, "Laplace(0, 1.7)");
        // The test has power: a 6% scale error is rejected (expected statistic ≈ 0.011).
        let dw = ks_statistic(&mut v, cdf_with(scale * 1.06)).unwrap();
        assert!(
            dw > ks_critical(n, 1e-6),
            "6% scale error not detected: D = {dw}"
        );
    }

    #[test]
    fn bad_inputs_are_errors() {
        let dom = Domain::L1Ball {
            dim: 2,
            radius: 1.0,
        };
        for eps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(Laplace::new(eps, dom).is_err());
        }
        assert!(
            Laplace::new(
                1.0,
                Domain::L1Ball {
                    dim: 0,
                    radius: 1.0
                }
            )
            .is_err()
        );
        assert!(
            Laplace::new(
                1.0,
                Domain::L2Ball {
                    dim: 2,
                    radius: -1.0
                }
            )
            .is_err()
        );
        assert!(
            Laplace::new(
                1.0,
                Domain::LInfBall {
                    dim: 2,
                    radius: f64::NAN
                }
            )
            .is_err()
        );
        assert!(Laplace::new(1.0, Domain::Interval { lo: 1.0, hi: 1.0 }).is_err());
        assert!(
            Laplace::new(
                1.0,
                Domain::Interval {
                    lo: f64::NAN,
                    hi: 1.0
                }
            )
            .is_err()
        );
        assert!(
            Laplace::new(
                1.0,
                Domain::Interval {
                    lo: -f64::MAX,
                    hi: f64::MAX
                }
            )
            .is_err()
        );
        assert!(
            Laplace::new(
                1.0,
                Domain::LInfBall {
                    dim: 10,
                    radius: f64::MAX
                }
            )
            .is_err()
        );
        let m = Laplace::new(1.0, dom).unwrap();
        let mut rng = seeded_rng_for_experiments(1);
        assert!(m.privatize(&[0.5], &mut rng).is_err());
        assert!(m.privatize(&[0.9, 0.9], &mut rng).is_err());
        assert!(m.privatize(&[f64::NAN, 0.0], &mut rng).is_err());
        let mut out = [0.0; 3];
        assert!(m.privatize_into(&[0.1, 0.1], &mut out, &mut rng).is_err());
        assert!(m.variance_at(&[2.0, 0.0]).is_err());
    }
}
