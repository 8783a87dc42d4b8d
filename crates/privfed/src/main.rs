//! The `privfed` command line.
//! TEMP wiring of the accounting subcommands (to be replaced by the lead's main.rs).

mod account;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "privfed", about = "privfed command line")]
struct Cli {
    /// Print the report as pretty JSON.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Privacy of a deployment.
    Account(account::AccountArgs),
    /// Noise for a target (ε, δ).
    Calibrate(account::CalibrateArgs),
    /// Deployment analyses.
    #[command(subcommand)]
    Analyze(account::AnalyzeCommand),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let v = match &cli.cmd {
        Cmd::Account(a) => account::run_account(a)?,
        Cmd::Calibrate(a) => account::run_calibrate(a)?,
        Cmd::Analyze(a) => account::run_analyze(a)?,
    };
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("{v}");
    }
    Ok(())
}
