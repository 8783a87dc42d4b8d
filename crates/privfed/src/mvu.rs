//! `privfed mvu ...`: privacy-aware compression (paper 004). Design MVU mechanisms, compute
//! their Rényi DP, and run the paper's distributed-mean-estimation experiments.

use crate::output::print_report;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use privfed_compression::designer::DesignOptions;
use privfed_compression::rdp::{REPORT_ORDERS, rdp_report};
use privfed_mechanisms::mvu::DpConstraint;
use privfed_sim::experiments::Observer;
use privfed_sim::experiments::mvu::{self as mvu_experiments, ScalarConfig, VectorConfig};
use privfed_sim::mechanism::{design_mvu_timed, load_design};
use std::path::PathBuf;

/// `privfed mvu` subcommands.
#[derive(Debug, Subcommand)]
pub enum MvuCommand {
    /// Design the minimum-variance unbiased mechanism (paper 004 §3.4): prints P (rows =
    /// inputs), the alphabet, the variance, the worst-case variance, the exact ε and the time.
    Design(DesignArgs),
    /// Rényi DP of a design (paper 004 §4.3): the scalar curve, and for vectors the greedy
    /// (Lemma 7) and LP-relaxation bounds.
    Rdp(RdpArgs),
    /// Paper 004 §5.1 experiments (scalar and vector distributed mean estimation): writes CSV
    /// and prints a markdown table.
    Experiment(ExperimentArgs),
}

/// The metric of `--metric-dp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MetricArg {
    /// dist(x, x') = |x − x'|.
    L1,
    /// dist(x, x') = |x − x'|².
    L2,
}

impl MetricArg {
    /// The power p of the metric.
    pub fn power(self) -> u32 {
        match self {
            MetricArg::L1 => 1,
            MetricArg::L2 => 2,
        }
    }

    fn constraint(self) -> DpConstraint {
        DpConstraint::Metric {
            power: self.power(),
        }
    }
}

/// Arguments of `privfed mvu design`.
#[derive(Debug, Args)]
pub struct DesignArgs {
    /// Input bits b_in (2^b_in input levels).
    #[arg(long)]
    input_bits: u32,
    /// Output bits b_out (the report size).
    #[arg(long)]
    output_bits: u32,
    /// ε (natural log): ε-LDP, or the metric-DP ε with --metric-dp.
    #[arg(long, allow_negative_numbers = true)]
    epsilon: f64,
    /// Metric DP with this metric on [0, 1] instead of ε-LDP (paper 004 §4.1).
    #[arg(long, value_enum)]
    metric_dp: Option<MetricArg>,
    /// Most LP/QP alternations per start.
    #[arg(long, default_value_t = 200)]
    max_iterations: usize,
    /// Pseudo-random alphabet starts (default: automatic by size; more starts, better designs,
    /// longer runs).
    #[arg(long)]
    random_starts: Option<usize>,
    /// Write the design (JSON, loadable with --design) to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `privfed mvu rdp`.
#[derive(Debug, Args)]
pub struct RdpArgs {
    /// The design file (from `privfed mvu design --out`).
    #[arg(long)]
    design: PathBuf,
    /// Rényi orders α > 1 (comma separated).
    #[arg(long, value_delimiter = ',', default_values_t = REPORT_ORDERS.to_vec())]
    orders: Vec<f64>,
    /// Vector bounds: the dimension d (with --sensitivity).
    #[arg(long)]
    dim: Option<usize>,
    /// Vector bounds: the ℓp distance Δ between neighbouring rescaled inputs (p from the
    /// design's metric; 1 for an LDP design).
    #[arg(long)]
    sensitivity: Option<f64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Which experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Experiment {
    /// Scalar DME: n clients all holding the same x ∈ [−1, 1] (paper 004 Fig. 2).
    Scalar,
    /// Vector DME: d = 128, ℓ1-normalized and positive-orthant ℓ2 data (paper 004 Fig. 3).
    Vector,
}

/// Arguments of `privfed mvu experiment`.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// Which experiment.
    #[arg(value_enum)]
    which: Experiment,
    /// Clients n (default: 100000 scalar, 10000 vector).
    #[arg(long)]
    clients: Option<usize>,
    /// Scalar: number of evenly spaced x in [−1, 1].
    #[arg(long, default_value_t = 21)]
    points: usize,
    /// Vector: dimension.
    #[arg(long, default_value_t = 128)]
    dim: usize,
    /// Vector: trials.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Vector, ℓ1 data: input bits of the dithering grid (paper 004 App. B.3: 9; the design is
    /// optimized on 5 bits and refined to this grid). 5 reproduces the earlier configuration.
    #[arg(long, default_value_t = 9)]
    l1_input_bits: u32,
    /// Privacy budgets (comma separated).
    #[arg(long, value_delimiter = ',', default_values_t = vec![1.0, 3.0, 5.0])]
    epsilons: Vec<f64>,
    /// Seed (AES-256-CTR, the noise generator; experiments only).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Write the CSV here.
    #[arg(long)]
    csv: Option<PathBuf>,
}

/// Runs `privfed mvu ...`.
pub fn run(cmd: &MvuCommand) -> Result<()> {
    match cmd {
        MvuCommand::Design(a) => run_design(a),
        MvuCommand::Rdp(a) => run_rdp(a),
        MvuCommand::Experiment(a) => match a.which {
            Experiment::Scalar => run_scalar_experiment(a),
            Experiment::Vector => run_vector_experiment(a),
        },
    }
}

fn run_design(a: &DesignArgs) -> Result<()> {
    let constraint = a.metric_dp.map_or(DpConstraint::Ldp, MetricArg::constraint);
    let options = DesignOptions {
        max_iterations: a.max_iterations,
        random_starts: a.random_starts.or(DesignOptions::default().random_starts),
        ..DesignOptions::default()
    };
    let (r, seconds) =
        design_mvu_timed(a.input_bits, a.output_bits, a.epsilon, constraint, &options)?;
    if let Some(path) = &a.out {
        let s = serde_json::to_string_pretty(&r.design)?;
        std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))?;
    }
    let report = r.summary(a.input_bits, a.output_bits, constraint, a.epsilon, seconds);
    print_report(&serde_json::to_value(report)?, a.json)?;
    Ok(())
}

fn run_rdp(a: &RdpArgs) -> Result<()> {
    let d = load_design(&a.design)?;
    if let Some(&bad) = a.orders.iter().find(|&&o| !(o > 1.0 && o.is_finite())) {
        bail!("Rényi orders must be finite and > 1 (got {bad})");
    }
    let vector = match (a.dim, a.sensitivity) {
        (Some(dim), Some(sens)) => Some((dim, sens)),
        _ => None,
    };
    let report = rdp_report(&d, &a.orders, vector)?;
    print_report(&serde_json::to_value(report)?, a.json)?;
    Ok(())
}

fn write_csv(path: &Option<PathBuf>, csv: &str) -> Result<()> {
    if let Some(p) = path {
        std::fs::write(p, csv).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

fn run_scalar_experiment(a: &ExperimentArgs) -> Result<()> {
    let config = ScalarConfig {
        clients: a.clients.unwrap_or(100_000),
        points: a.points,
        epsilons: a.epsilons.clone(),
        seed: a.seed,
    };
    let out = mvu_experiments::run_scalar_experiment(&config, &mut Stderr)?;
    write_csv(&a.csv, &out.csv)?;
    crate::output::emit(&out.table)?;
    Ok(())
}

fn run_vector_experiment(a: &ExperimentArgs) -> Result<()> {
    let config = VectorConfig {
        clients: a.clients.unwrap_or(10_000),
        dim: a.dim,
        trials: a.trials,
        l1_input_bits: a.l1_input_bits,
        epsilons: a.epsilons.clone(),
        seed: a.seed,
    };
    let out = mvu_experiments::run_vector_experiment(&config, &mut Stderr)?;
    write_csv(&a.csv, &out.csv)?;
    crate::output::emit(&out.table)?;
    Ok(())
}

/// Prints an experiment's progress messages on standard error.
struct Stderr;

impl Observer for Stderr {
    fn message(&mut self, line: &str) {
        eprintln!("{line}");
    }
}
