//! The `privfed` command line: describe mechanisms, run distributed mean estimation,
//! account for privacy. Thin glue over the library crates.

mod bench;
mod build;
mod describe;
mod dme;
mod loadgen;
mod output;
mod serve;

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
    /// Serve Draw-and-Discard models over HTTP (paper 003).
    Serve(serve::ServeArgs),
    /// Load a Draw-and-Discard server with simulated devices; report updates/s and latency.
    Loadgen(loadgen::LoadgenArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Describe(args) => describe::run(&args),
        Command::Dme(args) => dme::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Loadgen(args) => loadgen::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
