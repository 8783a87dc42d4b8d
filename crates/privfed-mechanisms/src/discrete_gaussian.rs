//! The exact discrete Gaussian sampler of Canonne, Kamath and Steinke ("The Discrete Gaussian for
//! Differential Privacy", NeurIPS 2020, Algorithms 1–3): the baseline of paper 001's comparison
//! (the distributed discrete Gaussian, DDG; docs/ALGORITHMS.md §2.5).
//!
//! `N_ℤ(0, σ²)` has pmf `∝ exp(−k²/(2σ²))` on the integers. The sampler uses only integer
//! arithmetic and uniform integers, so its output distribution is exact — no floating point
//! touches it:
//! * `Bernoulli(exp(−γ))` for rational `γ = n/d` (Alg. 1): for `γ ≤ 1`, draw `A_K ~ Bernoulli(γ/K)`
//!   for `K = 1, 2, …` until one fails, and return whether the failing `K` is odd; for `γ > 1`,
//!   `⌊γ⌋` draws of `Bernoulli(e^{−1})` and one of `Bernoulli(e^{−(γ−⌊γ⌋)})`;
//! * the discrete Laplace with integer scale `t` (Alg. 2), from a uniform remainder accepted with
//!   probability `e^{−U/t}` plus `t` times a geometric count;
//! * the discrete Gaussian (Alg. 3): a discrete Laplace draw `Y` with `t = ⌊σ⌋ + 1`, accepted with
//!   probability `exp(−(|Y| − σ²/t)²/(2σ²))`.
//!
//! The variance parameter is held as an exact rational `σ² = p/2¹⁶`; [`DiscreteGaussian::new`]
//! rounds a requested `σ²` **up** to that grid (more noise, never less) and reports the value
//! used. `σ²` is limited to `[2⁻¹⁶, 2⁴⁰]` so that every product fits in `u128`. One event is not
//! covered exactly: a candidate so far in the tail that `(|Y|·2¹⁶·t − p)²` overflows `u128` has
//! acceptance probability below `e^{−2²⁹}` and is rejected outright (the output's total-variation
//! distance from `N_ℤ(0, σ²)` is below that probability).

use crate::error::{MechanismError, Result};
use rand::{CryptoRng, Rng, RngExt};

/// `σ²` is represented as `p / DENOMINATOR`.
const DENOMINATOR_BITS: u32 = 16;
const DENOMINATOR: u128 = 1 << DENOMINATOR_BITS;
/// Largest `σ²` accepted (`2⁴⁰`, σ ≈ 10⁶).
pub const MAX_VARIANCE: f64 = 1_099_511_627_776.0;

/// `Bernoulli(n/d)` exactly, for `0 ≤ n ≤ d`, `d > 0`.
fn bernoulli_ratio<R: Rng + ?Sized>(n: u128, d: u128, rng: &mut R) -> bool {
    rng.random_range(0..d) < n
}

/// `Bernoulli(exp(−n/d))` exactly (CKS Alg. 1), `d > 0`: `⌊n/d⌋` draws of `Bernoulli(e^{−1})`
/// (stopping at the first failure), then one of `Bernoulli(e^{−(n mod d)/d})`.
fn bernoulli_exp_neg<R: Rng + ?Sized>(n: u128, d: u128, rng: &mut R) -> bool {
    let whole = n / d;
    let frac = n % d;
    let mut i = 0u128;
    while i < whole {
        if !bernoulli_exp_neg_le1(1, 1, rng) {
            return false;
        }
        i += 1;
    }
    bernoulli_exp_neg_le1(frac, d, rng)
}

/// `Bernoulli(exp(−n/d))` for `0 ≤ n/d ≤ 1`: the parity of the first failing `K` of
/// `Bernoulli(γ/K)`, `K = 1, 2, …`.
fn bernoulli_exp_neg_le1<R: Rng + ?Sized>(n: u128, d: u128, rng: &mut R) -> bool {
    let mut k: u128 = 1;
    loop {
        // d·k stays far below u128::MAX: K exceeds 40 with probability below 1/40!.
        let dk = d.saturating_mul(k);
        if !bernoulli_ratio(n, dk, rng) {
            return k % 2 == 1;
        }
        k += 1;
    }
}

/// The discrete Laplace with integer scale `t ≥ 1` (pmf `∝ e^{−|x|/t}`; CKS Alg. 2).
fn discrete_laplace<R: Rng + ?Sized>(t: u128, rng: &mut R) -> i128 {
    loop {
        let u = rng.random_range(0..t);
        if !bernoulli_exp_neg_le1(u, t, rng) {
            continue;
        }
        let mut v: u128 = 0;
        while bernoulli_exp_neg_le1(1, 1, rng) {
            v += 1;
        }
        let x = u + t * v;
        let negative = rng.random::<bool>();
        if negative && x == 0 {
            continue;
        }
        let x = x as i128;
        return if negative { -x } else { x };
    }
}

/// An exact sampler of the discrete Gaussian `N_ℤ(0, σ²)`.
#[derive(Debug, Clone, Copy)]
pub struct DiscreteGaussian {
    /// `σ² = p / 2¹⁶`.
    p: u128,
    /// `t = ⌊σ⌋ + 1`, the discrete Laplace scale of the proposal.
    t: u128,
}

impl DiscreteGaussian {
    /// `N_ℤ(0, σ²)` with `σ²` rounded up to a multiple of `2⁻¹⁶`; `σ² ∈ (0, 2⁴⁰]`.
    pub fn new(sigma2: f64) -> Result<Self> {
        if !(sigma2.is_finite() && sigma2 > 0.0 && sigma2 <= MAX_VARIANCE) {
            return Err(MechanismError::invalid(
                "sigma2",
                sigma2,
                format!("must be a variance in (0, {MAX_VARIANCE:e}]"),
            ));
        }
        // Exact: σ²·2¹⁶ ≤ 2⁵⁶ is an f64 whose ceiling is an exactly representable integer.
        let p = (sigma2 * DENOMINATOR as f64).ceil() as u128;
        let p = p.max(1);
        // ⌊σ⌋ = ⌊√⌊p/2¹⁶⌋⌋ (for integer m, m² ≤ p/q ⟺ m² ≤ ⌊p/q⌋).
        let t = (p / DENOMINATOR).isqrt() + 1;
        Ok(DiscreteGaussian { p, t })
    }

    /// The variance parameter `σ²` actually used (the requested one rounded up to `2⁻¹⁶`).
    /// (The pmf's variance is slightly below `σ²` for small σ; for σ ≥ 1 they agree to 10⁻⁸.)
    pub fn sigma2(&self) -> f64 {
        self.p as f64 / DENOMINATOR as f64
    }

    /// One draw.
    pub fn sample<R: Rng + CryptoRng + ?Sized>(&self, rng: &mut R) -> i64 {
        let q = DENOMINATOR;
        // Acceptance exponent γ = (|Y|·q·t − p)² / (2·p·q·t²).
        let den = 2 * self.p * q * self.t * self.t;
        loop {
            let y = discrete_laplace(self.t, rng);
            let a = y.unsigned_abs();
            let Some(aqt) = a.checked_mul(q).and_then(|v| v.checked_mul(self.t)) else {
                continue; // acceptance probability below e^{-2^29}: see the module docs
            };
            let diff = aqt.abs_diff(self.p);
            let Some(num) = diff.checked_mul(diff) else {
                continue;
            };
            if bernoulli_exp_neg(num, den, rng) {
                // (|y|·q·t − p)² < 2¹²⁸ and p < 2⁵⁷ bound |y| below 2⁶⁵/(q·t) ≤ 2⁴⁹: fits i64.
                return y as i64;
            }
        }
    }

    /// Fills `out` with i.i.d. draws.
    pub fn fill<R: Rng + CryptoRng + ?Sized>(&self, out: &mut [i64], rng: &mut R) {
        for v in out.iter_mut() {
            *v = self.sample(rng);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_rng_for_experiments;
    use privfed_testkit::{assert_chi_square_gof, assert_mean, assert_variance};

    /// Draws against the exact pmf `∝ e^{−k²/(2σ²)}` (normalized over ±(12σ + 10)), chi-square
    /// at α = 1e-6 for σ² = 0.3, 4, 100.7, 10^4, 2.5·10^7; mean 0 (z-test, α = 1e-6).
    #[test]
    fn matches_the_discrete_gaussian_pmf() {
        let mut rng = seeded_rng_for_experiments(303);
        for &s2 in &[0.3, 4.0, 100.7, 1e4, 2.5e7] {
            let dg = DiscreteGaussian::new(s2).unwrap();
            let s2 = dg.sigma2();
            let n = 200_000;
            let mut draws = vec![0i64; n];
            dg.fill(&mut draws, &mut rng);
            let w = (12.0 * s2.sqrt() + 10.0) as i64;
            let weights: Vec<f64> = (-w..=w)
                .map(|k| (-((k * k) as f64) / (2.0 * s2)).exp())
                .collect();
            let z: f64 = weights.iter().sum();
            let probs: Vec<f64> = weights.iter().map(|v| v / z).collect();
            let mut counts = vec![0u64; probs.len()];
            for &k in &draws {
                assert!(k.abs() <= w, "σ² = {s2}: draw {k} beyond 12σ");
                counts[(k + w) as usize] += 1;
            }
            assert_chi_square_gof(&counts, &probs, 1e-6, &format!("N_Z(0, {s2})"));
            let xs: Vec<f64> = draws.iter().map(|&k| k as f64).collect();
            assert_mean(&xs, 0.0, 1e-6, &format!("N_Z(0, {s2}) mean"));
            let var: f64 = probs
                .iter()
                .enumerate()
                .map(|(i, p)| p * ((i as i64 - w) as f64).powi(2))
                .sum();
            assert_variance(&xs, var, 1e-6, &format!("N_Z(0, {s2}) variance"));
        }
    }

    #[test]
    fn exact_bernoulli_exp_frequencies() {
        // Bernoulli(e^{−n/d}) for γ = 0, 0.37, 1, 2.5: binomial z-tests at α = 1e-6.
        let mut rng = seeded_rng_for_experiments(9);
        let n = 400_000usize;
        for (num, den) in [(0u128, 1u128), (37, 100), (1, 1), (5, 2)] {
            let p = (-(num as f64) / den as f64).exp();
            let hits = (0..n)
                .filter(|_| bernoulli_exp_neg(num, den, &mut rng))
                .count();
            let z = privfed_testkit::z_mean_known_variance(
                hits as f64 / n as f64,
                n,
                p,
                p * (1.0 - p).max(1e-300),
            );
            if p < 1.0 {
                privfed_testkit::assert_z(z, 1e-6, &format!("e^-({num}/{den})"));
            } else {
                assert_eq!(hits, n);
            }
        }
    }

    #[test]
    fn variance_is_rounded_up_and_validated() {
        let dg = DiscreteGaussian::new(1.0 / 3.0).unwrap();
        assert!(dg.sigma2() >= 1.0 / 3.0 && dg.sigma2() < 1.0 / 3.0 + 2f64.powi(-16));
        assert_eq!(DiscreteGaussian::new(4.0).unwrap().sigma2(), 4.0);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 2.0 * MAX_VARIANCE] {
            assert!(DiscreteGaussian::new(bad).is_err(), "{bad}");
        }
    }
}
