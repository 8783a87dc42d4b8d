//! `privfed describe`: the exact guarantee and variance of a mechanism.

use crate::build::{MechanismArgs, build};
use crate::output::print_report;
use anyhow::Result;
use clap::Args;
use privfed_mechanisms::LocalRandomizer;
use serde_json::json;

/// Arguments of `privfed describe`.
#[derive(Debug, Args)]
pub struct DescribeArgs {
    #[command(flatten)]
    mech: MechanismArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `privfed describe`.
pub fn run(args: &DescribeArgs) -> Result<()> {
    let m = build(&args.mech)?;
    let g = m.guarantee();
    let report = json!({
        "mechanism": m.name(),
        "epsilon": g.epsilon(),
        "delta": g.delta(),
        "dim": m.dim(),
        "variance": m.worst_case_variance(),
        "domain": m.domain(),
        "guarantee": g,
        "params": m,
    });
    print_report(&report, args.json)?;
    Ok(())
}
