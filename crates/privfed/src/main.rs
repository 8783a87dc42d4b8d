//! The `privfed` command line: describe mechanisms, run distributed mean estimation,
//! account for privacy. Thin glue over the library crates.

mod bench;
mod build;
mod ddml;
mod describe;
mod dme;
mod output;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// privfed: private federated learning and analytics.
#[derive(Debug, Parser)]
#[command(name = "privfed", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Describe a local randomizer: its exact ε, worst-case variance and parameters.
    Describe(describe::DescribeArgs),
    /// Distributed mean estimation: N clients privatize inputs from the mechanism's domain,
    /// the server averages; reports the MSE against the exact prediction.
    Dme(dme::DmeArgs),
    /// Measure privatize time per vector of PrivUnit2 and PrivUnitG against the cost of drawing
    /// d standard normals (the floor).
    Bench(bench::BenchArgs),
    /// Draw-and-Discard (paper 003): simulate training, regenerate the experiments.
    Ddml(ddml::DdmlArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Describe(args) => describe::run(&args),
        Command::Dme(args) => dme::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Ddml(args) => ddml::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
