//! The randomized Hadamard rotation of paper 001's pipeline (docs/ALGORITHMS.md §2.3 step 2).
//!
//! `x ↦ H·D·x` on `x` padded with zeros to `d' = 2^⌈log₂ d⌉`, where `D` is a diagonal of random
//! signs and `H` the normalized Walsh–Hadamard matrix (`H_{ij} = (−1)^{⟨i,j⟩}/√d'`, symmetric and
//! orthogonal, so `H⁻¹ = H`). It preserves the ℓ2 norm and spreads a spiky vector over all
//! coordinates (each becomes close to `N(0, ‖x‖²/d')`), which is what lets the modular range of
//! secure aggregation hold `k` standard deviations of every coordinate. The inverse is `D·H`.
//!
//! `H` is applied with the in-place fast transform (`d'·log₂ d'` additions, never a matrix).
//! `D` comes from **shared randomness**: a 256-bit seed known to every client and the server,
//! expanded with ChaCha20 (one sign per bit of the key stream, least significant bit of each
//! little-endian 64-bit word first). The seed is not a secret of any client; derive it per round
//! from a session/round id with a KDF, never from a clock.

use crate::error::{MechanismError, Result};
use rand::{Rng, SeedableRng};

/// Largest padded dimension accepted (`2⁴⁰`).
pub const MAX_PADDED_DIM: usize = 1 << 40;

/// The in-place normalized fast Walsh–Hadamard transform `v ← H·v` (`H` symmetric, orthogonal,
/// self-inverse). Errors unless `v.len()` is a power of two.
pub fn fwht_normalized(v: &mut [f64]) -> Result<()> {
    let n = v.len();
    if !n.is_power_of_two() {
        return Err(MechanismError::invalid(
            "len",
            n as f64,
            "the Walsh–Hadamard transform needs a power-of-two length",
        ));
    }
    let mut h = 1;
    while h < n {
        for block in v.chunks_exact_mut(2 * h) {
            let (lo, hi) = block.split_at_mut(h);
            for (a, b) in lo.iter_mut().zip(hi.iter_mut()) {
                let (x, y) = (*a, *b);
                *a = x + y;
                *b = x - y;
            }
        }
        h *= 2;
    }
    let scale = 1.0 / (n as f64).sqrt();
    for x in v.iter_mut() {
        *x *= scale;
    }
    Ok(())
}

/// A randomized Hadamard rotation of dimension `dim` (padded to a power of two).
#[derive(Debug, Clone)]
pub struct RandomizedHadamard {
    dim: usize,
    /// `true` where the diagonal is `−1`; length `padded_dim`.
    negative: Vec<bool>,
}

impl RandomizedHadamard {
    /// The rotation for vectors of length `dim ≥ 1`, its sign diagonal expanded from `seed`.
    pub fn new(dim: usize, seed: [u8; 32]) -> Result<Self> {
        if dim == 0 {
            return Err(MechanismError::invalid("dim", 0.0, "must be at least 1"));
        }
        let padded = dim
            .checked_next_power_of_two()
            .filter(|&p| p <= MAX_PADDED_DIM)
            .ok_or_else(|| {
                MechanismError::invalid("dim", dim as f64, "padded dimension exceeds 2^40")
            })?;
        let mut stream = rand::rngs::ChaCha20Rng::from_seed(seed);
        let mut negative = Vec::with_capacity(padded);
        while negative.len() < padded {
            let word = stream.next_u64();
            let take = (padded - negative.len()).min(64);
            negative.extend((0..take).map(|b| (word >> b) & 1 == 1));
        }
        Ok(RandomizedHadamard { dim, negative })
    }

    /// The input dimension `d`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The padded (rotated) dimension `d' = 2^⌈log₂ d⌉`.
    pub fn padded_dim(&self) -> usize {
        self.negative.len()
    }

    /// `out ← H·D·pad(x)`; `x.len() == dim`, `out.len() == padded_dim`, `x` finite.
    pub fn rotate_into(&self, x: &[f64], out: &mut [f64]) -> Result<()> {
        self.check_len("x", x.len(), self.dim)?;
        self.check_len("out", out.len(), self.padded_dim())?;
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(MechanismError::invalid(
                "x",
                x[i],
                format!("coordinate {i} is not finite"),
            ));
        }
        let (head, pad) = out.split_at_mut(self.dim);
        for ((o, &v), &neg) in head.iter_mut().zip(x).zip(&self.negative) {
            *o = flip(v, neg);
        }
        pad.fill(0.0);
        fwht_normalized(out)
    }

    /// `H·D·pad(x)` as a new vector.
    pub fn rotate(&self, x: &[f64]) -> Result<Vec<f64>> {
        let mut out = vec![0.0; self.padded_dim()];
        self.rotate_into(x, &mut out)?;
        Ok(out)
    }

    /// The inverse: `out ← unpad(D·H·y)`; `y.len() == padded_dim` (it is used as scratch and left
    /// holding `H·y`), `out.len() == dim`.
    pub fn inverse_in_place(&self, y: &mut [f64], out: &mut [f64]) -> Result<()> {
        self.check_len("y", y.len(), self.padded_dim())?;
        self.check_len("out", out.len(), self.dim)?;
        fwht_normalized(y)?;
        for ((o, &v), &neg) in out.iter_mut().zip(&y[..self.dim]).zip(&self.negative) {
            *o = flip(v, neg);
        }
        Ok(())
    }

    /// `unpad(D·H·y)` as a new vector.
    pub fn inverse(&self, y: &[f64]) -> Result<Vec<f64>> {
        let mut scratch = y.to_vec();
        let mut out = vec![0.0; self.dim];
        self.inverse_in_place(&mut scratch, &mut out)?;
        Ok(out)
    }

    fn check_len(&self, name: &'static str, got: usize, want: usize) -> Result<()> {
        if got == want {
            Ok(())
        } else {
            Err(MechanismError::invalid(
                name,
                got as f64,
                format!("length must be {want}"),
            ))
        }
    }
}

/// `−v` when `neg`, else `v`, by flipping the sign bit: the bits of the negation, without a
/// branch (the signs are random, so an `if` mispredicted on half the coordinates).
#[inline(always)]
fn flip(v: f64, neg: bool) -> f64 {
    f64::from_bits(v.to_bits() ^ (u64::from(neg) << 63))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(b: u8) -> [u8; 32] {
        [b; 32]
    }

    /// `H_{ij} = (−1)^{popcount(i & j)} / √n`, formed explicitly for small `n`.
    fn explicit_hadamard(n: usize) -> Vec<Vec<f64>> {
        let s = 1.0 / (n as f64).sqrt();
        (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| if (i & j).count_ones() % 2 == 0 { s } else { -s })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn fast_transform_matches_the_matrix() {
        for n in [1usize, 2, 4, 8, 64] {
            let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin() + 0.1).collect();
            let h = explicit_hadamard(n);
            let want: Vec<f64> = h
                .iter()
                .map(|row| row.iter().zip(&x).map(|(a, b)| a * b).sum())
                .collect();
            let mut got = x.clone();
            fwht_normalized(&mut got).unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-13, "n={n}: {g} vs {w}");
            }
        }
        assert!(fwht_normalized(&mut [1.0, 2.0, 3.0]).is_err());
    }

    #[test]
    fn inverse_recovers_input_and_norm_is_preserved() {
        for dim in [1usize, 3, 100, 1000, 4096, 5000] {
            let rot = RandomizedHadamard::new(dim, seed(7)).unwrap();
            assert_eq!(rot.padded_dim(), dim.next_power_of_two());
            let x: Vec<f64> = (0..dim).map(|i| ((i * 7919) % 101) as f64 - 50.0).collect();
            let y = rot.rotate(&x).unwrap();
            let nx: f64 = x.iter().map(|v| v * v).sum::<f64>().sqrt();
            let ny: f64 = y.iter().map(|v| v * v).sum::<f64>().sqrt();
            assert!(
                (nx - ny).abs() <= 1e-12 * nx.max(1.0),
                "dim={dim}: {nx} vs {ny}"
            );
            let back = rot.inverse(&y).unwrap();
            for (a, b) in back.iter().zip(&x) {
                assert!(
                    (a - b).abs() <= 1e-12 * nx.max(1.0),
                    "dim={dim}: {a} vs {b}"
                );
            }
        }
    }

    #[test]
    fn signs_are_deterministic_per_seed_and_balanced() {
        let a = RandomizedHadamard::new(1 << 16, seed(1)).unwrap();
        let b = RandomizedHadamard::new(1 << 16, seed(1)).unwrap();
        let c = RandomizedHadamard::new(1 << 16, seed(2)).unwrap();
        assert_eq!(a.negative, b.negative);
        assert_ne!(a.negative, c.negative);
        // Number of −1 signs ~ Bin(65536, ½): mean 32768, sd 128; |z| < 5 fails with
        // probability 6e-7 for a correct expansion.
        let neg = a.negative.iter().filter(|&&v| v).count() as f64;
        assert!((neg - 32768.0).abs() < 5.0 * 128.0, "{neg}");
    }

    #[test]
    fn flip_has_the_bits_of_negation() {
        for v in [
            0.0,
            -0.0,
            1.5,
            -2.25,
            1e-310,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ] {
            assert_eq!(flip(v, true).to_bits(), (-v).to_bits(), "{v}");
            assert_eq!(flip(v, false).to_bits(), v.to_bits(), "{v}");
        }
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(RandomizedHadamard::new(0, seed(0)).is_err());
        assert!(RandomizedHadamard::new(usize::MAX, seed(0)).is_err());
        let rot = RandomizedHadamard::new(5, seed(0)).unwrap();
        assert!(rot.rotate(&[1.0; 4]).is_err());
        assert!(rot.rotate(&[1.0, 2.0, f64::NAN, 0.0, 0.0]).is_err());
        assert!(rot.rotate(&[1.0, 2.0, f64::INFINITY, 0.0, 0.0]).is_err());
        assert!(rot.inverse(&[0.0; 5]).is_err());
    }
}

#[cfg(test)]
mod flatness {
    use super::*;
    use privfed_testkit::assert_ks_fits;

    /// A spiky input (256 non-zeros of distinct magnitudes in d = 2^14) is far from Gaussian,
    /// but after the rotation its coordinates follow `N(0, ‖x‖²/d')` closely: KS at α = 1e-6
    /// against that normal passes for the rotated vector and fails for the raw one.
    #[test]
    fn rotation_makes_a_spiky_vector_near_gaussian() {
        let d = 1 << 14;
        let mut x = vec![0.0; d];
        for j in 0..256 {
            x[(j * 7919) % d] = 1.0 + (j as f64).sqrt();
        }
        let norm2: f64 = x.iter().map(|v| v * v).sum();
        let sd = (norm2 / d as f64).sqrt();
        let cdf = |v: f64| privfed_special::norm_cdf(v / sd);
        for seed in [1u8, 2, 3] {
            let y = RandomizedHadamard::new(d, [seed; 32])
                .unwrap()
                .rotate(&x)
                .unwrap();
            let mut y = y;
            assert_ks_fits(
                &mut y,
                cdf,
                1e-6,
                &format!("rotated spiky vector, seed {seed}"),
            );
        }
        let mut raw = x.clone();
        let d_raw = privfed_testkit::ks_statistic(&mut raw, cdf).unwrap();
        assert!(d_raw > privfed_testkit::ks_critical(d, 1e-6), "{d_raw}");
    }
}
