//! `privfed describe`: the exact guarantee and variance of a mechanism.

use crate::build::{DistributedArgs, MechanismArgs, build};
use crate::output::print_report;
use anyhow::Result;
use clap::Args;
use privfed_sim::mechanism::MechanismKind;

/// Arguments of `privfed describe`.
#[derive(Debug, Args)]
pub struct DescribeArgs {
    #[command(flatten)]
    pub(crate) mech: MechanismArgs,
    #[command(flatten)]
    distributed: DistributedArgs,
    /// Clients per round (skellam: the minimum number expected to survive).
    #[arg(long)]
    clients: Option<usize>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `privfed describe`.
pub fn run(args: &DescribeArgs) -> Result<()> {
    let share = match args.mech.mechanism {
        MechanismKind::Skellam => Some(privfed_distributed::NoiseShare::Skellam),
        MechanismKind::Ddg => Some(privfed_distributed::NoiseShare::DiscreteGaussian),
        _ => None,
    };
    if let Some(share) = share {
        let Some(clients) = args.clients else {
            anyhow::bail!("--clients is required for {}", args.mech.mechanism.name());
        };
        let mut req = args.mech.plan_request(&args.distributed, clients)?;
        req.share = share;
        let plan = privfed_distributed::plan(&req)?;
        print_report(&serde_json::to_value(&plan)?, args.json)?;
        return Ok(());
    }
    let m = build(&args.mech)?;
    print_report(&serde_json::to_value(m.report())?, args.json)?;
    Ok(())
}
