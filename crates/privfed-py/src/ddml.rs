//! The Draw-and-Discard client step (paper 003 Alg. 1; `privfed_ddml::client::ClientStep`): a
//! device takes the model instance it drew from the server and returns
//! `B' = B − γ·clip(G) + noise`, with the noise calibrated to the step's sensitivity — re-exported
//! by `privfed.ddml`, with the binary weight format of the server's API.

use crate::arrays::{read_floats, read_vector, write_floats};
use crate::errors::{Kind, PyResultExt, ToPyErr, error, invalid};
use crate::json::{json_to_python, to_json, to_python};
use crate::rng::SharedRng;
use crate::rng::os_key;
use numpy::PyArray1;
use privfed_ddml::client::{ClientNoise, ClientStep as StepRs, PrivacyUnit};
use privfed_fl::FlError;
use privfed_fl::datasets::default_data_dir;
use privfed_learn::glm::{Example, Glm};
use privfed_mechanisms::rng::{NoiseRng, seeded_rng_for_experiments};
use privfed_sim::simulate::{
    SimConfig, SimDataset, StrategyChoiceError, StrategyName, server_strategy, simulate_in_process,
};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rand::SeedableRng;
use std::path::PathBuf;
use std::time::Instant;

fn unit_from_str(unit: &str) -> PyResult<PrivacyUnit> {
    match unit {
        "feature" => Ok(PrivacyUnit::Feature),
        "model" => Ok(PrivacyUnit::Model),
        other => Err(invalid(
            "unit",
            format!("expected \"feature\" or \"model\", got {other:?}"),
        )),
    }
}

/// The noisy client step of Draw-and-Discard (paper 003 Alg. 1, eq. (4)): the average GLM
/// gradient over the device's examples, each coordinate clipped to `[−1, 1]`, a step of
/// `learning_rate`, plus Laplace noise for ε-DP (`noise="laplace"`, the paper's), Gaussian for
/// (ε, δ)-DP (`noise="gaussian"`), or none (`noise="none"`: no privacy). `unit="feature"`
/// protects each released weight (the paper's guarantee, sensitivity `2γ` per weight);
/// `unit="model"` the whole released model. Noise from an OS-seeded CSPRNG (`seed=` for
/// experiments).
#[pyclass(frozen, module = "privfed.ddml", name = "ClientStep")]
pub struct ClientStep {
    inner: StepRs,
    rng: SharedRng,
}

/// The examples of a GLM from `x` (`(n, features)`) and `y` (`(n,)`).
fn examples(x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<(Vec<Example>, usize)> {
    let fx = read_floats(x, "x")?;
    let [n, features] = fx.dims.as_slice() else {
        return Err(error(
            Kind::InvalidInput,
            format!("x must have shape (n, features); got shape {:?}", fx.dims),
        ));
    };
    let (n, features) = (*n, *features);
    let ys = read_vector(y, "y")?;
    if ys.len() != n {
        return Err(error(
            Kind::InvalidInput,
            format!("y has {} entries, x has {n} rows", ys.len()),
        ));
    }
    if features == 0 {
        return Err(error(Kind::InvalidInput, "x has no features"));
    }
    let ex = fx
        .data
        .chunks(features)
        .zip(ys)
        .map(|(row, y)| Example::new(row.to_vec(), y))
        .collect();
    Ok((ex, features))
}

#[pymethods]
impl ClientStep {
    #[new]
    #[pyo3(signature = (learning_rate, num_weights, *, noise="laplace", epsilon=None, delta=None, unit="feature", seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        learning_rate: f64,
        num_weights: i64,
        noise: &str,
        epsilon: Option<f64>,
        delta: Option<f64>,
        unit: &str,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let p = crate::mechanisms::count("num_weights", num_weights, 1)?;
        let noise = match (noise, epsilon, delta) {
            ("none", None, None) => ClientNoise::None,
            ("none", _, _) => {
                return Err(invalid(
                    "epsilon",
                    "noise=\"none\" takes no epsilon or delta",
                ));
            }
            ("laplace", Some(epsilon), None) => ClientNoise::Laplace { epsilon },
            ("laplace", None, _) => {
                return Err(invalid("epsilon", "noise=\"laplace\" needs epsilon"));
            }
            ("laplace", Some(_), Some(_)) => {
                return Err(invalid("delta", "noise=\"laplace\" is pure ε-DP: no delta"));
            }
            ("gaussian", Some(epsilon), Some(delta)) => ClientNoise::Gaussian { epsilon, delta },
            ("gaussian", _, _) => {
                return Err(invalid(
                    "epsilon",
                    "noise=\"gaussian\" needs epsilon and delta",
                ));
            }
            (other, _, _) => {
                return Err(invalid(
                    "noise",
                    format!("expected \"laplace\", \"gaussian\" or \"none\", got {other:?}"),
                ));
            }
        };
        let inner = StepRs::new(learning_rate, noise, unit_from_str(unit)?, p).py()?;
        Ok(Self {
            inner,
            rng: SharedRng::new(seed)?,
        })
    }

    /// `B − γ·clip(G) + noise` from the drawn model `B` and the (unclipped) average gradient
    /// `G` (1-D, length `num_weights`; the result has `model`'s float dtype).
    fn privatize_step<'py>(
        &self,
        py: Python<'py>,
        model: &Bound<'py, PyAny>,
        gradient: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = read_floats(model, "model")?;
        let g = read_vector(gradient, "gradient")?;
        if m.dims.len() != 1 {
            return Err(error(
                Kind::InvalidInput,
                format!("model must be 1-D; got shape {:?}", m.dims),
            ));
        }
        let mut rng = self.rng.fork();
        let step = &self.inner;
        let out = py
            .detach(|| step.privatize_step(&m.data, &g, &mut rng))
            .py()?;
        write_floats(py, out, &m.dims, m.dtype, m.shape)
    }

    /// The whole client step of Alg. 1 for a GLM: the average gradient of `glm` (`"logistic"`,
    /// `"linear"` or `"softmax"`; softmax's classes are `num_weights / features`) at `model`
    /// over the examples `x` (`(n, features)`) with responses `y` (`(n,)`; class indices for
    /// softmax), clipped, stepped and noised. Returns the update to post, in `model`'s dtype.
    #[pyo3(signature = (model, x, y, *, glm="logistic"))]
    fn apply<'py>(
        &self,
        py: Python<'py>,
        model: &Bound<'py, PyAny>,
        x: &Bound<'py, PyAny>,
        y: &Bound<'py, PyAny>,
        glm: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = read_floats(model, "model")?;
        if m.dims.len() != 1 {
            return Err(error(
                Kind::InvalidInput,
                format!("model must be 1-D; got shape {:?}", m.dims),
            ));
        }
        let (ex, features) = examples(x, y)?;
        let p = self.inner.num_weights();
        let model_rs = match glm {
            "logistic" => Glm::logistic(features),
            "linear" => Glm::linear(features),
            "softmax" => {
                if !p.is_multiple_of(features) {
                    return Err(error(
                        Kind::InvalidInput,
                        format!(
                            "softmax: num_weights {p} is not a multiple of the {features} features"
                        ),
                    ));
                }
                Glm::softmax(features, p / features)
            }
            other => {
                return Err(invalid(
                    "glm",
                    format!("expected \"logistic\", \"linear\" or \"softmax\", got {other:?}"),
                ));
            }
        }
        .py()?;
        let mut rng = self.rng.fork();
        let step = &self.inner;
        let out = py
            .detach(|| step.apply(&model_rs, &m.data, &ex, &mut rng))
            .py()?;
        write_floats(py, out, &m.dims, m.dtype, m.shape)
    }

    /// Learning rate γ.
    #[getter]
    fn learning_rate(&self) -> f64 {
        self.inner.learning_rate()
    }
    /// Number of weights `p`.
    #[getter]
    fn num_weights(&self) -> usize {
        self.inner.num_weights()
    }
    /// `"feature"` or `"model"`.
    #[getter]
    fn unit(&self) -> &'static str {
        match self.inner.unit() {
            PrivacyUnit::Feature => "feature",
            PrivacyUnit::Model => "model",
        }
    }
    /// The noise as a dict (`{"kind": "laplace", "epsilon": …}`, …).
    #[getter]
    fn noise<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.noise())
    }
    /// The Laplace scale `b` or the Gaussian σ (0 without noise).
    #[getter]
    fn noise_scale(&self) -> f64 {
        self.inner.noise_scale()
    }
    /// Per-weight noise variance σ² (`2b²` for Laplace): the server initializes its `k`
    /// instances with variance `(k/2)·σ²` (paper 003 Thm. 1).
    #[getter]
    fn noise_variance(&self) -> f64 {
        self.inner.noise_variance()
    }
    /// The guarantee of one released update (a dict; per weight for `unit="feature"`, for the
    /// whole model for `unit="model"`), or `None` without noise.
    #[getter]
    fn guarantee<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.inner.guarantee() {
            Some(g) => to_python(py, &g),
            None => Ok(py.None().into_bound(py)),
        }
    }
    /// ε of one released update (`inf` without noise).
    #[getter]
    fn epsilon(&self) -> f64 {
        self.inner
            .guarantee()
            .map_or(f64::INFINITY, |g| g.epsilon())
    }
    /// δ of one released update (0 for Laplace; 1 without noise).
    #[getter]
    fn delta(&self) -> f64 {
        self.inner.guarantee().map_or(1.0, |g| g.delta())
    }
    /// The step's serde form (learning_rate, noise, unit, num_weights, scale).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        format!(
            "<ClientStep learning_rate={} num_weights={} noise={:?} unit={}>",
            self.inner.learning_rate(),
            self.inner.num_weights(),
            self.inner.noise(),
            self.unit()
        )
    }
}

/// Weights in the server's binary format (little-endian `float32` bytes).
#[pyfunction]
#[pyo3(name = "encode_weights")]
fn ddml_encode_weights<'py>(
    py: Python<'py>,
    weights: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let w = read_vector(weights, "weights")?;
    let f: Vec<f32> = w.iter().map(|&v| v as f32).collect();
    Ok(PyBytes::new(py, &privfed_ddml::wire::encode_f32(&f)))
}

/// Weights from the server's binary format (a `float32` array); a length that is not a
/// multiple of 4 is an `InvalidInput`.
#[pyfunction]
#[pyo3(name = "decode_weights")]
fn ddml_decode_weights<'py>(py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyArray1<f32>>> {
    let w = privfed_ddml::wire::decode_f32(data).ok_or_else(|| {
        error(
            Kind::InvalidInput,
            format!(
                "{} bytes is not a whole number of float32 weights",
                data.len()
            ),
        )
    })?;
    Ok(PyArray1::from_vec(py, w))
}

/// The one of `all` whose stable `name` is `value`, else an `InvalidParameter` naming `param`
/// and the names it accepts.
fn by_name<T: Copy>(
    param: &str,
    value: &str,
    all: &[T],
    name: fn(T) -> &'static str,
) -> PyResult<T> {
    all.iter()
        .copied()
        .find(|&t| name(t) == value)
        .ok_or_else(|| {
            let names: Vec<_> = all.iter().map(|&t| name(t)).collect();
            invalid(
                param,
                format!(
                    "expected one of \"{}\", got {value:?}",
                    names.join("\", \"")
                ),
            )
        })
}

/// The report of `privfed ddml simulate --json` as a dict (`privfed_sim::simulate`, paper 003
/// §V): Draw-and-Discard training of the GLM of `dataset` (`"synthetic-production"`,
/// `"mnist"` or `"adult"`, the last two read from `data_dir`, default `$PRIVFED_DATA_DIR` or
/// `../shared/data`) over simulated clients in process, with `k` instances, learning rate γ,
/// client Laplace noise for feature-level `epsilon`-LDP (`None`: no noise, no privacy), server
/// `strategy` (`"draw-and-discard"`, `"accept-one-in"`, `"replace-drawn"`,
/// `"average-before-overwrite"`, `"server-batch"` with `server_batch`) and an optional spam
/// filter. Seeded runs (`seed=`) are reproducible and give the CLI's numbers; without a seed
/// the run is seeded from the operating system (the synthetic data then uses seed 0).
/// `passes`, `examples_per_client`, `strategy`, `synthetic_train` and `synthetic_test` left at
/// `None` take the library's defaults, which are also `privfed ddml simulate`'s
/// (`SimConfig::DEFAULT_PASSES`, `SimConfig::DEFAULT_EXAMPLES_PER_CLIENT`,
/// `StrategyName::DEFAULT`, `SimDataset::SYNTHETIC_TRAIN`, `SimDataset::SYNTHETIC_TEST`).
#[pyfunction]
#[pyo3(name = "simulate_in_process", signature = (
    dataset, *, k, learning_rate, epsilon, passes=None, examples_per_client=None,
    strategy=None, server_batch=None, spam_sigmas=None,
    synthetic_train=None, synthetic_test=None, seed=None, data_dir=None
))]
#[allow(clippy::too_many_arguments)]
fn simulate_in_process_py<'py>(
    py: Python<'py>,
    dataset: &str,
    k: usize,
    learning_rate: f64,
    epsilon: Option<f64>,
    passes: Option<usize>,
    examples_per_client: Option<usize>,
    strategy: Option<&str>,
    server_batch: Option<usize>,
    spam_sigmas: Option<f64>,
    synthetic_train: Option<usize>,
    synthetic_test: Option<usize>,
    seed: Option<u64>,
    data_dir: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let data = by_name("dataset", dataset, &SimDataset::ALL, SimDataset::name)?;
    let name = match strategy {
        Some(s) => by_name("strategy", s, &StrategyName::ALL, StrategyName::name)?,
        None => StrategyName::DEFAULT,
    };
    let synthetic_train = synthetic_train.unwrap_or(SimDataset::SYNTHETIC_TRAIN);
    let synthetic_test = synthetic_test.unwrap_or(SimDataset::SYNTHETIC_TEST);
    let (strategy, k) = server_strategy(name, k, server_batch).map_err(|e| {
        let param = match e {
            StrategyChoiceError::NoInstances => "k",
            _ => "server_batch",
        };
        invalid(param, e.to_string())
    })?;
    let config = SimConfig {
        strategy,
        noise: epsilon.map_or(ClientNoise::None, |epsilon| ClientNoise::Laplace {
            epsilon,
        }),
        learning_rate,
        passes: passes.unwrap_or(SimConfig::DEFAULT_PASSES),
        examples_per_client: examples_per_client.unwrap_or(SimConfig::DEFAULT_EXAMPLES_PER_CLIENT),
        spam_sigmas,
        ..SimConfig::paper_defaults(k)
    };
    let dir = data_dir.unwrap_or_else(default_data_dir);
    let mut rng: NoiseRng = match seed {
        Some(s) => seeded_rng_for_experiments(s),
        None => NoiseRng::from_seed(*os_key()?),
    };
    let summary = py.detach(|| -> PyResult<String> {
        let dataset = data
            .load(&dir, synthetic_train, synthetic_test, seed.unwrap_or(0))
            .map_err(|e| FlError::from(e).to_pyerr())?;
        let start = Instant::now();
        let report = simulate_in_process(&dataset, &config, &mut rng, |_| {}).py()?;
        to_json(&report.summary(&dataset, seed, start.elapsed().as_secs_f64()))
    })?;
    json_to_python(py, &summary)
}

/// Registers the class and functions (re-exported by `privfed.ddml`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ClientStep>()?;
    m.add_function(wrap_pyfunction!(ddml_encode_weights, m)?)?;
    m.add_function(wrap_pyfunction!(ddml_decode_weights, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_in_process_py, m)?)?;
    Ok(())
}
