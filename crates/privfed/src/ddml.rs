//! `privfed ddml`: Draw-and-Discard simulation and paper 003's experiments (`docs/ALGORITHMS.md` §4.4).
//!
//! * `privfed ddml simulate`: one training run over simulated clients
//!   ([`privfed_sim::simulate`]), reporting held-out accuracy and loss, update counters, the
//!   intra-model variance against (k/2)σ², the adversary I/II/III privacy report and, for the
//!   synthetic production model, the largest weight error. In process by default; with
//!   `--server URL` against a live `privfed serve` ([`privfed_sim::http::HttpModelServer`]):
//!   the command creates a model `--model NAME` (default `ddml-sim-SEED`, or a random suffix
//!   without `--seed`) with the simulation's `k`, dimension, initialization std
//!   `√((k/2)·σ²_init)` and `--spam-sigmas`, using the admin token (`--admin-token` or
//!   `PRIVFED_ADMIN_TOKEN`); it fails if a model of that name exists (there is no way to reuse
//!   one: a simulation starts from a fresh initialization). The clients draw and post over HTTP,
//!   one at a time; the evaluation (accuracy, loss, intra-model variance, weight error) uses the
//!   server's mean and variance (`GET /v1/models/{name}`, computed from its `f32` instances).
//!   The model is deleted afterwards, also after a failed run, unless `--keep-model`. Only
//!   `--strategy draw-and-discard` runs against a server (it overwrites a uniformly random
//!   instance and does not batch). The server draws its own random instances, so a seeded run
//!   against a server is not reproducible (the data, the client order and the client noise
//!   are). The JSON report has the in-process keys plus `server` (the URL) and `model`.
//! * `privfed ddml experiments`: regenerates the CSV files behind `EXPERIMENTS.md`; with
//!   `--repeats R` every configuration runs R times (seeds derived from `--seed`), the CSV files
//!   give the mean and standard error over the runs and the `*_runs.csv` files every run.

use crate::output::print_report;
use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use privfed_client::client::Client;
use privfed_ddml::client::ClientNoise;
use privfed_ddml::engine::Strategy;
use privfed_ddml::guard::{GuardSpec, UpdateGuard};
use privfed_ddml::wire::CreateModel;
use privfed_fl::datasets::{Dataset, default_data_dir};
use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};
use privfed_sim::experiments::Observer;
use privfed_sim::experiments::ddml::{self as experiments, ExperimentsConfig};
use privfed_sim::http::HttpModelServer;
use privfed_sim::simulate::{
    Progress, SimConfig, SimDataset, SimReport, StrategyChoiceError, StrategyName, initial_std,
    server_strategy, simulate, simulate_in_process,
};
use rand::Rng;
use std::path::PathBuf;
use std::time::Instant;

/// Arguments of `privfed ddml`.
#[derive(Debug, Args)]
pub struct DdmlArgs {
    #[command(subcommand)]
    command: DdmlCommand,
}

#[derive(Debug, Subcommand)]
enum DdmlCommand {
    /// Train a GLM by Draw-and-Discard over simulated clients, in process or against a live
    /// server (--server).
    Simulate(SimulateArgs),
    /// Regenerate the CSV files of paper 003's experiments (EXPERIMENTS.md).
    Experiments(ExperimentsArgs),
}

/// Arguments of `privfed ddml simulate`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("noise").required(true).args(["epsilon", "no_noise"])))]
pub struct SimulateArgs {
    /// Dataset.
    #[arg(long, value_enum)]
    dataset: SimDataset,
    /// Directory holding mnist/ and adult/ (default: $PRIVFED_DATA_DIR or ../shared/data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Number of model instances k.
    #[arg(long)]
    k: usize,
    /// Client Laplace noise for feature-level ε-LDP (scale 2γ/ε per weight).
    #[arg(long)]
    epsilon: Option<f64>,
    /// No client noise (no privacy; the paper's noise-free comparisons).
    #[arg(long)]
    no_noise: bool,
    /// Learning rate γ.
    #[arg(long)]
    learning_rate: f64,
    /// Passes over the training data.
    #[arg(long, default_value_t = SimConfig::DEFAULT_PASSES)]
    passes: usize,
    /// Examples per client N_c.
    #[arg(long, default_value_t = SimConfig::DEFAULT_EXAMPLES_PER_CLIENT)]
    examples_per_client: usize,
    /// Server strategy (only draw-and-discard with --server).
    #[arg(long, value_enum, default_value_t = StrategyName::DEFAULT)]
    strategy: StrategyName,
    /// Server-side batch size N_s (implies --strategy server-batch; not with --server).
    #[arg(long)]
    server_batch: Option<usize>,
    /// Spam filter: reject updates with a weight beyond this many standard deviations across
    /// the instances (off by default). Use at least 8: the instances share ancestry, and with
    /// k = 20 and 387 weights narrower bands reject many honest updates (53% at 4, 6% at 5,
    /// 0.085% at 8; see privfed_ddml::engine::RECOMMENDED_SPAM_SIGMAS).
    #[arg(long)]
    spam_sigmas: Option<f64>,
    /// Training rows generated for synthetic-production.
    #[arg(long, default_value_t = SimDataset::SYNTHETIC_TRAIN)]
    synthetic_train: usize,
    /// Held-out rows generated for synthetic-production.
    #[arg(long, default_value_t = SimDataset::SYNTHETIC_TEST)]
    synthetic_test: usize,
    /// Seed for a reproducible run (AES-256-CTR, the noise generator; for experiments only). Without it the run is
    /// seeded from the operating system (the synthetic data then uses seed 0).
    #[arg(long)]
    seed: Option<u64>,
    /// Train against a live Draw-and-Discard server (`privfed serve`) at this URL instead of in
    /// process: create the model there (needs the admin token), draw and post over HTTP,
    /// evaluate the server's mean, delete the model. Draw-and-discard only; the server's own
    /// randomness makes such runs not reproducible.
    #[arg(long, value_name = "URL")]
    server: Option<String>,
    /// Admin token of the server, to create and delete the model (with --server).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "PRIVFED_ADMIN_TOKEN",
        hide_env_values = true
    )]
    admin_token: Option<String>,
    /// Name of the model to create on the server; it must not exist yet (default: ddml-sim-SEED,
    /// or a random suffix without --seed).
    #[arg(long, value_name = "NAME", requires = "server")]
    model: Option<String>,
    /// Keep the model on the server after the run (default: delete it).
    #[arg(long, requires = "server")]
    keep_model: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// The server strategy and the number of instances it keeps ([`server_strategy`]), its
/// refusals worded with the command line's options.
fn strategy(
    name: StrategyName,
    k: usize,
    server_batch: Option<usize>,
) -> Result<(Strategy, usize)> {
    server_strategy(name, k, server_batch).map_err(|e| match e {
        StrategyChoiceError::NoInstances => anyhow!("--k must be at least 1"),
        StrategyChoiceError::MissingBatch => {
            anyhow!("--strategy server-batch needs --server-batch")
        }
        StrategyChoiceError::BatchWithoutServerBatch => {
            anyhow!("--server-batch goes with --strategy server-batch")
        }
        other => anyhow!("{other}"),
    })
}

fn progress_bar(total: u64, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} clients ({eta} left) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb
}

fn update_bar(pb: &ProgressBar, p: &Progress) {
    pb.set_length(p.clients_total);
    pb.set_position(p.clients_done);
    if let Some(a) = p.accuracy {
        pb.set_message(format!("pass {} accuracy {a:.4}", p.pass));
    }
}

/// With `--server`: the strategy must be draw-and-discard, and there must be an admin token.
fn check_server_args(a: &SimulateArgs) -> Result<Option<(&str, &str)>> {
    let Some(url) = a.server.as_deref() else {
        return Ok(None);
    };
    if a.server_batch.is_some() || a.strategy == StrategyName::ServerBatch {
        bail!(
            "--server-batch and --strategy server-batch run in process only (the server does not batch): drop --server"
        );
    }
    if a.strategy != StrategyName::DrawAndDiscard {
        let name = a.strategy.name();
        bail!(
            "--server supports only --strategy draw-and-discard (the server overwrites a uniformly random instance), not {name}: drop --server to simulate it in process"
        );
    }
    let token = a
        .admin_token
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .context(
            "--server needs --admin-token TOKEN (or PRIVFED_ADMIN_TOKEN) to create the model",
        )?;
    Ok(Some((url, token)))
}

/// Fails fast, before loading the data, when the server does not answer `GET /healthz`.
fn check_reachable(url: &str) -> Result<()> {
    let client =
        Client::new(url).with_context(|| format!("cannot build an HTTP client for {url}"))?;
    let healthy = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(client.healthy())
        .with_context(|| format!("cannot reach the server at {url}"))?;
    if !healthy {
        bail!("GET {url}/healthz did not answer 200: is it a healthy privfed server?");
    }
    Ok(())
}

/// Creates the model on the server, runs the simulation against it and (unless `--keep-model`)
/// deletes it, also when the run failed. Returns the report and the model's name.
#[allow(clippy::too_many_arguments)]
fn simulate_on_server(
    a: &SimulateArgs,
    url: &str,
    token: &str,
    dataset: &Dataset,
    config: &SimConfig,
    rng: &mut ExperimentRng,
    pb: &ProgressBar,
) -> Result<(SimReport, String)> {
    let name = match (&a.model, a.seed) {
        (Some(n), _) => n.clone(),
        (None, Some(s)) => format!("ddml-sim-{s}"),
        (None, None) => format!("ddml-sim-{:016x}", rng.next_u64()),
    };
    let req = CreateModel {
        name: name.clone(),
        dim: dataset.glm.num_weights(),
        k: config.k,
        init_std: Some(initial_std(dataset, config)?),
        spam_sigmas: config.spam_sigmas,
        spam_max_outside_fraction: None,
        // The server checks every update as this client step from the instance drawn.
        update_guard: Some(UpdateGuard::Step(GuardSpec {
            unit: config.unit,
            ..GuardSpec::new(config.learning_rate, config.noise)
        })),
    };
    let client = Client::new(url)
        .with_context(|| format!("cannot build an HTTP client for {url}"))?
        .with_admin_token(token);
    let mut server = HttpModelServer::create(client, &req)
        .with_context(|| format!("cannot create model `{name}` on the server at {url}"))?;
    let result = simulate(dataset, config, &mut server, rng, |p| update_bar(pb, p));
    let cleanup = if a.keep_model {
        Ok(())
    } else {
        server.delete()
    };
    let report =
        result.with_context(|| format!("training model `{name}` on the server at {url}"))?;
    if let Err(e) = cleanup {
        let e = anyhow::Error::new(e);
        eprintln!("warning: could not delete model `{name}` from {url}: {e:#}");
    }
    Ok((report, name))
}

fn run_simulate(a: &SimulateArgs) -> Result<()> {
    let server = check_server_args(a)?;
    if let Some((url, _)) = server {
        check_reachable(url)?;
    }
    let (strat, k) = strategy(a.strategy, a.k, a.server_batch)?;
    let noise = match (a.epsilon, a.no_noise) {
        (Some(e), false) => ClientNoise::Laplace { epsilon: e },
        (None, true) => ClientNoise::None,
        _ => bail!("give exactly one of --epsilon and --no-noise"),
    };
    let config = SimConfig {
        strategy: strat,
        noise,
        learning_rate: a.learning_rate,
        passes: a.passes,
        examples_per_client: a.examples_per_client,
        spam_sigmas: a.spam_sigmas,
        ..SimConfig::paper_defaults(k)
    };
    let mut rng: ExperimentRng = match a.seed {
        Some(s) => seeded_rng_for_experiments(s),
        None => rand::make_rng(),
    };
    let dir = a.data_dir.clone().unwrap_or_else(default_data_dir);
    let dataset = a
        .dataset
        .load(
            &dir,
            a.synthetic_train,
            a.synthetic_test,
            a.seed.unwrap_or(0),
        )
        .with_context(|| format!("loading {:?} from {}", a.dataset, dir.display()))?;
    let start = Instant::now();
    let pb = progress_bar(0, a.quiet);
    let (report, model) = match server {
        None => (
            simulate_in_process(&dataset, &config, &mut rng, |p| update_bar(&pb, p))?,
            None,
        ),
        Some((url, token)) => {
            let (r, name) = simulate_on_server(a, url, token, &dataset, &config, &mut rng, &pb)?;
            (r, Some(name))
        }
    };
    pb.finish_and_clear();
    let mut summary = report.summary(&dataset, a.seed, start.elapsed().as_secs_f64());
    if let (Some((url, _)), Some(name)) = (server, model) {
        summary.server = Some(url.to_string());
        summary.model = Some(name);
    }
    print_report(&serde_json::to_value(summary)?, a.json)?;
    Ok(())
}

/// Arguments of `privfed ddml experiments`.
#[derive(Debug, Args)]
pub struct ExperimentsArgs {
    /// Directory holding mnist/ (default: $PRIVFED_DATA_DIR or ../shared/data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Output directory for the CSV files.
    #[arg(long, default_value = "experiments")]
    out: PathBuf,
    /// Passes over MNIST per run (by default the paper's).
    #[arg(long, default_value_t = SimConfig::DEFAULT_PASSES)]
    passes: usize,
    /// Comma-separated list of experiments: variance, k, epsilon, batching, strategies,
    /// synthetic (default: all).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Independent runs per k in the variance-stabilization experiment.
    #[arg(long, default_value_t = 1000)]
    variance_runs: usize,
    /// Runs per configuration (MNIST grids and known weights), with different seeds: the CSV
    /// files give the mean and standard error over the runs, and the `*_runs.csv` files every
    /// run. Repeat 0 uses the single-run seed of earlier versions.
    #[arg(long, default_value_t = 1)]
    repeats: usize,
    /// Base seed.
    #[arg(long, default_value_t = 2026)]
    seed: u64,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
}

/// Draws a progress bar per simulation run and prints the messages on standard error.
struct Bars {
    quiet: bool,
    bar: Option<ProgressBar>,
}

impl Observer for Bars {
    fn message(&mut self, line: &str) {
        eprintln!("{line}");
    }
    fn run_started(&mut self) {
        self.bar = Some(progress_bar(0, self.quiet));
    }
    fn run_progress(&mut self, p: &Progress) {
        if let Some(pb) = &self.bar {
            update_bar(pb, p);
        }
    }
    fn run_finished(&mut self) {
        if let Some(pb) = self.bar.take() {
            pb.finish_and_clear();
        }
    }
}

fn run_experiments(a: &ExperimentsArgs) -> Result<()> {
    let config = ExperimentsConfig {
        data_dir: a.data_dir.clone(),
        out: a.out.clone(),
        passes: a.passes,
        only: a.only.clone(),
        variance_runs: a.variance_runs,
        repeats: a.repeats,
        seed: a.seed,
    };
    let mut bars = Bars {
        quiet: a.quiet,
        bar: None,
    };
    Ok(experiments::run_experiments(&config, &mut bars)?)
}

/// Runs `privfed ddml`.
pub fn run(args: &DdmlArgs) -> Result<()> {
    match &args.command {
        DdmlCommand::Simulate(a) => run_simulate(a),
        DdmlCommand::Experiments(a) => run_experiments(a),
    }
}
