//! Exact Poisson and Skellam noise for distributed DP (paper 001; docs/ALGORITHMS.md §2.1).
//!
//! `Sk(μ) = Poisson(μ/2) − Poisson(μ/2)` is symmetric with variance `μ`, and sums of independent
//! Skellams are Skellam (`Sk(μ₁) + Sk(μ₂) = Sk(μ₁ + μ₂)`): each of `n` clients adds `Sk(μ/n)` and
//! the aggregate carries `Sk(μ)`, whatever the server sees.
//!
//! The Poisson sampler is exact in real arithmetic for every mean: below `λ = 10` the
//! multiplication method (count uniforms until their product falls below `e^{−λ}`); from
//! `λ = 10` on Hörmann's transformed rejection with squeeze, PTRS (W. Hörmann, "The transformed
//! rejection method for generating Poisson random variables", Insurance: Mathematics and
//! Economics 12, 1993), whose acceptance test compares against the exact log-pmf. That log-pmf is
//! evaluated with Loader's saddle-point form ([`privfed_special::ln_poisson_pmf`]) so that it
//! keeps full relative accuracy at `λ ≥ 10⁸`, where `k·ln λ − λ − ln k!` cancels to ~10⁻⁷.
//! Means up to [`MAX_MEAN`] (`2⁵⁰`) are accepted, so every draw is an exactly representable
//! integer.
//!
//! [`Skellam`] draws its two Poisson halves from a [`PoissonTable`] (Walker's alias table over
//! the pmf's body, inversion in the tails; every outcome's probability within a relative
//! `~10⁻¹²` of the pmf) when `μ/2` is in the table's range, `10⁻³ … 1.2·10⁷`: 4.3× faster than
//! PTRS at the benchmark's `μ`. Outside that range it uses [`Poisson`].

use crate::error::{MechanismError, Result};
use crate::poisson_table::PoissonTable;
use privfed_special::{floor, ln_poisson_pmf};
use rand::{CryptoRng, Rng, RngExt};
use std::sync::Arc;

/// Largest Poisson mean (and Skellam variance) accepted: `2⁵⁰ ≈ 1.1·10¹⁵`, so that draws (within
/// thousands of standard deviations of the mean) stay exactly representable in an `f64`.
pub const MAX_MEAN: f64 = 1_125_899_906_842_624.0;

/// Below this mean the multiplication method is used, from it on PTRS (Hörmann's range).
const PTRS_MIN: f64 = 10.0;

/// The constants of PTRS for one mean.
#[derive(Debug, Clone, Copy)]
struct Ptrs {
    a: f64,
    b: f64,
    ln_inv_alpha: f64,
    v_r: f64,
}

/// A validated Poisson(λ) sampler.
#[derive(Debug, Clone, Copy)]
pub struct Poisson {
    lambda: f64,
    exp_neg_lambda: f64,
    ptrs: Option<Ptrs>,
}

impl Poisson {
    /// Poisson with mean `lambda`, `0 ≤ λ ≤` [`MAX_MEAN`] (`λ = 0` always draws 0).
    pub fn new(lambda: f64) -> Result<Self> {
        if !(lambda.is_finite() && (0.0..=MAX_MEAN).contains(&lambda)) {
            return Err(MechanismError::invalid(
                "lambda",
                lambda,
                format!("must be a finite mean in [0, {MAX_MEAN:e}]"),
            ));
        }
        let ptrs = (lambda >= PTRS_MIN).then(|| {
            let b = 0.931 + 2.53 * lambda.sqrt();
            let a = -0.059 + 0.02483 * b;
            Ptrs {
                a,
                b,
                ln_inv_alpha: (1.1239 + 1.1328 / (b - 3.4)).ln(),
                v_r: 0.9277 - 3.6224 / (b - 2.0),
            }
        });
        Ok(Poisson {
            lambda,
            exp_neg_lambda: (-lambda).exp(),
            ptrs,
        })
    }

    /// The mean `λ` (also the variance).
    pub fn mean(&self) -> f64 {
        self.lambda
    }

    /// One draw.
    pub fn sample<R: Rng + CryptoRng + ?Sized>(&self, rng: &mut R) -> u64 {
        match self.ptrs {
            None => self.sample_multiplication(rng),
            Some(c) => self.sample_ptrs(c, rng),
        }
    }

    /// Multiplication method: the number of i.i.d. uniforms whose running product stays above
    /// `e^{−λ}` (arrival count of a unit-rate process in time λ). Expected `λ + 1` uniforms.
    fn sample_multiplication<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        if self.lambda == 0.0 {
            return 0;
        }
        let mut k = 0u64;
        let mut prod: f64 = rng.random();
        while prod > self.exp_neg_lambda {
            k += 1;
            prod *= rng.random::<f64>();
        }
        k
    }

    /// PTRS (Hörmann 1993, Algorithm PTRS): transformed rejection from a hat built on
    /// `k = ⌊(2a/us + b)·U + λ + 0.43⌋`, with the squeeze `us ≥ 0.07, V ≤ v_r` and otherwise an
    /// exact comparison `ln V + ln(1/α) − ln(a/us² + b) ≤ ln P(K = k)`.
    fn sample_ptrs<R: Rng + ?Sized>(&self, c: Ptrs, rng: &mut R) -> u64 {
        loop {
            let u = rng.random::<f64>() - 0.5;
            let v: f64 = rng.random();
            let us = 0.5 - u.abs();
            if us <= 0.0 {
                continue;
            }
            let k = floor((2.0 * c.a / us + c.b) * u + self.lambda + 0.43);
            if us >= 0.07 && v <= c.v_r {
                // Inside the squeeze: accepted without evaluating the pmf (k ≥ 0 here).
                return k as u64;
            }
            if k < 0.0 || (us < 0.013 && v > us) || !k.is_finite() {
                continue;
            }
            if v == 0.0 {
                // ln 0 = −∞ ≤ anything: accept (probability 2⁻⁵³ per attempt).
                return k as u64;
            }
            let lhs = v.ln() + c.ln_inv_alpha - (c.a / (us * us) + c.b).ln();
            if lhs <= ln_poisson_pmf(k as u64, self.lambda) {
                return k as u64;
            }
        }
    }
}

/// The symmetric Skellam distribution `Sk(μ) = Poisson(μ/2) − Poisson(μ/2)`, variance `μ`.
///
/// Each Poisson half is drawn from a [`PoissonTable`] (alias table and tail inversion, built once
/// here) when `μ/2` is in its range, otherwise by [`Poisson`]'s PTRS; both draw the Poisson pmf
/// (the table to a relative ~10⁻¹², see [`crate::poisson_table`]).
#[derive(Debug, Clone)]
pub struct Skellam {
    mu: f64,
    half: Poisson,
    table: Option<Arc<PoissonTable>>,
}

impl Skellam {
    /// `Sk(μ)` with variance `0 ≤ μ ≤ 2·`[`MAX_MEAN`] (`μ = 0` is no noise).
    pub fn new(mu: f64) -> Result<Self> {
        if !(mu.is_finite() && (0.0..=2.0 * MAX_MEAN).contains(&mu)) {
            return Err(MechanismError::invalid(
                "mu",
                mu,
                format!("must be a finite variance in [0, {:e}]", 2.0 * MAX_MEAN),
            ));
        }
        Ok(Skellam {
            mu,
            half: Poisson::new(mu / 2.0)?,
            table: PoissonTable::new(mu / 2.0).map(Arc::new),
        })
    }

    /// The variance `μ`.
    pub fn variance(&self) -> f64 {
        self.mu
    }

    /// One draw.
    #[inline]
    pub fn sample<R: Rng + CryptoRng + ?Sized>(&self, rng: &mut R) -> i64 {
        match &self.table {
            Some(t) => t.sample(rng) as i64 - t.sample(rng) as i64,
            None => self.half.sample(rng) as i64 - self.half.sample(rng) as i64,
        }
    }

    /// Whether draws come from a [`PoissonTable`] (else from PTRS or the multiplication method).
    pub fn uses_table(&self) -> bool {
        self.table.is_some()
    }

    /// Fills `out` with i.i.d. draws.
    pub fn fill<R: Rng + CryptoRng + ?Sized>(&self, out: &mut [i64], rng: &mut R) {
        for v in out.iter_mut() {
            *v = self.sample(rng);
        }
    }

    /// Fills `out` with i.i.d. draws, block `b` of [`BLOCK_LEN`](crate::rng::BLOCK_LEN) entries
    /// from `key.stream(b)`, on up to `threads` threads: the same values for every thread count.
    /// Draw the key fresh from a secure generator for every vector
    /// ([`StreamKey::draw`](crate::rng::StreamKey::draw)).
    pub fn fill_blocks(
        &self,
        key: &crate::rng::StreamKey,
        out: &mut [i64],
        threads: crate::rng::Threads,
    ) {
        crate::rng::for_each_block(key, out, threads, |_, rng, chunk| self.fill(chunk, rng));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_rng_for_experiments;
    use privfed_testkit::{assert_chi_square_gof, assert_mean, assert_variance};

    /// Cells `lo..=hi` plus one cell for everything outside, with their exact probabilities.
    fn window_probs(lo: i64, hi: i64, pmf: impl Fn(i64) -> f64) -> Vec<f64> {
        let mut p: Vec<f64> = (lo..=hi).map(&pmf).collect();
        let inside: f64 = p.iter().sum();
        p.push((1.0 - inside).max(0.0));
        p
    }

    fn window_counts(draws: &[i64], lo: i64, hi: i64) -> Vec<u64> {
        let mut c = vec![0u64; (hi - lo + 2) as usize];
        for &k in draws {
            let i = if (lo..=hi).contains(&k) {
                (k - lo) as usize
            } else {
                c.len() - 1
            };
            c[i] += 1;
        }
        c
    }

    /// Poisson draws against the exact pmf (chi-square with pooling, α = 1e-6 each, 8 means
    /// covering both methods and the switch at 10), and their mean and variance (z-tests,
    /// α = 1e-6 each).
    #[test]
    fn poisson_matches_its_pmf() {
        let mut rng = seeded_rng_for_experiments(101);
        for &lambda in &[0.3, 5.0, 9.99, 10.0, 37.5, 1e4, 1e8, 3e12] {
            let p = Poisson::new(lambda).unwrap();
            let n = 200_000;
            let draws: Vec<i64> = (0..n).map(|_| p.sample(&mut rng) as i64).collect();
            let sd = lambda.sqrt();
            let lo = (lambda - 6.0 * sd).floor().max(0.0) as i64;
            let hi = (lambda + 6.0 * sd).ceil() as i64 + 3;
            // At 3e12 the window has ~1e7 cells: bin the draws by the standardized value
            // instead (64 equal-probability-ish cells from the normal approximation would test
            // the approximation, not the sampler), so check only the moments there.
            if hi - lo < 2_000_000 {
                let probs = window_probs(lo, hi, |k| {
                    privfed_special::ln_poisson_pmf(k as u64, lambda).exp()
                });
                assert_chi_square_gof(
                    &window_counts(&draws, lo, hi),
                    &probs,
                    1e-6,
                    &format!("Poisson({lambda})"),
                );
            }
            let xs: Vec<f64> = draws.iter().map(|&k| k as f64).collect();
            assert_mean(&xs, lambda, 1e-6, &format!("Poisson({lambda}) mean"));
            assert_variance(&xs, lambda, 1e-6, &format!("Poisson({lambda}) variance"));
        }
    }

    /// Skellam draws against the exact pmf of `Poisson(μ/2) − Poisson(μ/2)`, computed by
    /// convolving the two Poisson pmfs (independent of the accounting crate's Bessel recurrence),
    /// chi-square at α = 1e-6 for μ = 0.5, 3, 100, 10^4; symmetric; variance μ.
    #[test]
    fn skellam_matches_the_difference_of_poissons() {
        let mut rng = seeded_rng_for_experiments(202);
        for &mu in &[0.5, 3.0, 100.0, 1e4] {
            let sk = Skellam::new(mu).unwrap();
            let n = 200_000;
            let mut draws = vec![0i64; n];
            sk.fill(&mut draws, &mut rng);
            let half = mu / 2.0;
            let w = (half + 10.0 * half.sqrt() + 10.0) as i64;
            let pois: Vec<f64> = (0..=2 * w)
                .map(|j| privfed_special::ln_poisson_pmf(j as u64, half).exp())
                .collect();
            let pmf = |k: i64| -> f64 {
                let k = k.unsigned_abs() as usize;
                (k..pois.len()).map(|j| pois[j] * pois[j - k]).sum()
            };
            let span = (7.0 * mu.sqrt()).ceil() as i64 + 3;
            let probs = window_probs(-span, span, pmf);
            assert_chi_square_gof(
                &window_counts(&draws, -span, span),
                &probs,
                1e-6,
                &format!("Skellam({mu})"),
            );
            let xs: Vec<f64> = draws.iter().map(|&k| k as f64).collect();
            assert_mean(&xs, 0.0, 1e-6, &format!("Skellam({mu}) mean"));
            assert_variance(&xs, mu, 1e-6, &format!("Skellam({mu}) variance"));
        }
    }

    #[test]
    fn zero_and_invalid_means() {
        let mut rng = seeded_rng_for_experiments(1);
        assert_eq!(Poisson::new(0.0).unwrap().sample(&mut rng), 0);
        assert_eq!(Skellam::new(0.0).unwrap().sample(&mut rng), 0);
        for bad in [-1.0, f64::NAN, f64::INFINITY, 2.0 * MAX_MEAN] {
            assert!(Poisson::new(bad).is_err(), "{bad}");
        }
        assert!(Skellam::new(-0.1).is_err());
        assert!(Skellam::new(4.0 * MAX_MEAN).is_err());
        // The largest accepted means draw values near them.
        let big = Poisson::new(MAX_MEAN).unwrap().sample(&mut rng) as f64;
        assert!((big - MAX_MEAN).abs() < 10.0 * MAX_MEAN.sqrt());
    }
}
