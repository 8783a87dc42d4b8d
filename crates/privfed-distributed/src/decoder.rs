//! The server side of paper 001's pipeline: from the modular sum to the private mean — signed
//! representatives, unscale, inverse rotation, unpad — with a report of coordinates that look
//! wrapped.

use crate::error::{DistributedError, Result};
use crate::modular::{small_i64_to_f64, to_signed};
use crate::params::SkellamParams;
use privfed_mechanisms::hadamard::RandomizedHadamard;
use privfed_special::norm_sf;
use serde::Serialize;

/// The decoded aggregate of one round.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decoded {
    /// The private sum of the contributions (length `d`, unscaled).
    pub sum: Vec<f64>,
    /// `sum / contributors`.
    pub mean: Vec<f64>,
    /// How many clients contributed.
    pub contributors: usize,
    /// Coordinates of the modular sum whose signed value lies within one planned standard
    /// deviation of the boundary `±2^{b−1}` (beyond `(k−1)/k·2^{b−1}`): where wrapped coordinates
    /// land.
    pub near_boundary: usize,
    /// How many such coordinates the plan expects without any wrap: `d'·2·Q(k−1)`.
    pub expected_near_boundary: f64,
    /// `near_boundary` exceeds its expectation by more than `6·√expected + 6` (a Poisson upper
    /// tail far below 10⁻⁶ when nothing wrapped): the modular range was too small for this round
    /// and the mean is not to be trusted.
    pub wrap_suspected: bool,
}

/// The server's decoder for one round.
#[derive(Debug, Clone)]
pub struct SkellamDecoder {
    params: SkellamParams,
    rotation: RandomizedHadamard,
}

impl SkellamDecoder {
    /// The decoder for `params` and the round's shared `rotation_seed`.
    pub fn new(params: SkellamParams, rotation_seed: [u8; 32]) -> Result<Self> {
        Ok(SkellamDecoder {
            rotation: RandomizedHadamard::new(params.dim(), rotation_seed)?,
            params,
        })
    }

    /// Decodes the modular sum of `contributors ≥ 1` encoded vectors.
    pub fn decode(&self, modular_sum: &[u64], contributors: usize) -> Result<Decoded> {
        let mut rotated = vec![0.0f64; self.params.padded_dim()];
        let report = self.unscale(modular_sum, contributors, &mut rotated)?;
        let sum = self.rotation.inverse_vec(rotated)?;
        let mean = sum.iter().map(|v| v / contributors as f64).collect();
        Ok(Decoded {
            sum,
            mean,
            contributors,
            near_boundary: report.near_boundary,
            expected_near_boundary: report.expected_near_boundary,
            wrap_suspected: report.wrap_suspected,
        })
    }

    /// [`decode`](Self::decode) into the caller's buffers, for a server that decodes round after
    /// round: `scratch` (length `d'`, overwritten), `sum` and `mean` (length `d`) receive the same
    /// values `decode` returns, and nothing is allocated. The report is `decode`'s without the
    /// vectors.
    pub fn decode_into(
        &self,
        modular_sum: &[u64],
        contributors: usize,
        scratch: &mut [f64],
        sum: &mut [f64],
        mean: &mut [f64],
    ) -> Result<DecodeReport> {
        let d = self.params.dim();
        for (name, len, want) in [
            ("scratch", scratch.len(), self.params.padded_dim()),
            ("sum", sum.len(), d),
            ("mean", mean.len(), d),
        ] {
            if len != want {
                return Err(DistributedError::invalid(
                    name,
                    len as f64,
                    format!("length must be {want}"),
                ));
            }
        }
        let report = self.unscale(modular_sum, contributors, scratch)?;
        self.rotation.inverse_in_place(scratch, sum)?;
        for (m, &v) in mean.iter_mut().zip(sum.iter()) {
            *m = v / contributors as f64;
        }
        Ok(report)
    }

    /// Checks the inputs and writes `signed(x_i)/s` into `rotated` (length `d'`), with the wrap
    /// report.
    fn unscale(
        &self,
        modular_sum: &[u64],
        contributors: usize,
        rotated: &mut [f64],
    ) -> Result<DecodeReport> {
        let p = &self.params;
        if modular_sum.len() != p.padded_dim() {
            return Err(DistributedError::invalid(
                "sum",
                modular_sum.len() as f64,
                format!("length must be the padded dimension {}", p.padded_dim()),
            ));
        }
        if contributors == 0 {
            return Err(DistributedError::invalid(
                "contributors",
                0.0,
                "at least one client must contribute",
            ));
        }
        let bits = p.bits();
        let limit = 1u64 << bits;
        let half = (1u64 << (bits - 1)) as f64;
        let edge = half * (p.k() - 1.0).max(0.0) / p.k();
        // One pass: range check, signed representative, boundary count, unscale.
        let (near, out_of_range) = pulp::Arch::new().dispatch(Unscale {
            sum: modular_sum,
            out: rotated,
            bits,
            edge,
            scale: p.scale(),
        });
        if out_of_range && let Some(i) = modular_sum.iter().position(|&x| x >= limit) {
            return Err(DistributedError::invalid(
                "sum",
                modular_sum[i] as f64,
                format!("entry {i} is not in [0, 2^{bits})"),
            ));
        }
        let expected = p.padded_dim() as f64 * 2.0 * norm_sf((p.k() - 1.0).max(0.0));
        Ok(DecodeReport {
            contributors,
            near_boundary: near,
            expected_near_boundary: expected,
            wrap_suspected: near as f64 > expected + 6.0 * expected.sqrt() + 6.0,
        })
    }
}

/// What [`SkellamDecoder::decode_into`] reports besides the vectors (the fields of [`Decoded`]
/// of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DecodeReport {
    /// How many clients contributed.
    pub contributors: usize,
    /// Coordinates of the modular sum beyond `(k−1)/k·2^{b−1}` (see [`Decoded::near_boundary`]).
    pub near_boundary: usize,
    /// Their expectation without any wrap.
    pub expected_near_boundary: f64,
    /// See [`Decoded::wrap_suspected`].
    pub wrap_suspected: bool,
}

/// The decoder's first pass, compiled for the CPU's widest vectors: `out_i = signed(x_i) / s`,
/// counting entries beyond `edge` and flagging any `x_i ≥ 2^b`. The signed representative is
/// [`to_signed`]'s; for `b ≤ 51` it converts to `f64` through `small_i64_to_f64`, above by a plain
/// cast. Every step is exact or a correctly rounded division: the same bits on every CPU.
struct Unscale<'a> {
    sum: &'a [u64],
    out: &'a mut [f64],
    bits: u32,
    edge: f64,
    scale: f64,
}

impl pulp::WithSimd for Unscale<'_> {
    type Output = (usize, bool);

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> (usize, bool) {
        if self.bits <= 51 {
            self.run::<true>()
        } else {
            self.run::<false>()
        }
    }
}

impl Unscale<'_> {
    #[inline(always)]
    fn run<const SMALL: bool>(self) -> (usize, bool) {
        let limit = 1u64 << self.bits;
        let (mut near, mut out_of_range) = (0usize, false);
        for (o, &x) in self.out.iter_mut().zip(self.sum) {
            out_of_range |= x >= limit;
            let v = to_signed(x, self.bits);
            let f = if SMALL { small_i64_to_f64(v) } else { v as f64 };
            near += usize::from(f.abs() > self.edge);
            *o = f / self.scale;
        }
        (near, out_of_range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectorized pass against the scalar definition, bit for bit, on both conversion paths
    /// (b = 16 and b = 60), with entries at the boundaries and one out of range.
    #[test]
    fn unscale_pass_matches_the_scalar_definition() {
        for bits in [16u32, 51, 52, 60] {
            let limit = 1u64 << bits;
            let mut sum: Vec<u64> = (0..1000u64)
                .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) % limit)
                .collect();
            sum.extend([0, 1, limit / 2 - 1, limit / 2, limit - 1]);
            let (edge, scale) = (limit as f64 / 2.0 * 0.75, 8153.2);
            for bad in [false, true] {
                if bad {
                    sum.push(limit);
                }
                let mut out = vec![0.0; sum.len()];
                let (near, oor) = pulp::Arch::new().dispatch(Unscale {
                    sum: &sum,
                    out: &mut out,
                    bits,
                    edge,
                    scale,
                });
                let want: Vec<f64> = sum
                    .iter()
                    .map(|&x| to_signed(x, bits) as f64 / scale)
                    .collect();
                let want_near = sum
                    .iter()
                    .filter(|&&x| (to_signed(x, bits) as f64).abs() > edge)
                    .count();
                assert!(
                    out.iter()
                        .zip(&want)
                        .all(|(a, b)| a.to_bits() == b.to_bits()),
                    "b = {bits}"
                );
                assert_eq!(near, want_near, "b = {bits}");
                assert_eq!(oor, bad, "b = {bits}");
            }
        }
    }

    /// `decode_into` fills its buffers with `decode`'s values, bit for bit, reports the same,
    /// and refuses buffers of the wrong length.
    #[test]
    fn decode_into_matches_decode() {
        use crate::{SkellamEncoder, modular::ModularSum, pipeline_tests::request, plan};
        use privfed_mechanisms::rng::seeded_rng_for_experiments;
        let d = 1000;
        let p = plan(&request(d, 16, 10, 0.1, (-0.5f64).exp())).unwrap();
        let seed = [3u8; 32];
        let enc = SkellamEncoder::new(p.params, seed).unwrap();
        let dec = SkellamDecoder::new(p.params, seed).unwrap();
        let mut rng = seeded_rng_for_experiments(9);
        let mut total = ModularSum::new(16, p.params.padded_dim()).unwrap();
        for c in 0..10 {
            let x: Vec<f64> = (0..d).map(|i| ((i * 7 + c) % 13) as f64 / 100.0).collect();
            total.add(&enc.encode(&x, &mut rng).unwrap().0).unwrap();
        }
        let want = dec.decode(total.value(), 10).unwrap();
        let (mut scratch, mut sum, mut mean) =
            (vec![0.0; p.params.padded_dim()], vec![0.0; d], vec![0.0; d]);
        let report = dec
            .decode_into(total.value(), 10, &mut scratch, &mut sum, &mut mean)
            .unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&sum), bits(&want.sum));
        assert_eq!(bits(&mean), bits(&want.mean));
        assert_eq!(report.near_boundary, want.near_boundary);
        assert_eq!(report.wrap_suspected, want.wrap_suspected);
        assert_eq!(report.contributors, 10);
        assert!(
            dec.decode_into(
                total.value(),
                10,
                &mut scratch,
                &mut sum[..d - 1],
                &mut mean
            )
            .is_err()
        );
        assert!(
            dec.decode_into(total.value(), 10, &mut scratch[1..], &mut sum, &mut mean)
                .is_err()
        );
    }
}
