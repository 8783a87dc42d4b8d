//! The server side of paper 001's pipeline: from the modular sum to the private mean — signed
//! representatives, unscale, inverse rotation, unpad — with a report of coordinates that look
//! wrapped.

use crate::error::{DistributedError, Result};
use crate::modular::to_signed;
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
        let (mut near, mut out_of_range) = (0usize, false);
        let rotated: Vec<f64> = modular_sum
            .iter()
            .map(|&x| {
                out_of_range |= x >= limit;
                let v = to_signed(x, bits) as f64;
                near += usize::from(v.abs() > edge);
                v / p.scale()
            })
            .collect();
        if out_of_range && let Some(i) = modular_sum.iter().position(|&x| x >= limit) {
            return Err(DistributedError::invalid(
                "sum",
                modular_sum[i] as f64,
                format!("entry {i} is not in [0, 2^{bits})"),
            ));
        }
        let sum = self.rotation.inverse_vec(rotated)?;
        let mean = sum.iter().map(|v| v / contributors as f64).collect();
        let expected = p.padded_dim() as f64 * 2.0 * norm_sf((p.k() - 1.0).max(0.0));
        Ok(Decoded {
            sum,
            mean,
            contributors,
            near_boundary: near,
            expected_near_boundary: expected,
            wrap_suspected: near as f64 > expected + 6.0 * expected.sqrt() + 6.0,
        })
    }
}
