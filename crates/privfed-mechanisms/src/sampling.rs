//! Exact samplers shared by the randomizers: Bernoulli draws exact for an `f64` probability,
//! Gaussian vectors, directions orthogonal to a unit vector, truncated standard normals, and the
//! inner product of a uniform point on the sphere with a fixed unit vector, truncated to a
//! spherical cap or its complement.
//!
//! All samplers are generic over the generator (`R: Rng + ?Sized`); the mechanisms that call
//! them require a cryptographically secure one.

use crate::batch;
use crate::error::{MechanismError, Result};
use crate::rng::{BLOCK_LEN, StreamKey, Threads, for_each_block, for_each_chunk};
use rand::{Rng, RngExt};
use rand_distr::{Beta, Distribution};
use serde::Serialize;

/// Fills `out` with i.i.d. standard normal draws from one generator stream (the batched
/// ziggurat of [`batch::fill_normal`]).
pub fn fill_standard_normal<R: Rng + ?Sized>(rng: &mut R, out: &mut [f64]) {
    batch::fill_normal(rng, out);
}

/// The part of `v` that lines up with block `b` of length `len` (empty if `v` is shorter: the
/// callers have checked the lengths; this only keeps a mismatch from panicking).
pub(crate) fn block_of(v: &[f64], b: usize, len: usize) -> &[f64] {
    let start = b * BLOCK_LEN;
    v.get(start..start + len).unwrap_or(&[])
}

/// Fills `out` with a standard Gaussian vector `g`, block `b` from `key.stream(b)`, on up to
/// `threads` threads, and returns `(⟨g, u⟩, ‖g‖², ‖u‖²)`: summed within each block, then over
/// the blocks in order, so the sums (like `g`) do not depend on the thread count. Callers form
/// the component of `g` orthogonal to `u` (`g − ⟨g,û⟩û`, squared norm `‖g‖² − ⟨g,û⟩²`) in their
/// own output pass; `‖u‖²` lets them validate the input without a separate (serial) pass over it.
pub(crate) fn gaussian_with_dot_blocks(
    key: &StreamKey,
    u: &[f64],
    out: &mut [f64],
    threads: Threads,
) -> (f64, f64, f64) {
    let parts = for_each_block(key, out, threads, |b, rng, chunk| {
        batch::fill_normal_with_dot_and_norms(rng, block_of(u, b, chunk.len()), chunk)
    });
    parts
        .iter()
        .fold((0.0, 0.0, 0.0), |(d, n, m), &(pd, pn, pm)| {
            (d + pd, n + pn, m + pm)
        })
}

/// `out ← a·x + c·out`, block by block on up to `threads` threads.
pub(crate) fn combine_blocks(x: &[f64], out: &mut [f64], a: f64, c: f64, threads: Threads) {
    for_each_chunk(out, threads, |b, chunk| {
        let xs = block_of(x, b, chunk.len());
        for (o, &xi) in chunk.iter_mut().zip(xs) {
            *o = a * xi + c * *o;
        }
    });
}

/// A point uniform on the unit sphere `S^{dim−1}` (normalized Gaussian vector).
///
/// Errors if `dim == 0`.
pub fn uniform_on_sphere<R: Rng + ?Sized>(dim: usize, rng: &mut R) -> Result<Vec<f64>> {
    if dim == 0 {
        return Err(MechanismError::invalid("dim", 0.0, "must be at least 1"));
    }
    let mut v = vec![0.0; dim];
    loop {
        fill_standard_normal(rng, &mut v);
        let n = crate::norm::l2_norm(&v);
        // n == 0 has probability zero; loop rather than divide by it.
        if n > 0.0 {
            v.iter_mut().for_each(|x| *x /= n);
            return Ok(v);
        }
    }
}

/// Exact sample of `N(0,1)` conditioned on `X ≥ a`.
///
/// For `a < 0.5`, rejection from `N(0,1)` (acceptance `1 − Φ(a) > 0.3`); otherwise Robert's
/// (1995) translated-exponential rejection with the optimal rate `λ = (a + √(a²+4))/2`, whose
/// acceptance exceeds 0.75 for every `a ≥ 0`, so the far tail (`a = 8` or `a = 40`) is as cheap and
/// as exact as the bulk.
pub fn truncated_standard_normal_above<R: Rng + ?Sized>(a: f64, rng: &mut R) -> f64 {
    if a < 0.5 {
        loop {
            let x = batch::normal(rng);
            if x >= a {
                return x;
            }
        }
    }
    let lambda = 0.5 * (a + (a * a + 4.0).sqrt());
    loop {
        let e = batch::exp1(rng);
        let x = a + e / lambda;
        let log_accept = -0.5 * (x - lambda) * (x - lambda);
        let u: f64 = open01(rng);
        if u.ln() <= log_accept {
            return x;
        }
    }
}

/// Exact sample of `N(0,1)` conditioned on `X < b` (by symmetry with
/// [`truncated_standard_normal_above`]).
pub fn truncated_standard_normal_below<R: Rng + ?Sized>(b: f64, rng: &mut R) -> f64 {
    loop {
        let x = -truncated_standard_normal_above(-b, rng);
        // The above-sampler returns x ≥ −b, i.e. −x ≤ b; exclude the measure-zero endpoint.
        if x < b {
            return x;
        }
    }
}

/// A uniform draw in the open interval (0, 1).
pub(crate) fn open01<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    loop {
        let u: f64 = rng.random();
        if u > 0.0 {
            return u;
        }
    }
}

/// Sampler of `T = ⟨V, u⟩` for `V` uniform on `S^{d−1}`, restricted to the cap `T ≥ γ` or to its
/// complement `T < γ` (docs/ALGORITHMS.md §1.1).
///
/// `T` has density `∝ (1 − t²)^{(d−3)/2}` on `[−1, 1]`, i.e. `(1+T)/2 ~ Beta((d−1)/2, (d−1)/2)`.
/// * Cap, `d ≥ 4`: the log-density `ℓ(t) = β·ln(1 − t²)`, `β = (d−3)/2`, is concave, so a
///   translated exponential `ℓ(γ) + M − λ(t − γ)` bounds it on `[γ, 1)` for any rate `λ > 0` once
///   `M = max_{t ≥ γ} [ℓ(t) − ℓ(γ) + λ(t − γ)]` (a closed form). Rejection from that envelope is
///   exact whatever `λ`; `λ` is chosen by Robert's rule applied to the local quadratic expansion of
///   `ℓ` at `γ`, which keeps the acceptance rate high from `γ = 0` to far tails (measured in tests).
///   No draw ever falls outside the cap, so the cost does not grow as the cap probability shrinks.
/// * Cap, `d = 2`: `T = cos θ`, `θ` uniform on `[0, arccos γ]`; `d = 3`: `T` uniform on `[γ, 1]`.
/// * Complement: rejection from the untruncated law (`Beta` for `d ≥ 4`, closed forms below), whose
///   acceptance is `P(T < γ) ≥ ½` because `γ ≥ 0`.
#[derive(Debug, Clone, Serialize)]
pub struct SphereCapSampler {
    dim: usize,
    gamma: f64,
    #[serde(skip)]
    kind: CapKind,
}

#[derive(Debug, Clone)]
enum CapKind {
    /// d = 2: arcsine law.
    Circle,
    /// d = 3: uniform law.
    Sphere2,
    /// d ≥ 4: log-concave envelope.
    General {
        beta: f64,
        ln_1m_gamma2: f64,
        lambda: f64,
        m: f64,
        full: Beta<f64>,
    },
}

impl SphereCapSampler {
    /// Builds the sampler for dimension `dim ≥ 2` and cap height `γ ∈ [0, 1)`.
    pub fn new(dim: usize, gamma: f64) -> Result<Self> {
        if dim < 2 {
            return Err(MechanismError::invalid(
                "dim",
                dim as f64,
                "the sphere needs dimension at least 2",
            ));
        }
        if !(gamma.is_finite() && (0.0..1.0).contains(&gamma)) {
            return Err(MechanismError::invalid(
                "gamma",
                gamma,
                "must lie in [0, 1)",
            ));
        }
        let kind = match dim {
            2 => CapKind::Circle,
            3 => CapKind::Sphere2,
            _ => {
                let beta = (dim as f64 - 3.0) / 2.0;
                let alpha = (dim as f64 - 1.0) / 2.0;
                let g2 = gamma * gamma;
                let one_m = (1.0 - gamma) * (1.0 + gamma);
                let slope = -2.0 * beta * gamma / one_m;
                let curv = 2.0 * beta * (1.0 + g2) / (one_m * one_m);
                let a = -slope / curv.sqrt();
                let lambda = curv.sqrt() * 0.5 * (a + (a * a + 4.0).sqrt());
                let ln_1m_gamma2 = (-g2).ln_1p();
                // Maximizer of h(t) = β ln(1−t²) + λ t on [γ, 1): root of λt² + 2βt − λ = 0.
                let t_star = (beta * beta + lambda * lambda).sqrt() - beta;
                let t_star = t_star / lambda;
                let m = if t_star > gamma {
                    beta * ((-(t_star * t_star)).ln_1p() - ln_1m_gamma2) + lambda * (t_star - gamma)
                } else {
                    0.0
                };
                let full = Beta::new(alpha, alpha).map_err(|e| {
                    MechanismError::Numerical(format!("Beta({alpha}, {alpha}): {e}"))
                })?;
                CapKind::General {
                    beta,
                    ln_1m_gamma2,
                    lambda,
                    m,
                    full,
                }
            }
        };
        Ok(Self { dim, gamma, kind })
    }

    /// Dimension of the sphere.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Cap height γ.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// Draws `T` conditioned on `T ≥ γ`.
    pub fn sample_cap<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let gamma = self.gamma;
        match &self.kind {
            CapKind::Circle => (rng.random::<f64>() * gamma.acos()).cos(),
            CapKind::Sphere2 => gamma + (1.0 - gamma) * rng.random::<f64>(),
            CapKind::General {
                beta,
                ln_1m_gamma2,
                lambda,
                m,
                ..
            } => loop {
                let e = batch::exp1(rng);
                let y = e / lambda;
                let x = gamma + y;
                if x >= 1.0 {
                    continue;
                }
                let log_ratio = beta * ((-(x * x)).ln_1p() - ln_1m_gamma2) + lambda * y - m;
                if open01(rng).ln() <= log_ratio {
                    return x;
                }
            },
        }
    }

    /// Draws `T` conditioned on `T < γ`.
    pub fn sample_complement<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        loop {
            let t = match &self.kind {
                CapKind::Circle => (std::f64::consts::PI * rng.random::<f64>()).cos(),
                CapKind::Sphere2 => 2.0 * rng.random::<f64>() - 1.0,
                CapKind::General { full, .. } => 2.0 * full.sample(rng) - 1.0,
            };
            if t < self.gamma {
                return t;
            }
        }
    }

    /// Acceptance probability of one envelope proposal in [`sample_cap`](Self::sample_cap)
    /// is not needed by callers; this exposes the envelope rate for diagnostics.
    pub fn envelope_rate(&self) -> Option<f64> {
        match &self.kind {
            CapKind::General { lambda, .. } => Some(*lambda),
            _ => None,
        }
    }
}

/// Samples `U < p` for `U` uniform on `[0, 1)` with infinitely many random bits, **exactly**:
/// the probability of `true` is the real number represented by the `f64` `p`.
///
/// Compares 64-bit words of `U` with the binary expansion of `p` until they differ (which
/// happens on the first word except with probability `2^{-64}`).
pub(crate) fn bernoulli_exact<R: Rng + ?Sized>(rng: &mut R, p: f64) -> bool {
    if p.is_nan() || p <= 0.0 {
        return false;
    }
    if p >= 1.0 {
        return true;
    }
    let bits = p.to_bits();
    let exp_field = ((bits >> 52) & 0x7ff) as i64;
    let frac = bits & ((1u64 << 52) - 1);
    // p = mant · 2^{−s}
    let (mant, s) = if exp_field == 0 {
        (frac, 1074i64)
    } else {
        (frac | (1u64 << 52), 1075 - exp_field)
    };
    let mut k: i64 = 0;
    loop {
        // Bits 64k+1 ..= 64k+64 after the binary point: floor(mant · 2^{64(k+1) − s}) mod 2^64.
        let sh = 64 * (k + 1) - s;
        let chunk = if sh >= 64 {
            0
        } else if sh >= 0 {
            ((mant as u128) << sh) as u64
        } else if -sh >= 64 {
            0
        } else {
            mant >> (-sh)
        };
        let r = rng.next_u64();
        if r < chunk {
            return true;
        }
        if r > chunk {
            return false;
        }
        if sh >= 0 {
            // p has no bits beyond this word: U ≥ p.
            return false;
        }
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_rng_for_experiments;
    use crate::special;
    use privfed_testkit::assert_ks_fits;

    #[test]
    fn truncated_normal_matches_cdf_in_bulk_and_far_tail() {
        // KS at level 1e-6 per case (4 cases: family-wise FPR ≤ 4e-6).
        let mut rng = seeded_rng_for_experiments(11);
        for &a in &[-1.0, 0.3, 2.0, 8.0] {
            let n = 40_000;
            let mut xs: Vec<f64> = (0..n)
                .map(|_| truncated_standard_normal_above(a, &mut rng))
                .collect();
            assert!(xs.iter().all(|&x| x >= a));
            let ln_sf_a = special::ln_norm_sf(a);
            let cdf = |x| 1.0 - (special::ln_norm_sf(x) - ln_sf_a).exp();
            assert_ks_fits(&mut xs, cdf, 1e-6, &format!("a = {a}"));
        }
    }

    #[test]
    fn truncated_normal_below_is_mirror() {
        let mut rng = seeded_rng_for_experiments(12);
        for _ in 0..10_000 {
            assert!(truncated_standard_normal_below(-3.0, &mut rng) < -3.0);
            assert!(truncated_standard_normal_below(1.0, &mut rng) < 1.0);
        }
    }

    /// CDF of T conditioned on T ≥ γ, from the incomplete beta: P(T ≥ t) = I_{(1−t)/2}(α, α).
    fn cap_cdf(dim: usize, gamma: f64, t: f64) -> f64 {
        let a = (dim as f64 - 1.0) / 2.0;
        let ln_tail = |t: f64| special::ln_beta_inc(a, a, (1.0 - t) / 2.0);
        1.0 - (ln_tail(t) - ln_tail(gamma)).exp()
    }

    #[test]
    fn cap_inner_product_matches_truncated_beta() {
        // d, γ pairs from the bulk to the far tail (γ·√d up to ~9); KS level 1e-6 each.
        let cases = [
            (2usize, 0.3),
            (3, 0.5),
            (4, 0.0),
            (10, 0.6),
            (1000, 0.0),
            (1000, 0.05),
            (1000, 0.2),
            (100_000, 0.004),
            (100_000, 0.03),
        ];
        let mut rng = seeded_rng_for_experiments(13);
        for &(dim, gamma) in &cases {
            let s = SphereCapSampler::new(dim, gamma).unwrap();
            let n = 30_000;
            let mut xs: Vec<f64> = (0..n).map(|_| s.sample_cap(&mut rng)).collect();
            assert!(xs.iter().all(|&t| t >= gamma && t <= 1.0));
            let cdf = |t| cap_cdf(dim, gamma, t);
            assert_ks_fits(&mut xs, cdf, 1e-6, &format!("d={dim} γ={gamma}"));
        }
    }

    #[test]
    fn complement_inner_product_matches_truncated_beta() {
        let cases = [(2usize, 0.3), (3, 0.5), (50, 0.2), (100_000, 0.003)];
        let mut rng = seeded_rng_for_experiments(14);
        for &(dim, gamma) in &cases {
            let s = SphereCapSampler::new(dim, gamma).unwrap();
            let a = (dim as f64 - 1.0) / 2.0;
            let ln_below = |t: f64| special::ln_beta_inc(a, a, (1.0 + t) / 2.0);
            let n = 30_000;
            let mut xs: Vec<f64> = (0..n).map(|_| s.sample_complement(&mut rng)).collect();
            assert!(xs.iter().all(|&t| t < gamma && t >= -1.0));
            let lg = ln_below(gamma);
            let cdf = |t| (ln_below(t) - lg).exp();
            assert_ks_fits(&mut xs, cdf, 1e-6, &format!("d={dim} γ={gamma}"));
        }
    }

    #[test]
    fn cap_sampler_acceptance_is_high() {
        // Count proposals through the envelope directly: acceptance must stay above 0.5 from
        // γ = 0 to far tails, so the sampler's cost is bounded (a property, not a timing).
        for &(dim, gamma) in &[
            (4usize, 0.0),
            (1000, 0.0),
            (1000, 0.3),
            (1_000_000, 0.0),
            (1_000_000, 0.008),
        ] {
            let s = SphereCapSampler::new(dim, gamma).unwrap();
            let CapKind::General {
                beta,
                ln_1m_gamma2,
                lambda,
                m,
                ..
            } = s.kind.clone()
            else {
                unreachable!()
            };
            let mut rng = seeded_rng_for_experiments(15);
            let (mut tries, mut acc) = (0u32, 0u32);
            while acc < 2000 {
                tries += 1;
                let e = batch::exp1(&mut rng);
                let y = e / lambda;
                let x: f64 = gamma + y;
                if x < 1.0 {
                    let lr = beta * ((-(x * x)).ln_1p() - ln_1m_gamma2) + lambda * y - m;
                    assert!(lr <= 1e-9, "envelope violated at d={dim} γ={gamma}: {lr}");
                    if open01(&mut rng).ln() <= lr {
                        acc += 1;
                    }
                }
            }
            let rate = acc as f64 / tries as f64;
            assert!(rate > 0.5, "d={dim} γ={gamma}: acceptance {rate}");
        }
    }

    #[test]
    fn sphere_points_are_unit() {
        let mut rng = seeded_rng_for_experiments(16);
        let v = uniform_on_sphere(1000, &mut rng).unwrap();
        assert!((crate::norm::l2_norm(&v) - 1.0).abs() < 1e-12);
        assert!(uniform_on_sphere(0, &mut rng).is_err());
        assert!(SphereCapSampler::new(1, 0.1).is_err());
        assert!(SphereCapSampler::new(10, 1.0).is_err());
        assert!(SphereCapSampler::new(10, f64::NAN).is_err());
    }

    struct FixedRng(Vec<u64>, usize);
    impl rand::TryRng for FixedRng {
        type Error = core::convert::Infallible;
        fn try_next_u32(&mut self) -> core::result::Result<u32, Self::Error> {
            Ok(self.try_next_u64()? as u32)
        }
        fn try_next_u64(&mut self) -> core::result::Result<u64, Self::Error> {
            let v = self.0[self.1];
            self.1 += 1;
            Ok(v)
        }
        fn try_fill_bytes(&mut self, _dst: &mut [u8]) -> core::result::Result<(), Self::Error> {
            unimplemented!()
        }
    }

    #[test]
    fn bernoulli_exact_compares_binary_expansions() {
        let half = 1u64 << 63;
        assert!(bernoulli_exact(&mut FixedRng(vec![half - 1], 0), 0.5));
        assert!(!bernoulli_exact(&mut FixedRng(vec![half], 0), 0.5));
        // p = 2^-70: first word of p is 0; a zero first word continues to the second word,
        // whose top bits hold p: 2^-70 = 2^-64 · 2^-6 → second word 2^58.
        let p = 2f64.powi(-70);
        assert!(!bernoulli_exact(&mut FixedRng(vec![1], 0), p));
        assert!(bernoulli_exact(&mut FixedRng(vec![0, (1 << 58) - 1], 0), p));
        assert!(!bernoulli_exact(&mut FixedRng(vec![0, 1 << 58], 0), p));
        // The smallest subnormal, 2^-1074: bit 1074 is in word 16 (bits 1025..1088).
        let tiny = f64::from_bits(1);
        let mut words = vec![0u64; 16];
        words.push((1u64 << (1088 - 1074)) - 1);
        assert!(bernoulli_exact(&mut FixedRng(words.clone(), 0), tiny));
        words[16] += 1;
        assert!(!bernoulli_exact(&mut FixedRng(words, 0), tiny));
        // 1/3 (non-dyadic, 53-bit mantissa): its first word is floor(2^64/3) rounded to 53 bits.
        let third = 1.0f64 / 3.0;
        let w = (third * 2f64.powi(64)) as u64;
        assert!(bernoulli_exact(&mut FixedRng(vec![w - 1], 0), third));
        assert!(!bernoulli_exact(&mut FixedRng(vec![w], 0), third));
        assert!(!bernoulli_exact(&mut FixedRng(vec![], 0), 0.0));
        assert!(bernoulli_exact(&mut FixedRng(vec![], 0), 1.0));
        assert!(!bernoulli_exact(&mut FixedRng(vec![], 0), f64::NAN));
    }

    #[test]
    fn bernoulli_exact_frequencies() {
        // Binomial z-tests at α = 6e-7 each (the old 5σ), 3 tests.
        let mut rng = seeded_rng_for_experiments(11);
        let n = 1_000_000usize;
        for p in [0.3, 0.001, 0.987654321] {
            let c = (0..n).filter(|_| bernoulli_exact(&mut rng, p)).count() as f64;
            let z = privfed_testkit::z_mean_known_variance(c / n as f64, n, p, p * (1.0 - p));
            privfed_testkit::assert_z(z, 6e-7, &format!("p={p}: {c}"));
        }
    }
}
