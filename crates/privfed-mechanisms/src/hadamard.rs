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

/// Levels whose butterflies stay within blocks of this many entries (32 KiB, the L1 cache) run
/// block by block.
const FWHT_BLOCK: usize = 1 << 11;
/// The levels above run in groups of up to this many per pass over the vector.
const FWHT_GROUP: u32 = 4;
/// Entries per stream of a group's strip (`2^GROUP` streams of this many entries stay in cache
/// while the group's levels run over them).
const FWHT_STRIP: usize = 1 << 8;

/// The in-place normalized fast Walsh–Hadamard transform `v ← H·v` (`H` symmetric, orthogonal,
/// self-inverse). Errors unless `v.len()` is a power of two.
///
/// The `log₂ n` levels of butterflies `(a, b) ← (a + b, a − b)` run in the textbook order, level by
/// level, so every entry sees the same operations in the same order as the plain loop (the test
/// `blocked_transform_has_the_bits_of_the_plain_one` compares bits); only the order in which
/// independent butterflies are visited is changed to stay in cache: the levels within 32 KiB
/// blocks block by block, the levels above in groups of four, strip by strip, two levels per
/// sweep. At `n = 2^20` that is three passes over the vector instead of twenty.
pub fn fwht_normalized(v: &mut [f64]) -> Result<()> {
    let n = v.len();
    if !n.is_power_of_two() {
        return Err(MechanismError::invalid(
            "len",
            n as f64,
            "the Walsh–Hadamard transform needs a power-of-two length",
        ));
    }
    pulp::Arch::new().dispatch(Fwht(v));
    Ok(())
}

/// The transform's levels and scale, compiled for the CPU's widest vectors (additions and one
/// multiplication per entry: the same bits on every CPU). A `WithSimd` struct with an
/// `#[inline(always)]` body, not a closure, so the loops are compiled inside the dispatched
/// function (see `batch::FillDot`).
struct Fwht<'a>(&'a mut [f64]);

impl pulp::WithSimd for Fwht<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) {
        let v = self.0;
        let n = v.len();
        let inner = n.min(FWHT_BLOCK);
        for block in v.chunks_exact_mut(inner) {
            let mut h = 1;
            if inner >= 8 {
                // Levels 1, 2, 4 in registers, eight entries at a time (as slices of one or two
                // entries, their loop overhead cost more than the additions).
                for e in block.chunks_exact_mut(8) {
                    let mut x = [e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]];
                    for h in [1, 2, 4] {
                        for i in 0..8 {
                            if i & h == 0 {
                                let (a, b) = (x[i], x[i + h]);
                                x[i] = a + b;
                                x[i + h] = a - b;
                            }
                        }
                    }
                    e.copy_from_slice(&x);
                }
                h = 8;
            }
            // Two levels per pass (half the loads and stores), then an odd one left over.
            while 4 * h <= inner {
                for quad in block.chunks_exact_mut(4 * h) {
                    let (ab, cd) = quad.split_at_mut(2 * h);
                    let (a, b) = ab.split_at_mut(h);
                    let (c, d) = cd.split_at_mut(h);
                    butterflies2(a, b, c, d);
                }
                h *= 4;
            }
            if h < inner {
                for pair in block.chunks_exact_mut(2 * h) {
                    let (lo, hi) = pair.split_at_mut(h);
                    butterflies(lo, hi);
                }
            }
        }
        let mut h = inner;
        while h < n {
            let g = FWHT_GROUP.min((n / h).trailing_zeros());
            level_group(v, h, g);
            h <<= g;
        }
        let scale = 1.0 / (n as f64).sqrt();
        for x in v.iter_mut() {
            *x *= scale;
        }
    }
}

#[inline(always)]
fn butterflies(lo: &mut [f64], hi: &mut [f64]) {
    for (a, b) in lo.iter_mut().zip(hi.iter_mut()) {
        let (x, y) = (*a, *b);
        *a = x + y;
        *b = x - y;
    }
}

/// Two levels on four equal slices: level `h` on `(a, b)` and `(c, d)`, then level `2h` on
/// `(a, c)` and `(b, d)`: each entry sees the operations of the two levels in order.
#[inline(always)]
fn butterflies2(a: &mut [f64], b: &mut [f64], c: &mut [f64], d: &mut [f64]) {
    let n = a.len().min(b.len()).min(c.len()).min(d.len());
    let (a, b, c, d) = (&mut a[..n], &mut b[..n], &mut c[..n], &mut d[..n]);
    for i in 0..n {
        let (w, x, y, z) = (a[i], b[i], c[i], d[i]);
        let (w, x, y, z) = (w + x, w - x, y + z, y - z);
        a[i] = w + y;
        c[i] = w - y;
        b[i] = x + z;
        d[i] = x - z;
    }
}

/// Levels `h0, 2h0, …, 2^{g−1}h0` of the transform, strip by strip: within each block of
/// `2^g·h0` entries, for offsets `j` in a strip of [`FWHT_STRIP`], all `g` levels run on the
/// `2^g` entries `m·h0 + j` before the next strip.
#[inline(always)]
fn level_group(v: &mut [f64], h0: usize, g: u32) {
    for block in v.chunks_exact_mut(h0 << g) {
        let mut j0 = 0;
        while j0 < h0 {
            let c = FWHT_STRIP.min(h0 - j0);
            let mut l = 0;
            while l < g {
                let h = h0 << l;
                if l + 1 < g {
                    for quad in block.chunks_exact_mut(4 * h) {
                        let (ab, cd) = quad.split_at_mut(2 * h);
                        let (qa, qb) = ab.split_at_mut(h);
                        let (qc, qd) = cd.split_at_mut(h);
                        for m in 0..1usize << l {
                            let o = m * h0 + j0;
                            butterflies2(
                                &mut qa[o..o + c],
                                &mut qb[o..o + c],
                                &mut qc[o..o + c],
                                &mut qd[o..o + c],
                            );
                        }
                    }
                    l += 2;
                } else {
                    for pair in block.chunks_exact_mut(2 * h) {
                        let (lo, hi) = pair.split_at_mut(h);
                        for m in 0..1usize << l {
                            let o = m * h0 + j0;
                            butterflies(&mut lo[o..o + c], &mut hi[o..o + c]);
                        }
                    }
                    l += 1;
                }
            }
            j0 += c;
        }
    }
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
        self.rotate_scaled_into(x, 1.0, out)
    }

    /// `out ← H·D·pad(x·factor)`, each `x_i·factor` rounded as a scaled copy would hold it (the
    /// same bits as scaling first), without making the copy.
    pub fn rotate_scaled_into(&self, x: &[f64], factor: f64, out: &mut [f64]) -> Result<()> {
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
            *o = flip(v * factor, neg);
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

    /// `unpad(D·H·y)` computed in `y`'s own buffer, which is returned truncated to `dim` (the
    /// same bits as [`inverse_in_place`](Self::inverse_in_place), without a second allocation).
    pub fn inverse_vec(&self, mut y: Vec<f64>) -> Result<Vec<f64>> {
        self.check_len("y", y.len(), self.padded_dim())?;
        fwht_normalized(&mut y)?;
        for (v, &neg) in y.iter_mut().zip(&self.negative[..self.dim]) {
            *v = flip(*v, neg);
        }
        y.truncate(self.dim);
        Ok(y)
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

    /// The textbook transform: one pass per level, then the scale.
    fn plain_fwht(v: &mut [f64]) {
        let n = v.len();
        let mut h = 1;
        while h < n {
            for pair in v.chunks_exact_mut(2 * h) {
                let (lo, hi) = pair.split_at_mut(h);
                butterflies(lo, hi);
            }
            h *= 2;
        }
        let scale = 1.0 / (n as f64).sqrt();
        for x in v.iter_mut() {
            *x *= scale;
        }
    }

    /// The cache-blocked order gives the textbook transform's bits, for sizes below, at and above
    /// the block, with upper levels in full and partial groups.
    #[test]
    fn blocked_transform_has_the_bits_of_the_plain_one() {
        for log_n in [0u32, 1, 5, 12, 13, 14, 16, 17, 18, 19] {
            let n = 1usize << log_n;
            let x: Vec<f64> = (0..n)
                .map(|i| ((i as f64) * 0.618_033_988_7).fract() * 2.0 - 1.0 + (i % 7) as f64 * 1e-9)
                .collect();
            let (mut a, mut b) = (x.clone(), x);
            fwht_normalized(&mut a).unwrap();
            plain_fwht(&mut b);
            assert!(
                a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()),
                "n = 2^{log_n}"
            );
        }
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
