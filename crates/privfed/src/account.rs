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
use privfed_accounting::rdp::{default_orders, local_sampled_rdp, pure_dp_rdp};
use privfed_accounting::{DpEvent, PldAccountant, RdpAccountant};
use privfed_compression::rdp::{mvu_rdp_curve, vector_rdp_greedy, vector_rdp_lp};
use privfed_mechanisms::mvu::{DpConstraint, MvuDesign};
use serde_json::{Value, json};
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

/// Runs `privfed account`; returns `{accountant, mechanism, event, steps, sampling_rate,
/// epsilon|delta, optimal_order (rdp, ε queries)}`.
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
    let inner = step_event(args)?;
    let one = if q >= 1.0 {
        inner
    } else if args.mechanism == MechanismArg::Pure {
        // A local randomizer: whether a client took part is visible (local sampling, no
        // amplification of the pure ε), not a secret sample of a central data set.
        DpEvent::LocalSampled {
            rate: q,
            event: Box::new(inner),
        }
    } else {
        DpEvent::PoissonSampled {
            rate: q,
            event: Box::new(inner),
        }
    };
    let event = DpEvent::SelfComposed {
        event: Box::new(one),
        count: args.steps,
    };
    let mut out = json!({
        "accountant": accountant.name(),
        "mechanism": args.mechanism.name(),
        "steps": args.steps,
        "sampling_rate": q,
        "event": event,
    });
    match accountant {
        AccountantArg::Rdp => {
            if args.value_discretization.is_some() {
                bail!("--value-discretization applies to --accountant pld only");
            }
            let mut acc = RdpAccountant::new();
            acc.compose(&event).context("composing the event")?;
            // A pure ε-DP step also composes to T·ε with δ = 0, tighter than RDP at small T.
            let pure_total = match (args.mechanism, args.local_epsilon) {
                (MechanismArg::Pure, Some(e)) => Some(e * args.steps as f64),
                _ => None,
            };
            rdp_answer(&acc, args, pure_total, &mut out)?;
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

/// The per-step RDP curve of an MVU design on `orders`, its pure ε, and a description of the bound.
struct MvuStep {
    curve: Vec<f64>,
    pure_epsilon: f64,
    bound: Value,
}

/// Scalar mechanism: the exact curve `max_{i,i'} D^α_{i,i'}` (`privfed-compression` `rdp`),
/// pure ε the design's exact ε-LDP.
fn mvu_scalar_step(design: &MvuDesign, orders: &[f64]) -> Result<MvuStep> {
    Ok(MvuStep {
        curve: mvu_rdp_curve(design, orders)?,
        pure_epsilon: design.ldp_epsilon(),
        bound: json!({
            "rdp_bound": "exact_scalar",
            "note": "max over pairs of input levels of D_alpha(P_i || P_i'); exact over continuous inputs",
        }),
    })
}

/// Vector mechanism (Lemma 6; dithered inputs whose rescaled ℓp distance is at most `sens`): per
/// order the smallest of three valid upper bounds — the LP relaxation (4), the greedy bound
/// (Lemma 7; never below the LP, kept as a check) and the RDP of a pure ε-DP mechanism at the
/// vector's pure ε.
///
/// Pure ε of the vector: each coordinate whose level changes costs at least 1 in
/// `Σ_l |i_l − i'_l|^p ≤ ((B_in − 1)·Δ)^p` and contributes at most the design's ε-LDP, so at most
/// `min(d, ⌊((B_in − 1)Δ)^p⌋)·ε_LDP`; for a metric design also `ε_metric·Δ^p` (Lemma 6).
fn mvu_vector_step(design: &MvuDesign, orders: &[f64], dim: usize, sens: f64) -> Result<MvuStep> {
    if dim == 0 {
        bail!("--dim must be at least 1");
    }
    if !(sens.is_finite() && sens > 0.0) {
        bail!("--sensitivity must be finite and > 0, got {sens}");
    }
    let (p, metric) = match design.constraint() {
        DpConstraint::Metric { power } => (power, Some(design.exact_epsilon())),
        DpConstraint::Ldp => (1, None),
    };
    let budget = ((design.num_inputs() - 1) as f64 * sens).powi(p as i32);
    // A tiny relative slack so that a budget that is an integer up to rounding counts fully.
    let changed = (budget * (1.0 + 1e-12)).floor().min(dim as f64);
    let mut pure = changed * design.ldp_epsilon();
    if let Some(em) = metric {
        pure = pure.min(em * sens.powi(p as i32));
    }
    let mut curve = Vec::with_capacity(orders.len());
    let mut wins = [0usize; 3];
    for &a in orders {
        let lp = vector_rdp_lp(design, a, p, sens, dim)?;
        let greedy = vector_rdp_greedy(design, a, p, sens)?;
        let pure_rdp = pure_dp_rdp(pure, a);
        // The value is the smallest; the credit goes to the LP unless another bound is below it
        // by more than rounding (the LP and the greedy bound coincide when the best ratio
        // D_k/k^p is at a distance the budget per coordinate covers, up to one ulp).
        let v = lp.min(greedy).min(pure_rdp);
        let k = if lp <= v * (1.0 + 1e-12) {
            0
        } else if greedy <= pure_rdp {
            1
        } else {
            2
        };
        wins[k] += 1;
        curve.push(v);
    }
    let names = ["lp_relaxation", "greedy", "pure_dp"];
    let used: Vec<&str> = (0..3).filter(|&k| wins[k] > 0).map(|k| names[k]).collect();
    Ok(MvuStep {
        curve,
        pure_epsilon: pure,
        bound: json!({
            "rdp_bound": used.join("+"),
            "orders_per_bound": {"lp_relaxation": wins[0], "greedy": wins[1], "pure_dp": wins[2]},
            "note": "per order the smallest of the LP relaxation (4), the greedy bound (Lemma 7) and the pure-DP RDP at the vector's pure epsilon",
            "vector": {"dim": dim, "sensitivity": sens, "p": p},
        }),
    })
}

/// `privfed account --mechanism mvu`: the design's per-step RDP curve on the accountant's orders
/// (scalar: exact; vector: see [`mvu_vector_step`]), locally Poisson-sampled if `q < 1`
/// ([`local_sampled_rdp`]), composed `--steps` times by the RDP accountant as a
/// `DpEvent::RdpCurve`, converted to (ε, δ); the result is also capped by pure composition
/// (`T·ε_pure`, which sampling does not reduce in the local model).
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
    let design = crate::mvu::load_design(path)?;
    let orders = default_orders();
    let step = match (args.dim, args.sensitivity) {
        (None, None) => mvu_scalar_step(&design, &orders)?,
        (Some(dim), Some(sens)) => mvu_vector_step(&design, &orders, dim, sens)?,
        _ => bail!("--dim and --sensitivity go together (the vector mechanism)"),
    };
    let curve = if q < 1.0 {
        step.curve
            .iter()
            .zip(&orders)
            .map(|(&e, &a)| local_sampled_rdp(q, e, a))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        step.curve
    };
    let event = DpEvent::SelfComposed {
        event: Box::new(DpEvent::RdpCurve {
            orders,
            epsilons: curve,
        }),
        count: args.steps,
    };
    let mut acc = RdpAccountant::new();
    acc.compose(&event)
        .with_context(|| format!("composing the RDP curve of {}", path.display()))?;
    let pure_total = step.pure_epsilon * args.steps as f64;
    let mut out = json!({
        "accountant": "rdp",
        "mechanism": "mvu",
        "design": path.display().to_string(),
        "design_constraint": design.constraint(),
        "steps": args.steps,
        "sampling_rate": q,
        "pure_epsilon_per_step": step.pure_epsilon,
        "bound": step.bound,
        "event": event,
    });
    if q < 1.0 {
        out["sampling"] = json!(
            "local: each step the client reports with probability q, else nothing; per order \
             ln(1 - q + q*exp((alpha-1)*eps(alpha)))/(alpha-1), exact when absence is visible"
        );
    }
    rdp_answer(&acc, args, Some(pure_total), &mut out)?;
    Ok(out)
}

/// The RDP accountant's answer to `--delta` (ε and the optimal order) or `--epsilon` (δ), into
/// `out`. With `pure_total = Some(T·ε)` (every step pure ε-DP) the answer is capped by pure
/// composition (ε ≤ T·ε at δ = 0), the RDP figure kept beside it (`epsilon_rdp` / `delta_rdp`)
/// and the source named (`epsilon_from` / `delta_from`: `rdp` or `pure_composition`).
fn rdp_answer(
    acc: &RdpAccountant,
    args: &AccountArgs,
    pure_total: Option<f64>,
    out: &mut Value,
) -> Result<()> {
    if let Some(total) = pure_total {
        out["epsilon_pure_composition"] = json!(total);
    }
    if let Some(delta) = args.delta {
        let r = acc.get_epsilon_and_order(delta)?;
        out["delta"] = json!(delta);
        out["optimal_order"] = json!(r.optimal_order);
        match pure_total {
            None => out["epsilon"] = float_or_null(r.epsilon),
            Some(total) => {
                out["epsilon_rdp"] = float_or_null(r.epsilon);
                let (eps, from) = if r.epsilon <= total {
                    (r.epsilon, "rdp")
                } else {
                    (total, "pure_composition")
                };
                out["epsilon"] = json!(eps);
                out["epsilon_from"] = json!(from);
            }
        }
    } else {
        let eps = args.epsilon.expect("clap enforces --delta or --epsilon");
        let d_rdp = acc.get_delta(eps)?;
        out["epsilon"] = json!(eps);
        match pure_total {
            None => out["delta"] = json!(d_rdp),
            Some(total) => {
                out["delta_rdp"] = json!(d_rdp);
                let (delta, from) = if eps >= total {
                    (0.0, "pure_composition")
                } else {
                    (d_rdp, "rdp")
                };
                out["delta"] = json!(delta);
                out["delta_from"] = json!(from);
            }
        }
    }
    Ok(())
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
        MechanismArg::Pure | MechanismArg::Mvu => bail!(
            "--mechanism {} has no noise parameter to calibrate",
            args.mechanism.name()
        ),
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
