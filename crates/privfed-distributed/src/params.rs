//! The shared parameters of one distributed-DP round and the formulas that follow from them
//! (paper 001 §4; docs/ALGORITHMS.md §2.3): the rounding-inflated sensitivities, the conditional
//! rounding threshold and the scale heuristic. Each formula lives here once; the encoder, the
//! planner and the accounting call it.

use crate::error::{DistributedError, Result};
use privfed_mechanisms::hadamard::MAX_PADDED_DIM;
use privfed_mechanisms::skellam::MAX_MEAN;
use serde::{Deserialize, Serialize};

/// Largest bit width of the modular arithmetic (`Z_{2^b}` held in `u64`).
pub const MAX_BITS: u32 = 62;
/// Largest scaled clip norm `s·c`: every scaled coordinate and its rounding stay exact integers
/// in an `f64` and fit in an `i64`.
pub const MAX_SCALED_NORM: f64 = 4_503_599_627_370_496.0; // 2^52

/// ℓ2 norm bound of a vector of scaled ℓ2 norm `≤ scaled_norm` in `padded_dim` coordinates after
/// (conditional) stochastic rounding to the integers (001 Prop. 4.2; Kairouz et al. 2021 Thm. 1):
/// `min( sc + √d',  √(s²c² + d'/4 + √(2·ln(1/β))·(sc + √d'/2)) )`, the second term only when
/// `β > 0` (the encoder then retries until the rounded vector meets it). This is the ℓ2
/// sensitivity `Δ₂` of one client's contribution in the integer domain.
pub fn rounded_l2_bound(scaled_norm: f64, beta: f64, padded_dim: usize) -> f64 {
    let d = padded_dim as f64;
    let always = scaled_norm + d.sqrt();
    match conditional_rounding_threshold(scaled_norm, beta, padded_dim) {
        Some(sq) => always.min(sq.sqrt()),
        None => always,
    }
}

/// The squared-norm bound that conditional rounding enforces, `s²c² + d'/4 +
/// √(2·ln(1/β))·(sc + √d'/2)`, or `None` for `β = 0` (plain stochastic rounding, no retries).
pub fn conditional_rounding_threshold(
    scaled_norm: f64,
    beta: f64,
    padded_dim: usize,
) -> Option<f64> {
    if beta <= 0.0 {
        return None;
    }
    let d = padded_dim as f64;
    Some(
        scaled_norm * scaled_norm
            + d / 4.0
            + (2.0 * (1.0 / beta).ln()).sqrt() * (scaled_norm + d.sqrt() / 2.0),
    )
}

/// ℓ1 sensitivity of an integer vector with ℓ2 norm `≤ l2` in `padded_dim` coordinates:
/// `Δ₁ = Δ₂·min(√d', Δ₂)` (Cauchy–Schwarz, and `‖v‖₁ ≤ ‖v‖₂²` for integer vectors).
pub fn rounded_l1_bound(l2: f64, padded_dim: usize) -> f64 {
    l2 * (padded_dim as f64).sqrt().min(l2)
}

/// The scale heuristic of paper 001's code (§4.2, 4.4): the largest `s` such that `k` standard
/// deviations of an aggregated coordinate fit in the modular range under the worst case of all
/// `n` client vectors aligned, `2k·√( s²(c²n²/d' + nσ²) + n/4 ) = 2^b`, i.e.
/// `s = √(2^{2b} − n·k²) / (2k·√(c²n²/d' + nσ²))` with `σ` the **local** (per-client) noise
/// standard deviation in unscaled units. (docs/ALGORITHMS.md §2.3 writes `n·c²/d'`, the variance
/// for independent directions; the authors' code uses the aligned worst case `n²c²/d'`, which
/// wraps less, and so do we.)
///
/// Infeasible when `2^{2b} ≤ n·k²` (the rounding noise of `n` clients alone overflows `b` bits).
pub fn heuristic_scale(
    local_noise_stddev: f64,
    clip: f64,
    bits: u32,
    clients: usize,
    padded_dim: usize,
    k: f64,
) -> Result<f64> {
    let n = clients as f64;
    let range_sq = 4f64.powi(bits as i32);
    let room = range_sq - n * k * k;
    if room <= 0.0 {
        let need = ((n * k * k).log2() / 2.0).floor() as u32 + 1;
        return Err(DistributedError::Infeasible {
            knob: "bits",
            reason: format!(
                "the rounding noise of {clients} clients at k = {k} standard deviations does not fit in {bits} bits"
            ),
            advice: format!("use at least {need} bits, fewer clients, or a smaller k"),
        });
    }
    let d = padded_dim as f64;
    let per_coord = clip * clip * n * n / d + n * local_noise_stddev * local_noise_stddev;
    Ok(room.sqrt() / (2.0 * k * per_coord.sqrt()))
}

/// What the planner, the CLI or a config file specifies for a round (unvalidated).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SkellamConfig {
    /// Vector dimension `d` (before padding).
    pub dim: usize,
    /// ℓ2 clip norm `c` (unscaled).
    pub clip: f64,
    /// Bit width `b` of the modular arithmetic, `1..=62`.
    pub bits: u32,
    /// Scale `s` applied before rounding.
    pub scale: f64,
    /// Local (per-client) noise standard deviation `σ` in unscaled units; each client adds
    /// `Sk(s²σ²)` per coordinate. `0` means no noise (no privacy).
    pub local_noise_stddev: f64,
    /// Conditional rounding parameter `β ∈ [0, 1)` (`0`: plain stochastic rounding).
    pub beta: f64,
    /// Number of aggregate standard deviations the modular range is sized for (`k > 0`).
    pub k: f64,
}

/// Validated parameters shared by every client and the server for one round.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SkellamParams {
    config: SkellamConfig,
    padded_dim: usize,
}

impl SkellamParams {
    /// Checks every field of `config`.
    pub fn new(config: SkellamConfig) -> Result<Self> {
        let c = config;
        if c.dim == 0 {
            return Err(DistributedError::invalid("dim", 0.0, "must be at least 1"));
        }
        let padded_dim = c
            .dim
            .checked_next_power_of_two()
            .filter(|&p| p <= MAX_PADDED_DIM)
            .ok_or_else(|| {
                DistributedError::invalid("dim", c.dim as f64, "padded dimension exceeds 2^40")
            })?;
        if !(c.clip.is_finite() && c.clip > 0.0) {
            return Err(DistributedError::invalid(
                "clip",
                c.clip,
                "must be finite and > 0",
            ));
        }
        if !(1..=MAX_BITS).contains(&c.bits) {
            return Err(DistributedError::invalid(
                "bits",
                c.bits as f64,
                format!("must be in 1..={MAX_BITS}"),
            ));
        }
        if !(c.scale.is_finite() && c.scale > 0.0) {
            return Err(DistributedError::invalid(
                "scale",
                c.scale,
                "must be finite and > 0",
            ));
        }
        if c.scale * c.clip > MAX_SCALED_NORM {
            return Err(DistributedError::invalid(
                "scale",
                c.scale,
                format!(
                    "scale × clip must be at most 2^52 (is {:e})",
                    c.scale * c.clip
                ),
            ));
        }
        if !(c.local_noise_stddev.is_finite() && c.local_noise_stddev >= 0.0) {
            return Err(DistributedError::invalid(
                "local_noise_stddev",
                c.local_noise_stddev,
                "must be finite and ≥ 0",
            ));
        }
        let mu = (c.scale * c.local_noise_stddev).powi(2);
        if mu > 2.0 * MAX_MEAN {
            return Err(DistributedError::invalid(
                "local_noise_stddev",
                c.local_noise_stddev,
                format!(
                    "the scaled Skellam variance s²σ² = {mu:e} exceeds {:e}",
                    2.0 * MAX_MEAN
                ),
            ));
        }
        if !(c.beta.is_finite() && (0.0..1.0).contains(&c.beta)) {
            return Err(DistributedError::invalid(
                "beta",
                c.beta,
                "must be in [0, 1)",
            ));
        }
        if !(c.k.is_finite() && c.k > 0.0) {
            return Err(DistributedError::invalid(
                "k",
                c.k,
                "must be finite and > 0",
            ));
        }
        Ok(SkellamParams {
            config: c,
            padded_dim,
        })
    }

    /// The configuration these parameters were built from.
    pub fn config(&self) -> &SkellamConfig {
        &self.config
    }
    /// `d`.
    pub fn dim(&self) -> usize {
        self.config.dim
    }
    /// `d' = 2^⌈log₂ d⌉`.
    pub fn padded_dim(&self) -> usize {
        self.padded_dim
    }
    /// `c`.
    pub fn clip(&self) -> f64 {
        self.config.clip
    }
    /// `b`.
    pub fn bits(&self) -> u32 {
        self.config.bits
    }
    /// `s`.
    pub fn scale(&self) -> f64 {
        self.config.scale
    }
    /// `σ` (local, unscaled).
    pub fn local_noise_stddev(&self) -> f64 {
        self.config.local_noise_stddev
    }
    /// `β`.
    pub fn beta(&self) -> f64 {
        self.config.beta
    }
    /// `k`.
    pub fn k(&self) -> f64 {
        self.config.k
    }
    /// The Skellam variance each client adds per coordinate, `μ_local = s²σ²` (integer domain).
    pub fn local_mu(&self) -> f64 {
        (self.config.scale * self.config.local_noise_stddev).powi(2)
    }
    /// `Δ₂` of one client's rounded contribution (integer domain): [`rounded_l2_bound`] at `s·c`.
    pub fn l2_sensitivity(&self) -> f64 {
        rounded_l2_bound(
            self.config.scale * self.config.clip,
            self.config.beta,
            self.padded_dim,
        )
    }
    /// `Δ₁` of one client's rounded contribution (integer domain): [`rounded_l1_bound`].
    pub fn l1_sensitivity(&self) -> f64 {
        rounded_l1_bound(self.l2_sensitivity(), self.padded_dim)
    }
    /// The squared-norm bound the encoder's conditional rounding enforces (`None` for `β = 0`).
    pub fn rounding_threshold(&self) -> Option<f64> {
        conditional_rounding_threshold(
            self.config.scale * self.config.clip,
            self.config.beta,
            self.padded_dim,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heuristic_scale_golden_values() {
        // n = 100, c = 1, local σ = 0.1 (central 1), d = 2^20, k = 4 (golden values,
        // from the paper's code): s ≈ 8153 at b = 16, ≈ 510 at b = 12.
        let s16 = heuristic_scale(0.1, 1.0, 16, 100, 1 << 20, 4.0).unwrap();
        let s12 = heuristic_scale(0.1, 1.0, 12, 100, 1 << 20, 4.0).unwrap();
        assert!((s16 - 8153.2).abs() < 0.5, "{s16}");
        assert!((s12 - 509.55).abs() < 0.05, "{s12}");
        // Closed form by hand at b = 16: √(2^32 − 1600)/(8·√(100²/2^20 + 1)).
        let want = (2f64.powi(32) - 1600.0).sqrt() / (8.0 * (1e4 / 1048576.0 + 1.0f64).sqrt());
        assert!((s16 - want).abs() < 1e-9 * want);
    }

    #[test]
    fn heuristic_scale_refuses_too_few_bits() {
        // n·k² = 100·16 = 1600 > 2^10 = 1024 ⇒ 5 bits cannot hold it; 6 bits can (4096).
        let err = heuristic_scale(0.1, 1.0, 5, 100, 1024, 4.0).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("bits") && msg.contains("at least 6"), "{msg}");
        assert!(heuristic_scale(0.1, 1.0, 6, 100, 1024, 4.0).is_ok());
    }

    #[test]
    fn rounded_bounds() {
        // β = 0: sc + √d'.
        assert_eq!(rounded_l2_bound(10.0, 0.0, 64), 18.0);
        // β > 0: the smaller of the two.
        let b = rounded_l2_bound(10.0, (-0.5f64).exp(), 64);
        let sq: f64 = 100.0 + 16.0 + 1.0 * (10.0 + 4.0);
        assert!((b - sq.sqrt()).abs() < 1e-12 && b < 18.0, "{b}");
        // Δ₁ = Δ₂·min(√d', Δ₂).
        assert_eq!(rounded_l1_bound(3.0, 64), 9.0);
        assert_eq!(rounded_l1_bound(30.0, 64), 240.0);
    }

    fn cfg() -> SkellamConfig {
        SkellamConfig {
            dim: 100,
            clip: 1.0,
            bits: 16,
            scale: 100.0,
            local_noise_stddev: 0.1,
            beta: 0.0,
            k: 4.0,
        }
    }

    #[test]
    fn validation_names_the_parameter() {
        let p = SkellamParams::new(cfg()).unwrap();
        assert_eq!(p.padded_dim(), 128);
        assert!((p.local_mu() - 100.0).abs() < 1e-9);
        let bad: Vec<(SkellamConfig, &str)> = vec![
            (SkellamConfig { dim: 0, ..cfg() }, "dim"),
            (SkellamConfig { clip: 0.0, ..cfg() }, "clip"),
            (
                SkellamConfig {
                    clip: f64::NAN,
                    ..cfg()
                },
                "clip",
            ),
            (SkellamConfig { bits: 0, ..cfg() }, "bits"),
            (SkellamConfig { bits: 63, ..cfg() }, "bits"),
            (
                SkellamConfig {
                    scale: -1.0,
                    ..cfg()
                },
                "scale",
            ),
            (
                SkellamConfig {
                    scale: 1e300,
                    ..cfg()
                },
                "scale",
            ),
            (
                SkellamConfig {
                    local_noise_stddev: f64::INFINITY,
                    ..cfg()
                },
                "local_noise_stddev",
            ),
            (SkellamConfig { beta: 1.0, ..cfg() }, "beta"),
            (SkellamConfig { k: 0.0, ..cfg() }, "k"),
        ];
        for (c, name) in bad {
            match SkellamParams::new(c) {
                Err(DistributedError::InvalidParameter { name: n, .. }) => assert_eq!(n, name),
                other => panic!("{name}: {other:?}"),
            }
        }
    }
}
