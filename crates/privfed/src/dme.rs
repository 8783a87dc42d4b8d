//! `privfed dme`: distributed mean estimation ([`privfed_sim::dme`], docs/ALGORITHMS.md §6)
//! with a progress bar.

use crate::build::{MechanismArgs, build};
use crate::output::print_report;
use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use privfed_sim::dme::{DmeConfig, run_dme};

/// Arguments of `privfed dme`.
#[derive(Debug, Args)]
pub struct DmeArgs {
    #[command(flatten)]
    mech: MechanismArgs,
    /// Number of clients N.
    #[arg(long)]
    clients: usize,
    /// Number of independent trials T.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Seed for a reproducible run (ChaCha20; for experiments only). Without it the run is
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
    let mech = build(&args.mech)?;
    let total = (args.clients as u64) * (args.trials as u64);
    let progress = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(total)
    };
    progress.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} privatizations ({per_sec}, eta {eta})",
        )
        .context("progress template")?
        .progress_chars("=> "),
    );
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
