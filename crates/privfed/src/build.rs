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
    /// Privacy parameter ε (natural log); for `separated`, the total. Required except for
    /// `skellam`, where it is an optional target (with --delta) instead of --noise-stddev.
    #[arg(long, allow_negative_numbers = true)]
    pub epsilon: Option<f64>,
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
    /// For skellam: the aggregate standard deviations the modular range holds (default 4).
    #[arg(long)]
    pub k: Option<usize>,
    /// First positive grid point a (scalar-rel-dp).
    #[arg(long, allow_negative_numbers = true)]
    pub a: Option<f64>,
    /// Geometric growth κ of the grid (scalar-rel-dp).
    #[arg(long, allow_negative_numbers = true)]
    pub kappa: Option<f64>,
    /// Output bits (grr: 2^bits grid points; skellam: the modulus 2^bits of secure aggregation).
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

/// The options of the distributed mechanisms (`skellam`; `gaussian` with --clip is paper 001's
/// continuous-Gaussian baseline).
#[derive(Debug, Clone, Args)]
pub struct DistributedArgs {
    /// ℓ2 clip norm c of each client's vector (distributed mechanisms).
    #[arg(long, allow_negative_numbers = true)]
    pub clip: Option<f64>,
    /// Local (per-client) noise standard deviation σ in unscaled units (skellam, instead of an
    /// --epsilon target); the central standard deviation is σ·√clients.
    #[arg(long, allow_negative_numbers = true)]
    pub noise_stddev: Option<f64>,
    /// Conditional-rounding parameter β ∈ [0, 1) (skellam; 0: plain stochastic rounding).
    #[arg(long, default_value_t = (-0.5f64).exp(), allow_negative_numbers = true)]
    pub beta: f64,
    /// Poisson sampling rate of the clients per round (skellam accounting).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub sampling_rate: f64,
    /// Rounds composed in the ε report (skellam accounting).
    #[arg(long, default_value_t = 1)]
    pub rounds: u64,
    /// Fraction γ ∈ [0, 1) of the clients that may collude with the server (skellam, ddg): the
    /// noise and ε count only the honest lower bound, clients − ⌈γ·clients⌉. Default 0; with
    /// `dme --secagg` in the active threat model, the γ the round's thresholds are sized for.
    #[arg(long, allow_negative_numbers = true)]
    pub colluding_fraction: Option<f64>,
}

impl MechanismArgs {
    /// The distributed-DP plan request these options describe (`clients`: the cohort).
    pub fn plan_request(
        &self,
        d: &DistributedArgs,
        clients: usize,
    ) -> Result<privfed_distributed::PlanRequest> {
        use anyhow::bail;
        use privfed_distributed::{NoiseTarget, PlanRequest};
        let Some(clip) = d.clip else {
            bail!("--clip is required for the distributed mechanisms");
        };
        let Some(dim) = self.dim else {
            bail!("--dim is required for the distributed mechanisms");
        };
        let noise = match (self.epsilon, d.noise_stddev) {
            (Some(e), None) => {
                if self.delta.is_none() {
                    bail!("--epsilon as a target needs --delta");
                }
                NoiseTarget::Epsilon(e)
            }
            (None, Some(s)) => NoiseTarget::LocalStddev(s),
            (Some(_), Some(_)) => {
                bail!("give either --epsilon (a target) or --noise-stddev, not both")
            }
            (None, None) => bail!("give --epsilon with --delta (a target) or --noise-stddev"),
        };
        Ok(PlanRequest {
            dim,
            clip,
            bits: self.bits,
            clients,
            max_contributors: None,
            k: self.k.map_or(4.0, |k| k as f64),
            beta: d.beta,
            noise,
            delta: self.delta,
            sampling_rate: d.sampling_rate,
            rounds: d.rounds,
            share: Default::default(),
            colluding_fraction: d.colluding_fraction.unwrap_or(0.0),
        })
    }

    /// The options as a library spec.
    fn spec(&self) -> Result<MechanismSpec> {
        let Some(epsilon) = self.epsilon else {
            anyhow::bail!("--epsilon is required for {}", self.mechanism.name());
        };
        Ok(MechanismSpec {
            kind: self.mechanism,
            epsilon,
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
        })
    }
}

/// Builds the mechanism the options describe, with every parameter validated by the library.
pub fn build(args: &MechanismArgs) -> Result<AnyRandomizer> {
    Ok(args.spec()?.build()?)
}
