//! In-process Draw-and-Discard training over simulated clients (paper 003 §V, `docs/ALGORITHMS.md`
//! §4.4).
//!
//! Each pass shuffles the training rows and deals them to clients, `N_c` consecutive rows per
//! client (the last client of a pass may get fewer); every client draws an instance from the
//! server, runs the noisy client step of Alg. 1 ([`ClientStep`]) on its rows and submits the
//! result. The server side is behind the small [`ModelServer`] trait so that the same loop can
//! drive the in-memory [`InProcessServer`] (a [`DrawAndDiscard`] engine) or a live HTTP server
//! ([`crate::http::HttpModelServer`], which picks the instance to overwrite itself
//! and does not say which: [`Outcome::Accepted`]). The update counters of the report are tallied
//! from the outcomes the clients see ([`DdmlStats::record`]), so they mean the same against
//! either server.
//!
//! The instances start at `N(0, (k/2)·σ²)` (paper 003 §V-A), where `σ²` is the client's
//! per-weight noise variance; without client noise the paper initializes "with ε = 1 in the
//! client-side noise calculation", i.e. `σ² = 2·(2γ/1)² = 8γ²` (Laplace), and so does
//! [`initial_noise_variance`].
//!
//! The report ([`SimReport`]) gives the held-out accuracy and loss of the average of the `k`
//! instances, the training loss, the update counters, the intra-model variance against its
//! Thm. 1 prediction `(k/2)·σ²` (exact in expectation only for pure-noise updates: with learning,
//! the instances also differ by their different gradient histories), the three-adversary privacy
//! report ([`AdversaryReport`], computed by `privfed_accounting::analysis::draw_and_discard`) and, when the dataset has known weights,
//! `weights_max_abs_error = max_j |b̄_j − w_j|`.

use crate::adversary::AdversaryReport;
use privfed_ddml::client::{ClientNoise, ClientStep, PrivacyUnit};
use privfed_ddml::engine::{
    DdmlStats, DrawAndDiscard, Outcome, SpamFilter, Strategy, initialize_with_std,
    predicted_intra_model_variance,
};
use privfed_fl::datasets::{DataError, Dataset, load_adult, load_mnist, synthetic_production};
use privfed_learn::error::{LearnError, Result, check_positive};
use privfed_learn::glm::{Example, Glm};
use privfed_mechanisms::laplace::sample_laplace;
use privfed_mechanisms::rng::seeded_rng_for_experiments;
use privfed_mechanisms::{CryptoRng, Rng};
use rand::seq::SliceRandom;
use serde::Serialize;
use std::path::Path;

/// A model instance handed to a client.
#[derive(Debug, Clone, PartialEq)]
pub struct Drawn {
    /// Which instance, if the server says (the HTTP server does not: `None`). Only
    /// [`Strategy::ReplaceDrawn`] uses it; the [`InProcessServer`] always sets it.
    pub index: Option<usize>,
    /// Its weights.
    pub weights: Vec<f64>,
    /// The HTTP server's single-use ticket for the update stepping from this draw (`None` in
    /// process).
    pub ticket: Option<String>,
}

/// The server side of a Draw-and-Discard simulation: the operations the simulated clients and
/// the evaluation need. [`InProcessServer`] implements it in memory;
/// [`crate::http::HttpModelServer`] over HTTP (draw = `GET /draw`, submit =
/// `POST /updates`, mean and variance = `GET /v1/models/{name}`).
pub trait ModelServer {
    /// The server's error; the simulator's own errors (configuration, data) convert into it.
    type Error: From<LearnError>;
    /// Number of instances `k`.
    fn k(&self) -> usize;
    /// Number of weights.
    fn dim(&self) -> usize;
    /// How it folds updates in (a live server: always [`Strategy::DrawAndDiscard`]).
    fn strategy(&self) -> Strategy;
    /// Serves an instance. `rng` is the simulation's generator (any cryptographically secure
    /// generator: the methods are generic, like `rand::Distribution::sample`, so the simulation
    /// loop is monomorphized and the trait does not fix a generator type); a server with its own
    /// randomness may ignore it.
    fn draw<R: Rng + CryptoRng + ?Sized>(&mut self, rng: &mut R) -> Result<Drawn, Self::Error>;
    /// Folds in an update computed from `drawn`; a spam rejection is an [`Outcome::Rejected`],
    /// not an error.
    fn submit<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        drawn: &Drawn,
        update: &[f64],
        rng: &mut R,
    ) -> Result<Outcome, Self::Error>;
    /// The average of the instances (the prediction model).
    fn mean_model(&mut self) -> Result<Vec<f64>, Self::Error>;
    /// The intra-model variance (sample variance across instances, averaged over weights).
    fn intra_model_variance(&mut self) -> Result<f64, Self::Error>;
}

/// The in-memory [`ModelServer`]: a [`DrawAndDiscard`] engine.
#[derive(Debug, Clone)]
pub struct InProcessServer {
    engine: DrawAndDiscard,
}

impl InProcessServer {
    /// Wraps an engine.
    pub fn new(engine: DrawAndDiscard) -> Self {
        Self { engine }
    }

    /// The engine.
    pub fn engine(&self) -> &DrawAndDiscard {
        &self.engine
    }
}

impl ModelServer for InProcessServer {
    type Error = LearnError;
    fn k(&self) -> usize {
        self.engine.k()
    }
    fn dim(&self) -> usize {
        self.engine.dim()
    }
    fn strategy(&self) -> Strategy {
        self.engine.strategy()
    }
    fn draw<R: Rng + CryptoRng + ?Sized>(&mut self, rng: &mut R) -> Result<Drawn> {
        let index = self.engine.draw(rng);
        Ok(Drawn {
            ticket: None,
            index: Some(index),
            weights: self.engine.instance(index).to_vec(),
        })
    }
    fn submit<R: Rng + CryptoRng + ?Sized>(
        &mut self,
        drawn: &Drawn,
        update: &[f64],
        rng: &mut R,
    ) -> Result<Outcome> {
        let index = drawn.index.ok_or_else(|| {
            LearnError::invalid(
                "drawn.index",
                f64::NAN,
                "the in-process server needs the index of the drawn instance",
            )
        })?;
        self.engine.submit(index, update, rng)
    }
    fn mean_model(&mut self) -> Result<Vec<f64>> {
        Ok(self.engine.mean_model())
    }
    fn intra_model_variance(&mut self) -> Result<f64> {
        Ok(self.engine.intra_model_variance())
    }
}

/// Parameters of a simulation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimConfig {
    /// Number of instances `k` the server keeps.
    pub k: usize,
    /// How the server folds updates in.
    pub strategy: Strategy,
    /// Client noise.
    pub noise: ClientNoise,
    /// What the client guarantee protects.
    pub unit: PrivacyUnit,
    /// Learning rate γ.
    pub learning_rate: f64,
    /// Passes over the training data.
    pub passes: usize,
    /// Examples per client `N_c`.
    pub examples_per_client: usize,
    /// Spam filter band in standard deviations (none if `None`, the default); at least
    /// [`privfed_ddml::engine::RECOMMENDED_SPAM_SIGMAS`] if used, since narrower bands reject many honest
    /// updates.
    pub spam_sigmas: Option<f64>,
    /// Evaluate on the held-out set after every pass (the learning curve).
    pub evaluate_every_pass: bool,
    /// `δ_T` of the adversary-III report.
    pub delta_t: f64,
}

impl SimConfig {
    /// Paper 003 §V-A's passes over the training data (20); the default of
    /// [`Self::paper_defaults`], `privfed ddml simulate --passes` and Python's
    /// `simulate_in_process(passes=None)`.
    pub const DEFAULT_PASSES: usize = 20;
    /// Paper 003 §V-A's examples per client `N_c` (10); the default of
    /// [`Self::paper_defaults`], `privfed ddml simulate --examples-per-client` and Python's
    /// `simulate_in_process(examples_per_client=None)`.
    pub const DEFAULT_EXAMPLES_PER_CLIENT: usize = 10;

    /// Paper 003 §V-A defaults for `k` instances: draw-and-discard, no noise, γ = 0.001,
    /// [`Self::DEFAULT_PASSES`] passes, [`Self::DEFAULT_EXAMPLES_PER_CLIENT`] examples per
    /// client, no spam filter, per-pass evaluation, `δ_T = 10⁻⁸`.
    pub fn paper_defaults(k: usize) -> Self {
        Self {
            k,
            strategy: Strategy::DrawAndDiscard,
            noise: ClientNoise::None,
            unit: PrivacyUnit::Feature,
            learning_rate: 0.001,
            passes: Self::DEFAULT_PASSES,
            examples_per_client: Self::DEFAULT_EXAMPLES_PER_CLIENT,
            spam_sigmas: None,
            evaluate_every_pass: true,
            delta_t: privfed_accounting::report::DRAW_AND_DISCARD_DELTA_T,
        }
    }

    fn validate(&self) -> Result<()> {
        if self.k == 0 {
            return Err(LearnError::invalid("k", 0.0, "must be ≥ 1"));
        }
        if self.passes == 0 {
            return Err(LearnError::invalid("passes", 0.0, "must be ≥ 1"));
        }
        if self.examples_per_client == 0 {
            return Err(LearnError::invalid(
                "examples_per_client",
                0.0,
                "must be ≥ 1",
            ));
        }
        check_positive("learning_rate", self.learning_rate)?;
        if !(self.delta_t > 0.0 && self.delta_t < 0.5) {
            return Err(LearnError::invalid(
                "delta_t",
                self.delta_t,
                "must lie in (0, 1/2)",
            ));
        }
        Ok(())
    }
}

/// The per-weight variance `σ²` used for the initialization `N(0, (k/2)·σ²)`: the client's noise
/// variance, or, without client noise, the Laplace variance at ε = 1, `8γ²` (paper 003 §V-A).
pub fn initial_noise_variance(step: &ClientStep) -> f64 {
    match step.noise() {
        ClientNoise::None => 8.0 * step.learning_rate() * step.learning_rate(),
        _ => step.noise_variance(),
    }
}

/// Progress of a running simulation, passed to the callback.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Clients processed so far (over all passes).
    pub clients_done: u64,
    /// Clients in the whole run.
    pub clients_total: u64,
    /// The pass in progress (1-based).
    pub pass: usize,
    /// Held-out accuracy after the last finished pass, if evaluated.
    pub accuracy: Option<f64>,
}

/// One point of the learning curve (after a pass).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CurvePoint {
    /// Passes done.
    pub pass: usize,
    /// Training examples ingested so far (the paper's "sample size").
    pub examples_seen: u64,
    /// Held-out accuracy of the average model.
    pub accuracy: f64,
    /// Held-out loss of the average model.
    pub loss: f64,
    /// Intra-model variance.
    pub intra_model_variance: f64,
}

/// The result of a simulation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    /// Dataset name.
    pub dataset: &'static str,
    /// Number of weights.
    pub num_weights: usize,
    /// The configuration.
    pub config: SimConfig,
    /// Training rows.
    pub train_examples: usize,
    /// Held-out rows.
    pub test_examples: usize,
    /// Clients per pass, `⌈rows/N_c⌉`.
    pub clients_per_pass: usize,
    /// Updates submitted (clients over all passes).
    pub updates: u64,
    /// This run's updates by outcome, as the clients saw them ([`DdmlStats::record`]).
    pub server: DdmlStats,
    /// Held-out accuracy of the average of the `k` instances.
    pub accuracy: f64,
    /// Held-out mean loss of the average model.
    pub loss: f64,
    /// Training mean loss of the average model.
    pub train_loss: f64,
    /// Measured intra-model variance at the end.
    pub intra_model_variance: f64,
    /// `(k/2)·σ²` for the client noise variance σ² (paper 003 Thm. 1; 0 without noise).
    pub predicted_intra_model_variance: f64,
    /// Client per-weight noise variance σ².
    pub noise_variance: f64,
    /// The initialization variance `(k/2)·σ²_init` (see [`initial_noise_variance`]).
    pub init_variance: f64,
    /// Privacy against adversaries I/II/III (Laplace noise only; `T` = overwrites per instance).
    pub privacy: Option<AdversaryReport>,
    /// `max_j |b̄_j − w_j|` against the known weights, if the dataset has them.
    pub weights_max_abs_error: Option<f64>,
    /// The average model's weights (the estimate).
    pub mean_weights: Vec<f64>,
    /// Learning curve (one point per pass when `evaluate_every_pass`).
    pub curve: Vec<CurvePoint>,
}

/// What `privfed ddml simulate` prints: a [`SimReport`] flattened for reading, with the seed,
/// the run time and, against a live server, its URL and the model's name.
#[derive(Debug, Clone, Serialize)]
pub struct SimSummary<'a> {
    /// Dataset name.
    pub dataset: &'static str,
    /// Number of weights.
    pub num_weights: usize,
    /// Number of instances k.
    pub k: usize,
    /// The server strategy.
    pub strategy: Strategy,
    /// The clients' Laplace ε (`null` without noise).
    pub epsilon: Option<f64>,
    /// Learning rate γ.
    pub learning_rate: f64,
    /// Passes over the training data.
    pub passes: usize,
    /// Examples per client `N_c`.
    pub examples_per_client: usize,
    /// Training rows.
    pub train_examples: usize,
    /// Held-out rows.
    pub test_examples: usize,
    /// The run's seed (`null`: seeded from the operating system).
    pub seed: Option<u64>,
    /// Held-out accuracy of the average model.
    pub accuracy: f64,
    /// Held-out mean loss of the average model.
    pub loss: f64,
    /// Training mean loss of the average model.
    pub train_loss: f64,
    /// Updates submitted.
    pub updates: u64,
    /// Updates accepted by the server.
    pub updates_accepted: u64,
    /// Updates rejected (spam filter, guard).
    pub updates_rejected: u64,
    /// Updates discarded (e.g. accept-one-in).
    pub updates_discarded: u64,
    /// Instances overwritten.
    pub overwrites: u64,
    /// Measured intra-model variance at the end.
    pub intra_model_variance: f64,
    /// `(k/2)·σ²` (paper 003 Thm. 1).
    pub predicted_intra_model_variance: f64,
    /// Client per-weight noise variance σ².
    pub noise_variance: f64,
    /// The initialization variance.
    pub init_variance: f64,
    /// Privacy against adversaries I/II/III (Laplace noise only).
    pub privacy: Option<AdversaryReport>,
    /// The learning curve.
    pub curve: &'a [CurvePoint],
    /// Wall time of the run, seconds.
    pub seconds: f64,
    /// The weights, when the dataset has known ones.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub known_weights: Option<KnownWeights<'a>>,
    /// The server's URL (runs against a live server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The model's name on the server (runs against a live server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// The estimate against the known weights of a dataset.
#[derive(Debug, Clone, Serialize)]
pub struct KnownWeights<'a> {
    /// `max_j |b̄_j − w_j|`.
    pub weights_max_abs_error: Option<f64>,
    /// The known weights w.
    pub true_weights: &'a [f64],
    /// The average model's weights b̄.
    pub estimated_weights: &'a [f64],
}

impl SimReport {
    /// The [`SimSummary`] of this run over `dataset` with `seed`, taking `seconds`.
    pub fn summary<'a>(
        &'a self,
        dataset: &'a Dataset,
        seed: Option<u64>,
        seconds: f64,
    ) -> SimSummary<'a> {
        let c = &self.config;
        SimSummary {
            dataset: self.dataset,
            num_weights: self.num_weights,
            k: c.k,
            strategy: c.strategy,
            epsilon: match c.noise {
                ClientNoise::Laplace { epsilon } => Some(epsilon),
                _ => None,
            },
            learning_rate: c.learning_rate,
            passes: c.passes,
            examples_per_client: c.examples_per_client,
            train_examples: self.train_examples,
            test_examples: self.test_examples,
            seed,
            accuracy: self.accuracy,
            loss: self.loss,
            train_loss: self.train_loss,
            updates: self.updates,
            updates_accepted: self.server.accepted,
            updates_rejected: self.server.rejected,
            updates_discarded: self.server.discarded,
            overwrites: self.server.overwrites,
            intra_model_variance: self.intra_model_variance,
            predicted_intra_model_variance: self.predicted_intra_model_variance,
            noise_variance: self.noise_variance,
            init_variance: self.init_variance,
            privacy: self.privacy,
            curve: &self.curve,
            seconds,
            known_weights: dataset.true_weights.as_deref().map(|w| KnownWeights {
                weights_max_abs_error: self.weights_max_abs_error,
                true_weights: w,
                estimated_weights: &self.mean_weights,
            }),
            server: None,
            model: None,
        }
    }
}

/// Mean loss and accuracy of `weights` over all rows of `table`, in chunks (no full copy).
pub fn evaluate(
    glm: &Glm,
    weights: &[f64],
    table: &privfed_fl::datasets::Table,
) -> Result<(f64, f64)> {
    if table.is_empty() {
        return Err(LearnError::Empty("evaluation set"));
    }
    let (mut loss, mut acc) = (0.0, 0.0);
    let chunk = 2048;
    let mut start = 0;
    while start < table.len() {
        let end = (start + chunk).min(table.len());
        let ex: Vec<Example> = (start..end).map(|i| table.example(i)).collect();
        let n = ex.len() as f64;
        loss += glm.loss(weights, &ex)? * n;
        acc += glm.accuracy(weights, &ex)? * n;
        start = end;
    }
    let n = table.len() as f64;
    Ok((acc / n, loss / n))
}

/// The standard deviation `√((k/2)·σ²_init)` of the initial instances for `config` over
/// `dataset` (see [`initial_noise_variance`]); what a live server's model is created with.
/// Errors on an invalid configuration.
pub fn initial_std(dataset: &Dataset, config: &SimConfig) -> Result<f64> {
    config.validate()?;
    let step = client_step(dataset, config)?;
    Ok(predicted_intra_model_variance(config.k, initial_noise_variance(&step)).sqrt())
}

/// Builds the initial instances and the in-process server for `config` over `dataset`.
pub fn in_process_server<R: Rng + CryptoRng + ?Sized>(
    dataset: &Dataset,
    config: &SimConfig,
    rng: &mut R,
) -> Result<InProcessServer> {
    let init_std = initial_std(dataset, config)?;
    let p = dataset.glm.num_weights();
    let instances = initialize_with_std(&vec![0.0; p], config.k, init_std, rng)?;
    let filter = config
        .spam_sigmas
        .map(|s| SpamFilter::new(s, 0.0))
        .transpose()?;
    Ok(InProcessServer::new(DrawAndDiscard::new(
        config.strategy,
        instances,
        filter,
    )?))
}

fn client_step(dataset: &Dataset, config: &SimConfig) -> Result<ClientStep> {
    ClientStep::new(
        config.learning_rate,
        config.noise,
        config.unit,
        dataset.glm.num_weights(),
    )
}

/// Runs the simulation against `server`, calling `progress` every few clients and after every
/// pass. Errors on an invalid configuration, an empty dataset, a server of the wrong dimension,
/// number of instances or strategy, or any error the server returns.
pub fn simulate<S: ModelServer, R: Rng + CryptoRng + ?Sized, F: FnMut(&Progress)>(
    dataset: &Dataset,
    config: &SimConfig,
    server: &mut S,
    rng: &mut R,
    mut progress: F,
) -> Result<SimReport, S::Error> {
    config.validate()?;
    if dataset.train.is_empty() {
        return Err(LearnError::Empty("training set").into());
    }
    let glm = &dataset.glm;
    let p = glm.num_weights();
    if server.dim() != p {
        return Err(LearnError::DimensionMismatch {
            what: "server model",
            expected: p,
            got: server.dim(),
        }
        .into());
    }
    if server.k() != config.k {
        return Err(LearnError::invalid(
            "k",
            config.k as f64,
            format!("the server keeps {} instances", server.k()),
        )
        .into());
    }
    if server.strategy() != config.strategy {
        return Err(LearnError::Unsupported(format!(
            "the configuration asks for strategy {:?} but the server runs {:?}",
            config.strategy,
            server.strategy()
        ))
        .into());
    }
    let step = client_step(dataset, config)?;
    let n = dataset.train.len();
    let nc = config.examples_per_client;
    let clients_per_pass = n.div_ceil(nc);
    let clients_total = (clients_per_pass * config.passes) as u64;
    let mut order: Vec<usize> = (0..n).collect();
    let mut curve = Vec::new();
    let mut done = 0u64;
    let mut stats = DdmlStats::default();
    let mut last_acc = None;
    for pass in 1..=config.passes {
        order.shuffle(rng);
        for chunk in order.chunks(nc) {
            let examples = dataset.train.examples(chunk);
            let drawn = server.draw(rng)?;
            let update = step.apply(glm, &drawn.weights, &examples, rng)?;
            stats.record(&server.submit(&drawn, &update, rng)?);
            done += 1;
            if done.is_multiple_of(64) {
                progress(&Progress {
                    clients_done: done,
                    clients_total,
                    pass,
                    accuracy: last_acc,
                });
            }
        }
        if config.evaluate_every_pass || pass == config.passes {
            let mean = server.mean_model()?;
            let (accuracy, loss) = evaluate(glm, &mean, &dataset.test)?;
            last_acc = Some(accuracy);
            curve.push(CurvePoint {
                pass,
                examples_seen: (pass * n) as u64,
                accuracy,
                loss,
                intra_model_variance: server.intra_model_variance()?,
            });
        }
        progress(&Progress {
            clients_done: done,
            clients_total,
            pass,
            accuracy: last_acc,
        });
    }
    let mean = server.mean_model()?;
    let (accuracy, loss) = evaluate(glm, &mean, &dataset.test)?;
    let (_, train_loss) = evaluate(glm, &mean, &dataset.train)?;
    let k = server.k();
    let privacy = match config.noise {
        ClientNoise::Laplace { epsilon } => Some(AdversaryReport::new(
            epsilon,
            k,
            (stats.overwrites / k as u64).max(1),
            config.delta_t,
        )?),
        _ => None,
    };
    let weights_max_abs_error = dataset.true_weights.as_ref().map(|w| {
        mean.iter()
            .zip(w)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max)
    });
    Ok(SimReport {
        dataset: dataset.kind.name(),
        num_weights: p,
        config: config.clone(),
        train_examples: n,
        test_examples: dataset.test.len(),
        clients_per_pass,
        updates: done,
        server: stats,
        accuracy,
        loss,
        train_loss,
        intra_model_variance: server.intra_model_variance()?,
        predicted_intra_model_variance: predicted_intra_model_variance(k, step.noise_variance()),
        noise_variance: step.noise_variance(),
        init_variance: predicted_intra_model_variance(config.k, initial_noise_variance(&step)),
        privacy,
        weights_max_abs_error,
        mean_weights: mean,
        curve,
    })
}

/// [`simulate`] against a fresh [`InProcessServer`] built by [`in_process_server`], all
/// randomness from `rng`.
pub fn simulate_in_process<R: Rng + CryptoRng + ?Sized, F: FnMut(&Progress)>(
    dataset: &Dataset,
    config: &SimConfig,
    rng: &mut R,
    progress: F,
) -> Result<SimReport> {
    let mut server = in_process_server(dataset, config, rng)?;
    simulate(dataset, config, &mut server, rng, progress)
}

/// The mean of one quantity over repeated runs and its standard error.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MeanStdError {
    /// Number of runs `R`.
    pub runs: usize,
    /// Mean over the runs.
    pub mean: f64,
    /// Standard error of the mean: sample standard deviation (divisor `R − 1`) over `√R`; `None`
    /// for a single run.
    pub std_error: Option<f64>,
}

impl MeanStdError {
    /// Mean and standard error of `values`. Errors if `values` is empty or holds a non-finite
    /// value.
    pub fn of(values: &[f64]) -> Result<Self> {
        if values.is_empty() {
            return Err(LearnError::Empty("values"));
        }
        if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(LearnError::NonFinite {
                what: "values",
                index,
                value,
            });
        }
        let r = values.len() as f64;
        let mean = values.iter().sum::<f64>() / r;
        let std_error = (values.len() > 1).then(|| {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (r - 1.0);
            (var / r).sqrt()
        });
        Ok(Self {
            runs: values.len(),
            mean,
            std_error,
        })
    }
}

/// One point of the learning curve summarized over repeated runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurveSummary {
    /// Passes done.
    pub pass: usize,
    /// Training examples ingested so far.
    pub examples_seen: u64,
    /// Held-out accuracy of the average model.
    pub accuracy: MeanStdError,
    /// Held-out loss of the average model.
    pub loss: MeanStdError,
    /// Intra-model variance.
    pub intra_model_variance: MeanStdError,
}

/// Repeated runs of one configuration (different seeds) summarized: mean and standard error of
/// every reported quantity ([`summarize_repeats`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepeatSummary {
    /// Number of runs `R`.
    pub runs: usize,
    /// Updates submitted per run (the same in every run).
    pub updates: u64,
    /// Overwrites (varies between runs for the accept-one-in strategy).
    pub overwrites: MeanStdError,
    /// Held-out accuracy.
    pub accuracy: MeanStdError,
    /// Held-out loss.
    pub loss: MeanStdError,
    /// Training loss.
    pub train_loss: MeanStdError,
    /// Final intra-model variance.
    pub intra_model_variance: MeanStdError,
    /// `(k/2)·σ²` (the same in every run).
    pub predicted_intra_model_variance: f64,
    /// `max_j |b̄_j − w_j|`, if the dataset has known weights.
    pub weights_max_abs_error: Option<MeanStdError>,
    /// Per weight, the average model's weight over the runs.
    pub mean_weights: Vec<MeanStdError>,
    /// The learning curve, pass by pass.
    pub curve: Vec<CurveSummary>,
}

/// Summarizes repeated runs of one configuration. Errors if `reports` is empty, if the reports
/// differ in configuration, dataset or number of weights (they are then not repeats), or if a
/// reported quantity is not finite.
pub fn summarize_repeats(reports: &[SimReport]) -> Result<RepeatSummary> {
    let first = reports.first().ok_or(LearnError::Empty("reports"))?;
    for (i, r) in reports.iter().enumerate() {
        if r.config != first.config
            || r.dataset != first.dataset
            || r.num_weights != first.num_weights
            || r.updates != first.updates
            || r.curve.len() != first.curve.len()
            || r.weights_max_abs_error.is_some() != first.weights_max_abs_error.is_some()
        {
            return Err(LearnError::invalid(
                "reports",
                i as f64,
                "is not a repeat of the first report (configuration, dataset or shape differ)",
            ));
        }
    }
    let of = |f: &dyn Fn(&SimReport) -> f64| {
        MeanStdError::of(&reports.iter().map(f).collect::<Vec<_>>())
    };
    let curve = (0..first.curve.len())
        .map(|i| {
            let at = |f: &dyn Fn(&CurvePoint) -> f64| of(&|r: &SimReport| f(&r.curve[i]));
            Ok(CurveSummary {
                pass: first.curve[i].pass,
                examples_seen: first.curve[i].examples_seen,
                accuracy: at(&|c| c.accuracy)?,
                loss: at(&|c| c.loss)?,
                intra_model_variance: at(&|c| c.intra_model_variance)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mean_weights = (0..first.mean_weights.len())
        .map(|j| of(&|r: &SimReport| r.mean_weights[j]))
        .collect::<Result<Vec<_>>>()?;
    Ok(RepeatSummary {
        runs: reports.len(),
        updates: first.updates,
        overwrites: of(&|r| r.server.overwrites as f64)?,
        accuracy: of(&|r| r.accuracy)?,
        loss: of(&|r| r.loss)?,
        train_loss: of(&|r| r.train_loss)?,
        intra_model_variance: of(&|r| r.intra_model_variance)?,
        predicted_intra_model_variance: first.predicted_intra_model_variance,
        weights_max_abs_error: match first.weights_max_abs_error {
            Some(_) => Some(of(&|r| r.weights_max_abs_error.unwrap_or(f64::NAN))?),
            None => None,
        },
        mean_weights,
        curve,
    })
}

/// One point of a variance-stabilization trace.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VariancePoint {
    /// Updates (overwrites) done.
    pub step: usize,
    /// Mean over runs of the intra-model variance.
    pub mean: f64,
    /// Its standard error (sample standard deviation over runs / √runs).
    pub std_error: f64,
}

/// Pure-noise Draw-and-Discard (paper 003 Thm. 1): `runs` independent servers with `k` instances
/// of `p` weights, stabilized initialization `N(0, (k/2)σ²)` with `σ² = 2b²`, and `steps`
/// updates each of the form "drawn instance + Laplace(b) per weight". Returns the mean and
/// standard error over runs of the intra-model variance every `every` steps (and at step 0);
/// Thm. 1 predicts `(k/2)·2b²` throughout. Errors unless `k ≥ 2`, `p, runs, every ≥ 1` and
/// `b > 0`.
#[allow(clippy::too_many_arguments)]
pub fn variance_stabilization_trace<R: Rng + CryptoRng + ?Sized>(
    k: usize,
    p: usize,
    laplace_scale: f64,
    steps: usize,
    every: usize,
    runs: usize,
    strategy: Strategy,
    rng: &mut R,
) -> Result<Vec<VariancePoint>> {
    if k < 2 {
        return Err(LearnError::invalid("k", k as f64, "must be ≥ 2"));
    }
    if p == 0 || runs == 0 || every == 0 {
        return Err(LearnError::invalid("p, runs, every", 0.0, "must be ≥ 1"));
    }
    check_positive("laplace_scale", laplace_scale)?;
    let s2 = 2.0 * laplace_scale * laplace_scale;
    let points = steps / every + 1;
    let mut sum = vec![0.0; points];
    let mut sumsq = vec![0.0; points];
    let mut upd = vec![0.0; p];
    for _ in 0..runs {
        let init = initialize_with_std(
            &vec![0.0; p],
            k,
            predicted_intra_model_variance(k, s2).sqrt(),
            rng,
        )?;
        let mut s = DrawAndDiscard::new(strategy, init, None)?;
        let mut record = |i: usize, v: f64| {
            sum[i] += v;
            sumsq[i] += v * v;
        };
        record(0, s.intra_model_variance());
        for t in 1..=steps {
            let d = s.draw(rng);
            for (u, &w) in upd.iter_mut().zip(s.instance(d)) {
                *u = w + sample_laplace(rng, laplace_scale);
            }
            s.submit(d, &upd, rng)?;
            if t % every == 0 {
                record(t / every, s.intra_model_variance());
            }
        }
    }
    let r = runs as f64;
    Ok((0..points)
        .map(|i| {
            let mean = sum[i] / r;
            let var = if runs > 1 {
                ((sumsq[i] - r * mean * mean) / (r - 1.0)).max(0.0)
            } else {
                0.0
            };
            VariancePoint {
                step: i * every,
                mean,
                std_error: (var / r).sqrt(),
            }
        })
        .collect())
}

/// The data sets of `privfed ddml simulate` and Python's `privfed.ddml.simulate`, by name
/// ([`Self::name`]).
///
/// With the `clap` feature this enum is the command line's value enum (its doc comments are
/// the help text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SimDataset {
    /// The 33-weight logistic model with known weights (paper 003 §V-C), generated.
    SyntheticProduction,
    /// MNIST (original gzip'd IDX files under DATA_DIR/mnist).
    Mnist,
    /// UCI Adult (adult.data and adult.test under DATA_DIR/adult).
    Adult,
}

impl SimDataset {
    /// Every data set.
    pub const ALL: [Self; 3] = [Self::SyntheticProduction, Self::Mnist, Self::Adult];

    /// Training rows generated for synthetic-production by default (paper 003 §V-C's 200,000);
    /// the default of `privfed ddml simulate --synthetic-train`, Python's
    /// `simulate_in_process(synthetic_train=None)` and paper 003's experiment grid.
    pub const SYNTHETIC_TRAIN: usize = 200_000;
    /// Held-out rows generated for synthetic-production by default (20,000); the default of
    /// `--synthetic-test` and `synthetic_test=None` as for [`Self::SYNTHETIC_TRAIN`].
    pub const SYNTHETIC_TEST: usize = 20_000;

    /// The stable name (as on the command line).
    pub fn name(self) -> &'static str {
        match self {
            Self::SyntheticProduction => "synthetic-production",
            Self::Mnist => "mnist",
            Self::Adult => "adult",
        }
    }

    /// The data set of a stable name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Loads the data set: MNIST and Adult from `data_dir`; the synthetic production model
    /// generated with `synthetic_train` and `synthetic_test` rows from its own generator, seeded
    /// by `seed ^ 0x5EED_DA7A`, so that runs with different training seeds can share the data.
    pub fn load(
        self,
        data_dir: &Path,
        synthetic_train: usize,
        synthetic_test: usize,
        seed: u64,
    ) -> std::result::Result<Dataset, DataError> {
        match self {
            Self::Mnist => load_mnist(data_dir),
            Self::Adult => load_adult(data_dir),
            Self::SyntheticProduction => {
                let mut rng = seeded_rng_for_experiments(seed ^ 0x5EED_DA7A);
                synthetic_production(synthetic_train, synthetic_test, &mut rng)
            }
        }
    }
}

/// The server strategies of `privfed ddml simulate --strategy` and Python's
/// `privfed.ddml.simulate(strategy=...)`, by name ([`Self::name`]); [`server_strategy`] turns
/// one into a [`Strategy`] and its number of instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum StrategyName {
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

impl StrategyName {
    /// The default strategy, draw-and-discard (the paper's Alg. 2, as in
    /// [`SimConfig::paper_defaults`]): that of `privfed ddml simulate --strategy` and Python's
    /// `simulate_in_process(strategy=None)`.
    pub const DEFAULT: Self = Self::DrawAndDiscard;

    /// Every strategy.
    pub const ALL: [Self; 5] = [
        Self::DrawAndDiscard,
        Self::AcceptOneIn,
        Self::ReplaceDrawn,
        Self::AverageBeforeOverwrite,
        Self::ServerBatch,
    ];

    /// The stable name (as on the command line).
    pub fn name(self) -> &'static str {
        match self {
            Self::DrawAndDiscard => "draw-and-discard",
            Self::AcceptOneIn => "accept-one-in",
            Self::ReplaceDrawn => "replace-drawn",
            Self::AverageBeforeOverwrite => "average-before-overwrite",
            Self::ServerBatch => "server-batch",
        }
    }

    /// The strategy of a stable name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Why a [`server_strategy`] request has no strategy (the front ends word it with their own
/// option names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StrategyChoiceError {
    /// `k` is 0.
    #[error("k must be at least 1")]
    NoInstances,
    /// `server-batch` without a batch size.
    #[error("strategy server-batch needs a server batch size")]
    MissingBatch,
    /// A batch size with a strategy other than draw-and-discard or server-batch.
    #[error("a server batch size goes with strategy server-batch")]
    BatchWithoutServerBatch,
}

/// The [`Strategy`] of `name` with `k` instances and an optional server batch size, and the
/// number of instances the server keeps: a batch size makes draw-and-discard server-batch;
/// accept-one-in keeps one instance and accepts one update in `k` (paper 003 §V-B).
pub fn server_strategy(
    name: StrategyName,
    k: usize,
    server_batch: Option<usize>,
) -> std::result::Result<(Strategy, usize), StrategyChoiceError> {
    if k == 0 {
        return Err(StrategyChoiceError::NoInstances);
    }
    Ok(match (name, server_batch) {
        (StrategyName::DrawAndDiscard | StrategyName::ServerBatch, Some(batch)) => {
            (Strategy::ServerBatch { batch }, k)
        }
        (StrategyName::ServerBatch, None) => return Err(StrategyChoiceError::MissingBatch),
        (_, Some(_)) => return Err(StrategyChoiceError::BatchWithoutServerBatch),
        (StrategyName::DrawAndDiscard, None) => (Strategy::DrawAndDiscard, k),
        (StrategyName::AcceptOneIn, None) => (Strategy::AcceptOneIn { k }, 1),
        (StrategyName::ReplaceDrawn, None) => (Strategy::ReplaceDrawn, k),
        (StrategyName::AverageBeforeOverwrite, None) => (Strategy::AverageBeforeOverwrite, k),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use privfed_fl::datasets::{DatasetKind, SYNTHETIC_TRUE_WEIGHTS, Table, synthetic_production};
    use privfed_mechanisms::rng::seeded_rng_for_experiments;

    /// The stable names round-trip and are the command line's value names.
    #[test]
    fn dataset_and_strategy_names_round_trip() {
        for d in SimDataset::ALL {
            assert_eq!(SimDataset::from_name(d.name()), Some(d));
        }
        for s in StrategyName::ALL {
            assert_eq!(StrategyName::from_name(s.name()), Some(s));
        }
        assert_eq!(SimDataset::from_name("cifar"), None);
        #[cfg(feature = "clap")]
        {
            use clap::ValueEnum;
            for d in SimDataset::value_variants() {
                assert_eq!(d.to_possible_value().unwrap().get_name(), d.name());
            }
            for s in StrategyName::value_variants() {
                assert_eq!(s.to_possible_value().unwrap().get_name(), s.name());
            }
        }
    }

    /// Accept-one-in keeps one instance; a batch size makes draw-and-discard server-batch and
    /// is refused with the other strategies; k = 0 is refused.
    #[test]
    fn server_strategy_choices() {
        use StrategyName as N;
        assert_eq!(
            server_strategy(N::AcceptOneIn, 5, None),
            Ok((Strategy::AcceptOneIn { k: 5 }, 1))
        );
        assert_eq!(
            server_strategy(N::DrawAndDiscard, 5, Some(3)),
            Ok((Strategy::ServerBatch { batch: 3 }, 5))
        );
        assert_eq!(
            server_strategy(N::ReplaceDrawn, 5, None),
            Ok((Strategy::ReplaceDrawn, 5))
        );
        assert_eq!(
            server_strategy(N::ServerBatch, 5, None),
            Err(StrategyChoiceError::MissingBatch)
        );
        assert_eq!(
            server_strategy(N::ReplaceDrawn, 5, Some(3)),
            Err(StrategyChoiceError::BatchWithoutServerBatch)
        );
        assert_eq!(
            server_strategy(N::DrawAndDiscard, 0, None),
            Err(StrategyChoiceError::NoInstances)
        );
    }

    /// Thm. 1 by simulation: 300 runs, k = 10, p = 20, Laplace b = 0.5 (σ² = 0.5, prediction
    /// 2.5), 400 steps. At every recorded step (0, 100, …, 400) the mean over runs is within 5
    /// standard errors of 2.5: each a 5-sigma z-test (FPR ≈ 6e-7 each, ≈ 3e-6 for the 5 points
    /// by the union bound; CLT approximation over 300 runs). Negative control: the same trace
    /// with "replace the drawn instance" ends far above the prediction.
    #[test]
    fn variance_is_stabilized_at_k_over_two_sigma2() {
        let mut rng = seeded_rng_for_experiments(31);
        let pred = predicted_intra_model_variance(10, 0.5);
        assert_eq!(pred, 2.5);
        let tr = variance_stabilization_trace(
            10,
            20,
            0.5,
            400,
            100,
            300,
            Strategy::DrawAndDiscard,
            &mut rng,
        )
        .unwrap();
        assert_eq!(tr.len(), 5);
        for pt in &tr {
            assert!(
                (pt.mean - pred).abs() < 5.0 * pt.std_error,
                "step {}: {} ± {} vs {pred}",
                pt.step,
                pt.mean,
                pt.std_error
            );
        }
        let ctrl = variance_stabilization_trace(
            10,
            20,
            0.5,
            400,
            400,
            30,
            Strategy::ReplaceDrawn,
            &mut rng,
        )
        .unwrap();
        assert!(ctrl[1].mean > 2.0 * pred, "replace-drawn {:?}", ctrl[1]);
        assert!(
            variance_stabilization_trace(1, 2, 0.5, 1, 1, 1, Strategy::DrawAndDiscard, &mut rng)
                .is_err()
        );
    }

    /// Without noise, D&D recovers the 33 true weights of paper 003 §V-C: 200,000 synthetic
    /// rows, k = 10, γ = 0.2, N_c = 10, 10 passes (200,000 updates). Tolerances: largest
    /// absolute error < 0.5 and mean absolute error < 0.15 (the weights range to ±1.72; the
    /// all-zero model has errors 1.72 and 0.99). This is a deterministic check of one seeded run,
    /// not a calibrated statistical test; measured over seeds 1, 2, 3 of this set-up: max
    /// 0.22 / 0.34 / 0.21, mean 0.083 / 0.098 / 0.090. The paper's own setting (k = 30,
    /// γ = 0.005) needs far more updates than a unit test can afford (the paper used 983
    /// million; see EXPERIMENTS.md): the slowest directions of the logistic loss (sparse crosses
    /// such as `I·E2x`) have small curvature, so each instance needs many multiples of
    /// 1/(γ·curvature) updates; with 100,000 updates, k = 10 and γ = 0.05 the max error is 0.89.
    #[test]
    fn synthetic_weights_are_recovered_without_noise() {
        let mut rng = seeded_rng_for_experiments(32);
        let d = synthetic_production(200_000, 20_000, &mut rng).unwrap();
        let mut cfg = SimConfig::paper_defaults(10);
        cfg.learning_rate = 0.2;
        cfg.passes = 10;
        cfg.evaluate_every_pass = false;
        let r = simulate_in_process(&d, &cfg, &mut rng, |_| {}).unwrap();
        let err = r.weights_max_abs_error.unwrap();
        eprintln!("max abs weight error {err}, accuracy {}", r.accuracy);
        let mae = crate::experiments::ddml::weights_mean_abs_error(&r.mean_weights);
        assert!(err < 0.5, "max abs error {err}: {:?}", r.mean_weights);
        assert!(mae < 0.15, "mean abs error {mae}");
        // The Bayes accuracy of the true model on this distribution is ≈ 0.77.
        assert!(r.accuracy > 0.74, "accuracy {}", r.accuracy);
        assert_eq!(r.updates, 10 * 20_000);
        assert_eq!(r.server.overwrites, r.updates);
        assert_eq!(r.mean_weights.len(), SYNTHETIC_TRUE_WEIGHTS.len());
        assert!(r.privacy.is_none());
    }

    fn small_dataset() -> Dataset {
        let mut rng = seeded_rng_for_experiments(33);
        synthetic_production(2000, 500, &mut rng).unwrap()
    }

    #[test]
    fn same_seed_same_report_and_noise_report() {
        let d = small_dataset();
        let mut cfg = SimConfig::paper_defaults(5);
        cfg.noise = ClientNoise::Laplace { epsilon: 2.0 };
        cfg.passes = 2;
        let run = |seed| {
            let mut rng = seeded_rng_for_experiments(seed);
            simulate_in_process(&d, &cfg, &mut rng, |_| {}).unwrap()
        };
        let (a, b, c) = (run(7), run(7), run(8));
        assert_eq!(a, b);
        assert_ne!(a.mean_weights, c.mean_weights);
        let pr = a.privacy.unwrap();
        assert_eq!(pr.channel_listener_epsilon, 2.0);
        assert!((pr.internal_expected_epsilon - 0.8 * 1.0).abs() < 1e-12);
        assert_eq!(pr.further_updates, 400 / 5);
        // σ² = 2(2γ/ε)² = 2e-6; prediction (k/2)σ² = 5e-6.
        assert!((a.noise_variance - 2e-6).abs() < 1e-18);
        assert!((a.predicted_intra_model_variance - 5e-6).abs() < 1e-18);
        assert_eq!(a.curve.len(), 2);
        assert_eq!(a.curve[1].examples_seen, 4000);
    }

    #[test]
    fn mean_and_standard_error() {
        let m = MeanStdError::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        // Sample variance (divisor 3) is 5/3; s.e. = √(5/3 / 4).
        assert_eq!((m.runs, m.mean), (4, 2.5));
        assert!((m.std_error.unwrap() - (5.0f64 / 12.0).sqrt()).abs() < 1e-15);
        let one = MeanStdError::of(&[0.7]).unwrap();
        assert_eq!((one.runs, one.mean, one.std_error), (1, 0.7, None));
        assert_eq!(MeanStdError::of(&[2.0, 2.0]).unwrap().std_error, Some(0.0));
        assert!(MeanStdError::of(&[]).is_err());
        assert!(MeanStdError::of(&[1.0, f64::NAN]).is_err());
    }

    /// Three seeded runs of one configuration: every summarized quantity is the mean of the
    /// runs' values with the sample standard error; the curve is summarized pass by pass; runs of
    /// different configurations are refused.
    #[test]
    fn repeats_are_summarized() {
        let d = small_dataset();
        let mut cfg = SimConfig::paper_defaults(5);
        cfg.noise = ClientNoise::Laplace { epsilon: 2.0 };
        cfg.learning_rate = 0.05;
        cfg.passes = 3;
        let run = |cfg: &SimConfig, seed| {
            let mut rng = seeded_rng_for_experiments(seed);
            simulate_in_process(&d, cfg, &mut rng, |_| {}).unwrap()
        };
        let reports: Vec<SimReport> = (40..43).map(|s| run(&cfg, s)).collect();
        let s = summarize_repeats(&reports).unwrap();
        let check = |m: &MeanStdError, v: Vec<f64>| {
            let mean = v.iter().sum::<f64>() / 3.0;
            let se = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0 / 3.0).sqrt();
            assert_eq!(m.runs, 3);
            assert!((m.mean - mean).abs() < 1e-12, "{m:?} vs {v:?}");
            assert!((m.std_error.unwrap() - se).abs() < 1e-12, "{m:?} vs {v:?}");
        };
        check(&s.accuracy, reports.iter().map(|r| r.accuracy).collect());
        check(&s.loss, reports.iter().map(|r| r.loss).collect());
        check(
            &s.train_loss,
            reports.iter().map(|r| r.train_loss).collect(),
        );
        check(
            &s.intra_model_variance,
            reports.iter().map(|r| r.intra_model_variance).collect(),
        );
        check(
            s.weights_max_abs_error.as_ref().unwrap(),
            reports
                .iter()
                .map(|r| r.weights_max_abs_error.unwrap())
                .collect(),
        );
        check(
            &s.mean_weights[4],
            reports.iter().map(|r| r.mean_weights[4]).collect(),
        );
        assert_eq!(s.curve.len(), 3);
        for (i, c) in s.curve.iter().enumerate() {
            assert_eq!(c.pass, i + 1);
            assert_eq!(c.examples_seen, 2000 * (i as u64 + 1));
            check(
                &c.accuracy,
                reports.iter().map(|r| r.curve[i].accuracy).collect(),
            );
            check(&c.loss, reports.iter().map(|r| r.curve[i].loss).collect());
        }
        // The seeds differ, so the runs do.
        assert!(s.accuracy.std_error.unwrap() > 0.0 || s.loss.std_error.unwrap() > 0.0);
        assert_eq!(s.updates, 3 * 200);
        assert_eq!(s.overwrites.mean, 600.0);
        assert!((s.predicted_intra_model_variance - 2.5 * 2.0 * 0.05f64.powi(2)).abs() < 1e-15);
        assert!(summarize_repeats(&[]).is_err());
        let mut other = cfg.clone();
        other.k = 4;
        let mixed = vec![reports[0].clone(), run(&other, 43)];
        assert!(summarize_repeats(&mixed).is_err());
    }

    #[test]
    fn progress_and_validation() {
        let d = small_dataset();
        let mut cfg = SimConfig::paper_defaults(2);
        cfg.passes = 1;
        cfg.examples_per_client = 3;
        let mut rng = seeded_rng_for_experiments(34);
        let mut last = None;
        let r = simulate_in_process(&d, &cfg, &mut rng, |p| last = Some(*p)).unwrap();
        // 2000 rows in chunks of 3: 667 clients (the last has 2 rows).
        assert_eq!(r.clients_per_pass, 667);
        let last = last.unwrap();
        assert_eq!((last.clients_done, last.clients_total), (667, 667));
        assert!(last.accuracy.is_some());
        for bad in [
            SimConfig {
                k: 0,
                ..cfg.clone()
            },
            SimConfig {
                passes: 0,
                ..cfg.clone()
            },
            SimConfig {
                examples_per_client: 0,
                ..cfg.clone()
            },
            SimConfig {
                learning_rate: f64::NAN,
                ..cfg.clone()
            },
            SimConfig {
                delta_t: 0.7,
                ..cfg.clone()
            },
        ] {
            assert!(simulate_in_process(&d, &bad, &mut rng, |_| {}).is_err());
        }
        // A server of the wrong dimension.
        let other = Dataset {
            kind: DatasetKind::Adult,
            glm: Glm::logistic(2).unwrap(),
            train: Table::new(2, vec![0.0; 4], vec![0.0, 1.0]).unwrap(),
            test: Table::new(2, vec![0.0; 2], vec![0.0]).unwrap(),
            true_weights: None,
        };
        let mut srv = in_process_server(&other, &cfg, &mut rng).unwrap();
        assert!(matches!(
            simulate(&d, &cfg, &mut srv, &mut rng, |_| {}),
            Err(LearnError::DimensionMismatch { .. })
        ));
        // A server with another number of instances.
        let mut srv = in_process_server(
            &d,
            &SimConfig {
                k: 3,
                ..cfg.clone()
            },
            &mut rng,
        )
        .unwrap();
        assert!(simulate(&d, &cfg, &mut srv, &mut rng, |_| {}).is_err());
        // A server with another strategy.
        let replace = SimConfig {
            strategy: Strategy::ReplaceDrawn,
            ..cfg.clone()
        };
        let mut other_srv = in_process_server(&d, &replace, &mut rng).unwrap();
        assert!(matches!(
            simulate(&d, &cfg, &mut other_srv, &mut rng, |_| {}),
            Err(LearnError::Unsupported(_))
        ));
        // The in-process server needs to know which instance was drawn.
        let mut drawn = srv.draw(&mut rng).unwrap();
        let w = drawn.weights.clone();
        drawn.index = None;
        assert!(srv.submit(&drawn, &w, &mut rng).is_err());
    }

    /// The report's counters, tallied from the outcomes, equal the engine's own, for a strategy
    /// that discards and one that buffers (spam filter on so that some updates are rejected).
    #[test]
    fn report_counters_match_the_engine() {
        let d = small_dataset();
        for (k, strategy) in [
            (5, Strategy::DrawAndDiscard),
            (1, Strategy::AcceptOneIn { k: 4 }),
            (5, Strategy::ServerBatch { batch: 7 }),
        ] {
            let mut cfg = SimConfig::paper_defaults(k);
            cfg.strategy = strategy;
            cfg.passes = 1;
            cfg.noise = ClientNoise::Laplace { epsilon: 1.0 };
            cfg.spam_sigmas = (k > 1).then_some(2.0);
            let mut rng = seeded_rng_for_experiments(37);
            let mut srv = in_process_server(&d, &cfg, &mut rng).unwrap();
            let r = simulate(&d, &cfg, &mut srv, &mut rng, |_| {}).unwrap();
            assert_eq!(r.server, srv.engine().stats(), "{strategy:?}");
            assert_eq!(r.server.accepted + r.server.rejected, r.updates);
        }
    }

    /// A short no-noise MNIST run learns: k = 10, γ = 0.05 (larger than the paper's 0.001 so
    /// that one pass suffices), N_c = 10, one pass over the first 20,000 training rows: held-out
    /// accuracy well above the 10% of chance (measured 0.70 with seed 35; asserted > 0.6).
    #[test]
    #[cfg_attr(
        not(has_shared_data),
        ignore = "shared/data (mnist, adult) not found beside the repository"
    )]
    fn mnist_short_run_learns() {
        let dir = privfed_testkit::shared_data();
        let full = privfed_fl::datasets::load_mnist(&dir).unwrap();
        let idx: Vec<usize> = (0..20_000).collect();
        let rows: Vec<f32> = idx
            .iter()
            .flat_map(|&i| full.train.row(i).to_vec())
            .collect();
        let labels = idx.iter().map(|&i| full.train.label(i)).collect();
        let d = Dataset {
            train: Table::new(784, rows, labels).unwrap(),
            ..full
        };
        let mut cfg = SimConfig::paper_defaults(10);
        cfg.learning_rate = 0.05;
        cfg.passes = 1;
        let mut rng = seeded_rng_for_experiments(35);
        let r = simulate_in_process(&d, &cfg, &mut rng, |_| {}).unwrap();
        eprintln!("MNIST short run accuracy {}", r.accuracy);
        assert!(r.accuracy > 0.6, "accuracy {}", r.accuracy);
    }

    /// A short no-noise Adult run learns: k = 10, γ = 0.05, N_c = 10, 2 passes. The majority
    /// class has 76.4% of the test rows; asserted > 0.80 (measured 0.811 with seed 36).
    #[test]
    #[cfg_attr(
        not(has_shared_data),
        ignore = "shared/data (mnist, adult) not found beside the repository"
    )]
    fn adult_short_run_learns() {
        let dir = privfed_testkit::shared_data();
        let d = privfed_fl::datasets::load_adult(&dir).unwrap();
        let mut cfg = SimConfig::paper_defaults(10);
        cfg.learning_rate = 0.05;
        cfg.passes = 2;
        let mut rng = seeded_rng_for_experiments(36);
        let r = simulate_in_process(&d, &cfg, &mut rng, |_| {}).unwrap();
        eprintln!("Adult short run accuracy {}", r.accuracy);
        assert!(r.accuracy > 0.80, "accuracy {}", r.accuracy);
    }
}
