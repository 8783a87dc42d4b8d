//! The federated-learning simulator (`privfed_fl`; `docs/FEDERATED_LEARNING.md`) and its
//! models (`privfed_learn::nn`) — re-exported by `privfed.fl`.
//!
//! * `train(config, …)` (`fl_train` here): one run as `privfed fl train` does it (checkpoints it resumes from,
//!   outputs), returning the summary of `--json`;
//! * `Trainer`: the same run a round at a time, with its parameters, history, events and
//!   checkpoints;
//! * `Model`: one of the simulator's models on its own (init, loss and gradient, evaluation,
//!   local SGD), so a device — e.g. a Flower client — trains with privfed's models without
//!   torch.
//!
//! A config is a run's TOML (text or a file path) or the same as a dict. Training runs without
//! the GIL; the per-round progress line is written to stderr from Rust. Between rounds the GIL
//! is taken back briefly, so Ctrl-C stops a run (after its checkpoint is written).

use std::path::{Path, PathBuf};

use crate::arrays::read_floats;
use crate::errors::{Kind, PyResultExt, error, invalid};
use crate::intarrays::read_u32;
use crate::json::{from_python, from_value, to_python};
use crate::rng::rng_from_seed;
use numpy::PyArray1;
use privfed_fl::config::{LocalTraining, TrainConfig};
use privfed_fl::data::Shard;
use privfed_fl::datasets::default_data_dir;
use privfed_fl::run::{Run, RunConfig, RunOptions};
use privfed_fl::spec::DataSpec;
use privfed_fl::train::{StopKind, local_sgd, write_atomically};
use privfed_fl::{FlError, RoundMetrics, StepOutcome, Trainer as TrainerRs};
use privfed_learn::nn::{Batch, Inputs, Model as ModelRs, ModelSpec, Scratch};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

/// The dependent of [`TrainerCell`]: a trainer borrowing its run's data.
type Dep<'a> = TrainerRs<'a>;

self_cell::self_cell!(
    /// A run and its trainer (the library's `Trainer` borrows the data the `Run` owns).
    struct TrainerCell {
        owner: Run,
        #[covariant]
        dependent: Dep,
    }
);

/// Worker threads: every core for `None`; 0 is refused.
fn worker_threads(threads: Option<usize>) -> PyResult<usize> {
    match threads {
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
        Some(0) => Err(invalid("threads", "must be at least 1 (None: every core)")),
        Some(n) => Ok(n),
    }
}

fn config_error(e: impl std::fmt::Display) -> PyErr {
    error(Kind::ConfigError, e.to_string())
}

/// A run config from TOML text, a TOML file (`str` or `os.PathLike`), or a dict of the same
/// form. Returns it and the file it came from, if any.
fn read_config(obj: &Bound<'_, PyAny>) -> PyResult<(RunConfig, Option<PathBuf>)> {
    let py = obj.py();
    if obj.is_instance_of::<PyDict>() {
        let mut v: serde_json::Value = from_python(obj, "config", Kind::ConfigError)?;
        let map = v
            .as_object_mut()
            .ok_or_else(|| config_error("config: expected a table"))?;
        let data = map
            .remove("data")
            .ok_or_else(|| config_error("config: missing the [data] table"))?;
        let data: DataSpec = from_value(data, "config [data]", Kind::ConfigError)?;
        let train: TrainConfig = from_value(v, "config", Kind::ConfigError)?;
        return Ok((RunConfig { data, train }, None));
    }
    let is_path = py
        .import("os")?
        .getattr("PathLike")
        .and_then(|c| obj.is_instance(&c))?;
    let text: String = if is_path {
        let p: PathBuf = obj.extract()?;
        return Ok((RunConfig::read(&p).py()?, Some(p)));
    } else {
        obj.extract().map_err(|_| {
            invalid(
                "config",
                "expected TOML text, a path to a TOML file, or a dict",
            )
        })?
    };
    let looks_like_toml = text.contains('=') || text.contains('\n') || text.contains('[');
    let p = PathBuf::from(&text);
    if !looks_like_toml || p.is_file() {
        return Ok((RunConfig::read(&p).py()?, Some(p)));
    }
    Ok((RunConfig::from_toml(&text).py()?, None))
}

fn data_dir_of(data_dir: Option<PathBuf>) -> PathBuf {
    data_dir.unwrap_or_else(default_data_dir)
}

/// Opens `run` (data loaded, checkpoint read) and builds its trainer, without the GIL.
fn open_cell(
    py: Python<'_>,
    config: RunConfig,
    options: RunOptions,
    checkpoint: Option<Vec<u8>>,
) -> PyResult<TrainerCell> {
    py.detach(|| {
        let run = match checkpoint {
            Some(bytes) => Run::resume_from(config, options, bytes)?,
            None => Run::open(config, options)?,
        };
        TrainerCell::try_new(run, |r| r.trainer())
    })
    .py()
}

/// The per-round progress line (stderr, no GIL).
fn progress_line(m: &RoundMetrics, rounds: u64) {
    let mut s = format!("round {}/{rounds}", m.round);
    if let Some(a) = m.accuracy {
        s.push_str(&format!("  accuracy {a:.4}"));
    }
    if let Some(e) = m.epsilon {
        s.push_str(&format!("  ε {e:.3}"));
    }
    if m.aborted {
        s.push_str("  (secure aggregation aborted)");
    }
    s.push_str(&format!("  {:.2} s", m.seconds.total));
    eprintln!("{s}");
}

/// Runs up to `limit` rounds: each without the GIL (the run's own checkpoint, the extra
/// `checkpoint` file and the progress line included), the GIL taken back between rounds to check
/// for Ctrl-C. Returns the rounds run.
fn run_rounds(
    py: Python<'_>,
    cell: &mut TrainerCell,
    limit: u64,
    checkpoint: Option<&Path>,
    progress: bool,
) -> PyResult<u64> {
    let mut done = 0u64;
    while done < limit {
        let outcome = py
            .detach(|| {
                cell.with_dependent_mut(|run, t| {
                    let out = t.step()?;
                    if let StepOutcome::Round(m) = &out {
                        run.round_done(t)?;
                        if let Some(p) = checkpoint {
                            write_atomically(p, &t.checkpoint()?)?;
                        }
                        if progress {
                            progress_line(m.as_ref(), t.config().rounds);
                        }
                    }
                    Ok::<_, FlError>(out)
                })
            })
            .py()?;
        match outcome {
            StepOutcome::Round(_) => done += 1,
            StepOutcome::Finished => break,
        }
        py.check_signals()?;
    }
    Ok(done)
}

/// Trains one run as `privfed fl train` does and returns its report (the keys of `--json`:
/// the summary — `final_accuracy`, `final_epsilon`, `delta`, `guarantee`, `stopped`, `seed`,
/// `model_sha256`, … — with `rounds` (one dict per round), `seconds`, `threads`, and `out`).
///
/// `config`: TOML text, a path to a TOML file, or a dict of the same form. `data_dir`: the data
/// sets (default `$PRIVFED_DATA_DIR` or `../shared/data`). With `out_dir` the run writes
/// `metrics.csv`, `summary.json`, `run.svg`, `run.png` and `checkpoint.bin` there; with
/// `checkpoint` (default `out_dir/checkpoint.bin`) a checkpoint is written after every round and
/// an existing one is resumed from (`fresh=True` starts over). `max_rounds` stops this call
/// early (the run stays resumable). A budget stop ends the run normally, with `stopped` set.
#[pyfunction]
#[pyo3(name = "train", signature = (config, *, data_dir=None, out_dir=None, checkpoint=None, fresh=false, max_rounds=None, threads=None, progress=true))]
#[allow(clippy::too_many_arguments)]
fn fl_train<'py>(
    py: Python<'py>,
    config: &Bound<'py, PyAny>,
    data_dir: Option<PathBuf>,
    out_dir: Option<PathBuf>,
    checkpoint: Option<PathBuf>,
    fresh: bool,
    max_rounds: Option<u64>,
    threads: Option<usize>,
    progress: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let (run, config_file) = read_config(config)?;
    let options = RunOptions {
        data_dir: data_dir_of(data_dir),
        out_dir,
        checkpoint,
        fresh,
        threads: worker_threads(threads)?,
        config_file,
    };
    let mut cell = open_cell(py, run, options, None)?;
    if progress && cell.borrow_owner().resumes() {
        eprintln!("resuming from round {}", cell.borrow_dependent().round());
    }
    run_rounds(
        py,
        &mut cell,
        max_rounds.unwrap_or(u64::MAX),
        None,
        progress,
    )?;
    let report = py
        .detach(|| cell.borrow_owner().finish(cell.borrow_dependent()))
        .py()?;
    to_python(py, &report)
}

/// A training run a round at a time (`privfed_fl::Trainer` over data it owns): the data
/// is loaded (and partitioned from the run's seed), the model built, the privacy mechanisms
/// resolved and calibrated when it is created. Bit-identical for any `threads`.
#[pyclass(module = "privfed.fl", name = "Trainer")]
pub struct Trainer {
    cell: TrainerCell,
}

impl Trainer {
    fn t(&self) -> &TrainerRs<'_> {
        self.cell.borrow_dependent()
    }
}

fn read_checkpoint(obj: &Bound<'_, PyAny>) -> PyResult<(Vec<u8>, Option<PathBuf>)> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok((b.as_bytes().to_vec(), None));
    }
    let p: PathBuf = obj
        .extract()
        .map_err(|_| invalid("checkpoint", "expected a path or the checkpoint's bytes"))?;
    let bytes = std::fs::read(&p)
        .map_err(|e| error(Kind::ConfigError, format!("reading {}: {e}", p.display())))?;
    Ok((bytes, Some(p)))
}

#[pymethods]
impl Trainer {
    #[new]
    #[pyo3(signature = (config, *, data_dir=None, threads=None))]
    fn new(
        py: Python<'_>,
        config: &Bound<'_, PyAny>,
        data_dir: Option<PathBuf>,
        threads: Option<usize>,
    ) -> PyResult<Self> {
        let (run, _) = read_config(config)?;
        let options = RunOptions {
            data_dir: data_dir_of(data_dir),
            threads: worker_threads(threads)?,
            ..RunOptions::default()
        };
        Ok(Self {
            cell: open_cell(py, run, options, None)?,
        })
    }

    /// Resumes a run from a checkpoint (a path, or the bytes of `checkpoint()`) with the
    /// config it was written with (its seed may be omitted: the checkpoint's is used). The run
    /// goes on exactly as an uninterrupted one would.
    #[staticmethod]
    #[pyo3(signature = (checkpoint, config, *, data_dir=None, threads=None))]
    fn resume(
        py: Python<'_>,
        checkpoint: &Bound<'_, PyAny>,
        config: &Bound<'_, PyAny>,
        data_dir: Option<PathBuf>,
        threads: Option<usize>,
    ) -> PyResult<Self> {
        let (bytes, _) = read_checkpoint(checkpoint)?;
        let (run, _) = read_config(config)?;
        let options = RunOptions {
            data_dir: data_dir_of(data_dir),
            threads: worker_threads(threads)?,
            ..RunOptions::default()
        };
        Ok(Self {
            cell: open_cell(py, run, options, Some(bytes))?,
        })
    }

    /// Runs the next round (without the GIL) and returns its record (`round`, `sampled`,
    /// `contributors`, `train_loss`, `accuracy`, `test_loss`, `epsilon` after the round,
    /// `update_norm`, `wrap_suspected`, `aborted`, `seconds`), or `None` when every round has
    /// run. Raises `PrivacyBudgetExceeded` when the configured budget stops training instead
    /// (the round is not run or its aggregate is discarded; the trainer stays usable and its
    /// summary says why), and `TrainingDiverged` when a client's local update or the server's
    /// step stopped being finite (the summary's `stopped` has `kind = "diverged"`).
    fn step<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.t().is_finished() {
            return Ok(None);
        }
        let outcome = py
            .detach(|| self.cell.with_dependent_mut(|_, t| t.step()))
            .py()?;
        match outcome {
            StepOutcome::Round(m) => Ok(Some(to_python(py, &*m)?)),
            StepOutcome::Finished => match self.t().summary().stopped {
                Some(s) => Err(error(
                    match s.kind {
                        StopKind::Budget => Kind::PrivacyBudgetExceeded,
                        StopKind::Diverged => Kind::TrainingDiverged,
                    },
                    s.reason,
                )),
                None => Ok(None),
            },
        }
    }

    /// Runs up to `rounds` more rounds (all remaining for `None`) and returns the summary. With
    /// `progress=True` a line per round goes to stderr; with `checkpoint` (a path) a checkpoint
    /// is written after every round. A budget stop ends the run normally (`summary()["stopped"]`).
    #[pyo3(signature = (rounds=None, *, progress=false, checkpoint=None))]
    fn run<'py>(
        &mut self,
        py: Python<'py>,
        rounds: Option<u64>,
        progress: bool,
        checkpoint: Option<PathBuf>,
    ) -> PyResult<Bound<'py, PyAny>> {
        run_rounds(
            py,
            &mut self.cell,
            rounds.unwrap_or(u64::MAX),
            checkpoint.as_deref(),
            progress,
        )?;
        to_python(py, &self.t().summary())
    }

    /// The run's summary so far (the keys of `privfed fl train --json` without `rounds`).
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.t().summary())
    }

    /// The run's state as bytes (config, seed, round, events, history, parameters, optimizer
    /// state, checksum). It holds the seed, from which every noise draw can be recomputed: keep
    /// it as private as the clients' data.
    fn checkpoint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let b = self.t().checkpoint().py()?;
        Ok(PyBytes::new(py, &b))
    }

    /// Writes `checkpoint()` to `path` atomically (a crash leaves the old file or the new one).
    fn save_checkpoint(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let t = self.t();
        py.detach(|| write_atomically(&path, &t.checkpoint()?)).py()
    }

    /// The current model parameters (`float32`, a copy).
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f32>> {
        PyArray1::from_slice(py, self.t().params())
    }
    /// Rounds completed.
    #[getter]
    fn round(&self) -> u64 {
        self.t().round()
    }
    /// Rounds configured.
    #[getter]
    fn rounds(&self) -> u64 {
        self.t().config().rounds
    }
    /// Whether there is nothing left to run (all rounds, or a budget stop).
    #[getter]
    fn finished(&self) -> bool {
        self.t().is_finished()
    }
    /// ε(δ) after the last round (`None` for runs without privacy; 0 before the first).
    #[getter]
    fn epsilon(&self) -> Option<f64> {
        self.t().summary().final_epsilon
    }
    /// The record of every completed round (dicts, as `step()` returns them).
    #[getter]
    fn history<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.t().history())
    }
    /// The privacy events composed so far, one per private round (`privfed.accounting`
    /// events): compose them into any accountant.
    #[getter]
    fn events<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .t()
            .events()
            .iter()
            .map(|e| crate::accounting::event_to_py(py, e))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }
    /// The resolved training config (a dict; the seed as 64 hex digits).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, self.t().config())
    }
    /// Number of clients in the data.
    #[getter]
    fn clients(&self) -> usize {
        self.cell.borrow_owner().data().clients.len()
    }
    fn __repr__(&self) -> String {
        let t = self.t();
        format!(
            "<Trainer data={:?} round={}/{}>",
            self.cell.borrow_owner().data().name,
            t.round(),
            t.config().rounds
        )
    }
}

/// One of the simulator's models on its own (`privfed_learn::nn`), over flat `float32`
/// parameters: `spec` is the `[model]` table of a run config as a dict —
/// `{"kind": "softmax", "features": 784, "classes": 10}`, `"mlp"` (`hidden`), `"cnn"`
/// (`input`, `conv`, `hidden`), `"lenet5"`, `"char_gru"` (`vocab`, `embed`, `hidden`).
/// Dense models take `x` of shape `(n, features)` (CNNs also `(n, c, h, w)`), any float dtype,
/// and integer class labels `y` of shape `(n,)`; `char_gru` takes integer tokens `x` and
/// next-token targets `y`, both `(n, len)`.
#[pyclass(frozen, module = "privfed.fl", name = "Model")]
pub struct Model {
    spec: ModelSpec,
    inner: Box<dyn ModelRs>,
}

/// Owned batch data.
enum BatchData {
    Dense {
        x: Vec<f32>,
        features: usize,
        y: Vec<u32>,
    },
    Tokens {
        x: Vec<u32>,
        len: usize,
        y: Vec<u32>,
    },
}

impl BatchData {
    fn batch(&self) -> Batch<'_> {
        match self {
            BatchData::Dense { x, features, y } => Batch {
                inputs: Inputs::Dense {
                    x,
                    features: *features,
                },
                targets: y,
            },
            BatchData::Tokens { x, len, y } => Batch {
                inputs: Inputs::Tokens { x, len: *len },
                targets: y,
            },
        }
    }

    fn rows(&self) -> usize {
        self.batch().rows()
    }
}

impl Model {
    fn tokens(&self) -> bool {
        matches!(self.spec, ModelSpec::CharGru { .. })
    }

    /// Classes of a dense model's labels (vocabulary of a token model).
    fn classes(&self) -> usize {
        match &self.spec {
            ModelSpec::Softmax { classes, .. }
            | ModelSpec::Mlp { classes, .. }
            | ModelSpec::Cnn { classes, .. } => *classes,
            ModelSpec::Lenet5 {} => 10,
            ModelSpec::CharGru { vocab, .. } => *vocab,
        }
    }

    fn data(&self, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<BatchData> {
        let labels = read_u32(y, "y")?;
        if self.tokens() {
            let t = read_u32(x, "x")?;
            let [_, len] = t.dims.as_slice() else {
                return Err(error(
                    Kind::InvalidInput,
                    format!("x must be tokens of shape (n, len); got shape {:?}", t.dims),
                ));
            };
            if labels.dims != t.dims {
                return Err(error(
                    Kind::InvalidInput,
                    format!(
                        "y must have x's shape {:?} (one next token per position); got {:?}",
                        t.dims, labels.dims
                    ),
                ));
            }
            return Ok(BatchData::Tokens {
                x: t.data,
                len: *len,
                y: labels.data,
            });
        }
        let f = read_floats(x, "x")?;
        let (rows, features) = match f.dims.as_slice() {
            [] | [_] => {
                return Err(error(
                    Kind::InvalidInput,
                    format!("x must have shape (n, features); got shape {:?}", f.dims),
                ));
            }
            [n, rest @ ..] => (*n, rest.iter().product::<usize>()),
        };
        if labels.dims.as_slice() != [rows] {
            return Err(error(
                Kind::InvalidInput,
                format!(
                    "y must have shape ({rows},), one label per row of x; got {:?}",
                    labels.dims
                ),
            ));
        }
        Ok(BatchData::Dense {
            x: f.data.iter().map(|&v| v as f32).collect(),
            features,
            y: labels.data,
        })
    }

    fn params(&self, params: &Bound<'_, PyAny>) -> PyResult<Vec<f32>> {
        let p = read_floats(params, "params")?;
        let n = self.inner.num_params();
        if p.dims.as_slice() != [n] {
            return Err(error(
                Kind::InvalidInput,
                format!("params must have shape ({n},); got shape {:?}", p.dims),
            ));
        }
        Ok(p.data.iter().map(|&v| v as f32).collect())
    }
}

#[pymethods]
impl Model {
    #[new]
    fn new(spec: &Bound<'_, PyAny>) -> PyResult<Self> {
        let spec: ModelSpec = from_python(spec, "model spec", Kind::ConfigError)?;
        let inner = spec.build().map_err(config_error)?;
        Ok(Self { spec, inner })
    }

    /// Length of the parameter vector.
    #[getter]
    fn num_params(&self) -> usize {
        self.inner.num_params()
    }
    /// The spec (a dict).
    #[getter]
    fn spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.spec)
    }

    /// Initial parameters (the model's standard initialization; `float32`) from an OS-seeded
    /// generator, or from `seed` (an int, 32 bytes or 64 hex digits) for experiments.
    #[pyo3(signature = (seed=None))]
    fn init<'py>(
        &self,
        py: Python<'py>,
        seed: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let mut rng = rng_from_seed(seed)?;
        Ok(PyArray1::from_vec(py, self.inner.init(&mut rng)))
    }

    /// `(loss, grad)`: the mean loss over the batch and its gradient (`float32`) at `params`.
    fn loss_grad<'py>(
        &self,
        py: Python<'py>,
        params: &Bound<'py, PyAny>,
        x: &Bound<'py, PyAny>,
        y: &Bound<'py, PyAny>,
    ) -> PyResult<(f64, Bound<'py, PyArray1<f32>>)> {
        let p = self.params(params)?;
        let data = self.data(x, y)?;
        let model = self.inner.as_ref();
        let (loss, grad) = py
            .detach(|| {
                let mut grad = vec![0.0f32; p.len()];
                let loss =
                    model.loss_grad(&p, &data.batch(), &mut grad, &mut Scratch::default())?;
                Ok::<_, privfed_learn::LearnError>((loss, grad))
            })
            .py()?;
        Ok((loss, PyArray1::from_vec(py, grad)))
    }

    /// `(loss_sum, correct, count)` over the batch (sums, so batches combine by addition).
    fn evaluate(
        &self,
        py: Python<'_>,
        params: &Bound<'_, PyAny>,
        x: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
    ) -> PyResult<(f64, u64, u64)> {
        let p = self.params(params)?;
        let data = self.data(x, y)?;
        let model = self.inner.as_ref();
        let e = py
            .detach(|| model.evaluate(&p, &data.batch(), &mut Scratch::default()))
            .py()?;
        Ok((e.loss_sum, e.correct, e.count))
    }

    /// Local training exactly as the simulator's clients do it
    /// (`privfed_fl::train::local_sgd`): `epochs` passes of minibatch SGD over the
    /// shuffled rows from `params`, each step `θ ← θ − η(∇L(θ) + μ(θ − params))` with
    /// `η = learning_rate`, `μ = proximal`, at most `max_steps` steps. Returns the new
    /// parameters (`float32`), or `(params, mean_loss)` with `return_loss=True`. The shuffle
    /// comes from an OS-seeded generator, or `seed` for experiments.
    #[pyo3(signature = (params, x, y, *, epochs=1, batch_size=10, learning_rate=0.05, proximal=0.0, max_steps=None, seed=None, return_loss=false))]
    #[allow(clippy::too_many_arguments)]
    fn local_sgd<'py>(
        &self,
        py: Python<'py>,
        params: &Bound<'py, PyAny>,
        x: &Bound<'py, PyAny>,
        y: &Bound<'py, PyAny>,
        epochs: u32,
        batch_size: usize,
        learning_rate: f64,
        proximal: f64,
        max_steps: Option<usize>,
        seed: Option<&Bound<'py, PyAny>>,
        return_loss: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        if epochs == 0 {
            return Err(invalid("epochs", "must be at least 1"));
        }
        if batch_size == 0 {
            return Err(invalid("batch_size", "must be at least 1"));
        }
        if !(learning_rate.is_finite() && learning_rate > 0.0) {
            return Err(invalid(
                "learning_rate",
                format!("must be finite and > 0, got {learning_rate}"),
            ));
        }
        if !(proximal.is_finite() && proximal >= 0.0) {
            return Err(invalid(
                "proximal",
                format!("must be finite and >= 0, got {proximal}"),
            ));
        }
        let p = self.params(params)?;
        let data = self.data(x, y)?;
        if data.rows() == 0 {
            return Err(error(Kind::InvalidInput, "x has no rows"));
        }
        let shard = match data {
            BatchData::Dense { x, features, y } => Shard::dense(features, self.classes(), x, y),
            BatchData::Tokens { x, len, y } => Shard::tokens(len, self.classes(), x, y),
        }
        .py()?;
        let cfg = LocalTraining {
            epochs,
            batch_size,
            learning_rate,
            proximal,
            max_steps,
        };
        let mut rng = rng_from_seed(seed)?;
        let model = self.inner.as_ref();
        let (theta, loss) = py
            .detach(|| local_sgd(model, &shard, &p, &cfg, &mut rng))
            .py()?;
        let arr = PyArray1::from_vec(py, theta).into_any();
        if return_loss {
            Ok((arr, loss).into_pyobject(py)?.into_any())
        } else {
            Ok(arr)
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "<Model {:?} num_params={}>",
            self.spec,
            self.inner.num_params()
        )
    }
}

/// Registers the classes and functions (re-exported by `privfed.fl`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Trainer>()?;
    m.add_class::<Model>()?;
    m.add_function(wrap_pyfunction!(fl_train, m)?)?;
    Ok(())
}
