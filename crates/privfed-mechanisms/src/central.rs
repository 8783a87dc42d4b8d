//! The central step of paper 000 (`docs/ALGORITHMS.md` §1.5 "Central layer"; paper 000 eq. 13):
//! project each (already locally privatized) update onto the ℓ2 ball of radius `M`, average over
//! the **expected** batch size `qN` of a Poisson-sampled cohort, and add Gaussian noise
//! `N(0, σ²I)` with `σ = z·M/(qN)`:
//!
//! `aggregate = (Σ_{i ∈ batch} Π_M(u_i))/(qN) + N(0, (zM/(qN))² I)`, `Π_M(u) = u·min(1, M/‖u‖₂)`.
//!
//! Dividing by the expected rather than the realized batch size keeps the sensitivity of the
//! average to one client at `M/(qN)`, so the noise multiplier `z` is the ratio of the noise
//! standard deviation to the sensitivity.
//!
//! **Privacy is not computed here.** The central guarantee of the composition is that of the
//! Poisson-subsampled Gaussian mechanism with sampling rate `q` and noise multiplier `z`, composed
//! over rounds; it is accounted in the accounting crate (`privfed-accounting`, RDP/PLD,
//! `docs/ALGORITHMS.md` §5), not in this module. This module only implements the sampling, projection
//! and noise, exactly.

use crate::domain::{l2_norm_scaled, l2_norm_scaled_by};
use crate::error::{MechanismError, Result, check_positive};
use crate::sampling::bernoulli_exact;
use crate::{CryptoRng, Rng};
use serde::Serialize;

/// The central projection + Gaussian noise of paper 000 (see the [module docs](self)).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CentralGaussian {
    /// `M`, the radius of the ℓ2 ball the updates are projected onto.
    clip_norm: f64,
    /// `z`, the noise standard deviation in units of the sensitivity `M/(qN)`.
    noise_multiplier: f64,
}

impl CentralGaussian {
    /// A central layer with clip norm `M > 0` and noise multiplier `z > 0` (both finite).
    pub fn new(clip_norm: f64, noise_multiplier: f64) -> Result<CentralGaussian> {
        check_positive("clip_norm", clip_norm)?;
        check_positive("noise_multiplier", noise_multiplier)?;
        Ok(CentralGaussian {
            clip_norm,
            noise_multiplier,
        })
    }

    /// `M`.
    pub fn clip_norm(&self) -> f64 {
        self.clip_norm
    }

    /// `z`.
    pub fn noise_multiplier(&self) -> f64 {
        self.noise_multiplier
    }

    /// The projection `Π_M(v) = v·min(1, M/‖v‖₂)` onto the ℓ2 ball of radius `M`.
    ///
    /// Vectors inside the ball are returned unchanged. The norm is computed with scaling (no
    /// overflow for large finite entries), and the result is guaranteed to satisfy
    /// `‖Π_M(v)‖₂ ≤ M` as computed (the scale factor is nudged down by an ulp if rounding would
    /// land just above `M`). Expects finite entries (non-finite entries propagate as NaN;
    /// [`aggregate`](Self::aggregate) rejects them).
    pub fn project(&self, v: &[f64]) -> Vec<f64> {
        match self.projection_factor(v, l2_norm_scaled(v)) {
            None => v.to_vec(),
            Some(factor) => v.iter().map(|x| x * factor).collect(),
        }
    }

    /// The factor of [`project`](Self::project) for `v` of scaled norm `n` (`None`: inside the
    /// ball, or a NaN norm, so `v` is kept as it is), checked on the products `x * factor`
    /// without storing them.
    fn projection_factor(&self, v: &[f64], n: f64) -> Option<f64> {
        if n.is_nan() || n <= self.clip_norm {
            return None;
        }
        let mut factor = self.clip_norm / n;
        loop {
            if l2_norm_scaled_by(v, factor) <= self.clip_norm
                || factor == 0.0
                || !factor.is_finite()
            {
                return Some(factor);
            }
            factor *= 1.0 - f64::EPSILON;
        }
    }

    /// The standard deviation of the noise added to the average: `σ = z·M/(qN)`, with
    /// `expected_batch_size = qN` (meaningful for a finite positive value; returns NaN or ∞
    /// otherwise — [`aggregate`](Self::aggregate) validates it).
    pub fn noise_std(&self, expected_batch_size: f64) -> f64 {
        self.noise_multiplier * self.clip_norm / expected_batch_size
    }

    /// The noisy average `(Σ_i Π_M(u_i))/(qN) + N(0, σ²I)`, `σ = z·M/(qN)`, of the sampled
    /// updates (see [`poisson_sample`]), each of length `dim`.
    ///
    /// `dim` is explicit because a Poisson-sampled batch may be empty, in which case the result
    /// is pure noise of dimension `dim`. Accepts any iterator of slices (`&[Vec<f64>]`,
    /// `Vec<&[f64]>`, …). Errors: `dim = 0`, `expected_batch_size` not finite and positive, an
    /// update of the wrong length ([`MechanismError::DimensionMismatch`]) or with a non-finite
    /// entry ([`MechanismError::NonFiniteInput`]). Noise is `N(0,1)` from rand_distr's ziggurat
    /// `StandardNormal`, scaled by σ.
    pub fn aggregate<I, S, R>(
        &self,
        updates: I,
        dim: usize,
        expected_batch_size: f64,
        rng: &mut R,
    ) -> Result<Vec<f64>>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[f64]>,
        R: Rng + CryptoRng + ?Sized,
    {
        if dim == 0 {
            return Err(MechanismError::invalid("dim", 0.0, "must be at least 1"));
        }
        check_positive("expected_batch_size", expected_batch_size)?;
        let mut sum = vec![0.0; dim];
        for u in updates {
            let u = u.as_ref();
            if u.len() != dim {
                return Err(MechanismError::DimensionMismatch {
                    expected: dim,
                    got: u.len(),
                });
            }
            // A non-finite entry makes the scaled norm non-finite: only then look for it.
            let n = l2_norm_scaled(u);
            if !n.is_finite()
                && let Some((index, &value)) = u.iter().enumerate().find(|(_, v)| !v.is_finite())
            {
                return Err(MechanismError::NonFiniteInput { index, value });
            }
            // Π_M(u) added in place: the same values as `project`, without its copy.
            match self.projection_factor(u, n) {
                None => sum.iter_mut().zip(u).for_each(|(s, &x)| *s += x),
                Some(f) => sum.iter_mut().zip(u).for_each(|(s, &x)| *s += x * f),
            }
        }
        let sigma = self.noise_std(expected_batch_size);
        let mut z = vec![0.0; dim];
        crate::batch::fill_normal(rng, &mut z);
        for (s, z) in sum.iter_mut().zip(&z) {
            *s = *s / expected_batch_size + sigma * z;
        }
        Ok(sum)
    }
}

/// Poisson sampling of clients: each index in `0..n` is included independently with probability
/// `q ∈ (0, 1]`; returns the included indices in increasing order (possibly none). Each
/// inclusion is an exact Bernoulli(`q`) draw for the `f64` value `q` (binary-expansion
/// comparison, see [`crate::sampling`]), so the sampling rate used by the accountant is the one
/// realized.
pub fn poisson_sample<R: Rng + CryptoRng + ?Sized>(
    n: usize,
    q: f64,
    rng: &mut R,
) -> Result<Vec<usize>> {
    if !(q.is_finite() && q > 0.0 && q <= 1.0) {
        return Err(MechanismError::invalid(
            "q",
            q,
            "the sampling rate must lie in (0, 1]",
        ));
    }
    Ok((0..n).filter(|_| bernoulli_exact(rng, q)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::l2_norm;
    use crate::rng::seeded_rng_for_experiments;
    use privfed_testkit::{assert_chi_square_statistic, assert_z, z_mean_known_variance};
    use rand::RngExt;

    #[test]
    fn projection_properties() {
        let c = CentralGaussian::new(1.5, 1.0).unwrap();
        let mut rng = seeded_rng_for_experiments(8);
        for scale in [1e-200, 1e-3, 0.3, 1.0, 7.0, 1e5, 1e200] {
            for d in [1usize, 2, 10, 300] {
                let v: Vec<f64> = (0..d)
                    .map(|_| scale * rng.sample::<f64, _>(rand_distr::StandardNormal))
                    .collect();
                let p = c.project(&v);
                let nv = l2_norm_scaled(&v);
                let np = l2_norm_scaled(&p);
                assert!(np <= 1.5, "scale {scale} d {d}: ‖Π(v)‖ = {np}");
                if nv <= 1.5 {
                    assert_eq!(p, v);
                } else {
                    assert!((np - 1.5).abs() < 1e-12, "norm {np}");
                    // Same direction: p = v·(M/‖v‖).
                    for (a, b) in p.iter().zip(&v) {
                        assert!((a - b * (1.5 / nv)).abs() <= 1e-12 * (b * (1.5 / nv)).abs());
                    }
                }
                // Idempotent.
                assert_eq!(c.project(&p), p);
            }
        }
        assert_eq!(c.project(&[0.0, 0.0]), vec![0.0, 0.0]);
        assert_eq!(c.project(&[]), Vec::<f64>::new());
        let p = c.project(&[1e300, 1e300]);
        let expect = 1.5 / 2f64.sqrt();
        assert!((p[0] - expect).abs() < 1e-15 && (p[1] - expect).abs() < 1e-15);
        // Naive norms agree where they do not overflow.
        assert!((l2_norm_scaled(&[3.0, 4.0]) - 5.0).abs() < 1e-15);
        assert!((l2_norm_scaled(&[0.1, -0.2, 0.3]) - l2_norm(&[0.1, -0.2, 0.3])).abs() < 1e-16);
    }

    /// The one-pass norm and its scaled fallback both agree with a compensated scaled sum to
    /// 1e-14 relative, at scales where squares underflow (1e-170), are subnormal-adjacent
    /// (1e-150), ordinary, and overflow (1e160); a scaled factor is applied before squaring.
    #[test]
    fn norm_paths_agree_with_a_compensated_sum() {
        let mut rng = seeded_rng_for_experiments(3);
        for scale in [1e-170, 1e-150, 1e-3, 1.0, 1e150, 1e160] {
            for d in [1usize, 7, 8, 9, 100, 1001] {
                for factor in [1.0, 0.37] {
                    let v: Vec<f64> = (0..d)
                        .map(|_| scale * rng.sample::<f64, _>(rand_distr::StandardNormal))
                        .collect();
                    let m = v.iter().fold(0.0f64, |m, x| m.max((x * factor).abs()));
                    let (mut sum, mut comp) = (0.0f64, 0.0f64);
                    for x in &v {
                        let t = (x * factor / m) * (x * factor / m) - comp;
                        let next = sum + t;
                        comp = (next - sum) - t;
                        sum = next;
                    }
                    let want = m * sum.sqrt();
                    let got = l2_norm_scaled_by(&v, factor);
                    assert!(
                        (got - want).abs() <= 1e-14 * want,
                        "scale {scale} d {d} factor {factor}: {got} vs {want}"
                    );
                }
            }
        }
        assert!(l2_norm_scaled(&[1.0, f64::NAN]).is_nan());
        assert_eq!(l2_norm_scaled(&[1.0, f64::INFINITY]), f64::INFINITY);
        assert_eq!(l2_norm_scaled(&[0.0, -0.0]), 0.0);
        assert_eq!(l2_norm_scaled(&[]), 0.0);
    }

    #[test]
    fn aggregate_mean_and_noise_by_monte_carlo() {
        // One call with d = 200_000 coordinates: the noise coordinates are i.i.d. N(0, σ²).
        // Two-sided z-tests at α = 6e-7 each on their mean and their mean square (below), 2 tests.
        let d = 200_000;
        let c = CentralGaussian::new(1.0, 1.3).unwrap();
        let qn = 2.5;
        let mut rng = seeded_rng_for_experiments(41);
        let u1: Vec<f64> = (0..d)
            .map(|i| if i % 2 == 0 { 0.01 } else { -0.01 })
            .collect();
        let u2: Vec<f64> = vec![1e-4; d];
        let u3: Vec<f64> = vec![0.0; d];
        let updates = vec![u1.clone(), u2.clone(), u3];
        let out = c.aggregate(&updates, d, qn, &mut rng).unwrap();
        let (p1, p2) = (c.project(&u1), c.project(&u2));
        let sigma = c.noise_std(qn);
        assert!((sigma - 1.3 / 2.5).abs() < 1e-15);
        let df = d as f64;
        let (mut s1, mut s2) = (0.0, 0.0);
        for i in 0..d {
            let z = out[i] - (p1[i] + p2[i]) / qn;
            s1 += z;
            s2 += z * z;
        }
        // Two-sided z-tests at α = 6e-7 (|z| < 4.99): noise mean 0 (variance σ²) and mean
        // square σ² (Var(Z²) = 2σ⁴).
        let z = z_mean_known_variance(s1 / df, d, 0.0, sigma * sigma);
        assert_z(z, 6e-7, "noise mean");
        let z = z_mean_known_variance(s2 / df, d, sigma * sigma, 2.0 * sigma.powi(4));
        assert_z(z, 6e-7, "noise mean square");
        // u1 has norm 0.01·√d ≈ 4.47 > M = 1: it really was projected (1e-10: naive summation of
        // 2e5 squares).
        assert!(
            l2_norm(&u1) > 1.0 && l2_norm_scaled(&p1) <= 1.0 && (l2_norm(&p1) - 1.0).abs() < 1e-10
        );

        // Empty batch: pure noise of the right dimension; slices are accepted too.
        let none: Vec<&[f64]> = vec![];
        let out = c.aggregate(none, 3, qn, &mut rng).unwrap();
        assert_eq!(out.len(), 3);
        let slices: Vec<&[f64]> = vec![&[0.5, 0.5], &[1.0, 0.0]];
        assert_eq!(c.aggregate(slices, 2, 1.0, &mut rng).unwrap().len(), 2);
    }

    #[test]
    fn aggregate_adds_exactly_the_projections() {
        // `aggregate` projects in place; its sum must be that of `project`'s copies, bit for bit
        // (inside the ball, outside, entries near overflow and underflow, the zero vector).
        let c = CentralGaussian::new(1.5, 0.7).unwrap();
        let d = 5;
        let updates = vec![
            vec![0.1, -0.2, 0.3, 0.0, 0.05],
            vec![3.0, -4.0, 12.0, 0.5, -0.25],
            vec![1e300, -1e300, 5e299, 0.0, 1.0],
            vec![1e-300, 2e-300, 0.0, -3e-300, 0.0],
            vec![0.0; 5],
            vec![0.6, 0.8, 0.0, 0.0, 1.5 * 0.6],
        ];
        let qn = 3.0;
        let out = c
            .aggregate(&updates, d, qn, &mut seeded_rng_for_experiments(5))
            .unwrap();
        let mut sum = vec![0.0; d];
        for u in &updates {
            for (s, p) in sum.iter_mut().zip(c.project(u)) {
                *s += p;
            }
        }
        // The noise: `d` standard normals from the batch sampler, in order.
        let mut z = vec![0.0; d];
        crate::batch::fill_normal(&mut seeded_rng_for_experiments(5), &mut z);
        let sigma = c.noise_std(qn);
        for (i, (s, z)) in sum.iter().zip(&z).enumerate() {
            assert_eq!(
                out[i].to_bits(),
                (s / qn + sigma * z).to_bits(),
                "coordinate {i}"
            );
        }
    }

    #[test]
    fn aggregate_errors() {
        let c = CentralGaussian::new(1.0, 1.0).unwrap();
        let mut rng = seeded_rng_for_experiments(0);
        let ok = vec![vec![0.1, 0.2]];
        assert!(c.aggregate(&ok, 0, 1.0, &mut rng).is_err());
        for qn in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(c.aggregate(&ok, 2, qn, &mut rng).is_err());
        }
        assert!(matches!(
            c.aggregate(vec![vec![0.1, 0.2], vec![0.3]], 2, 1.0, &mut rng),
            Err(MechanismError::DimensionMismatch {
                expected: 2,
                got: 1
            })
        ));
        assert!(matches!(
            c.aggregate(vec![vec![0.1, f64::NAN]], 2, 1.0, &mut rng),
            Err(MechanismError::NonFiniteInput { index: 1, .. })
        ));
        assert!(
            c.aggregate(vec![vec![f64::INFINITY, 0.0]], 2, 1.0, &mut rng)
                .is_err()
        );
        for (m, z) in [
            (0.0, 1.0),
            (1.0, 0.0),
            (f64::NAN, 1.0),
            (1.0, f64::INFINITY),
        ] {
            assert!(CentralGaussian::new(m, z).is_err());
        }
        let json = serde_json::to_value(c).unwrap();
        assert_eq!(json["clip_norm"], 1.0);
        assert_eq!(json["noise_multiplier"], 1.0);
    }

    #[test]
    fn poisson_sampling_statistics() {
        // Total count over 2000 rounds of n = 1000 at q = 0.3 is Binomial(2e6, 0.3): two-sided
        // z-test at α = 6e-7 (|z| < 4.99). Per-index counts are Binomial(2000, 0.3); the sum of
        // their squared standardized deviations is ≈ χ²(1000) (normal approximation to each
        // binomial), tested at α = 1e-6.
        let (n, q, rounds) = (1000usize, 0.3, 2000usize);
        let mut rng = seeded_rng_for_experiments(77);
        let mut counts = vec![0u64; n];
        let mut total = 0u64;
        for _ in 0..rounds {
            let s = poisson_sample(n, q, &mut rng).unwrap();
            assert!(s.windows(2).all(|w| w[0] < w[1]));
            assert!(s.iter().all(|&i| i < n));
            total += s.len() as u64;
            for i in s {
                counts[i] += 1;
            }
        }
        let nt = (n * rounds) as f64;
        let z = z_mean_known_variance(total as f64 / nt, n * rounds, q, q * (1.0 - q));
        assert_z(z, 6e-7, "total sample size");
        let r = rounds as f64;
        let chi2: f64 = counts
            .iter()
            .map(|&c| (c as f64 - r * q).powi(2) / (r * q * (1.0 - q)))
            .sum();
        assert_chi_square_statistic(chi2, n, 1e-6, "per-index inclusion counts");

        assert_eq!(
            poisson_sample(5, 1.0, &mut rng).unwrap(),
            vec![0, 1, 2, 3, 4]
        );
        assert!(poisson_sample(0, 0.5, &mut rng).unwrap().is_empty());
        for q in [0.0, -0.1, 1.0 + 1e-12, f64::NAN] {
            assert!(poisson_sample(10, q, &mut rng).is_err());
        }
    }
}
