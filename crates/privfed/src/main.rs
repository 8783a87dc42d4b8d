//! The `privfed` command line: describe mechanisms, run distributed mean estimation,
//! account for privacy. Thin glue over the library crates.

mod account;
mod audit;
mod bench;
mod build;
mod ddml;
mod describe;
mod dme;
mod fl;
mod loadgen;
mod mvu;
mod output;
mod plot;
mod secagg;
mod serve;

use clap::{Arg, Command as ClapCommand, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::any::TypeId;

/// mimalloc instead of the system allocator: the server and the load generator allocate per
/// request (hyper buffers, bodies), and glibc's malloc/free took ~12% of the server's CPU
/// (BENCHMARKS.md, "Draw-and-Discard server").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
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
    /// What a deployment guarantees: ε for δ (or δ for ε) after composition and sampling,
    /// under the RDP or PLD accountant.
    Account(AccountCmd),
    /// The noise (multiplier, Laplace scale, Skellam variance) that meets a target (ε, δ).
    Calibrate(CalibrateCmd),
    /// Deployment analyses: Draw-and-Discard adversaries, reconstruction protection.
    Analyze(AnalyzeCmd),
    /// Privacy-aware compression (paper 004): design MVU mechanisms, run its experiments.
    #[command(subcommand)]
    Mvu(mvu::MvuCommand),
    /// Serve Draw-and-Discard models over HTTP (paper 003).
    Serve(serve::ServeArgs),
    /// Load a Draw-and-Discard server with simulated devices; report updates/s and latency.
    Loadgen(loadgen::LoadgenArgs),
    /// Draw-and-Discard (paper 003): simulate training, regenerate the experiments.
    Ddml(ddml::DdmlArgs),
    /// Secure aggregation (Bonawitz et al. 2017, SecAgg+): simulate rounds, plan parameters.
    #[command(subcommand)]
    Secagg(secagg::SecAggCommand),
    /// Federated learning with privacy: train models under local, central or distributed DP
    /// with secure aggregation, ε accounted every round.
    #[command(subcommand)]
    Fl(fl::FlCommand),
    /// Draw an SVG figure (line plots, log axes, 95% bands, legends) from a CSV an experiment
    /// wrote.
    Plot(plot::PlotArgs),
    /// Empirical privacy audit: run a mechanism on worst-case neighbours, bound ε from below,
    /// flag (exit status 2) a claim the samples reject.
    Audit(audit::AuditArgs),
}

/// `privfed account` with its output flag.
#[derive(Debug, clap::Args)]
struct AccountCmd {
    #[command(flatten)]
    args: account::AccountArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `privfed calibrate` with its output flag.
#[derive(Debug, clap::Args)]
struct CalibrateCmd {
    #[command(flatten)]
    args: account::CalibrateArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// `privfed analyze` with its output flag.
#[derive(Debug, clap::Args)]
struct AnalyzeCmd {
    #[command(subcommand)]
    cmd: account::AnalyzeCommand,
    /// Print JSON.
    #[arg(long, global = true)]
    json: bool,
}

/// Prints a JSON report returned by a library-level command.
fn report(v: anyhow::Result<serde_json::Value>, json: bool) -> anyhow::Result<()> {
    output::print_report(&v?, json)?;
    Ok(())
}

/// Whether `arg` is an option (not a positional) that takes one numeric value per occurrence.
fn is_numeric_option(arg: &Arg) -> bool {
    let numeric = [
        TypeId::of::<f64>(),
        TypeId::of::<f32>(),
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<isize>(),
    ];
    let ty = arg.get_value_parser().type_id();
    let is_option = arg.get_long().is_some() || arg.get_short().is_some();
    // An option with several values per occurrence would take a following flag as a value.
    let one_value = arg
        .get_num_args()
        .is_none_or(|n| n.max_values() <= 1 && n.takes_values());
    is_option && one_value && numeric.iter().any(|t| ty == *t)
}

/// `cmd` and every subcommand with each numeric option accepting a value that starts with `-`,
/// so `--delta -1e-5` or `--ticket-step-secs -1` reaches the option's own validation (which
/// names it) instead of being read as short flags. (clap's negative-number detection misses
/// exponents such as `-1e-5`, so hyphen values are allowed outright on these options only.)
fn numeric_options_take_negative_values(cmd: ClapCommand) -> ClapCommand {
    cmd.mut_args(|arg| {
        if is_numeric_option(&arg) {
            arg.allow_hyphen_values(true)
        } else {
            arg
        }
    })
    .mut_subcommands(numeric_options_take_negative_values)
}

/// Parses the command line (exits with clap's message on a parse error).
fn parse() -> Cli {
    let matches = numeric_options_take_negative_values(Cli::command()).get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn main() -> ExitCode {
    let cli = parse();
    let result = match cli.command {
        Command::Describe(args) => describe::run(&args),
        Command::Dme(args) => dme::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Account(c) => report(account::run_account(&c.args), c.json),
        Command::Calibrate(c) => report(account::run_calibrate(&c.args), c.json),
        Command::Analyze(c) => report(account::run_analyze(&c.cmd), c.json),
        Command::Mvu(cmd) => mvu::run(&cmd),
        Command::Serve(args) => serve::run(&args),
        Command::Loadgen(args) => loadgen::run(&args),
        Command::Ddml(args) => ddml::run(&args),
        Command::Secagg(cmd) => secagg::run(&cmd),
        Command::Fl(cmd) => fl::run(&cmd),
        Command::Plot(args) => plot::run(&args),
        Command::Audit(args) => audit::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // `privfed … | head`: the reader left; nothing is wrong.
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
