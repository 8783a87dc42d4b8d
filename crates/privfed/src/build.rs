//! Mechanism options shared by `describe` and `dme`, and construction of the mechanism.

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use privfed_mechanisms::gaussian::Gaussian;
use privfed_mechanisms::grid_rr::GridRr;
use privfed_mechanisms::laplace::Laplace;
use privfed_mechanisms::privunit_inf::PrivUnitInf;
use privfed_mechanisms::privunit2::PrivUnit2;
use privfed_mechanisms::privunitg::PrivUnitG;
use privfed_mechanisms::separated::Separated;
use privfed_mechanisms::{AnyRandomizer, Domain};

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

impl MechanismArgs {
    fn vector_dim(&self) -> Result<usize> {
        match self.dim {
            Some(d) => Ok(d),
            None => bail!(
                "--dim is required for {}",
                self.mechanism
                    .to_possible_value()
                    .map(|v| v.get_name().to_owned())
                    .unwrap_or_default()
            ),
        }
    }

    fn scalar_dim(&self) -> Result<()> {
        match self.dim {
            None | Some(1) => Ok(()),
            Some(d) => bail!("this mechanism is scalar: --dim must be 1 (got {d})"),
        }
    }
}

/// Builds the mechanism the options describe, with every parameter validated by the library.
pub fn build(args: &MechanismArgs) -> Result<AnyRandomizer> {
    use MechanismName as N;
    let eps = args.epsilon;
    Ok(match args.mechanism {
        N::Privunit2 => {
            let d = args.vector_dim()?;
            match args.parameterization {
                Parameterization::Optimized => PrivUnit2::optimized(eps, d)?.into(),
                Parameterization::Paper000 => {
                    let Some(e0) = args.epsilon0 else {
                        bail!(
                            "--parameterization paper000 needs --epsilon0 (the budget for the cap probability)"
                        )
                    };
                    PrivUnit2::paper000(eps, e0, d)?.into()
                }
                Parameterization::DimensionFree => {
                    bail!("--parameterization dimension-free applies to privunitg only")
                }
            }
        }
        N::Privunitg => {
            let d = args.vector_dim()?;
            match args.parameterization {
                Parameterization::Optimized => PrivUnitG::optimized(eps, d)?.into(),
                Parameterization::DimensionFree => PrivUnitG::dimension_free(eps, d)?.into(),
                Parameterization::Paper000 => {
                    bail!("--parameterization paper000 applies to privunit2 only")
                }
            }
        }
        N::PrivunitInf => PrivUnitInf::optimized(eps, args.vector_dim()?)?.into(),
        N::ScalarDp => {
            args.scalar_dim()?;
            match args.k {
                Some(k) => GridRr::scalar_dp_with_k(eps, args.r_max, k)?.into(),
                None => GridRr::scalar_dp(eps, args.r_max)?.into(),
            }
        }
        N::ScalarRelDp => {
            args.scalar_dim()?;
            let (Some(a), Some(kappa)) = (args.a, args.kappa) else {
                bail!(
                    "scalar-rel-dp needs --a (first positive grid point) and --kappa (geometric growth)"
                )
            };
            GridRr::scalar_rel_dp(eps, args.r_max, a, kappa)?.into()
        }
        N::Grr => {
            args.scalar_dim()?;
            GridRr::unbiased_grr(eps, args.bits, args.lo, args.hi)?.into()
        }
        N::Separated => {
            let d = args.vector_dim()?;
            let e2 = args.magnitude_epsilon.unwrap_or((eps / 10.0).min(1.0));
            if !(e2 > 0.0 && e2 < eps) {
                bail!("--magnitude-epsilon must lie in (0, --epsilon) = (0, {eps}); got {e2}");
            }
            Separated::new(eps - e2, e2, d, args.r_max)?.into()
        }
        N::BitwiseRr => {
            args.scalar_dim()?;
            privfed_mechanisms::bitwise_rr::BitwiseRr::new(eps, args.bits, args.lo, args.hi)?.into()
        }
        N::Mvu => {
            args.scalar_dim()?;
            crate::mvu::build_mvu(args)?.into()
        }
        N::Laplace => Laplace::new(eps, args.baseline_domain()?)?.into(),
        N::Gaussian => {
            let Some(delta) = args.delta else {
                bail!("gaussian needs --delta")
            };
            Gaussian::new(eps, delta, args.baseline_domain()?)?.into()
        }
    })
}

impl MechanismArgs {
    /// The input domain of the Laplace / Gaussian baselines.
    fn baseline_domain(&self) -> Result<Domain> {
        let dim = self.dim.unwrap_or(1);
        if dim == 0 {
            bail!("--dim must be at least 1");
        }
        let radius = self.radius;
        if !(radius.is_finite() && radius > 0.0) {
            bail!("--radius must be finite and > 0 (got {radius})");
        }
        Ok(match self.norm {
            NormBall::Sphere => Domain::UnitSphere { dim },
            NormBall::L1 => Domain::L1Ball { dim, radius },
            NormBall::L2 => Domain::L2Ball { dim, radius },
            NormBall::Linf => Domain::LInfBall { dim, radius },
        })
    }
}
