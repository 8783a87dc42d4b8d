//! The client side of paper 001's pipeline (Alg. 1; docs/ALGORITHMS.md §2.3): clip → scale →
//! pad and rotate → conditional stochastic rounding → add a Skellam share → wrap into `Z_{2^b}`.

use crate::error::{DistributedError, Result};
use crate::modular::wrap;
use crate::params::SkellamParams;
use privfed_mechanisms::discrete_gaussian::DiscreteGaussian;
use privfed_mechanisms::hadamard::RandomizedHadamard;
use privfed_mechanisms::rng::{BLOCK_LEN, StreamKey, Threads, for_each_block};
use privfed_mechanisms::skellam::Skellam;
use rand::{CryptoRng, Rng, RngExt};
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
    /// [`BLOCK_LEN`] coordinates comes from stream `b` of a fresh [`StreamKey`] drawn from `rng`,
    /// so the encoding is bit-for-bit the same for every thread count.
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
        let mut rounded = vec![0i64; p.padded_dim()];
        let stats = self.round_into(x, &mut rounded, rng)?;
        let key = StreamKey::draw(rng);
        let (noise, bits) = (&self.noise, p.bits());
        for_each_block(&key, out, threads, |b, stream, chunk| {
            let start = b * BLOCK_LEN;
            let r = rounded.get(start..start + chunk.len()).unwrap_or(&[]);
            for (o, &ri) in chunk.iter_mut().zip(r) {
                let noisy = match noise {
                    Some(Sampler::Skellam(sk)) => ri + sk.sample(stream),
                    Some(Sampler::DiscreteGaussian(dg)) => ri + dg.sample(stream),
                    None => ri,
                };
                *o = wrap(noisy, bits);
            }
        });
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
        let p = &self.params;
        if x.len() != p.dim() {
            return Err(DistributedError::invalid(
                "x",
                x.len() as f64,
                format!("length must be {}", p.dim()),
            ));
        }
        if out.len() != p.padded_dim() {
            return Err(DistributedError::invalid(
                "out",
                out.len() as f64,
                format!("length must be the padded dimension {}", p.padded_dim()),
            ));
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(DistributedError::invalid(
                "x",
                x[i],
                format!("coordinate {i} is not finite"),
            ));
        }
        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        let clipped = norm > p.clip();
        let factor = if clipped {
            p.scale() * p.clip() / norm
        } else {
            p.scale()
        };
        let scaled: Vec<f64> = x.iter().map(|v| v * factor).collect();
        let rotated = self.rotation.rotate(&scaled)?;
        let threshold = p.rounding_threshold();
        for tries in 1..=MAX_ROUNDING_TRIES {
            let mut sq = 0.0f64;
            for (o, &y) in out.iter_mut().zip(&rotated) {
                let fl = privfed_mechanisms::special::floor(y);
                let up = rng.random::<f64>() < y - fl;
                let r = fl + if up { 1.0 } else { 0.0 };
                sq += r * r;
                *o = r as i64;
            }
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
