//! CLI glue for privacy accounting: `privfed account`, `privfed calibrate`, `privfed analyze`.
//!
//! Each `run_*` function validates its arguments, calls the library function that computes its
//! report (`privfed_accounting::report`, `privfed_compression::account` for MVU designs,
//! `privfed_sim::experiments::paper001` for the ε-vs-noise grid) and returns the report's JSON;
//! `main.rs` prints it (pretty JSON with `--json`, a human rendering otherwise).

use anyhow::{Context, Result, anyhow, bail};
use privfed_accounting::DpEvent;
use privfed_accounting::calibrate::AccountantKind;
use privfed_accounting::rdp::default_orders;
use privfed_accounting::report::{
    AccountRequest, Calibrated, DRAW_AND_DISCARD_DELTA_T, Query, Reconstruction, account,
    analytic_gaussian_analysis, calibrate, draw_and_discard_analysis, reconstruction_analysis,
};
use privfed_compression::account::{account_steps, scalar_step, vector_step};
use privfed_sim::experiments::paper001::EpsilonVsNoise;
use serde_json::Value;
use std::path::PathBuf;

/// Which accountant to use.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccountantArg {
    /// Rényi DP (fast; an upper bound, looser than PLD).
    Rdp,
    /// Privacy loss distributions (tight, pessimistic discretization).
    Pld,
}

impl AccountantArg {
    fn kind(self) -> AccountantKind {
        match self {
            AccountantArg::Rdp => AccountantKind::Rdp,
            AccountantArg::Pld => AccountantKind::Pld,
        }
    }
}

/// The mechanism applied at each step.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MechanismArg {
    /// Gaussian noise (`--noise-multiplier`).
    Gaussian,
    /// Laplace noise (`--scale`, per unit ℓ1 sensitivity).
    Laplace,
    /// Any pure ε-DP randomizer (`--local-epsilon`).
    Pure,
    /// Skellam noise on an integer query (`--variance`, `--l1-sensitivity`, `--l2-sensitivity`).
    Skellam,
    /// An MVU design (`--design FILE` from `privfed mvu design --out`): its exact scalar RDP
    /// curve, or the vector mechanism's RDP bound with `--dim` and `--sensitivity`. RDP only.
    Mvu,
}

impl MechanismArg {
    fn name(self) -> &'static str {
        match self {
            MechanismArg::Gaussian => "gaussian",
            MechanismArg::Laplace => "laplace",
            MechanismArg::Pure => "pure",
            MechanismArg::Skellam => "skellam",
            MechanismArg::Mvu => "mvu",
        }
    }
}

/// `privfed account`: the privacy of `--steps` uses of a (possibly Poisson-subsampled) mechanism.
#[derive(clap::Args, Debug, Clone)]
#[command(allow_negative_numbers = true)]
pub struct AccountArgs {
    /// Accountant: rdp or pld (required, except for --mechanism mvu: rdp).
    #[arg(long, value_enum)]
    pub accountant: Option<AccountantArg>,
    /// Mechanism used at each step.
    #[arg(long, value_enum, default_value = "gaussian")]
    pub mechanism: MechanismArg,
    /// Gaussian noise multiplier (std / ℓ2 sensitivity).
    #[arg(long)]
    pub noise_multiplier: Option<f64>,
    /// Laplace scale (per unit ℓ1 sensitivity).
    #[arg(long)]
    pub scale: Option<f64>,
    /// ε of the pure-DP randomizer.
    #[arg(long)]
    pub local_epsilon: Option<f64>,
    /// Skellam variance μ (integer domain).
    #[arg(long)]
    pub variance: Option<f64>,
    /// Skellam ℓ1 sensitivity (integer domain).
    #[arg(long)]
    pub l1_sensitivity: Option<f64>,
    /// Skellam ℓ2 sensitivity (integer domain).
    #[arg(long)]
    pub l2_sensitivity: Option<f64>,
    /// MVU: the design file (from `privfed mvu design --out`).
    #[arg(long)]
    pub design: Option<PathBuf>,
    /// MVU vector mechanism: the dimension d (with --sensitivity).
    #[arg(long)]
    pub dim: Option<usize>,
    /// MVU vector mechanism: the ℓp distance Δ between neighbouring rescaled (to [0, 1]) dithered
    /// inputs, p the design's metric power (1 for an LDP design).
    #[arg(long)]
    pub sensitivity: Option<f64>,
    /// Sampling rate q ∈ (0, 1] (default 1: no sampling). Gaussian, Laplace, Skellam: central
    /// Poisson subsampling (the mechanism runs on a secret Poisson sample of the data set). Pure
    /// and MVU (local randomizers): local sampling — each client takes part with probability q
    /// and otherwise sends nothing, which is visible, so a pure ε is not amplified; only the
    /// RDP curve and δ(ε) shrink.
    #[arg(long)]
    pub sampling_rate: Option<f64>,
    /// Number of steps (compositions), at least 1.
    #[arg(long)]
    pub steps: u64,
    /// Report ε at this δ ∈ (0, 1).
    #[arg(long, required_unless_present = "epsilon", conflicts_with = "epsilon")]
    pub delta: Option<f64>,
    /// Report δ at this ε ≥ 0.
    #[arg(long)]
    pub epsilon: Option<f64>,
    /// PLD grid width (default 1e-4).
    #[arg(long)]
    pub value_discretization: Option<f64>,
}

/// `privfed calibrate`: the noise that meets a target (ε, δ).
#[derive(clap::Args, Debug, Clone)]
#[command(allow_negative_numbers = true)]
pub struct CalibrateArgs {
    /// Accountant: rdp or pld.
    #[arg(long, value_enum)]
    pub accountant: AccountantArg,
    /// Mechanism to calibrate (gaussian → noise multiplier, laplace → scale, skellam → variance).
    #[arg(long, value_enum, default_value = "gaussian")]
    pub mechanism: MechanismArg,
    /// Target ε.
    #[arg(long)]
    pub target_epsilon: f64,
    /// δ ∈ (0, 1).
    #[arg(long)]
    pub delta: f64,
    /// Poisson sampling rate q ∈ (0, 1] (default 1).
    #[arg(long)]
    pub sampling_rate: Option<f64>,
    /// Number of steps, at least 1.
    #[arg(long)]
    pub steps: u64,
    /// Skellam ℓ1 sensitivity (integer domain).
    #[arg(long)]
    pub l1_sensitivity: Option<f64>,
    /// Skellam ℓ2 sensitivity (integer domain).
    #[arg(long)]
    pub l2_sensitivity: Option<f64>,
}

/// `privfed analyze ddml`: Draw-and-Discard privacy against adversaries I, II, III.
#[derive(clap::Args, Debug, Clone)]
#[command(allow_negative_numbers = true)]
pub struct DdmlArgs {
    /// The client's local ε.
    #[arg(long)]
    pub local_epsilon: f64,
    /// Number of model instances k kept by the server.
    #[arg(long)]
    pub instances: u64,
    /// Further updates T of an instance before adversary III looks at it.
    #[arg(long)]
    pub updates: u64,
    /// δ_T for adversary III, in (0, 0.5).
    #[arg(long, default_value_t = DRAW_AND_DISCARD_DELTA_T)]
    pub delta_t: f64,
}

/// `privfed analyze reconstruction`: reconstruction protection for data uniform on S^{k−1}.
#[derive(clap::Args, Debug, Clone)]
#[command(allow_negative_numbers = true)]
pub struct ReconstructionArgs {
    /// Dimension k of the data (e.g. of a normalized low-frequency projection), at least 2.
    #[arg(long)]
    pub dimension: u64,
    /// Success threshold t ∈ (0, 1): the adversary wins if ⟨ĥ, Y⟩ ≥ t.
    #[arg(long)]
    pub threshold: f64,
    /// The randomizer's ε: report the bound on the success probability.
    #[arg(
        long,
        required_unless_present = "target_bound",
        conflicts_with = "target_bound"
    )]
    pub epsilon: Option<f64>,
    /// A target success probability: report the largest ε that keeps the bound below it.
    #[arg(long)]
    pub target_bound: Option<f64>,
}

/// `privfed analyze gaussian`: analytic Gaussian σ for (ε, δ) (Balle & Wang 2018).
#[derive(clap::Args, Debug, Clone)]
#[command(allow_negative_numbers = true)]
pub struct GaussianArgs {
    /// ε > 0.
    #[arg(long)]
    pub epsilon: f64,
    /// δ ∈ (0, 1).
    #[arg(long)]
    pub delta: f64,
    /// ℓ2 sensitivity (default 1).
    #[arg(long, default_value_t = 1.0)]
    pub sensitivity: f64,
}

/// `privfed analyze ...` subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum AnalyzeCommand {
    /// Draw-and-Discard privacy against adversaries I, II, III (paper 003 §IV).
    Ddml(DdmlArgs),
    /// Reconstruction protection: bound for an ε, or the largest ε for a bound (paper 000 §2.3).
    Reconstruction(ReconstructionArgs),
    /// Analytic Gaussian σ for (ε, δ).
    Gaussian(GaussianArgs),
    /// ε against noise for a sensitivity-1 query under several accountants: the Gaussian
    /// (analytic, PLD, RDP), Skellam (exact PLD, exact RDP, paper 001's RDP bound) and the
    /// distributed discrete Gaussian (paper 001 Fig. 2). Writes a CSV with --out.
    EpsilonVsNoise(EpsilonVsNoiseArgs),
}

/// `privfed analyze epsilon-vs-noise`.
#[derive(clap::Args, Debug, Clone)]
#[command(allow_negative_numbers = true)]
pub struct EpsilonVsNoiseArgs {
    /// Central noise standard deviations σ (unscaled; sensitivity 1), comma-separated. Without
    /// it: --points values spaced evenly in log from --sigma-min to --sigma-max.
    #[arg(long, value_delimiter = ',')]
    pub sigmas: Vec<f64>,
    /// Smallest σ of the log-spaced grid.
    #[arg(long, default_value_t = 0.5)]
    pub sigma_min: f64,
    /// Largest σ of the log-spaced grid.
    #[arg(long, default_value_t = 20.0)]
    pub sigma_max: f64,
    /// Points of the log-spaced grid.
    #[arg(long, default_value_t = 25)]
    pub points: usize,
    /// Integer scale s of the query and noise for Skellam and DDG (integer sensitivity s).
    #[arg(long, default_value_t = EpsilonVsNoise::DEFAULT_SCALE)]
    pub scale: u64,
    /// Clients n sharing the DDG noise.
    #[arg(long, default_value_t = EpsilonVsNoise::DEFAULT_CLIENTS)]
    pub clients: u64,
    /// Releases composed.
    #[arg(long, default_value_t = EpsilonVsNoise::DEFAULT_STEPS)]
    pub steps: u64,
    /// δ.
    #[arg(long, default_value_t = EpsilonVsNoise::DEFAULT_DELTA)]
    pub delta: f64,
    /// Write the points as CSV here (columns scale,clients,steps,delta,sigma,method,epsilon).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn need(v: Option<f64>, flag: &str, mech: MechanismArg) -> Result<f64> {
    v.ok_or_else(|| anyhow!("{flag} is required for --mechanism {}", mech.name()))
}

/// Builds the per-step event of `account` (before sampling and composition).
fn step_event(a: &AccountArgs) -> Result<DpEvent> {
    let m = a.mechanism;
    Ok(match m {
        MechanismArg::Gaussian => DpEvent::Gaussian {
            noise_multiplier: need(a.noise_multiplier, "--noise-multiplier", m)?,
        },
        MechanismArg::Laplace => DpEvent::Laplace {
            scale: need(a.scale, "--scale", m)?,
        },
        MechanismArg::Pure => DpEvent::PureDp {
            epsilon: need(a.local_epsilon, "--local-epsilon", m)?,
        },
        MechanismArg::Skellam => DpEvent::Skellam {
            mu: need(a.variance, "--variance", m)?,
            l1_sensitivity: need(a.l1_sensitivity, "--l1-sensitivity", m)?,
            l2_sensitivity: need(a.l2_sensitivity, "--l2-sensitivity", m)?,
        },
        MechanismArg::Mvu => bail!("--mechanism mvu is accounted from its design file (--design)"),
    })
}

fn check_steps(steps: u64) -> Result<()> {
    if steps == 0 {
        bail!("--steps must be at least 1");
    }
    Ok(())
}

fn check_rate(q: f64) -> Result<f64> {
    if !(q > 0.0 && q <= 1.0) {
        bail!("--sampling-rate must lie in (0, 1], got {q}");
    }
    Ok(q)
}

/// `--delta` (ε at δ) or `--epsilon` (δ at ε).
fn query(args: &AccountArgs) -> Query {
    match args.delta {
        Some(delta) => Query::EpsilonAt { delta },
        None => Query::DeltaAt {
            epsilon: args.epsilon.expect("clap enforces --delta or --epsilon"),
        },
    }
}

/// Runs `privfed account` ([`privfed_accounting::report::account`]; MVU designs:
/// [`privfed_compression::account::account_steps`]).
pub fn run_account(args: &AccountArgs) -> Result<Value> {
    check_steps(args.steps)?;
    let q = check_rate(args.sampling_rate.unwrap_or(1.0))?;
    if args.mechanism == MechanismArg::Mvu {
        return account_mvu(args, q);
    }
    for (set, flag) in [
        (args.design.is_some(), "--design"),
        (args.dim.is_some(), "--dim"),
        (args.sensitivity.is_some(), "--sensitivity"),
    ] {
        if set {
            bail!("{flag} applies to --mechanism mvu only");
        }
    }
    let accountant = args.accountant.ok_or_else(|| {
        anyhow!(
            "--accountant (rdp or pld) is required for --mechanism {}",
            args.mechanism.name()
        )
    })?;
    let step = step_event(args)?;
    if accountant == AccountantArg::Rdp && args.value_discretization.is_some() {
        bail!("--value-discretization applies to --accountant pld only");
    }
    let req = AccountRequest {
        accountant: accountant.kind(),
        step,
        sampling_rate: q,
        steps: args.steps,
        query: query(args),
        value_discretization: args.value_discretization,
    };
    Ok(serde_json::to_value(
        account(&req).context("composing the event")?,
    )?)
}

/// `privfed account --mechanism mvu`: the design's per-step RDP curve on the accountant's orders
/// (scalar: exact; vector: the smallest of three bounds per order; `privfed_compression::account`),
/// locally sampled if `q < 1`, composed `--steps` times as a `DpEvent::RdpCurve`, converted to
/// (ε, δ) and capped by pure composition (`T·ε_pure`, which sampling does not reduce in the local
/// model).
fn account_mvu(args: &AccountArgs, q: f64) -> Result<Value> {
    if args.accountant == Some(AccountantArg::Pld) {
        bail!(
            "--mechanism mvu is accounted through its RDP curve: use --accountant rdp (the PLD \
             accountant does not take RDP curves)"
        );
    }
    if args.value_discretization.is_some() {
        bail!("--value-discretization applies to --accountant pld only");
    }
    let path = args
        .design
        .as_ref()
        .ok_or_else(|| anyhow!("--design FILE is required for --mechanism mvu"))?;
    let design = privfed_sim::mechanism::load_design(path)?;
    let orders = default_orders();
    let step = match (args.dim, args.sensitivity) {
        (None, None) => scalar_step(&design, &orders)?,
        (Some(dim), Some(sens)) => {
            if dim == 0 {
                bail!("--dim must be at least 1");
            }
            if !(sens.is_finite() && sens > 0.0) {
                bail!("--sensitivity must be finite and > 0, got {sens}");
            }
            vector_step(&design, &orders, dim, sens)?
        }
        _ => bail!("--dim and --sensitivity go together (the vector mechanism)"),
    };
    let label = path.display().to_string();
    let report = account_steps(&design, label, step, &orders, q, args.steps, query(args))
        .with_context(|| format!("composing the RDP curve of {}", path.display()))?;
    Ok(serde_json::to_value(report)?)
}

/// Runs `privfed calibrate` ([`privfed_accounting::report::calibrate`]).
pub fn run_calibrate(args: &CalibrateArgs) -> Result<Value> {
    check_steps(args.steps)?;
    let q = check_rate(args.sampling_rate.unwrap_or(1.0))?;
    let mechanism = match args.mechanism {
        MechanismArg::Gaussian => Calibrated::Gaussian,
        MechanismArg::Laplace => Calibrated::Laplace,
        MechanismArg::Skellam => {
            let m = args.mechanism;
            Calibrated::Skellam {
                l1_sensitivity: need(args.l1_sensitivity, "--l1-sensitivity", m)?,
                l2_sensitivity: need(args.l2_sensitivity, "--l2-sensitivity", m)?,
            }
        }
        MechanismArg::Pure | MechanismArg::Mvu => bail!(
            "--mechanism {} has no noise parameter to calibrate",
            args.mechanism.name()
        ),
    };
    let report = calibrate(
        args.accountant.kind(),
        mechanism,
        args.target_epsilon,
        args.delta,
        q,
        args.steps,
    )?;
    Ok(serde_json::to_value(report)?)
}

/// Runs `privfed analyze ...` (`privfed_accounting::report`'s analyses).
pub fn run_analyze(cmd: &AnalyzeCommand) -> Result<Value> {
    Ok(match cmd {
        AnalyzeCommand::Ddml(a) => serde_json::to_value(draw_and_discard_analysis(
            a.local_epsilon,
            a.instances,
            a.updates,
            a.delta_t,
        )?)?,
        AnalyzeCommand::Reconstruction(a) => {
            let question = match a.epsilon {
                Some(epsilon) => Reconstruction::BoundAt { epsilon },
                None => Reconstruction::MaxEpsilonFor {
                    target_bound: a
                        .target_bound
                        .expect("clap enforces --epsilon or --target-bound"),
                },
            };
            serde_json::to_value(reconstruction_analysis(a.dimension, a.threshold, question)?)?
        }
        AnalyzeCommand::Gaussian(a) => serde_json::to_value(analytic_gaussian_analysis(
            a.epsilon,
            a.delta,
            a.sensitivity,
        )?)?,
        AnalyzeCommand::EpsilonVsNoise(a) => epsilon_vs_noise(a)?,
    })
}

fn epsilon_vs_noise(a: &EpsilonVsNoiseArgs) -> Result<Value> {
    use privfed_sim::experiments::paper001::{
        epsilon_vs_noise as compute, epsilon_vs_noise_csv, epsilon_vs_noise_report,
    };
    let sigmas = if a.sigmas.is_empty() {
        if !(a.sigma_min > 0.0 && a.sigma_max > a.sigma_min && a.sigma_max.is_finite()) {
            bail!("--sigma-min and --sigma-max must satisfy 0 < min < max");
        }
        if a.points < 2 {
            bail!("--points must be at least 2");
        }
        let (lo, hi) = (a.sigma_min.ln(), a.sigma_max.ln());
        (0..a.points)
            .map(|i| (lo + (hi - lo) * i as f64 / (a.points - 1) as f64).exp())
            .collect()
    } else {
        a.sigmas.clone()
    };
    let grid = EpsilonVsNoise {
        sigmas,
        scale: a.scale,
        clients: a.clients,
        steps: a.steps,
        delta: a.delta,
    };
    let points = compute(&grid)?;
    if let Some(path) = &a.out {
        std::fs::write(path, epsilon_vs_noise_csv(&grid, &points))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(serde_json::to_value(epsilon_vs_noise_report(
        &grid, points,
    ))?)
}
