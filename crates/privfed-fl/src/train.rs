//! The federated training loop: sample a cohort, train each client locally, privatize or encode
//! its update, aggregate, step the server optimizer, account the round, evaluate.
//!
//! **Determinism.** Every random choice draws from its own ChaCha stream keyed by the run's
//! 256-bit seed, with the stream id `purpose·2^56 + round·2^24 + client`
//! ([`privfed_mechanisms::rng::StreamKey`]): the cohort, each client's minibatch order, each
//! client's privatization noise, the server's noise, the dropouts. Clients are trained in
//! parallel but combined in cohort order, and nothing depends on which thread ran what, so a run
//! is bit-identical for any thread count, and a run resumed from a checkpoint (which needs no
//! generator state, only the round number) ends with the same model as an uninterrupted one.
//! The secure-aggregation protocol's own secrets come from the OS; they cancel out of the sum.
//!
//! **Accounting.** Each round emits the event of what it released
//! ([`PrivacyPlan::round_event`]: the subsampled Gaussian of a central layer, a locally sampled
//! pure-ε report, or the Skellam/DDG event of the clients that actually contributed), and ε(δ)
//! after the round is the accountant's answer for exactly those events. With a budget, a round
//! whose planned event would exceed it is not run; a round whose actual event would (fewer
//! survivors than planned) is discarded before anything is applied or reported, and training
//! stops: the reported ε never exceeds the budget.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use privfed_accounting::DpEvent;
use privfed_distributed::rotation_seed;
use privfed_learn::nn::{Eval, Model, Scratch};
use privfed_mechanisms::central::poisson_sample;
use privfed_mechanisms::rng::{NoiseRng, StreamKey};
use privfed_plot::csv::CsvWriter;
/// A CSV cell of an optional number (empty when absent); the CSV writer's, re-exported.
pub use privfed_plot::csv::opt;
use rand::RngExt;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::FlError;
use super::audit::{AuditSummary, Canaries, RoundAudit};
use super::config::{AuditConfig, LocalTraining, Sampling, Seed, ServerOptimizer, TrainConfig};
use super::data::{BatchBuf, FederatedData, Shard};
use super::privacy::{Accountant, ClientSide, Contribution, Guarantee, PrivacyPlan, aggregate};

const PURPOSE_INIT: u64 = 1;
const PURPOSE_SAMPLE: u64 = 2;
const PURPOSE_TRAIN: u64 = 3;
const PURPOSE_PRIVATIZE: u64 = 4;
const PURPOSE_SERVER: u64 = 5;
const PURPOSE_DROPOUT: u64 = 6;
// 7 is the data's partition stream (`run.rs`).
pub(crate) const PURPOSE_CANARY_DIRECTION: u64 = 8;
pub(crate) const PURPOSE_CANARY_INCLUSION: u64 = 9;
/// A canary's randomizer or encoder noise (local and distributed DP), per round and canary.
const PURPOSE_CANARY_PRIVATIZE: u64 = 10;

/// Test rows per evaluation task (fixed, so sums combine in the same order for any thread count).
const EVAL_CHUNK: usize = 256;

pub(crate) fn stream(seed: &Seed, purpose: u64, round: u64, client: u64) -> NoiseRng {
    StreamKey::from_bytes(seed.0).stream((purpose << 56) | (round << 24) | client)
}

/// Wall-clock seconds of a round's phases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseSeconds {
    /// Local training and privatization/encoding on the clients (wall clock, parallel).
    pub clients: f64,
    /// Of which: privatization or encoding, summed over clients (CPU seconds).
    pub privatize_cpu: f64,
    /// Server aggregation (central noise, modular sum or secure aggregation, decoding).
    pub aggregate: f64,
    /// Accounting.
    pub account: f64,
    /// Test-set evaluation.
    pub eval: f64,
    /// The whole round.
    pub total: f64,
}

/// One round's metrics (a row of the CSV; an element of `rounds` in the JSON output).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundMetrics {
    /// The round, from 1.
    pub round: u64,
    /// Clients sampled.
    pub sampled: usize,
    /// Clients whose contributions are in the aggregate (after dropouts).
    pub contributors: usize,
    /// Mean over the cohort of each client's mean local training loss.
    pub train_loss: Option<f64>,
    /// Test accuracy (rounds that evaluated).
    pub accuracy: Option<f64>,
    /// Test loss (rounds that evaluated).
    pub test_loss: Option<f64>,
    /// ε(δ) after this round (private runs).
    pub epsilon: Option<f64>,
    /// ℓ2 norm of the aggregate applied.
    pub update_norm: f64,
    /// The distributed decoder suspected a modular wrap.
    pub wrap_suspected: bool,
    /// The secure-aggregation round aborted (too few survivors): nothing was released, applied
    /// or accounted.
    #[serde(default)]
    pub aborted: bool,
    /// The canary audit after this round (runs with `[audit]`; see [`crate::audit`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<RoundAudit>,
    /// Phase timings.
    pub seconds: PhaseSeconds,
}

/// Why training ended before its last round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    /// The round that was not run or was discarded (for a server step that overflowed: the
    /// round after it).
    pub round: u64,
    /// What stopped it (checkpoints written before this field existed read as a budget stop,
    /// the only kind there was).
    #[serde(default)]
    pub kind: StopKind,
    /// Why, in words.
    pub reason: String,
}

/// What stopped a run early.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopKind {
    /// The privacy budget: the next round would have spent more than it allows.
    #[default]
    Budget,
    /// Training diverged: a client's local update, or the server's step, was not finite. The
    /// configuration (learning rates, momentum, clip against the noise) cannot train this model;
    /// nothing non-finite was privatized, released or applied.
    Diverged,
}

/// The server optimizer's state.
#[derive(Debug, Clone, PartialEq)]
enum OptState {
    Sgd { velocity: Vec<f32> },
    Adam { m: Vec<f32>, v: Vec<f32> },
}

/// Everything a run carries from round to round (and a checkpoint stores).
#[derive(Debug, Clone)]
struct State {
    round: u64,
    params: Vec<f32>,
    opt: OptState,
    history: Vec<RoundMetrics>,
    stopped: Option<Stopped>,
}

/// The result of [`Trainer::step`].
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutcome {
    /// A round ran.
    Round(Box<RoundMetrics>),
    /// All rounds have run (or training had stopped).
    Finished,
}

/// A run's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The data set's name.
    pub data: String,
    /// Clients in the data.
    pub clients: usize,
    /// Model parameters.
    pub params: usize,
    /// Rounds completed.
    pub rounds_completed: u64,
    /// Rounds configured.
    pub rounds_configured: u64,
    /// Test accuracy after the last evaluated round.
    pub final_accuracy: Option<f64>,
    /// Test loss after the last evaluated round.
    pub final_test_loss: Option<f64>,
    /// ε(δ) after the last round (private runs).
    pub final_epsilon: Option<f64>,
    /// δ.
    pub delta: f64,
    /// The hypothetical population `final_epsilon` was accounted for (`None`: the data's own
    /// clients). With it, ε describes a deployment of that size, not this run.
    pub hypothetical_population: Option<u64>,
    /// What ε protects against.
    pub guarantee: Guarantee,
    /// The neighbouring relation of `final_epsilon` (replace-one when a fixed cohort is
    /// accounted as sampling without replacement).
    pub neighbouring_relation: privfed_accounting::NeighbouringRelation,
    /// ε of one local report (local mechanisms).
    pub local_epsilon: Option<f64>,
    /// The central noise multiplier (central layers; calibrated if a target was given).
    pub noise_multiplier: Option<f64>,
    /// Why training stopped early.
    pub stopped: Option<Stopped>,
    /// The run's seed (64 hex digits): the run is reproducible from it.
    pub seed: String,
    /// SHA-256 of the final parameters (little-endian `f32`): equal hashes, equal models.
    pub model_sha256: String,
    /// The canary audit after the last round (runs with `[audit]`; see [`crate::audit`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditSummary>,
}

/// A training run over `data`.
#[derive(Debug)]
pub struct Trainer<'d> {
    cfg: TrainConfig,
    data: &'d FederatedData,
    model: Box<dyn Model>,
    plan: PrivacyPlan,
    seed: Seed,
    accountant: Accountant,
    threads: usize,
    state: State,
    /// The canaries and the initial parameters `θ_0` (runs with `[audit]`).
    canaries: Option<(Canaries, Vec<f32>)>,
    /// A planted bug for the audit's power tests.
    #[cfg(test)]
    pub(crate) canary_bug: Option<CanaryBug>,
}

/// A planted bug in the canaries' path (tests of the audit's power only).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CanaryBug {
    /// Canaries send their raw update: neither clipped nor randomized.
    SkipMechanism,
    /// Distributed DP: canaries are encoded with the clip raised to their norm and without their
    /// noise share (same scale, rotation and rounding), so their contribution is not bounded by
    /// the accounted sensitivity.
    UnclippedEncoding,
}

#[cfg(test)]
impl Trainer<'_> {
    /// The canary's contribution under [`CanaryBug`] (`None`: the honest path).
    fn planted_canary(
        &self,
        u: &[f64],
        rotation: [u8; 32],
        rng: &mut NoiseRng,
    ) -> Result<Option<Contribution>, FlError> {
        use privfed_distributed::encoder::SkellamEncoder;
        use privfed_distributed::params::{SkellamConfig, SkellamParams};
        Ok(match (self.canary_bug, &self.plan) {
            (Some(CanaryBug::SkipMechanism), _) => Some(Contribution::Update(u.to_vec())),
            (
                Some(CanaryBug::UnclippedEncoding),
                PrivacyPlan::Distributed { params, share, .. },
            ) => {
                let clip = l2(u).max(params.clip());
                let p = SkellamParams::new(SkellamConfig {
                    clip,
                    local_noise_stddev: 0.0,
                    ..*params.config()
                })?;
                let enc = SkellamEncoder::with_noise(p, rotation, *share)?;
                Some(Contribution::Encoded(enc.encode(u, rng)?.0))
            }
            _ => None,
        })
    }
}

/// Runs `f(i, worker)` for `i in 0..n` on up to `threads` threads, each with its own worker
/// value from `init`, and returns the results in index order.
fn parallel_map<W, T, I, F>(n: usize, threads: usize, init: I, f: F) -> Vec<T>
where
    T: Send,
    I: Fn() -> W + Sync,
    F: Fn(usize, &mut W) -> T + Sync,
{
    let threads = threads.clamp(1, n.max(1));
    if threads == 1 {
        let mut w = init();
        return (0..n).map(|i| f(i, &mut w)).collect();
    }
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut w = init();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let r = f(i, &mut w);
                    out.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                }
            });
        }
    });
    out.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every index is computed once"))
        .collect()
}

/// A worker thread's reusable buffers.
#[derive(Debug, Default)]
struct Worker {
    scratch: Scratch,
    buf: BatchBuf,
    grad: Vec<f32>,
    order: Vec<usize>,
}

/// Local training of one client from `global`: `epochs` passes of minibatch SGD over the
/// shuffled shard, each step `θ ← θ − η(∇L(θ) + μ(θ − θ_global))`. Returns the final parameters
/// and the mean minibatch loss.
fn local_train(
    model: &dyn Model,
    shard: &Shard,
    global: &[f32],
    cfg: &LocalTraining,
    rng: &mut NoiseRng,
    w: &mut Worker,
) -> Result<(Vec<f32>, f64), FlError> {
    let mut theta = global.to_vec();
    w.grad.resize(theta.len(), 0.0);
    let rows = shard.rows();
    let lr = cfg.learning_rate as f32;
    let mu = cfg.proximal as f32;
    let mut steps = 0usize;
    let mut loss_sum = 0.0;
    'epochs: for _ in 0..cfg.epochs {
        w.order.clear();
        w.order.extend(0..rows);
        for i in (1..rows).rev() {
            let j = rng.random_range(0..=i);
            w.order.swap(i, j);
        }
        for chunk in w.order.chunks(cfg.batch_size) {
            if cfg.max_steps.is_some_and(|m| steps >= m) {
                break 'epochs;
            }
            let batch = shard.gather(chunk, &mut w.buf);
            loss_sum += model.loss_grad(&theta, &batch, &mut w.grad, &mut w.scratch)?;
            if mu > 0.0 {
                for ((t, g), g0) in theta.iter_mut().zip(&w.grad).zip(global) {
                    *t -= lr * (g + mu * (*t - g0));
                }
            } else {
                for (t, g) in theta.iter_mut().zip(&w.grad) {
                    *t -= lr * g;
                }
            }
            steps += 1;
        }
    }
    Ok((theta, loss_sum / steps.max(1) as f64))
}

/// One client's local training, exactly as the training loop runs it: `cfg.epochs` passes of
/// minibatch SGD over `shard` shuffled by `rng`, from `global`, with the proximal term of
/// `cfg.proximal` and the step cap `cfg.max_steps`. Returns the new parameters and the mean
/// minibatch loss. Public for front ends that train one client outside a simulated run (the
/// Python bindings' `Model.local_sgd`, e.g. a Flower client), so local training has one home.
///
/// # Errors
/// Parameters of the wrong length, a shard that does not fit the model.
pub fn local_sgd(
    model: &dyn Model,
    shard: &Shard,
    global: &[f32],
    cfg: &LocalTraining,
    rng: &mut NoiseRng,
) -> Result<(Vec<f32>, f64), FlError> {
    local_train(model, shard, global, cfg, rng, &mut Worker::default())
}

/// Loss and accuracy of `params` on the first `max_rows` rows of `test`.
fn evaluate(
    model: &dyn Model,
    params: &[f32],
    test: &Shard,
    max_rows: Option<usize>,
    threads: usize,
) -> Result<Eval, FlError> {
    let rows = max_rows.map_or(test.rows(), |m| m.min(test.rows()));
    let chunks = rows.div_ceil(EVAL_CHUNK);
    let parts = parallel_map(chunks, threads, Scratch::default, |c, scratch| {
        let batch = test.range(c * EVAL_CHUNK, ((c + 1) * EVAL_CHUNK).min(rows));
        model.evaluate(params, &batch, scratch)
    });
    let mut total = Eval::default();
    for p in parts {
        total.merge(p?);
    }
    Ok(total)
}

fn l2(v: &[f64]) -> f64 {
    v.iter().map(|x| x * x).sum::<f64>().sqrt()
}

impl<'d> Trainer<'d> {
    /// A new run: checks the config against the data, builds the model, resolves and calibrates
    /// the privacy mechanisms, draws the initial parameters from the seed. `threads` only changes
    /// speed, never results.
    ///
    /// # Errors
    /// A bad config, a model that does not fit the data, mechanisms or targets that cannot work.
    pub fn new(cfg: TrainConfig, data: &'d FederatedData, threads: usize) -> Result<Self, FlError> {
        cfg.validate(data.clients.len())?;
        let model = cfg.model.build()?;
        let seed = cfg.seed.unwrap_or_else(Seed::from_os);
        let plan = PrivacyPlan::new(&cfg, model.num_params(), data.clients.len())?;
        let params = model.init(&mut stream(&seed, PURPOSE_INIT, 0, 0));
        let n = params.len();
        // One evaluation up front: a model that does not fit the data fails here, not mid-run.
        let probe = data.test.range(0, 1);
        model.evaluate(&params, &probe, &mut Scratch::default())?;
        let canaries = match &cfg.audit {
            None => None,
            Some(a) => {
                let clip_and_z = match &plan {
                    PrivacyPlan::Central { layer, .. } => {
                        Some((layer.clip_norm(), layer.noise_multiplier()))
                    }
                    _ => None,
                };
                // Under local and distributed DP a client's contribution is bounded by the clip
                // its mechanism applies: the canary norm defaults to it.
                let a = AuditConfig {
                    norm: a.norm.or(plan.client_clip()),
                    ..*a
                };
                let c = Canaries::from_seed(&a, n, clip_and_z, cfg.accounting.delta, &seed)?;
                Some((c, params.clone()))
            }
        };
        let opt = match cfg.server {
            ServerOptimizer::Sgd { .. } => OptState::Sgd {
                velocity: vec![0.0; n],
            },
            ServerOptimizer::Adam { .. } => OptState::Adam {
                m: vec![0.0; n],
                v: vec![0.0; n],
            },
        };
        Ok(Self {
            accountant: Accountant::for_config(&cfg),
            cfg,
            data,
            model,
            plan,
            seed,
            threads: threads.max(1),
            state: State {
                round: 0,
                params,
                opt,
                history: Vec::new(),
                stopped: None,
            },
            canaries,
            #[cfg(test)]
            canary_bug: None,
        })
    }

    /// Rounds completed.
    pub fn round(&self) -> u64 {
        self.state.round
    }

    /// The current model parameters.
    pub fn params(&self) -> &[f32] {
        &self.state.params
    }

    /// The metrics of every completed round.
    pub fn history(&self) -> &[RoundMetrics] {
        &self.state.history
    }

    /// The resolved privacy mechanisms.
    pub fn plan(&self) -> &PrivacyPlan {
        &self.plan
    }

    /// The events composed so far (one per private round).
    pub fn events(&self) -> Vec<DpEvent> {
        self.accountant.events()
    }

    /// The canaries' inclusion bits `S_i` (runs with `[audit]`).
    pub fn canary_inclusion(&self) -> Option<&[bool]> {
        self.canaries.as_ref().map(|(c, _)| c.included())
    }

    /// The run's config.
    pub fn config(&self) -> &TrainConfig {
        &self.cfg
    }

    /// Whether there is nothing left to run.
    pub fn is_finished(&self) -> bool {
        self.state.stopped.is_some() || self.state.round >= self.cfg.rounds
    }

    fn stop(&mut self, round: u64, kind: StopKind, reason: String) -> StepOutcome {
        self.state.stopped = Some(Stopped {
            round,
            kind,
            reason,
        });
        StepOutcome::Finished
    }

    fn cohort(&self, round: u64) -> Result<Vec<usize>, FlError> {
        let n = self.data.clients.len();
        let mut rng = stream(&self.seed, PURPOSE_SAMPLE, round, 0);
        Ok(match self.cfg.sampling {
            Sampling::Poisson { rate } => poisson_sample(n, rate, &mut rng)?,
            Sampling::Fixed { cohort } => {
                let mut idx: Vec<usize> = (0..n).collect();
                for i in 0..cohort {
                    let j = rng.random_range(i..n);
                    idx.swap(i, j);
                }
                idx.truncate(cohort);
                idx.sort_unstable();
                idx
            }
        })
    }

    fn dropouts(&self, round: u64, cohort: &[usize]) -> Vec<bool> {
        let p = match self.plan {
            PrivacyPlan::Distributed { dropout, .. } => dropout,
            _ => 0.0,
        };
        if p == 0.0 {
            return vec![false; cohort.len()];
        }
        let mut rng = stream(&self.seed, PURPOSE_DROPOUT, round, 0);
        cohort.iter().map(|_| rng.random_bool(p)).collect()
    }

    /// Runs the next round.
    ///
    /// # Errors
    /// A mechanism, the accountant or the secure-aggregation round failed; the state is left
    /// at the previous round.
    pub fn step(&mut self) -> Result<StepOutcome, FlError> {
        if self.is_finished() {
            return Ok(StepOutcome::Finished);
        }
        let t0 = Instant::now();
        let round = self.state.round + 1;
        let rate = self.cfg.accounted_rate(self.data.clients.len());
        let delta = self.cfg.accounting.delta;
        let budget = self.cfg.accounting.budget;
        if let (Some(b), Some(e)) = (budget, self.plan.planned_event(rate)?) {
            let next = self.accountant.epsilon_with(&e, delta)?;
            if next > b {
                return Ok(self.stop(
                    round,
                    StopKind::Budget,
                    format!("budget: round {round} would take ε to {next:.4} > {b}"),
                ));
            }
        }

        let cohort = self.cohort(round)?;
        let dropped = self.dropouts(round, &cohort);
        let rot = rotation_seed(&self.seed.0, round);
        let side = ClientSide::new(&self.plan, rot)?;
        let global = &self.state.params;
        let model = self.model.as_ref();
        let local = &self.cfg.local;
        let seed = &self.seed;
        let data = self.data;
        let t_clients = Instant::now();
        let results = parallel_map(cohort.len(), self.threads, Worker::default, |j, w| {
            let c = cohort[j];
            if dropped[j] {
                // A client that drops out before sending: its update is never used.
                return Ok(Some((None, Contribution::Encoded(Vec::new()), 0.0)));
            }
            let mut rng = stream(seed, PURPOSE_TRAIN, round, c as u64);
            let (theta, loss) = local_train(model, &data.clients[c], global, local, &mut rng, w)?;
            let update: Vec<f64> = theta
                .iter()
                .zip(global)
                .map(|(a, b)| f64::from(*a) - f64::from(*b))
                .collect();
            if !update.iter().all(|u| u.is_finite()) {
                // Local training blew up: no mechanism can privatize this (and none is asked to).
                return Ok(None);
            }
            let tp = Instant::now();
            let mut prng = stream(seed, PURPOSE_PRIVATIZE, round, c as u64);
            let contribution = side.contribute(update, &mut prng)?;
            Ok::<_, FlError>(Some((Some(loss), contribution, tp.elapsed().as_secs_f64())))
        });
        let clients_s = t_clients.elapsed().as_secs_f64();
        let mut contributions = Vec::with_capacity(results.len());
        let mut losses = Vec::new();
        let mut privatize_cpu = 0.0;
        let mut diverged = 0usize;
        for r in results {
            match r? {
                Some((loss, c, s)) => {
                    losses.extend(loss);
                    contributions.push(c);
                    privatize_cpu += s;
                }
                None => diverged += 1,
            }
        }
        if diverged > 0 {
            return Ok(self.stop(
                round,
                StopKind::Diverged,
                format!(
                    "diverged: {diverged} of {} clients' local updates in round {round} were not \
                     finite (local training from the round's global model blew up); the round \
                     was discarded before any privatization, release or accounting",
                    cohort.len()
                ),
            ));
        }

        let t_agg = Instant::now();
        let dim = self.model.num_params();
        let expected = self.cfg.expected_cohort(self.data.clients.len());
        let mut srng = stream(&self.seed, PURPOSE_SERVER, round, 0);
        // The included canaries go in after the real clients, as clients that never drop out,
        // through the clients' own mechanism: a plain update without privacy and under central
        // DP, the local randomizer's report, or the distributed encoding with its noise share.
        let mut dropped = dropped;
        let mut canary_count = 0;
        let mut canary_norm = None;
        if let Some((c, _)) = &self.canaries {
            let largest = contributions
                .iter()
                .filter_map(|u| match u {
                    Contribution::Update(u) => Some(l2(u)),
                    _ => None,
                })
                .reduce(f64::max);
            let previous = self
                .state
                .history
                .iter()
                .rev()
                .find_map(|m| m.audit.map(|a| a.norm));
            let norm = c.norm_for_round(largest, previous);
            canary_norm = Some(norm);
            for (i, u) in c.updates(norm).into_iter().enumerate() {
                let mut crng = stream(&self.seed, PURPOSE_CANARY_PRIVATIZE, round, i as u64);
                #[cfg(test)]
                let planted = self.planted_canary(&u, rot, &mut crng)?;
                #[cfg(not(test))]
                let planted = None;
                contributions.push(match planted {
                    Some(c) => c,
                    None => side.contribute(u, &mut crng)?,
                });
                dropped.push(false);
                canary_count += 1;
            }
        }
        let mut agg = aggregate(
            &self.plan,
            dim,
            expected,
            contributions,
            &dropped,
            rot,
            &mut srng,
        )?;
        // Canaries are extra clients: not counted as contributors, not accounted.
        agg.contributors = agg.contributors.saturating_sub(canary_count);
        let aggregate_s = t_agg.elapsed().as_secs_f64();

        let t_acc = Instant::now();
        let event = self.plan.round_event(rate, agg.contributors)?;
        if let (Some(b), Some(e)) = (budget, &event) {
            let next = self.accountant.epsilon_with(e, delta)?;
            if next > b {
                return Ok(self.stop(
                    round,
                    StopKind::Budget,
                    format!(
                        "budget: round {round} had {} contributors (fewer than planned) and would \
                         take ε to {next:.4} > {b}; its aggregate was discarded unreleased",
                        agg.contributors
                    ),
                ));
            }
        }
        if let Some(e) = &event {
            self.accountant.compose(e)?;
        }
        let epsilon = match self.plan {
            PrivacyPlan::None => None,
            _ => Some(self.accountant.epsilon(delta)?),
        };
        let account_s = t_acc.elapsed().as_secs_f64();

        let update_norm = agg.mean.as_deref().map_or(0.0, l2);
        if let Some(mean) = &agg.mean {
            self.apply(mean);
        }
        // The round was released and accounted; if the server's step overflowed the model, it
        // is recorded and training ends after it.
        let overflowed = !self.state.params.iter().all(|p| p.is_finite());
        let audit = match (&self.canaries, canary_norm) {
            (Some((c, init)), Some(norm)) if !overflowed => {
                let delta: Vec<f64> = self
                    .state
                    .params
                    .iter()
                    .zip(init)
                    .map(|(a, b)| f64::from(*a) - f64::from(*b))
                    .collect();
                Some(c.audit(&delta, norm, round)?)
            }
            _ => None,
        };

        let t_eval = Instant::now();
        let (accuracy, test_loss) = if !overflowed
            && (round.is_multiple_of(self.cfg.eval.every) || round == self.cfg.rounds)
        {
            let e = evaluate(
                self.model.as_ref(),
                &self.state.params,
                &self.data.test,
                self.cfg.eval.max_rows,
                self.threads,
            )?;
            (Some(e.accuracy()), Some(e.loss()))
        } else {
            (None, None)
        };
        let eval_s = t_eval.elapsed().as_secs_f64();

        let metrics = RoundMetrics {
            round,
            sampled: cohort.len(),
            contributors: agg.contributors,
            train_loss: (!losses.is_empty())
                .then(|| losses.iter().sum::<f64>() / losses.len() as f64),
            accuracy,
            test_loss,
            epsilon,
            update_norm,
            wrap_suspected: agg.wrap_suspected,
            aborted: agg.aborted,
            audit,
            seconds: PhaseSeconds {
                clients: clients_s,
                privatize_cpu,
                aggregate: aggregate_s,
                account: account_s,
                eval: eval_s,
                total: t0.elapsed().as_secs_f64(),
            },
        };
        self.state.round = round;
        self.state.history.push(metrics.clone());
        if overflowed {
            self.state.stopped = Some(Stopped {
                round: round + 1,
                kind: StopKind::Diverged,
                reason: format!(
                    "diverged: the server's step in round {round} left the global model's \
                     parameters not finite (the round was released and accounted)"
                ),
            });
        }
        Ok(StepOutcome::Round(Box::new(metrics)))
    }

    /// One server-optimizer step with pseudo-gradient `g = −mean`.
    fn apply(&mut self, mean: &[f64]) {
        let p = &mut self.state.params;
        match (&mut self.state.opt, self.cfg.server) {
            (
                OptState::Sgd { velocity },
                ServerOptimizer::Sgd {
                    learning_rate,
                    momentum,
                },
            ) => {
                let (lr, mu) = (learning_rate as f32, momentum as f32);
                for ((w, v), d) in p.iter_mut().zip(velocity.iter_mut()).zip(mean) {
                    *v = mu * *v - *d as f32;
                    *w -= lr * *v;
                }
            }
            (
                OptState::Adam { m, v },
                ServerOptimizer::Adam {
                    learning_rate,
                    beta1,
                    beta2,
                    epsilon,
                },
            ) => {
                let t = (self.state.round + 1) as i32;
                let c1 = 1.0 - beta1.powi(t);
                let c2 = 1.0 - beta2.powi(t);
                let (b1, b2) = (beta1 as f32, beta2 as f32);
                for (((w, m), v), d) in p.iter_mut().zip(m.iter_mut()).zip(v.iter_mut()).zip(mean) {
                    let g = -*d as f32;
                    *m = b1 * *m + (1.0 - b1) * g;
                    *v = b2 * *v + (1.0 - b2) * g * g;
                    let mh = f64::from(*m) / c1;
                    let vh = f64::from(*v) / c2;
                    *w -= (learning_rate * mh / (vh.sqrt() + epsilon)) as f32;
                }
            }
            // The state is built from the same config, so the kinds always agree.
            _ => {}
        }
    }

    /// Runs every remaining round, calling `on_round` after each (progress, checkpoints).
    ///
    /// # Errors
    /// From [`Trainer::step`] or `on_round`.
    pub fn run(
        &mut self,
        mut on_round: impl FnMut(&Self, &RoundMetrics) -> Result<(), FlError>,
    ) -> Result<Summary, FlError> {
        while let StepOutcome::Round(m) = self.step()? {
            on_round(self, &m)?;
        }
        Ok(self.summary())
    }

    /// The run's summary so far.
    pub fn summary(&self) -> Summary {
        let last_eval = self
            .state
            .history
            .iter()
            .rev()
            .find(|m| m.accuracy.is_some());
        Summary {
            data: self.data.name.clone(),
            clients: self.data.clients.len(),
            params: self.model.num_params(),
            rounds_completed: self.state.round,
            rounds_configured: self.cfg.rounds,
            final_accuracy: last_eval.and_then(|m| m.accuracy),
            final_test_loss: last_eval.and_then(|m| m.test_loss),
            final_epsilon: match self.plan {
                PrivacyPlan::None => None,
                // Nothing released yet: ε = 0.
                _ => Some(
                    self.state
                        .history
                        .last()
                        .and_then(|m| m.epsilon)
                        .unwrap_or(0.0),
                ),
            },
            delta: self.cfg.accounting.delta,
            hypothetical_population: self.cfg.accounting.hypothetical_population,
            guarantee: self.plan.guarantee(),
            neighbouring_relation: self.cfg.neighbouring_relation(),
            local_epsilon: self.plan.local_epsilon(),
            noise_multiplier: self.plan.noise_multiplier(),
            stopped: self.state.stopped.clone(),
            seed: self.seed.to_hex(),
            model_sha256: {
                let mut h = Sha256::new();
                for p in &self.state.params {
                    h.update(p.to_le_bytes());
                }
                h.finalize().iter().map(|b| format!("{b:02x}")).collect()
            },
            audit: self.canaries.as_ref().map(|(c, _)| {
                let last = self
                    .state
                    .history
                    .iter()
                    .rev()
                    .find_map(|m| m.audit.as_ref());
                c.summary(last)
            }),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Checkpoints.

/// First bytes of a checkpoint file.
pub const CHECKPOINT_MAGIC: &[u8; 16] = b"privfed-fl-ckpt1";

#[derive(Serialize, Deserialize)]
struct Header {
    config: serde_json::Value,
    data: String,
    clients: usize,
    seed: Seed,
    round: u64,
    optimizer: String,
    events: Vec<DpEvent>,
    history: Vec<RoundMetrics>,
    stopped: Option<Stopped>,
    arrays: Vec<usize>,
}

fn ckpt_err(reason: impl Into<String>) -> FlError {
    FlError::Checkpoint(reason.into())
}

fn config_identity(cfg: &TrainConfig) -> Result<serde_json::Value, FlError> {
    // The seed is compared separately (a config without one resumes with the recorded seed).
    let mut c = cfg.clone();
    c.seed = None;
    serde_json::to_value(&c).map_err(|e| ckpt_err(e.to_string()))
}

impl<'d> Trainer<'d> {
    /// The run's state as bytes: magic, a JSON header (config, seed, round, events, metrics),
    /// the parameter and optimizer arrays as little-endian `f32`, and a SHA-256 of everything
    /// before it. Contains the seed, from which every noise draw can be recomputed: keep
    /// checkpoints as private as the clients' data.
    ///
    /// # Errors
    /// Serialization failures (none expected).
    pub fn checkpoint(&self) -> Result<Vec<u8>, FlError> {
        let arrays: Vec<&[f32]> = match &self.state.opt {
            OptState::Sgd { velocity } => vec![&self.state.params, velocity],
            OptState::Adam { m, v } => vec![&self.state.params, m, v],
        };
        let header = Header {
            config: config_identity(&self.cfg)?,
            data: self.data.name.clone(),
            clients: self.data.clients.len(),
            seed: self.seed,
            round: self.state.round,
            optimizer: match self.state.opt {
                OptState::Sgd { .. } => "sgd".into(),
                OptState::Adam { .. } => "adam".into(),
            },
            events: self.accountant.events(),
            history: self.state.history.clone(),
            stopped: self.state.stopped.clone(),
            arrays: arrays.iter().map(|a| a.len()).collect(),
        };
        let json = serde_json::to_vec(&header).map_err(|e| ckpt_err(e.to_string()))?;
        let mut out =
            Vec::with_capacity(64 + json.len() + arrays.iter().map(|a| 4 * a.len()).sum::<usize>());
        out.extend_from_slice(CHECKPOINT_MAGIC);
        out.extend_from_slice(&(json.len() as u64).to_le_bytes());
        out.extend_from_slice(&json);
        for a in arrays {
            for x in a {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        let digest = Sha256::digest(&out);
        out.extend_from_slice(&digest);
        Ok(out)
    }

    /// Resumes a run from [`Trainer::checkpoint`]'s bytes. The config must be the one the
    /// checkpoint was written with (its seed may be omitted) and the data the same.
    ///
    /// # Errors
    /// A damaged checkpoint, or one from another config or data set.
    pub fn resume(
        mut cfg: TrainConfig,
        data: &'d FederatedData,
        threads: usize,
        bytes: &[u8],
    ) -> Result<Self, FlError> {
        let (header, mut rest) = read_header(bytes)?;
        if header.config != config_identity(&cfg)? {
            return Err(ckpt_err(
                "it was written by a different config (change the config back, or start a new \
                 run without the checkpoint)",
            ));
        }
        if let Some(s) = cfg.seed
            && s != header.seed
        {
            return Err(ckpt_err("it was written with a different seed"));
        }
        if header.data != data.name || header.clients != data.clients.len() {
            return Err(ckpt_err(format!(
                "it was written for data {:?} with {} clients, not {:?} with {}",
                header.data,
                header.clients,
                data.name,
                data.clients.len()
            )));
        }
        cfg.seed = Some(header.seed);
        let mut t = Trainer::new(cfg, data, threads)?;
        let mut arrays = Vec::new();
        for &n in &header.arrays {
            if n != t.state.params.len() || rest.len() < 4 * n {
                return Err(ckpt_err("arrays do not match the model's size"));
            }
            let (a, r) = rest.split_at(4 * n);
            arrays.push(
                a.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect::<Vec<f32>>(),
            );
            rest = r;
        }
        if !rest.is_empty() {
            return Err(ckpt_err("trailing bytes after the arrays"));
        }
        let mut it = arrays.into_iter();
        t.state.params = it.next().ok_or_else(|| ckpt_err("no parameters"))?;
        t.state.opt = match (header.optimizer.as_str(), &t.state.opt) {
            ("sgd", OptState::Sgd { .. }) => OptState::Sgd {
                velocity: it.next().ok_or_else(|| ckpt_err("no optimizer state"))?,
            },
            ("adam", OptState::Adam { .. }) => OptState::Adam {
                m: it.next().ok_or_else(|| ckpt_err("no optimizer state"))?,
                v: it.next().ok_or_else(|| ckpt_err("no optimizer state"))?,
            },
            _ => return Err(ckpt_err("optimizer state does not match the config")),
        };
        for e in &header.events {
            t.accountant.compose(e)?;
        }
        t.state.round = header.round;
        t.state.history = header.history;
        t.state.stopped = header.stopped;
        Ok(t)
    }
}

/// The seed recorded in a checkpoint (so a run whose config has no seed can load its data with
/// the same partition before resuming).
///
/// # Errors
/// A damaged or foreign file.
pub fn checkpoint_seed(bytes: &[u8]) -> Result<Seed, FlError> {
    Ok(read_header(bytes)?.0.seed)
}

fn read_header(bytes: &[u8]) -> Result<(Header, &[u8]), FlError> {
    if bytes.len() < 16 + 8 + 32 || &bytes[..16] != CHECKPOINT_MAGIC {
        return Err(ckpt_err("not a privfed training checkpoint"));
    }
    let (body, digest) = bytes.split_at(bytes.len() - 32);
    if Sha256::digest(body).as_slice() != digest {
        return Err(ckpt_err(
            "checksum mismatch: the file is damaged or truncated",
        ));
    }
    let len = u64::from_le_bytes(body[16..24].try_into().expect("8 bytes")) as usize;
    let json = body
        .get(24..24usize.saturating_add(len))
        .ok_or_else(|| ckpt_err("truncated header"))?;
    let header: Header =
        serde_json::from_slice(json).map_err(|e| ckpt_err(format!("header: {e}")))?;
    Ok((header, &body[24 + len..]))
}

/// Writes `bytes` to `path` atomically: a temporary file beside it, fsync, rename, fsync of the
/// directory. A crash leaves either the old checkpoint or the new one, never a mix.
///
/// # Errors
/// I/O errors, naming the path.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<(), FlError> {
    use std::io::Write;
    let io = |e: std::io::Error| ckpt_err(format!("{}: {e}", path.display()));
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(bytes).map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    std::fs::rename(&tmp, path).map_err(io)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io)?;
    Ok(())
}

/// The metrics as CSV (one row per round; empty cells where a round did not evaluate), written
/// by the one CSV writer, [`privfed_plot::csv::CsvWriter`].
pub fn history_csv(rows: &[RoundMetrics]) -> String {
    let mut csv = CsvWriter::with_header(
        "round,sampled,contributors,train_loss,accuracy,test_loss,epsilon,update_norm,\
         wrap_suspected,aborted,seconds_clients,seconds_privatize_cpu,seconds_aggregate,seconds_account,\
         seconds_eval,seconds_total",
    );
    for m in rows {
        let p = &m.seconds;
        csv.row(&[
            &m.round,
            &m.sampled,
            &m.contributors,
            &opt(m.train_loss),
            &opt(m.accuracy),
            &opt(m.test_loss),
            &opt(m.epsilon),
            &m.update_norm,
            &m.wrap_suspected,
            &m.aborted,
            &p.clients,
            &p.privatize_cpu,
            &p.aggregate,
            &p.account,
            &p.eval,
            &p.total,
        ]);
    }
    csv.into_string()
}
