//! Unbiased bitwise randomized response (paper 004 §3.2; `docs/ALGORITHMS.md` §3.2).
//!
//! The input `x ∈ [lo, hi]` is dithered to the index `k ∈ 0..B` of the `B = 2^b`-level grid
//! ([`crate::dither`]); each of the `b` bits `β_t` of `k = Σ_t β_t 2^t` is sent by binary
//! randomized response with budget `ε' = ε/b` (flipped with probability `q = 1/(1 + e^{ε'})`), and
//! the server decodes each received bit `o_t` with the unbiased alphabet
//! `â(0) = −1/(e^{ε'} − 1)`, `â(1) = e^{ε'}/(e^{ε'} − 1)` (so `E[â(o_t)] = β_t`), recombining
//! `k̂ = Σ_t 2^t â(o_t)` and `x̂ = lo + (hi − lo)·k̂/(B − 1)`.
//!
//! ## Exact privacy
//! `P(o | k) = Π_t (1−q)^{[o_t = β_t]} q^{[o_t ≠ β_t]}`; the largest ratio over inputs is
//! `((1−q)/q)^b`, attained by `k = 0` against `k = B − 1` (all bits differ). Dithering makes the
//! output law a mixture of these rows, which cannot increase the ratio. The guarantee is
//! `b·ln((1−q)/q)` computed from the `f64` flip probability the sampler realizes (exact Bernoulli).
//!
//! ## Exact variance
//! Each decoded bit has variance `q(1−q)(â(1) − â(0))² = e^{ε'}/(e^{ε'} − 1)²` whatever its value,
//! the bits are independent, so `Var(k̂ | k) = (4^b − 1)/3 · e^{ε'}/(e^{ε'} − 1)²` for every `k`,
//! and with the dithering `Var(x) = s²·(4^b − 1)/3·e^{ε'}/(e^{ε'} − 1)² + λ(1−λ)h²` with
//! `s = (hi − lo)/(B − 1) = h`; the worst case adds `h²/4`.

use crate::dither::{check_report_bits, locate, mix_rows, round_index};
use crate::domain::check_range;
use crate::error::{Result, check_positive};
use crate::sampling::bernoulli_exact;
use crate::{CryptoRng, Domain, Guarantee, LocalRandomizer, MechanismError, Rng, check_out_len};
use serde::Serialize;

/// Unbiased bitwise randomized response on `b` bits (paper 004 §3.2). Name `"bitwise-rr"`.
#[doc(alias = "bRR")]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BitwiseRr {
    /// Requested total ε (the guarantee is recomputed from the flip probability).
    epsilon: f64,
    bits: u32,
    lo: f64,
    hi: f64,
    /// Flip probability of each bit, `1/(1 + e^{ε/b})`.
    flip_probability: f64,
    #[serde(skip)]
    bit_alphabet: [f64; 2],
}

impl BitwiseRr {
    /// Unbiased bitwise RR with total budget `epsilon` split evenly over `bits ∈ 1..=16` bits,
    /// on inputs `[lo, hi]`. Errors if ε is not finite and positive, if the flip probability
    /// underflows (ε/b > ~700) or the decoded values overflow (ε/b tiny).
    pub fn new(epsilon: f64, bits: u32, lo: f64, hi: f64) -> Result<BitwiseRr> {
        check_positive("epsilon", epsilon)?;
        check_report_bits(bits)?;
        check_range(lo, hi)?;
        let e1 = epsilon / f64::from(bits);
        let mut q = 1.0 / (1.0 + e1.exp());
        // Round q up (a few ulps at most) so that the realized ε = b·ln((1−q)/q) does not exceed
        // the requested one.
        let bf = f64::from(bits);
        for _ in 0..64 {
            if q.is_nan() || bf * (libm::log1p(-q) - q.ln()) <= epsilon {
                break;
            }
            q = q.next_up();
        }
        if q.is_nan() || q < f64::MIN_POSITIVE {
            return Err(MechanismError::invalid(
                "epsilon",
                epsilon,
                "too large: the flip probability underflows",
            ));
        }
        let em1 = libm::expm1(e1);
        let bit_alphabet = [-1.0 / em1, e1.exp() / em1];
        if !(bit_alphabet[1].is_finite() && bit_alphabet[1] < 1e150) {
            return Err(MechanismError::invalid(
                "epsilon",
                epsilon,
                "too small: the decoded values overflow",
            ));
        }
        Ok(BitwiseRr {
            epsilon,
            bits,
            lo,
            hi,
            flip_probability: q,
            bit_alphabet,
        })
    }

    /// Number of bits `b` (the report is one index in `0..2^b`).
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The requested total ε.
    pub fn requested_epsilon(&self) -> f64 {
        self.epsilon
    }

    /// Flip probability of each bit, `q = 1/(1 + e^{ε/b})`.
    pub fn flip_probability(&self) -> f64 {
        self.flip_probability
    }

    /// The per-bit decoding alphabet `[−1/(e^{ε'}−1), e^{ε'}/(e^{ε'}−1)]`, `ε' = ε/b`.
    pub fn bit_alphabet(&self) -> [f64; 2] {
        self.bit_alphabet
    }

    fn levels(&self) -> usize {
        1usize << self.bits
    }

    fn scale(&self) -> f64 {
        (self.hi - self.lo) / (self.levels() - 1) as f64
    }

    /// What a device sends: the word `o ∈ 0..2^b` (dithering, then each bit flipped
    /// independently with probability `q`).
    pub fn encode<R: Rng + CryptoRng + ?Sized>(&self, x: f64, rng: &mut R) -> Result<usize> {
        let (i, lam) = locate(x, self.levels(), self.lo, self.hi)?;
        let k = round_index(i, lam, rng);
        let mut o = k;
        for t in 0..self.bits {
            if bernoulli_exact(rng, self.flip_probability) {
                o ^= 1 << t;
            }
        }
        Ok(o)
    }

    /// The server's unbiased estimate for the word `o`:
    /// `lo + (hi − lo)/(B−1)·Σ_t 2^t â(o_t)`. Errors if `o ≥ 2^b`.
    pub fn decode(&self, o: usize) -> Result<f64> {
        if o >= self.levels() {
            return Err(MechanismError::invalid(
                "index",
                o as f64,
                format!("must be < {}", self.levels()),
            ));
        }
        let k_hat: f64 = (0..self.bits)
            .map(|t| f64::from(1u32 << t) * self.bit_alphabet[(o >> t) & 1])
            .sum();
        Ok(self.lo + self.scale() * k_hat)
    }

    /// The decoded value of every word: `alphabet()[o] = decode(o)`.
    pub fn alphabet(&self) -> Vec<f64> {
        (0..self.levels())
            .map(|o| self.decode(o).unwrap_or(f64::NAN))
            .collect()
    }

    /// `P(o | k)` for the grid index `k`: the row `k` of the mechanism's matrix.
    pub fn row(&self, k: usize) -> Vec<f64> {
        let q = self.flip_probability;
        (0..self.levels())
            .map(|o| {
                let differ = (o ^ k).count_ones() as i32;
                q.powi(differ) * (1.0 - q).powi(self.bits as i32 - differ)
            })
            .collect()
    }

    /// The exact distribution of [`encode`](Self::encode) at `x`: `(1−λ)·row(i) + λ·row(i+1)`.
    pub fn pmf(&self, x: f64) -> Result<Vec<f64>> {
        let (i, lam) = locate(x, self.levels(), self.lo, self.hi)?;
        Ok(mix_rows(&self.row(i), &self.row(i + 1), lam))
    }

    /// `Var(k̂ | k)·h²`: the variance at every grid point, `h²(4^b−1)/3·e^{ε'}/(e^{ε'}−1)²`,
    /// written as `h²(4^b−1)/3·q(1−q)(â(1)−â(0))²` with the realized `q`.
    pub fn grid_variance(&self) -> f64 {
        let q = self.flip_probability;
        let spread = self.bit_alphabet[1] - self.bit_alphabet[0];
        let s = self.scale();
        let four_b = 4f64.powi(self.bits as i32);
        s * s * (four_b - 1.0) / 3.0 * q * (1.0 - q) * spread * spread
    }

    /// Exact `E[(x̂ − x)²]` at the scalar `x`: `grid_variance() + λ(1−λ)h²`.
    pub fn variance_scalar(&self, x: f64) -> Result<f64> {
        let (_, lam) = locate(x, self.levels(), self.lo, self.hi)?;
        let h = self.scale();
        Ok(self.grid_variance() + lam * (1.0 - lam) * h * h)
    }
}

impl LocalRandomizer for BitwiseRr {
    fn name(&self) -> &'static str {
        "bitwise-rr"
    }

    fn domain(&self) -> Domain {
        Domain::Interval {
            lo: self.lo,
            hi: self.hi,
        }
    }

    /// `Pure { ε = b·(ln(1−q) − ln q) }` with the realized flip probability `q` (module docs).
    fn guarantee(&self) -> Guarantee {
        let q = self.flip_probability;
        Guarantee::Pure {
            epsilon: f64::from(self.bits) * (libm::log1p(-q) - q.ln()),
        }
    }

    fn variance_at(&self, x: &[f64]) -> Result<f64> {
        self.domain().check(x)?;
        self.variance_scalar(x[0])
    }

    /// `grid_variance() + h²/4` (attained at the midpoints of the grid intervals).
    fn worst_case_variance(&self) -> f64 {
        let h = self.scale();
        self.grid_variance() + h * h / 4.0
    }

    fn privatize_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [f64],
        rng: &mut R,
    ) -> Result<()> {
        check_out_len(out, 1)?;
        self.domain().check(x)?;
        out[0] = self.decode(self.encode(x[0], rng)?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_rng_for_experiments;
    use privfed_testkit::assert_unbiased_with_variance;

    fn cases() -> Vec<BitwiseRr> {
        vec![
            BitwiseRr::new(1.0, 3, -1.0, 1.0).unwrap(),
            BitwiseRr::new(5.0, 3, -1.0, 1.0).unwrap(),
            BitwiseRr::new(2.0, 1, 0.0, 1.0).unwrap(),
            BitwiseRr::new(8.0, 4, -3.0, 2.0).unwrap(),
        ]
    }

    #[test]
    fn pmf_ratio_is_exactly_e_epsilon() {
        for m in cases() {
            let eps = m.guarantee().epsilon();
            assert!(eps <= m.requested_epsilon());
            assert!((eps - m.requested_epsilon()).abs() < 1e-12 * eps.max(1.0));
            let b = 1usize << m.bits();
            let rows: Vec<Vec<f64>> = (0..b).map(|k| m.row(k)).collect();
            let mut max_ratio = 0.0f64;
            for r1 in &rows {
                assert!((r1.iter().sum::<f64>() - 1.0).abs() < 1e-14);
                for r2 in &rows {
                    for (a, c) in r1.iter().zip(r2) {
                        max_ratio = max_ratio.max(a / c);
                    }
                }
            }
            assert!(max_ratio <= eps.exp() * (1.0 + 1e-12), "{max_ratio}");
            assert!((max_ratio / eps.exp() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn unbiased_and_variance_from_the_pmf() {
        for m in cases() {
            let alpha = m.alphabet();
            for x in [m.lo, m.hi, 0.3 * m.lo + 0.7 * m.hi, 0.5 * (m.lo + m.hi)] {
                let pmf = m.pmf(x).unwrap();
                let mean: f64 = pmf.iter().zip(&alpha).map(|(p, a)| p * a).sum();
                let scale = alpha.iter().fold(1.0f64, |s, a| s.max(a.abs()));
                assert!((mean - x).abs() < 1e-12 * scale, "x={x}: mean {mean}");
                let var: f64 = pmf
                    .iter()
                    .zip(&alpha)
                    .map(|(p, a)| p * (a - x).powi(2))
                    .sum();
                let v = m.variance_scalar(x).unwrap();
                assert!((var - v).abs() < 1e-10 * v, "x={x}: {var} vs {v}");
                assert!(v <= m.worst_case_variance() * (1.0 + 1e-12));
            }
        }
    }

    #[test]
    fn monte_carlo_mean_and_variance() {
        // Two-sided z-tests at α = 6e-7 (|z| < 4.99) on the mean error (exact variance) and on
        // the mean squared error against the exact variance (standard error from the sample's
        // fourth moment), 2 mechanisms × 2 inputs.
        let mut rng = seeded_rng_for_experiments(4);
        let n = 300_000;
        for m in [cases().remove(0), cases().remove(1)] {
            for x in [-0.77, 0.2] {
                let v = m.variance_scalar(x).unwrap();
                let errors: Vec<f64> = (0..n)
                    .map(|_| m.privatize(&[x], &mut rng).unwrap()[0] - x)
                    .collect();
                assert_unbiased_with_variance(&errors, v, 6e-7, &format!("x = {x}"));
            }
        }
    }

    #[test]
    fn errors() {
        assert!(BitwiseRr::new(0.0, 3, 0.0, 1.0).is_err());
        assert!(BitwiseRr::new(f64::NAN, 3, 0.0, 1.0).is_err());
        assert!(BitwiseRr::new(1.0, 0, 0.0, 1.0).is_err());
        assert!(BitwiseRr::new(1.0, 17, 0.0, 1.0).is_err());
        assert!(BitwiseRr::new(1.0, 3, 1.0, 0.0).is_err());
        assert!(BitwiseRr::new(1e-300, 3, 0.0, 1.0).is_err());
        assert!(BitwiseRr::new(1e5, 3, 0.0, 1.0).is_err());
        let m = cases().remove(0);
        let mut rng = seeded_rng_for_experiments(0);
        assert!(m.privatize(&[2.0], &mut rng).is_err());
        assert!(m.privatize(&[f64::NAN], &mut rng).is_err());
        assert!(m.decode(8).is_err());
        assert!(m.variance_at(&[0.0, 0.0]).is_err());
    }
}
