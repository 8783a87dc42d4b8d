//! Mechanism options shared by `describe` and `dme`; construction is
//! [`privfed_sim::mechanism::MechanismSpec::build`].

use anyhow::Result;
use clap::{Args, ValueEnum};
use privfed_mechanisms::AnyRandomizer;
use privfed_sim::mechanism as spec;

/// The mechanisms the CLI knows (stable names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MechanismName {
    /// PrivUnit2: spherical caps, unit vectors (papers 000, 002).
    Privunit2,
    /// PrivUnitG: Gaussian PrivUnit, unit vectors (paper 002).
    Privunitg,
    /// PrivUnitInf: hypercube caps, vectors in [-1,1]^d (paper 000).
    PrivunitInf,
    /// ScalarDP: randomized response on a uniform grid over [0, r_max] (paper 000).
    ScalarDp,
    /// ScalarRelDP: randomized response on a geometric grid over [0, r_max] (paper 000).
    ScalarRelDp,
    /// Unbiased generalized randomized response on 2^bits points over [lo, hi] (paper 004).
    Grr,
    /// Separated direction (PrivUnit2) × magnitude (ScalarDP), vectors in the l2 ball (paper 000).
    Separated,
    /// Laplace noise calibrated to the l1 diameter of the domain.
    Laplace,
    /// Gaussian noise, analytic calibration to (ε, δ) on the l2 diameter of the domain.
    Gaussian,
    /// Unbiased bitwise randomized response on --bits bits over [lo, hi] (paper 004).
    BitwiseRr,
    /// The MVU mechanism over [lo, hi] (paper 004): designed for --input-bits/--output-bits
    /// (default --bits) and --epsilon, or loaded from --design FILE.
    Mvu,
}

/// How PrivUnit2 / PrivUnitG parameters are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Parameterization {
    /// Exact ε, variance-optimal parameters (default).
    Optimized,
    /// Paper 000's sufficient conditions (16a/16b) with the split --epsilon0 (privunit2).
    Paper000,
    /// The dimension-free threshold of paper 002 (privunitg).
    DimensionFree,
}

/// Input domain for the Laplace and Gaussian baselines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NormBall {
    /// Unit sphere.
    Sphere,
    /// l1 ball of radius --radius.
    L1,
    /// l2 ball of radius --radius.
    L2,
    /// l∞ ball (cube) of half-width --radius.
    Linf,
}

/// Options that select and parameterize a mechanism.
#[derive(Debug, Clone, Args)]
pub struct MechanismArgs {
    /// The mechanism.
    #[arg(value_enum)]
    pub mechanism: MechanismName,
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

impl MechanismName {
    fn kind(self) -> spec::MechanismKind {
        use spec::MechanismKind as K;
        match self {
            Self::Privunit2 => K::Privunit2,
            Self::Privunitg => K::Privunitg,
            Self::PrivunitInf => K::PrivunitInf,
            Self::ScalarDp => K::ScalarDp,
            Self::ScalarRelDp => K::ScalarRelDp,
            Self::Grr => K::Grr,
            Self::Separated => K::Separated,
            Self::Laplace => K::Laplace,
            Self::Gaussian => K::Gaussian,
            Self::BitwiseRr => K::BitwiseRr,
            Self::Mvu => K::Mvu,
        }
    }
}

impl MechanismArgs {
    /// The options as a library spec.
    pub fn spec(&self) -> spec::MechanismSpec {
        spec::MechanismSpec {
            kind: self.mechanism.kind(),
            epsilon: self.epsilon,
            dim: self.dim,
            parameterization: match self.parameterization {
                Parameterization::Optimized => spec::Parameterization::Optimized,
                Parameterization::Paper000 => spec::Parameterization::Paper000,
                Parameterization::DimensionFree => spec::Parameterization::DimensionFree,
            },
            epsilon0: self.epsilon0,
            delta: self.delta,
            norm: match self.norm {
                NormBall::Sphere => spec::NormBall::Sphere,
                NormBall::L1 => spec::NormBall::L1,
                NormBall::L2 => spec::NormBall::L2,
                NormBall::Linf => spec::NormBall::Linf,
            },
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
