//! `privfed dme`: distributed mean estimation ([`privfed_sim::dme`], docs/ALGORITHMS.md §6)
//! with a progress bar.

use crate::build::{DistributedArgs, MechanismArgs, build};
use crate::output::print_report;
use crate::secagg::{PolicyArgs, ThreatModelArg};
use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use privfed_sim::distributed_dme::{
    DistributedDmeConfig, DistributedDmeError, DistributedNoise, run_distributed_dme,
};
use privfed_sim::dme::{DmeConfig, run_dme};
use privfed_sim::mechanism::MechanismKind;

/// Arguments of `privfed dme`.
#[derive(Debug, Args)]
pub struct DmeArgs {
    #[command(flatten)]
    mech: MechanismArgs,
    #[command(flatten)]
    distributed: DistributedArgs,
    /// Probability that a client drops out of a round before sending (skellam, and gaussian with
    /// --clip); the mean is over the survivors and ε is accounted with their noise.
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    dropout: f64,
    /// Number of clients N.
    #[arg(long)]
    clients: usize,
    /// Sum the clients' encodings through a real secure-aggregation round (skellam, ddg):
    /// X25519 keys, Shamir shares, masks; dropped clients share keys and then go silent, and
    /// their masks are recovered. The decoded mean is bit for bit the one of the plain modular
    /// sum.
    #[arg(long)]
    secagg: bool,
    /// The threat model of the --secagg round: `active` (signed keys from enrolled devices and a
    /// consistency round; holds against a server that lies about dropouts) or
    /// `honest-but-curious` (see docs/SECURE_AGGREGATION.md).
    #[arg(long, value_enum, default_value_t = ThreatModelArg::Active, requires = "secagg")]
    threat_model: ThreatModelArg,
    /// The --secagg clients' policy (the same options as `secagg simulate`).
    #[command(flatten)]
    policy: PolicyArgs,
    /// Number of independent trials T.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Seed for a reproducible run (AES-256-CTR, the noise generator; for experiments only). Without it the run is
    /// seeded from the operating system.
    #[arg(long)]
    seed: Option<u64>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Runs `privfed dme`.
pub fn run(args: &DmeArgs) -> Result<()> {
    if args.clients == 0 {
        bail!("--clients must be at least 1");
    }
    if args.trials == 0 {
        bail!("--trials must be at least 1");
    }
    if args.policy.is_set() && !args.secagg {
        bail!("the policy options (--min-clients, …, --permissive-policy) apply to --secagg only");
    }
    let distributed = match args.mech.mechanism {
        MechanismKind::Skellam => Some(DistributedNoise::Skellam),
        MechanismKind::Ddg => Some(DistributedNoise::Ddg),
        MechanismKind::Gaussian if args.distributed.clip.is_some() => {
            Some(DistributedNoise::Gaussian)
        }
        _ => None,
    };
    if let Some(noise) = distributed {
        return run_distributed(args, noise);
    }
    if args.secagg {
        bail!(
            "--secagg sums integer encodings mod 2^b: it applies to skellam and ddg, not {:?}",
            args.mech.mechanism
        );
    }
    let mech = build(&args.mech)?;
    let total = (args.clients as u64) * (args.trials as u64);
    let progress = bar(args.quiet, total, "privatizations")?;
    let config = DmeConfig {
        clients: args.clients,
        trials: args.trials,
        seed: args.seed,
        threads: args.threads,
    };
    let report = run_dme(&mech, &config, &|n| progress.inc(n));
    progress.finish_and_clear();
    print_report(&serde_json::to_value(report?)?, args.json)?;
    Ok(())
}

/// `privfed dme skellam …` and `privfed dme gaussian --clip …`: paper 001's distributed DME.
fn run_distributed(args: &DmeArgs, noise: DistributedNoise) -> Result<()> {
    let mut request = args.mech.plan_request(&args.distributed, args.clients)?;
    if args.secagg
        && args.threat_model == ThreatModelArg::Active
        && args.distributed.colluding_fraction.is_none()
    {
        // One γ: the active round is sized for the colluders the accounting assumes, by
        // default the planner's.
        request.colluding_fraction = privfed_secagg::plan::DEFAULT_CORRUPT_FRACTION;
    }
    let progress = bar(
        args.quiet,
        (args.clients as u64) * (args.trials as u64),
        "clients",
    )?;
    let config = DistributedDmeConfig {
        noise,
        request,
        trials: args.trials,
        seed: args.seed,
        dropout: args.dropout,
        secure_aggregation: args.secagg,
        secure_aggregation_threat: args.threat_model.sim(),
        secure_aggregation_policy: args.policy.policy()?,
    };
    let report = run_distributed_dme(&config, &|n| progress.inc(n));
    progress.finish_and_clear();
    let report = match report {
        Err(DistributedDmeError::Invalid("colluding_fraction", why)) => {
            bail!("--colluding-fraction {why}")
        }
        other => other?,
    };
    print_report(&serde_json::to_value(report)?, args.json)?;
    Ok(())
}

/// A progress bar over `total` items (hidden when `quiet`).
fn bar(quiet: bool, total: u64, what: &str) -> Result<ProgressBar> {
    let progress = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    progress.set_style(
        ProgressStyle::with_template(&format!(
            "{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {what} ({{per_sec}}, eta {{eta}})"
        ))
        .context("progress template")?
        .progress_chars("=> "),
    );
    Ok(progress)
}
