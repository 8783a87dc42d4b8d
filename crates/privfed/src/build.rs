//! Mechanism options shared by `describe` and `dme`; construction is
//! [`privfed_sim::mechanism::MechanismSpec::build`].

use anyhow::Result;
use clap::Args;
use privfed_mechanisms::AnyRandomizer;
use privfed_sim::mechanism::{MechanismKind, MechanismSpec, NormBall, Parameterization};

/// Options that select and parameterize a mechanism.
#[derive(Debug, Clone, Args)]
pub struct MechanismArgs {
    /// The mechanism.
    #[arg(value_enum)]
    pub mechanism: MechanismKind,
    /// Privacy parameter ε (natural log); for `separated`, the total.
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon: f64,
    /// Dimension (vector mechanisms; scalar mechanisms have dimension 1).
    #[arg(long)]
    pub dim: Option<usize>,
    /// Parameter choice for privunit2 / privunitg.
    #[arg(long, value_enum, default_value = "optimized")]
    pub parameterization: Parameterization,
    /// Budget split ε₀ for the cap probability (privunit2 with --parameterization paper000).
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon0: Option<f64>,
    /// δ for the Gaussian mechanism.
    #[arg(long, allow_negative_numbers = true)]
    pub delta: Option<f64>,
    /// Domain of the Laplace / Gaussian baselines.
    #[arg(long, value_enum, default_value = "l2")]
    pub norm: NormBall,
    /// Radius of the Laplace / Gaussian domain.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub radius: f64,
    /// Upper end of the magnitude range (scalar-dp, scalar-rel-dp, separated).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub r_max: f64,
    /// Grid size k (scalar-dp: k+1 points); default: the k minimizing worst-case variance.
    #[arg(long)]
    pub k: Option<usize>,
    /// First positive grid point a (scalar-rel-dp).
    #[arg(long, allow_negative_numbers = true)]
    pub a: Option<f64>,
    /// Geometric growth κ of the grid (scalar-rel-dp).
    #[arg(long, allow_negative_numbers = true)]
    pub kappa: Option<f64>,
    /// Output bits (grr: 2^bits grid points).
    #[arg(long, default_value_t = 3)]
    pub bits: u32,
    /// Lower end of the grr input range.
    #[arg(long, default_value_t = -1.0, allow_negative_numbers = true)]
    pub lo: f64,
    /// Upper end of the grr input range.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub hi: f64,
    /// MVU: input bits b_in (default: --bits).
    #[arg(long)]
    pub input_bits: Option<u32>,
    /// MVU: output bits b_out (default: --bits).
    #[arg(long)]
    pub output_bits: Option<u32>,
    /// MVU: load the design from this JSON file (written by `privfed mvu design --out`)
    /// instead of designing; its exact ε must not exceed --epsilon.
    #[arg(long)]
    pub design: Option<std::path::PathBuf>,
    /// Magnitude budget ε₂ of `separated` (the direction gets ε − ε₂); default ε/10 capped at 1.
    #[arg(long, allow_negative_numbers = true)]
    pub magnitude_epsilon: Option<f64>,
}

impl MechanismArgs {
    /// The options as a library spec.
    fn spec(&self) -> MechanismSpec {
        MechanismSpec {
            kind: self.mechanism,
            epsilon: self.epsilon,
            dim: self.dim,
            parameterization: self.parameterization,
            epsilon0: self.epsilon0,
            delta: self.delta,
            norm: self.norm,
            radius: self.radius,
            r_max: self.r_max,
            k: self.k,
            a: self.a,
            kappa: self.kappa,
            bits: self.bits,
            lo: self.lo,
            hi: self.hi,
            input_bits: self.input_bits,
            output_bits: self.output_bits,
            design: self.design.clone(),
            magnitude_epsilon: self.magnitude_epsilon,
        }
    }
}

/// Builds the mechanism the options describe, with every parameter validated by the library.
pub fn build(args: &MechanismArgs) -> Result<AnyRandomizer> {
    Ok(args.spec().build()?)
}
