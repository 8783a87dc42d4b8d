//! The client side of paper 001's pipeline (Alg. 1; docs/ALGORITHMS.md §2.3): clip → scale →
//! pad and rotate → conditional stochastic rounding → add a Skellam share → wrap into `Z_{2^b}`.

use crate::error::{DistributedError, Result};
use crate::modular::{small_f64_to_i64, wrap};
use crate::params::SkellamParams;
use privfed_mechanisms::discrete_gaussian::DiscreteGaussian;
use privfed_mechanisms::domain::l2_norm_scaled;
use privfed_mechanisms::hadamard::RandomizedHadamard;
use privfed_mechanisms::rng::{StreamKey, Threads, for_each_block};
use privfed_mechanisms::skellam::Skellam;
use rand::{CryptoRng, Rng};
use serde::{Deserialize, Serialize};

/// Retry cap of conditional rounding. Each try fails with probability at most `β` (001 Prop. 4.2),
/// so a correct input fails the cap with probability `≤ β^1000` (below 10⁻²¹⁷ at `β = e^{−0.5}`).
pub const MAX_ROUNDING_TRIES: u32 = 1000;

/// What happened while encoding one vector.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EncodeStats {
    /// Whether the input's ℓ2 norm exceeded `c` and was scaled down to it.
    pub clipped: bool,
    /// Rounding tries used (1 unless conditional rounding rejected a draw).
    pub rounding_tries: u32,
}

/// Which integer noise each client adds (variance `s²σ²` per coordinate either way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoiseShare {
    /// `Sk(s²σ²)`: paper 001's mechanism (sums stay Skellam).
    #[default]
    Skellam,
    /// `N_ℤ(0, s²σ²)`: the distributed discrete Gaussian baseline (Kairouz et al. 2021); the sum
    /// is only close to a discrete Gaussian ([`crate::accounting::ddg_round_event`] accounts
    /// for the gap).
    DiscreteGaussian,
}

#[derive(Debug, Clone)]
enum Sampler {
    Skellam(Skellam),
    DiscreteGaussian(DiscreteGaussian),
}

/// A client's encoder for one round: the shared parameters and the round's rotation.
#[derive(Debug, Clone)]
pub struct SkellamEncoder {
    params: SkellamParams,
    rotation: RandomizedHadamard,
    noise: Option<Sampler>,
}

impl SkellamEncoder {
    /// The encoder for `params`, with the rotation's sign diagonal expanded from the round's shared
    /// `rotation_seed` (see [`crate::seed::rotation_seed`]).
    pub fn new(params: SkellamParams, rotation_seed: [u8; 32]) -> Result<Self> {
        Self::with_noise(params, rotation_seed, NoiseShare::Skellam)
    }

    /// The same pipeline with the chosen noise share (the DDG baseline uses
    /// [`NoiseShare::DiscreteGaussian`]).
    pub fn with_noise(
        params: SkellamParams,
        rotation_seed: [u8; 32],
        share: NoiseShare,
    ) -> Result<Self> {
        let rotation = RandomizedHadamard::new(params.dim(), rotation_seed)?;
        let mu = params.local_mu();
        let noise = if mu > 0.0 {
            Some(match share {
                NoiseShare::Skellam => Sampler::Skellam(Skellam::new(mu)?),
                NoiseShare::DiscreteGaussian => {
                    Sampler::DiscreteGaussian(DiscreteGaussian::new(mu)?)
                }
            })
        } else {
            None
        };
        Ok(SkellamEncoder {
            params,
            rotation,
            noise,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &SkellamParams {
        &self.params
    }

    /// Encodes `x` (length `d`, finite) into `out` (length `d'`, entries in `[0, 2^b)`).
    pub fn encode_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [u64],
        rng: &mut R,
    ) -> Result<EncodeStats> {
        self.encode_into_threads(x, out, rng, Threads::ONE)
    }

    /// [`encode_into`](Self::encode_into) with the noise shares drawn on up to `threads`
    /// threads. Rounding uses `rng` directly; the noise of block `b` of
    /// [`BLOCK_LEN`](privfed_mechanisms::rng::BLOCK_LEN) coordinates comes from stream `b` of a
    /// fresh [`StreamKey`] drawn from `rng`, so the encoding is bit-for-bit the same for every
    /// thread count.
    pub fn encode_into_threads<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [u64],
        rng: &mut R,
        threads: Threads,
    ) -> Result<EncodeStats> {
        let p = &self.params;
        if out.len() != p.padded_dim() {
            return Err(DistributedError::invalid(
                "out",
                out.len() as f64,
                format!("length must be the padded dimension {}", p.padded_dim()),
            ));
        }
        // `out` holds the rounded integers (two's complement) until the noise is added in place.
        let stats = self.round_in_place(x, out, rng)?;
        let key = StreamKey::draw(rng);
        let bits = p.bits();
        match &self.noise {
            Some(Sampler::Skellam(sk)) => {
                for_each_block(&key, out, threads, |_, stream, chunk| {
                    for o in chunk.iter_mut() {
                        *o = wrap(*o as i64 + sk.sample(stream), bits);
                    }
                });
            }
            Some(Sampler::DiscreteGaussian(dg)) => {
                for_each_block(&key, out, threads, |_, stream, chunk| {
                    for o in chunk.iter_mut() {
                        *o = wrap(*o as i64 + dg.sample(stream), bits);
                    }
                });
            }
            None => {
                for o in out.iter_mut() {
                    *o = wrap(*o as i64, bits);
                }
            }
        }
        Ok(stats)
    }

    /// Encodes `x` into a new vector of length `d'`.
    pub fn encode<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        rng: &mut R,
    ) -> Result<(Vec<u64>, EncodeStats)> {
        let mut out = vec![0u64; self.params.padded_dim()];
        let stats = self.encode_into(x, &mut out, rng)?;
        Ok((out, stats))
    }

    /// Clip, scale, rotate and round (no noise, no wrap): the integer vector whose sensitivity the
    /// accounting uses. Exposed for tests and for simulations that need the exact unwrapped sum.
    pub fn round_into<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        out: &mut [i64],
        rng: &mut R,
    ) -> Result<EncodeStats> {
        self.round_in_place(x, bytemuck::cast_slice_mut(out), rng)
    }

    /// [`round_into`](Self::round_into) writing each integer's two's-complement bits into
    /// `words`, which also serves as the rotation's scratch (read as `f64`), so encoding a vector
    /// allocates nothing.
    fn round_in_place<R: Rng + CryptoRng + ?Sized>(
        &self,
        x: &[f64],
        words: &mut [u64],
        rng: &mut R,
    ) -> Result<EncodeStats> {
        let p = &self.params;
        if x.len() != p.dim() {
            return Err(DistributedError::invalid(
                "x",
                x.len() as f64,
                format!("length must be {}", p.dim()),
            ));
        }
        if words.len() != p.padded_dim() {
            return Err(DistributedError::invalid(
                "out",
                words.len() as f64,
                format!("length must be the padded dimension {}", p.padded_dim()),
            ));
        }
        // The norm is NaN or ∞ exactly when an entry is; find which for the message.
        let norm = l2_norm_scaled(x);
        if !norm.is_finite()
            && let Some(i) = x.iter().position(|v| !v.is_finite())
        {
            return Err(DistributedError::invalid(
                "x",
                x[i],
                format!("coordinate {i} is not finite"),
            ));
        }
        let clipped = norm > p.clip();
        let factor = if clipped {
            p.scale() * p.clip() / norm
        } else {
            p.scale()
        };
        let threshold = p.rounding_threshold();
        // |y_i| ≤ ‖y‖ ≈ s·c: below 2⁵⁰ every rounded value converts to i64 exactly through
        // `small_f64_to_i64` (see `round_chunk`).
        let small = p.scale() * p.clip() < 1_125_899_906_842_624.0;
        for tries in 1..=MAX_ROUNDING_TRIES {
            // Rounded in place, so a retry rotates again (the same values).
            self.rotation
                .rotate_scaled_into(x, factor, bytemuck::cast_slice_mut(words))?;
            let sq = pulp::Arch::new().dispatch(RoundPass {
                rng: &mut *rng,
                words: &mut *words,
                small,
            });
            if threshold.is_none_or(|t| sq <= t) {
                return Ok(EncodeStats {
                    clipped,
                    rounding_tries: tries,
                });
            }
        }
        Err(DistributedError::RoundingFailed {
            tries: MAX_ROUNDING_TRIES,
            beta: p.beta(),
        })
    }
}

/// Uniforms drawn per batch of [`RoundPass`] (the generator is called word by word, as
/// `rng.random::<f64>()` would, so the stream is the same).
const ROUND_BATCH: usize = 256;

/// Stochastic rounding of `words` (read as `f64`) in place to two's-complement integers, with one
/// uniform per coordinate, `round(y) = ⌊y⌋ + [U < y − ⌊y⌋]`; returns `Σ round(y)²`. Compiled
/// for the CPU's widest vectors (see `privfed_mechanisms::batch`): floor, compare and select are
/// exact operations, so every CPU gets the same integers.
struct RoundPass<'a, R: ?Sized> {
    rng: &'a mut R,
    words: &'a mut [u64],
    /// Every `|y| < 2⁵⁰`, so the conversion to `i64` can use [`small_f64_to_i64`].
    small: bool,
}

impl<R: Rng + ?Sized> pulp::WithSimd for RoundPass<'_, R> {
    type Output = f64;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> f64 {
        let RoundPass { rng, words, small } = self;
        let mut uniforms = [0u64; ROUND_BATCH];
        let mut sq = [0.0f64; 4];
        for chunk in words.chunks_mut(ROUND_BATCH) {
            let u = &mut uniforms[..chunk.len()];
            for v in u.iter_mut() {
                *v = rng.next_u64();
            }
            if small {
                round_chunk::<true>(chunk, u, &mut sq);
            } else {
                round_chunk::<false>(chunk, u, &mut sq);
            }
        }
        // Integers: the sum is exact in any order while it stays below 2⁵³.
        (sq[0] + sq[1]) + (sq[2] + sq[3])
    }
}

/// `2⁻⁵³`, the spacing of rand's `f64` uniforms.
const TWO_M53: f64 = 1.0 / 9_007_199_254_740_992.0;

#[inline(always)]
fn round_chunk<const SMALL: bool>(words: &mut [u64], uniforms: &[u64], sq: &mut [f64; 4]) {
    for (w4, u4) in words.chunks_mut(4).zip(uniforms.chunks(4)) {
        for ((w, &u), s) in w4.iter_mut().zip(u4).zip(sq.iter_mut()) {
            let y = f64::from_bits(*w);
            let fl = y.floor();
            // rand's `random::<f64>()`: the top 53 bits times 2⁻⁵³.
            let uniform = (u >> 11) as f64 * TWO_M53;
            let r = fl + if uniform < y - fl { 1.0 } else { 0.0 };
            *s += r * r;
            *w = if SMALL {
                small_f64_to_i64(r) as u64
            } else {
                r as i64 as u64
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_mechanisms::rng::seeded_rng_for_experiments;
    use rand::RngExt;

    /// The rounding as first written: one `random::<f64>()`, `floor` and a saturating cast per
    /// coordinate.
    fn reference_round(ys: &[f64], rng: &mut impl Rng) -> (Vec<i64>, f64) {
        let mut sq = 0.0;
        let out = ys
            .iter()
            .map(|&y| {
                let fl = y.floor();
                let r = fl
                    + if rng.random::<f64>() < y - fl {
                        1.0
                    } else {
                        0.0
                    };
                sq += r * r;
                r as i64
            })
            .collect();
        (out, sq)
    }

    /// The vectorized pass gives the reference's integers, sum of squares and generator state,
    /// on both conversion paths, over values of both signs, integers, halves and a length that
    /// is not a multiple of the batch.
    #[test]
    fn round_pass_matches_the_scalar_rounding() {
        let n = 3 * ROUND_BATCH + 7;
        let ys: Vec<f64> = (0..n)
            .map(|i| match i % 5 {
                0 => -(i as f64) * 0.37,
                1 => i as f64 * 1.13,
                2 => (i as f64).floor() - 40.0,
                3 => -0.5 - i as f64,
                _ => (i as f64 * 0.618).sin() * 1e6,
            })
            .collect();
        for small in [true, false] {
            let mut rng_a = seeded_rng_for_experiments(5);
            let mut rng_b = seeded_rng_for_experiments(5);
            let (want, want_sq) = reference_round(&ys, &mut rng_a);
            let mut words: Vec<u64> = ys.iter().map(|y| y.to_bits()).collect();
            let sq = pulp::Arch::new().dispatch(RoundPass {
                rng: &mut rng_b,
                words: &mut words,
                small,
            });
            let got: Vec<i64> = words.iter().map(|&w| w as i64).collect();
            assert_eq!(got, want, "small = {small}");
            assert_eq!(sq.to_bits(), want_sq.to_bits());
            assert_eq!(rng_a.next_u64(), rng_b.next_u64(), "generators in step");
        }
    }
}
