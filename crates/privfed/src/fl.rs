//! `privfed fl`: federated training with privacy — `fl train --config FILE` drives one
//! [`privfed_fl::run::Run`] (checkpoints a killed run resumes from, CSV/JSON/figure outputs)
//! with ε on the progress bar; `fl experiment` runs a paper's grid (`privfed_sim::experiments::fl`).

use crate::secagg::PolicyArgs;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use privfed_fl::RoundMetrics;
use privfed_fl::config::Privacy;
use privfed_fl::datasets::default_data_dir;
use privfed_fl::run::{Run, RunConfig, RunOptions};
use privfed_plot::write_figure;
use std::path::PathBuf;

/// `privfed fl …`.
#[derive(Debug, Subcommand)]
pub enum FlCommand {
    /// Train a model with federated learning under the configured privacy mechanism.
    Train(TrainArgs),
    /// Run one of the papers' experiments (a grid of training runs); write CSV and a figure.
    Experiment(ExperimentArgs),
}

/// Arguments of `privfed fl experiment`.
#[derive(Debug, Args)]
pub struct ExperimentArgs {
    /// paper000-logistic, paper000-mnist, paper001-mnist or paper001-shakespeare.
    name: String,
    /// Output directory (NAME.csv, NAME_rounds.csv, NAME.svg, NAME.png).
    #[arg(long)]
    out: PathBuf,
    /// A small grid (fewer rounds, clients and test rows): minutes instead of hours.
    #[arg(long)]
    quick: bool,
    /// Directory of the data sets.
    #[arg(long, env = "PRIVFED_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Worker threads (default: all cores). Results do not depend on it.
    #[arg(long)]
    threads: Option<usize>,
    /// Repeat every run with seeds 1..=N (a `seed` column; the figure shows the mean of the
    /// seeds with its 95% interval). 1: the grid's single seed.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

/// Arguments of `privfed fl train`.
#[derive(Debug, Args)]
#[command(after_help = "Example (a private MNIST run, about a minute here):\n  \
    privfed fl train --config examples/fl/quickstart.toml --out runs/quickstart\n\n\
    With --out, the run writes DIR/metrics.csv, DIR/summary.json, DIR/run.svg, DIR/run.png and a checkpoint \
    DIR/checkpoint.bin after every round; running the same command again resumes from it.")]
pub struct TrainArgs {
    /// The run's TOML config (see examples/fl/).
    #[arg(long)]
    config: PathBuf,
    /// Directory of the data sets (mnist/, adult/, tinyshakespeare/).
    #[arg(long, env = "PRIVFED_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Write metrics, summary, figure and checkpoints here (created if missing).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Checkpoint file (default with --out: DIR/checkpoint.bin). Resumed from if it exists.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Do not resume: remove an existing checkpoint and start over.
    #[arg(long)]
    fresh: bool,
    /// Stop after this many rounds of this invocation (the run stays resumable).
    #[arg(long)]
    max_rounds: Option<u64>,
    /// Worker threads (default: all cores). Results do not depend on it.
    #[arg(long)]
    threads: Option<usize>,
    /// Print the report as JSON (`rounds`, `final_accuracy`, `final_epsilon`, …).
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// The secure sum's clients' policy (the options of `secagg simulate`; each overrides the
    /// config's `[privacy.secagg_policy]`, which overrides the defaults). Needs a `distributed`
    /// privacy with `secure_aggregation = true`.
    #[command(flatten)]
    policy: PolicyArgs,
}

/// Runs a `privfed fl` command.
pub fn run(cmd: &FlCommand) -> Result<()> {
    match cmd {
        FlCommand::Train(a) => train(a),
        FlCommand::Experiment(a) => experiment(a),
    }
}

/// `--threads`, or every core; 0 is refused.
fn worker_threads(option: Option<usize>) -> Result<usize> {
    let threads =
        option.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if threads == 0 {
        bail!("--threads must be at least 1");
    }
    Ok(threads)
}

fn bar(total: u64, done: u64, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] round {pos}/{len} ({eta} left) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb.set_position(done);
    pb
}

fn bar_message(m: &RoundMetrics) -> String {
    let mut s = String::new();
    if let Some(a) = m.accuracy {
        s.push_str(&format!("accuracy {a:.4}"));
    }
    if let Some(e) = m.epsilon {
        s.push_str(&format!("  ε {e:.3}"));
    }
    if m.aborted {
        s.push_str("  (secure aggregation aborted)");
    }
    s
}

fn train(a: &TrainArgs) -> Result<()> {
    let options = RunOptions {
        data_dir: a.data_dir.clone().unwrap_or_else(default_data_dir),
        out_dir: a.out.clone(),
        checkpoint: a.checkpoint.clone(),
        fresh: a.fresh,
        threads: worker_threads(a.threads)?,
        config_file: Some(a.config.clone()),
    };
    let mut config = RunConfig::read(&a.config)?;
    if a.policy.is_set() {
        let Privacy::Distributed {
            secure_aggregation: true,
            secagg_policy,
            ..
        } = &mut config.train.privacy
        else {
            bail!(
                "the policy options (--min-clients, …, --permissive-policy) apply to a \
                 `distributed` privacy with secure_aggregation = true"
            );
        };
        *secagg_policy = Some(a.policy.apply(secagg_policy.unwrap_or_default())?);
    }
    let run = Run::open(config, options)?;
    let mut trainer = run.trainer()?;
    if run.resumes() && !a.quiet && !a.json {
        eprintln!("resuming from round {}", trainer.round());
    }
    let pb = bar(run.config().train.rounds, trainer.round(), a.quiet);
    let mut this_invocation = 0u64;
    let limit = a.max_rounds.unwrap_or(u64::MAX);
    while this_invocation < limit {
        match trainer.step()? {
            privfed_fl::StepOutcome::Round(m) => {
                this_invocation += 1;
                pb.set_position(m.round);
                pb.set_message(bar_message(&m));
                run.round_done(&trainer)?;
            }
            privfed_fl::StepOutcome::Finished => break,
        }
    }
    pb.finish_and_clear();
    let report = run.finish(&trainer)?;
    if a.json {
        crate::output::emit(&serde_json::to_string_pretty(&report)?)?;
    } else {
        print_human(&report.summary, &report.rounds)?;
    }
    Ok(())
}

fn print_human(s: &privfed_fl::Summary, history: &[RoundMetrics]) -> Result<()> {
    let mut lines = vec![format!(
        "{}: {} clients, {} parameters, {}/{} rounds",
        s.data, s.clients, s.params, s.rounds_completed, s.rounds_configured
    )];
    if let Some(a) = s.final_accuracy {
        lines.push(format!("final test accuracy: {a:.4}"));
    }
    match s.final_epsilon {
        Some(e) => lines.push(format!(
            "ε = {e:.4} at δ = {} ({:?} guarantee{}){}",
            s.delta,
            s.guarantee,
            match s.neighbouring_relation {
                privfed_accounting::NeighbouringRelation::ReplaceOne => {
                    ", replace-one neighbours: the fixed cohort accounted as sampling without replacement"
                }
                _ => "",
            },
            match s.hypothetical_population {
                Some(n) => format!(
                    " — accounted for a hypothetical population of {n} clients, not this run's {}",
                    s.clients
                ),
                None => String::new(),
            }
        )),
        None => lines.push("no privacy (ε = ∞)".into()),
    }
    if let Some(l) = s.local_epsilon {
        lines.push(format!("each report is {l:.4}-locally DP"));
    }
    if let Some(z) = s.noise_multiplier {
        lines.push(format!("central noise multiplier z = {z:.4}"));
    }
    if let Some(a) = &s.audit {
        lines.push(format!(
            "canary audit ({} canaries, {} included): ε ≥ {:.4} at {}% confidence ({} of {} guesses right); one-shot estimate ε̂ = {}",
            a.canaries,
            a.included,
            a.epsilon_lower_bound,
            100.0 * a.confidence,
            a.correct,
            a.guesses,
            a.epsilon_estimate
                .map_or("undefined".to_string(), |e| format!("{e:.4}"))
        ));
        if let Some(e) = a.accounted_canary_epsilon {
            lines.push(format!(
                "the canaries' accounted ε (a client at the clip norm in every round) = {e:.4}"
            ));
        }
    }
    if let Some(st) = &s.stopped {
        lines.push(format!("stopped before round {}: {}", st.round, st.reason));
    }
    let secs: f64 = history.iter().map(|m| m.seconds.total).sum();
    if !history.is_empty() {
        lines.push(format!(
            "{:.3} s per round ({:.2} rounds/s)",
            secs / history.len() as f64,
            history.len() as f64 / secs.max(1e-12)
        ));
    }
    lines.push(format!("seed: {}", s.seed));
    crate::output::emit(&lines.join("\n"))?;
    Ok(())
}

fn experiment(a: &ExperimentArgs) -> Result<()> {
    use privfed_fl::train::RoundMetrics;
    use privfed_sim::experiments::fl::{
        ExperimentReport, ResultRow, experiment, figure as exp_figure, results_csv, rounds_csv,
        run_experiment, with_seeds,
    };
    let exp = with_seeds(experiment(&a.name, a.quick)?, a.seeds)?;
    let data_dir = a.data_dir.clone().unwrap_or_else(default_data_dir);
    let threads = worker_threads(a.threads)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let total: u64 = exp.variants.iter().map(|v| v.config.train.rounds).sum();
    let pb = bar(total, 0, a.quiet);
    let mut done = 0u64;
    let n = exp.variants.len();
    let name = &exp.name;
    let csv = a.out.join(format!("{name}.csv"));
    let rcsv = a.out.join(format!("{name}_rounds.csv"));
    // Rewritten after every finished run, so an interrupted grid keeps what it finished.
    let write_csvs = |rows: &[ResultRow], rounds: &[(usize, RoundMetrics)]| -> Result<()> {
        std::fs::write(&csv, results_csv(rows))
            .with_context(|| format!("writing {}", csv.display()))?;
        std::fs::write(&rcsv, rounds_csv(&exp, rounds))
            .with_context(|| format!("writing {}", rcsv.display()))
    };
    let mut write_err = None;
    let (rows, _rounds) = run_experiment(
        &exp,
        &data_dir,
        threads,
        &mut |i, labels, m| {
            done += 1;
            pb.set_position(done);
            let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            pb.set_message(format!(
                "run {}/{n} {} {}",
                i + 1,
                l.join(" "),
                bar_message(m)
            ));
        },
        &mut |rows, rounds| {
            write_csvs(rows, rounds).map_err(|e| {
                let msg = format!("{e:#}");
                write_err = Some(e);
                privfed_fl::FlError::Checkpoint(msg)
            })
        },
    )
    .map_err(|e| write_err.take().unwrap_or_else(|| e.into()))?;
    pb.finish_and_clear();
    let svg = a.out.join(format!("{name}.svg"));
    let png = a.out.join(format!("{name}.png"));
    let fig = exp_figure(&exp, &rows);
    write_figure(&fig, &svg)?;
    write_figure(&fig, &png)?;
    let report = ExperimentReport {
        experiment: name,
        quick: a.quick,
        runs: &rows,
        files: [&csv, &rcsv, &svg, &png]
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
    };
    crate::output::print_report(&serde_json::to_value(report)?, a.json)?;
    Ok(())
}
