//! CLI glue for privacy accounting: `privfed account`, `privfed calibrate`, `privfed analyze`.
//!
//! Each `run_*` function validates its arguments, calls `privfed-accounting` and returns the JSON
//! report; `main.rs` prints it (pretty JSON with `--json`, a human rendering otherwise).

use anyhow::{Context, Result, anyhow, bail};
use privfed_accounting::analysis::{
    analytic_gaussian_sigma, draw_and_discard, max_epsilon_for_reconstruction, reconstruction_bound,
};
use privfed_accounting::calibrate::{
    AccountantKind, calibrate_laplace_scale, calibrate_noise_multiplier, calibrate_skellam_variance,
};
use privfed_accounting::{DpEvent, PldAccountant, RdpAccountant};
use serde_json::{Value, json};

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

    fn name(self) -> &'static str {
        match self {
            AccountantArg::Rdp => "rdp",
            AccountantArg::Pld => "pld",
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
}

impl MechanismArg {
    fn name(self) -> &'static str {
        match self {
            MechanismArg::Gaussian => "gaussian",
            MechanismArg::Laplace => "laplace",
            MechanismArg::Pure => "pure",
            MechanismArg::Skellam => "skellam",
        }
    }
}

/// `privfed account`: the privacy of `--steps` uses of a (possibly Poisson-subsampled) mechanism.
#[derive(clap::Args, Debug, Clone)]
#[command(allow_negative_numbers = true)]
pub struct AccountArgs {
    /// Accountant: rdp or pld.
    #[arg(long, value_enum)]
    pub accountant: AccountantArg,
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
    /// Poisson sampling rate q ∈ (0, 1] (default 1: no sampling).
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
    #[arg(long, default_value_t = 1e-8)]
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
}

fn need(v: Option<f64>, flag: &str, mech: MechanismArg) -> Result<f64> {
    v.ok_or_else(|| anyhow!("{flag} is required for --mechanism {}", mech.name()))
}

fn float_or_null(v: f64) -> Value {
    if v.is_finite() { json!(v) } else { Value::Null }
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

/// Runs `privfed account`; returns `{accountant, mechanism, event, steps, sampling_rate,
/// epsilon|delta, optimal_order (rdp, ε queries)}`.
pub fn run_account(args: &AccountArgs) -> Result<Value> {
    check_steps(args.steps)?;
    let q = check_rate(args.sampling_rate.unwrap_or(1.0))?;
    let inner = step_event(args)?;
    let one = if q < 1.0 {
        DpEvent::PoissonSampled {
            rate: q,
            event: Box::new(inner),
        }
    } else {
        inner
    };
    let event = DpEvent::SelfComposed {
        event: Box::new(one),
        count: args.steps,
    };
    let mut out = json!({
        "accountant": args.accountant.name(),
        "mechanism": args.mechanism.name(),
        "steps": args.steps,
        "sampling_rate": q,
        "event": event,
    });
    match args.accountant {
        AccountantArg::Rdp => {
            if args.value_discretization.is_some() {
                bail!("--value-discretization applies to --accountant pld only");
            }
            let mut acc = RdpAccountant::new();
            acc.compose(&event).context("composing the event")?;
            if let Some(delta) = args.delta {
                let r = acc.get_epsilon_and_order(delta)?;
                out["delta"] = json!(delta);
                out["epsilon"] = float_or_null(r.epsilon);
                out["optimal_order"] = json!(r.optimal_order);
            } else {
                let eps = args.epsilon.expect("clap enforces --delta or --epsilon");
                out["epsilon"] = json!(eps);
                out["delta"] = json!(acc.get_delta(eps)?);
            }
        }
        AccountantArg::Pld => {
            let mut acc = match args.value_discretization {
                Some(h) => PldAccountant::with_discretization(h)?,
                None => PldAccountant::new(),
            };
            acc.compose(&event).context("composing the event")?;
            if let Some(delta) = args.delta {
                let e = acc.get_epsilon(delta)?;
                out["delta"] = json!(delta);
                out["epsilon"] = float_or_null(e);
                if !e.is_finite() {
                    out["note"] =
                        json!("epsilon is unbounded: the mass at infinite loss exceeds delta");
                }
            } else {
                let eps = args.epsilon.expect("clap enforces --delta or --epsilon");
                out["epsilon"] = json!(eps);
                out["delta"] = json!(acc.get_delta(eps)?);
            }
            out["value_discretization"] = json!(acc.discretization());
        }
    }
    Ok(out)
}

/// Runs `privfed calibrate`; returns `{accountant, mechanism, noise_multiplier | scale |
/// variance, parameter, epsilon (achieved), target_epsilon, delta, sampling_rate, steps}`.
pub fn run_calibrate(args: &CalibrateArgs) -> Result<Value> {
    check_steps(args.steps)?;
    let q = check_rate(args.sampling_rate.unwrap_or(1.0))?;
    let k = args.accountant.kind();
    let (name, c) = match args.mechanism {
        MechanismArg::Gaussian => (
            "noise_multiplier",
            calibrate_noise_multiplier(k, args.target_epsilon, args.delta, q, args.steps)?,
        ),
        MechanismArg::Laplace => (
            "scale",
            calibrate_laplace_scale(k, args.target_epsilon, args.delta, q, args.steps)?,
        ),
        MechanismArg::Skellam => {
            let m = args.mechanism;
            (
                "variance",
                calibrate_skellam_variance(
                    k,
                    args.target_epsilon,
                    args.delta,
                    need(args.l1_sensitivity, "--l1-sensitivity", m)?,
                    need(args.l2_sensitivity, "--l2-sensitivity", m)?,
                    q,
                    args.steps,
                )?,
            )
        }
        MechanismArg::Pure => bail!("--mechanism pure has no noise parameter to calibrate"),
    };
    let mut out = json!({
        "accountant": args.accountant.name(),
        "mechanism": args.mechanism.name(),
        "parameter": c.parameter,
        "epsilon": c.epsilon,
        "target_epsilon": args.target_epsilon,
        "delta": args.delta,
        "sampling_rate": q,
        "steps": args.steps,
    });
    out[name] = json!(c.parameter);
    Ok(out)
}

/// Runs `privfed analyze ...`.
pub fn run_analyze(cmd: &AnalyzeCommand) -> Result<Value> {
    match cmd {
        AnalyzeCommand::Ddml(a) => {
            let r = draw_and_discard(a.local_epsilon, a.instances, a.updates, a.delta_t)?;
            Ok(json!({
                "analysis": "draw_and_discard",
                "local_epsilon": a.local_epsilon,
                "instances": a.instances,
                "updates": a.updates,
                "adversary_i": {"epsilon": r.adversary_i_epsilon},
                "adversary_ii": {"expected_loss": r.adversary_ii_expected_loss},
                "adversary_iii": {
                    "discard_probability": r.adversary_iii_discard_probability,
                    "epsilon": float_or_null(r.adversary_iii_epsilon),
                    "delta": r.adversary_iii_delta,
                },
            }))
        }
        AnalyzeCommand::Reconstruction(a) => {
            if let Some(eps) = a.epsilon {
                let r = reconstruction_bound(a.dimension, a.threshold, eps)?;
                Ok(json!({
                    "analysis": "reconstruction",
                    "dimension": a.dimension,
                    "threshold": a.threshold,
                    "epsilon": eps,
                    "ln_prior_probability": r.ln_prior_probability,
                    "prior_probability": r.prior_probability,
                    "ln_success_bound": r.ln_success_bound,
                    "success_bound": r.success_bound,
                }))
            } else {
                let target = a
                    .target_bound
                    .expect("clap enforces --epsilon or --target-bound");
                let eps = max_epsilon_for_reconstruction(a.dimension, a.threshold, target)?;
                let r = reconstruction_bound(a.dimension, a.threshold, eps)?;
                Ok(json!({
                    "analysis": "reconstruction",
                    "dimension": a.dimension,
                    "threshold": a.threshold,
                    "target_bound": target,
                    "max_epsilon": eps,
                    "ln_prior_probability": r.ln_prior_probability,
                    "prior_probability": r.prior_probability,
                }))
            }
        }
        AnalyzeCommand::Gaussian(a) => {
            let sigma = analytic_gaussian_sigma(a.epsilon, a.delta, a.sensitivity)?;
            Ok(json!({
                "analysis": "analytic_gaussian",
                "epsilon": a.epsilon,
                "delta": a.delta,
                "sensitivity": a.sensitivity,
                "sigma": sigma,
                "noise_multiplier": sigma / a.sensitivity,
            }))
        }
    }
}
