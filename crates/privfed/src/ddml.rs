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
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use privfed_client::client::Client;
use privfed_ddml::client::{ClientNoise, PrivacyUnit};
use privfed_ddml::engine::{Strategy, predicted_intra_model_variance};
use privfed_ddml::wire::CreateModel;
use privfed_mechanisms::rng::{ExperimentRng, seeded_rng_for_experiments};
use privfed_sim::data::{
    Dataset, SYNTHETIC_FEATURE_NAMES, SYNTHETIC_TRUE_WEIGHTS, default_data_dir, load_adult,
    load_mnist, synthetic_production,
};
use privfed_sim::http::HttpModelServer;
use privfed_sim::simulate::{
    MeanStdError, Progress, SimConfig, SimReport, initial_std, simulate, simulate_in_process,
    summarize_repeats, variance_stabilization_trace,
};
use rand::Rng;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
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

/// Which dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DatasetArg {
    /// The 33-weight logistic model with known weights (paper 003 §V-C), generated.
    SyntheticProduction,
    /// MNIST (original gzip'd IDX files under DATA_DIR/mnist).
    Mnist,
    /// UCI Adult (adult.data and adult.test under DATA_DIR/adult).
    Adult,
}

/// How the server folds updates in (paper 003 §V-B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StrategyArg {
    /// Overwrite a uniformly random instance (the paper's Alg. 2).
    DrawAndDiscard,
    /// A single model that accepts each update with probability 1/K.
    AcceptOneIn,
    /// Overwrite the instance that was drawn.
    ReplaceDrawn,
    /// Overwrite a random instance with the average of itself and the update.
    AverageBeforeOverwrite,
    /// Average --server-batch updates, then overwrite a random instance (K = 1: the classic
    /// server-side batching).
    ServerBatch,
}

/// Arguments of `privfed ddml simulate`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("noise").required(true).args(["epsilon", "no_noise"])))]
pub struct SimulateArgs {
    /// Dataset.
    #[arg(long, value_enum)]
    dataset: DatasetArg,
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
    #[arg(long, default_value_t = 20)]
    passes: usize,
    /// Examples per client N_c.
    #[arg(long, default_value_t = 10)]
    examples_per_client: usize,
    /// Server strategy (only draw-and-discard with --server).
    #[arg(long, value_enum, default_value_t = StrategyArg::DrawAndDiscard)]
    strategy: StrategyArg,
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
    #[arg(long, default_value_t = 200_000)]
    synthetic_train: usize,
    /// Held-out rows generated for synthetic-production.
    #[arg(long, default_value_t = 20_000)]
    synthetic_test: usize,
    /// Seed for a reproducible run (ChaCha20; for experiments only). Without it the run is
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

fn load(kind: DatasetArg, dir: &Path, train: usize, test: usize, seed: u64) -> Result<Dataset> {
    Ok(match kind {
        DatasetArg::Mnist => load_mnist(dir)?,
        DatasetArg::Adult => load_adult(dir)?,
        DatasetArg::SyntheticProduction => {
            // The data has its own generator, so runs with different training seeds can share it.
            let mut rng = seeded_rng_for_experiments(seed ^ 0x5EED_DA7A);
            synthetic_production(train, test, &mut rng)?
        }
    })
}

/// The server strategy and the number of instances it keeps.
fn strategy(arg: StrategyArg, k: usize, server_batch: Option<usize>) -> Result<(Strategy, usize)> {
    if k == 0 {
        bail!("--k must be at least 1");
    }
    Ok(match (arg, server_batch) {
        (StrategyArg::DrawAndDiscard | StrategyArg::ServerBatch, Some(b)) => {
            (Strategy::ServerBatch { batch: b }, k)
        }
        (StrategyArg::ServerBatch, None) => bail!("--strategy server-batch needs --server-batch"),
        (_, Some(_)) => bail!("--server-batch goes with --strategy server-batch"),
        (StrategyArg::DrawAndDiscard, None) => (Strategy::DrawAndDiscard, k),
        (StrategyArg::AcceptOneIn, None) => (Strategy::AcceptOneIn { k }, 1),
        (StrategyArg::ReplaceDrawn, None) => (Strategy::ReplaceDrawn, k),
        (StrategyArg::AverageBeforeOverwrite, None) => (Strategy::AverageBeforeOverwrite, k),
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

fn report_json(r: &SimReport, dataset: &Dataset, seed: Option<u64>, seconds: f64) -> Value {
    let c = &r.config;
    let epsilon = match c.noise {
        ClientNoise::Laplace { epsilon } => Some(epsilon),
        _ => None,
    };
    let mut v = json!({
        "dataset": r.dataset,
        "num_weights": r.num_weights,
        "k": c.k,
        "strategy": c.strategy,
        "epsilon": epsilon,
        "learning_rate": c.learning_rate,
        "passes": c.passes,
        "examples_per_client": c.examples_per_client,
        "train_examples": r.train_examples,
        "test_examples": r.test_examples,
        "seed": seed,
        "accuracy": r.accuracy,
        "loss": r.loss,
        "train_loss": r.train_loss,
        "updates": r.updates,
        "updates_accepted": r.server.accepted,
        "updates_rejected": r.server.rejected,
        "updates_discarded": r.server.discarded,
        "overwrites": r.server.overwrites,
        "intra_model_variance": r.intra_model_variance,
        "predicted_intra_model_variance": r.predicted_intra_model_variance,
        "noise_variance": r.noise_variance,
        "init_variance": r.init_variance,
        "privacy": r.privacy,
        "curve": r.curve,
        "seconds": seconds,
    });
    if let (Some(w), Value::Object(m)) = (&dataset.true_weights, &mut v) {
        m.insert(
            "weights_max_abs_error".into(),
            json!(r.weights_max_abs_error),
        );
        m.insert("true_weights".into(), json!(w));
        m.insert("estimated_weights".into(), json!(r.mean_weights));
    }
    v
}

/// With `--server`: the strategy must be draw-and-discard, and there must be an admin token.
fn check_server_args(a: &SimulateArgs) -> Result<Option<(&str, &str)>> {
    let Some(url) = a.server.as_deref() else {
        return Ok(None);
    };
    if a.server_batch.is_some() || a.strategy == StrategyArg::ServerBatch {
        bail!(
            "--server-batch and --strategy server-batch run in process only (the server does not batch): drop --server"
        );
    }
    if a.strategy != StrategyArg::DrawAndDiscard {
        let name = a
            .strategy
            .to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default();
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
        k,
        strategy: strat,
        noise,
        unit: PrivacyUnit::Feature,
        learning_rate: a.learning_rate,
        passes: a.passes,
        examples_per_client: a.examples_per_client,
        spam_sigmas: a.spam_sigmas,
        evaluate_every_pass: true,
        delta_t: 1e-8,
    };
    let mut rng: ExperimentRng = match a.seed {
        Some(s) => seeded_rng_for_experiments(s),
        None => rand::make_rng(),
    };
    let dir = a.data_dir.clone().unwrap_or_else(default_data_dir);
    let dataset = load(
        a.dataset,
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
    let mut v = report_json(&report, &dataset, a.seed, start.elapsed().as_secs_f64());
    if let (Some((url, _)), Some(name), Value::Object(m)) = (server, model, &mut v) {
        m.insert("server".into(), json!(url));
        m.insert("model".into(), json!(name));
    }
    print_report(&v, a.json)?;
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
    /// Passes over MNIST per run (the paper: 20).
    #[arg(long, default_value_t = 20)]
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

/// One MNIST run of the grid: label, config.
struct GridRun {
    experiment: &'static str,
    label: String,
    config: SimConfig,
}

fn mnist_config(k: usize, strategy: Strategy, noise: ClientNoise, passes: usize) -> SimConfig {
    SimConfig {
        k,
        strategy,
        noise,
        passes,
        ..SimConfig::paper_defaults(k)
    }
}

fn write(out: &Path, name: &str, body: &str) -> Result<()> {
    let p = out.join(name);
    std::fs::write(&p, body).with_context(|| format!("writing {}", p.display()))?;
    eprintln!("wrote {}", p.display());
    Ok(())
}

fn run_experiments(a: &ExperimentsArgs) -> Result<()> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let want = |name: &str| a.only.is_empty() || a.only.iter().any(|o| o == name);
    if a.repeats == 0 {
        bail!("--repeats must be at least 1");
    }
    for o in &a.only {
        if ![
            "variance",
            "k",
            "epsilon",
            "batching",
            "strategies",
            "synthetic",
        ]
        .contains(&o.as_str())
        {
            bail!("unknown experiment {o:?}");
        }
    }
    if want("variance") {
        // Thm. 1: pure-noise D&D, Laplace b = 1 (σ² = 2), p = 20, `variance_runs` runs per k,
        // 100·k updates each, recorded every 10·k.
        let mut rng = seeded_rng_for_experiments(a.seed);
        let mut csv = String::from("k,step,measured_mean,std_error,predicted\n");
        for k in [2usize, 5, 10, 20, 50] {
            let steps = 100 * k;
            let tr = variance_stabilization_trace(
                k,
                20,
                1.0,
                steps,
                steps / 10,
                a.variance_runs,
                Strategy::DrawAndDiscard,
                &mut rng,
            )?;
            let pred = predicted_intra_model_variance(k, 2.0);
            for p in tr {
                writeln!(csv, "{k},{},{},{},{pred}", p.step, p.mean, p.std_error)?;
            }
        }
        write(&a.out, "ddml_variance_stabilization.csv", &csv)?;
    }
    let mut runs: Vec<GridRun> = Vec::new();
    let p = a.passes;
    if want("k") {
        for k in [1usize, 2, 5, 10, 20, 50, 100] {
            runs.push(GridRun {
                experiment: "k",
                label: format!("k={k}"),
                config: mnist_config(k, Strategy::DrawAndDiscard, ClientNoise::None, p),
            });
        }
    }
    if want("epsilon") {
        for (name, e) in [
            ("ln3", 3f64),
            ("ln4", 4.0),
            ("ln8", 8.0),
            ("ln16", 16.0),
            ("ln32", 32.0),
        ] {
            runs.push(GridRun {
                experiment: "epsilon",
                label: format!("epsilon={name}"),
                config: mnist_config(
                    10,
                    Strategy::DrawAndDiscard,
                    ClientNoise::Laplace { epsilon: e.ln() },
                    p,
                ),
            });
        }
        runs.push(GridRun {
            experiment: "epsilon",
            label: "no noise".into(),
            config: mnist_config(10, Strategy::DrawAndDiscard, ClientNoise::None, p),
        });
    }
    if want("batching") {
        for ns in [10usize, 100, 1000, 10_000] {
            runs.push(GridRun {
                experiment: "batching",
                label: format!("Ns={ns}"),
                config: mnist_config(1, Strategy::ServerBatch { batch: ns }, ClientNoise::None, p),
            });
        }
        for k in [10usize, 20] {
            runs.push(GridRun {
                experiment: "batching",
                label: format!("k={k}"),
                config: mnist_config(k, Strategy::DrawAndDiscard, ClientNoise::None, p),
            });
        }
    }
    if want("strategies") {
        for (label, k, s) in [
            ("draw-and-discard", 20usize, Strategy::DrawAndDiscard),
            ("accept-one-in-20", 1, Strategy::AcceptOneIn { k: 20 }),
            ("replace-drawn", 20, Strategy::ReplaceDrawn),
            (
                "average-before-overwrite",
                20,
                Strategy::AverageBeforeOverwrite,
            ),
        ] {
            runs.push(GridRun {
                experiment: "strategies",
                label: label.into(),
                config: mnist_config(k, s, ClientNoise::None, p),
            });
        }
    }
    if !runs.is_empty() {
        let dir = a.data_dir.clone().unwrap_or_else(default_data_dir);
        let mnist =
            load_mnist(&dir).with_context(|| format!("loading MNIST from {}", dir.display()))?;
        // Identical configurations (e.g. k = 10 without noise appears in three experiments) are
        // run once (R times) and reported under every label.
        let mut done: Vec<(SimConfig, Vec<(u64, SimReport)>)> = Vec::new();
        let mut csvs: BTreeMap<&str, GridCsv> = BTreeMap::new();
        for (i, run) in runs.iter().enumerate() {
            let reports = if let Some((_, r)) = done.iter().find(|(c, _)| *c == run.config) {
                r.clone()
            } else {
                let mut reports = Vec::with_capacity(a.repeats);
                for rep in 0..a.repeats {
                    let seed = run_seed(a.seed, i as u64 + 1, rep as u64);
                    eprintln!(
                        "[{}/{}] {} {} (run {}/{}, seed {seed})",
                        i + 1,
                        runs.len(),
                        run.experiment,
                        run.label,
                        rep + 1,
                        a.repeats
                    );
                    let mut rng = seeded_rng_for_experiments(seed);
                    let pb = progress_bar(0, a.quiet);
                    let start = Instant::now();
                    let r =
                        simulate_in_process(&mnist, &run.config, &mut rng, |p| update_bar(&pb, p))?;
                    pb.finish_and_clear();
                    eprintln!(
                        "    accuracy {:.4} loss {:.4} ({:.0} s)",
                        r.accuracy,
                        r.loss,
                        start.elapsed().as_secs_f64()
                    );
                    reports.push((seed, r));
                }
                done.push((run.config.clone(), reports.clone()));
                reports
            };
            let csv = csvs.entry(run.experiment).or_insert_with(GridCsv::new);
            csv.add(&run.label, &reports)?;
            // Written after every configuration, so an interrupted grid keeps what it finished.
            csv.write(&a.out, run.experiment)?;
        }
    }
    if want("synthetic") {
        // Known weights (§V-C): the paper's k = 30, γ = 0.005 with the update budget we can
        // afford, and k = 10, γ = 0.2. The data are generated once; the repeats differ in the
        // training randomness only.
        let mut data_rng = seeded_rng_for_experiments(a.seed ^ 0x5EED_DA7A);
        let data = synthetic_production(200_000, 20_000, &mut data_rng)?;
        let mut weights = String::from("feature,true");
        let mut weight_runs = String::from("config,repeat,feature,true,estimate\n");
        let mut summary = String::from(
            "config,k,learning_rate,runs,updates,accuracy_mean,accuracy_se,loss_mean,loss_se,\
             weights_max_abs_error_mean,weights_max_abs_error_se,weights_mean_abs_error_mean,\
             weights_mean_abs_error_se\n",
        );
        let mut per_run = String::from(
            "config,repeat,seed,k,learning_rate,updates,accuracy,loss,weights_max_abs_error,\
             weights_mean_abs_error\n",
        );
        let mut cols = Vec::new();
        for (label, k, g, passes) in [
            ("k=30 gamma=0.005", 30usize, 0.005f64, 100usize),
            ("k=30 gamma=0.05", 30, 0.05, 100),
            ("k=10 gamma=0.2", 10, 0.2, 10),
        ] {
            let mut cfg = SimConfig::paper_defaults(k);
            cfg.learning_rate = g;
            cfg.passes = passes;
            cfg.evaluate_every_pass = false;
            let mut reports = Vec::with_capacity(a.repeats);
            let mut maes = Vec::with_capacity(a.repeats);
            for rep in 0..a.repeats {
                let seed = run_seed(a.seed, 1000, rep as u64);
                let mut rng = seeded_rng_for_experiments(seed);
                let pb = progress_bar(0, a.quiet);
                let start = Instant::now();
                let r = simulate_in_process(&data, &cfg, &mut rng, |p| update_bar(&pb, p))?;
                pb.finish_and_clear();
                let mae = r
                    .mean_weights
                    .iter()
                    .zip(SYNTHETIC_TRUE_WEIGHTS)
                    .map(|(a, b)| (a - b).abs())
                    .sum::<f64>()
                    / SYNTHETIC_TRUE_WEIGHTS.len() as f64;
                let max = r.weights_max_abs_error.unwrap_or(f64::NAN);
                eprintln!(
                    "synthetic {label} (run {}/{}, seed {seed}): max error {max:.3}, mean error \
                     {mae:.3}, accuracy {:.4} ({:.0} s)",
                    rep + 1,
                    a.repeats,
                    r.accuracy,
                    start.elapsed().as_secs_f64()
                );
                writeln!(
                    per_run,
                    "{label},{rep},{seed},{k},{g},{},{},{},{max},{mae}",
                    r.updates, r.accuracy, r.loss
                )?;
                for (j, name) in SYNTHETIC_FEATURE_NAMES.iter().enumerate() {
                    writeln!(
                        weight_runs,
                        "{label},{rep},{name},{},{}",
                        SYNTHETIC_TRUE_WEIGHTS[j], r.mean_weights[j]
                    )?;
                }
                maes.push(mae);
                reports.push(r);
            }
            let s = summarize_repeats(&reports)?;
            let max = s
                .weights_max_abs_error
                .context("the synthetic data set has known weights")?;
            let mae = MeanStdError::of(&maes)?;
            writeln!(
                summary,
                "{label},{k},{g},{},{},{},{},{},{}",
                s.runs,
                s.updates,
                mean_se(&s.accuracy),
                mean_se(&s.loss),
                mean_se(&max),
                mean_se(&mae)
            )?;
            write!(weights, ",{label},{label} se")?;
            cols.push(s.mean_weights);
        }
        weights.push('\n');
        for (j, name) in SYNTHETIC_FEATURE_NAMES.iter().enumerate() {
            write!(weights, "{name},{}", SYNTHETIC_TRUE_WEIGHTS[j])?;
            for c in &cols {
                write!(weights, ",{}", mean_se(&c[j]))?;
            }
            weights.push('\n');
        }
        write(&a.out, "ddml_synthetic_weights.csv", &weights)?;
        write(&a.out, "ddml_synthetic_weights_runs.csv", &weight_runs)?;
        write(&a.out, "ddml_synthetic.csv", &summary)?;
        write(&a.out, "ddml_synthetic_runs.csv", &per_run)?;
    }
    Ok(())
}

/// The seed of repeat `repeat` of run stream `stream` (a grid run's 1-based index, or 1000 for
/// the known-weights runs). Repeat 0 keeps the single-run seed `base + stream` of earlier
/// versions, so CSV files written with one repeat are unchanged; later repeats mix
/// `(base, stream, repeat)` with SplitMix64. Deterministic, so the same command writes the same
/// files.
fn run_seed(base: u64, stream: u64, repeat: u64) -> u64 {
    if repeat == 0 {
        return base.wrapping_add(stream);
    }
    splitmix64(splitmix64(splitmix64(base) ^ stream) ^ repeat)
}

/// The SplitMix64 finalizer (Steele, Lea and Flood's mixing function).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `mean,se` for a CSV row (the standard error is empty for a single run).
fn mean_se(m: &MeanStdError) -> String {
    match m.std_error {
        Some(se) => format!("{},{se}", m.mean),
        None => format!("{},", m.mean),
    }
}

/// The four CSV files of one MNIST grid: per configuration (mean and standard error over the
/// repeats), per run, and the learning curves summarized and per run.
struct GridCsv {
    summary: String,
    runs: String,
    curves: String,
    curve_runs: String,
}

impl GridCsv {
    fn new() -> Self {
        Self {
            summary: "config,k,runs,updates,overwrites_mean,overwrites_se,accuracy_mean,\
                      accuracy_se,loss_mean,loss_se,train_loss_mean,train_loss_se,\
                      intra_model_variance_mean,intra_model_variance_se,\
                      predicted_intra_model_variance\n"
                .into(),
            runs: "config,repeat,seed,k,updates,overwrites,accuracy,loss,train_loss,\
                   intra_model_variance,predicted_intra_model_variance\n"
                .into(),
            curves: "config,pass,examples_seen,runs,accuracy_mean,accuracy_se,loss_mean,loss_se,\
                     intra_model_variance_mean,intra_model_variance_se\n"
                .into(),
            curve_runs: "config,repeat,pass,examples_seen,accuracy,loss,intra_model_variance\n"
                .into(),
        }
    }

    fn add(&mut self, label: &str, reports: &[(u64, SimReport)]) -> Result<()> {
        let only: Vec<SimReport> = reports.iter().map(|(_, r)| r.clone()).collect();
        let s = summarize_repeats(&only)?;
        let k = only[0].config.k;
        writeln!(
            self.summary,
            "{label},{k},{},{},{},{},{},{},{},{}",
            s.runs,
            s.updates,
            mean_se(&s.overwrites),
            mean_se(&s.accuracy),
            mean_se(&s.loss),
            mean_se(&s.train_loss),
            mean_se(&s.intra_model_variance),
            s.predicted_intra_model_variance
        )?;
        for c in &s.curve {
            writeln!(
                self.curves,
                "{label},{},{},{},{},{},{}",
                c.pass,
                c.examples_seen,
                s.runs,
                mean_se(&c.accuracy),
                mean_se(&c.loss),
                mean_se(&c.intra_model_variance)
            )?;
        }
        for (rep, (seed, r)) in reports.iter().enumerate() {
            writeln!(
                self.runs,
                "{label},{rep},{seed},{k},{},{},{},{},{},{},{}",
                r.updates,
                r.server.overwrites,
                r.accuracy,
                r.loss,
                r.train_loss,
                r.intra_model_variance,
                r.predicted_intra_model_variance
            )?;
            for pt in &r.curve {
                writeln!(
                    self.curve_runs,
                    "{label},{rep},{},{},{},{},{}",
                    pt.pass, pt.examples_seen, pt.accuracy, pt.loss, pt.intra_model_variance
                )?;
            }
        }
        Ok(())
    }

    fn write(&self, out: &Path, experiment: &str) -> Result<()> {
        let name = |suffix: &str| format!("ddml_mnist_{experiment}{suffix}.csv");
        write(out, &name(""), &self.summary)?;
        write(out, &name("_runs"), &self.runs)?;
        write(out, &name("_curves"), &self.curves)?;
        write(out, &name("_curves_runs"), &self.curve_runs)
    }
}

/// Runs `privfed ddml`.
pub fn run(args: &DdmlArgs) -> Result<()> {
    match &args.command {
        DdmlCommand::Simulate(a) => run_simulate(a),
        DdmlCommand::Experiments(a) => run_experiments(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_sim::data::synthetic_production;

    #[test]
    fn run_seeds_are_deterministic_and_distinct() {
        // Repeat 0 is the single-run seed of earlier versions.
        assert_eq!(run_seed(2026, 4, 0), 2030);
        assert_eq!(run_seed(2026, 1000, 0), 3026);
        assert_eq!(run_seed(2026, 4, 3), run_seed(2026, 4, 3));
        let mut seeds: Vec<u64> = (1..=30u64)
            .flat_map(|s| (0..10u64).map(move |r| run_seed(2026, s, r)))
            .collect();
        seeds.push(run_seed(2027, 1, 1));
        let n = seeds.len();
        seeds.sort_unstable();
        seeds.dedup();
        assert_eq!(seeds.len(), n);
    }

    /// The grid CSV files of two configurations with three runs each: the summary rows hold the
    /// mean and standard error of the per-run rows, the curves one row per pass, and the per-run
    /// files every run with its seed.
    #[test]
    fn grid_csv_summarizes_the_runs() {
        let mut rng = seeded_rng_for_experiments(1);
        let d = synthetic_production(1000, 300, &mut rng).unwrap();
        let mut cfg = SimConfig::paper_defaults(3);
        cfg.learning_rate = 0.1;
        cfg.passes = 2;
        let runs: Vec<(u64, SimReport)> = (0..3)
            .map(|r| {
                let seed = run_seed(7, 1, r);
                let mut rng = seeded_rng_for_experiments(seed);
                (
                    seed,
                    simulate_in_process(&d, &cfg, &mut rng, |_| {}).unwrap(),
                )
            })
            .collect();
        let mut g = GridCsv::new();
        g.add("a", &runs).unwrap();
        g.add("b", &runs[..1]).unwrap();
        let table = |s: &str| -> Vec<Vec<String>> {
            s.lines()
                .map(|l| l.split(',').map(str::to_owned).collect())
                .collect()
        };
        let summary = table(&g.summary);
        let header = &summary[0];
        assert!(summary.iter().all(|r| r.len() == header.len()));
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        assert_eq!(summary.len(), 3);
        assert_eq!(summary[1][col("runs")], "3");
        let acc: Vec<f64> = runs.iter().map(|(_, r)| r.accuracy).collect();
        let mean = acc.iter().sum::<f64>() / 3.0;
        let se = (acc.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / 6.0).sqrt();
        let got: f64 = summary[1][col("accuracy_mean")].parse().unwrap();
        let got_se: f64 = summary[1][col("accuracy_se")].parse().unwrap();
        assert!((got - mean).abs() < 1e-12 && (got_se - se).abs() < 1e-12);
        // A single run has an empty standard error.
        assert_eq!(summary[2][col("runs")], "1");
        assert_eq!(summary[2][col("accuracy_se")], "");
        let per_run = table(&g.runs);
        assert_eq!(per_run.len(), 1 + 3 + 1);
        assert_eq!(per_run[2][2], run_seed(7, 1, 1).to_string());
        let curves = table(&g.curves);
        assert_eq!(curves.len(), 1 + 2 + 2);
        assert!(curves.iter().all(|r| r.len() == curves[0].len()));
        assert_eq!(table(&g.curve_runs).len(), 1 + 3 * 2 + 2);
    }
}
