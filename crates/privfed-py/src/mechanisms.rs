//! The local randomizers: one Python class per mechanism, over a common base class
//! `privfed.LocalRandomizer` (privatize, variance, ε, describe).

use crate::accounting::event_to_py;
use crate::arrays::{Shape, finish_output, new_output, read_floats, read_private};
use crate::errors::{Kind, PyResultExt, error, invalid};
use crate::json::to_python;
use crate::rng::{SharedRng, threads};
use numpy::PyArrayMethods;
use privfed_accounting::DpEvent;
use privfed_mechanisms::bitwise_rr::BitwiseRr;
use privfed_mechanisms::gaussian::Gaussian as GaussianMech;
use privfed_mechanisms::grid_rr::GridRr;
use privfed_mechanisms::laplace::Laplace as LaplaceMech;
use privfed_mechanisms::mvu::{DpConstraint, Mvu as MvuMech};
use privfed_mechanisms::privunit_inf::PrivUnitInf as PrivUnitInfMech;
use privfed_mechanisms::privunit2::PrivUnit2 as PrivUnit2Mech;
use privfed_mechanisms::privunitg::PrivUnitG as PrivUnitGMech;
use privfed_mechanisms::rng::{NoiseRng, StreamKey, Threads, for_each_block};
use privfed_mechanisms::separated::Separated as SeparatedMech;
use privfed_mechanisms::{AnyRandomizer, Domain, LocalRandomizer as _, MechanismError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Base class of privfed's local randomizers.
///
/// A randomizer is immutable: its constructor validates every parameter and computes its
/// exact ε; `privatize` returns an unbiased estimate of its input (`E[M(x)] = x`).
#[pyclass(subclass, frozen, module = "privfed", name = "LocalRandomizer")]
pub struct Randomizer {
    pub(crate) inner: AnyRandomizer,
    rng: SharedRng,
}

impl Randomizer {
    pub(crate) fn new(
        inner: impl Into<AnyRandomizer>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(Self {
            inner: inner.into(),
            rng: SharedRng::new(seed)?,
        })
    }
}

/// A non-negative count argument (`dim`, `k`, …) given as a Python int.
pub(crate) fn count(name: &str, v: i64, min: i64) -> PyResult<usize> {
    if v < min {
        return Err(invalid(name, format!("must be at least {min}, got {v}")));
    }
    usize::try_from(v).map_err(|_| invalid(name, format!("{v} is too large")))
}

/// Privatizes each of `n` rows of length `dim` (row keys drawn in order, rows spread over
/// threads; the output does not depend on the thread count).
fn privatize_rows(
    m: &AnyRandomizer,
    data: &[f64],
    out: &mut [f64],
    dim: usize,
    rng: &mut NoiseRng,
    threads: Threads,
) -> Result<(), MechanismError> {
    let n = data.len() / dim;
    let keys: Vec<StreamKey> = (0..n).map(|_| StreamKey::draw(rng)).collect();
    let t = threads.get().min(n).max(1);
    let per = n.div_ceil(t.max(1)).max(1);
    let results: Vec<Result<(), MechanismError>> = std::thread::scope(|s| {
        let handles: Vec<_> = out
            .chunks_mut(per * dim)
            .zip(data.chunks(per * dim))
            .zip(keys.chunks(per))
            .map(|((o, x), k)| {
                s.spawn(move || {
                    for ((orow, xrow), key) in o.chunks_mut(dim).zip(x.chunks(dim)).zip(k) {
                        m.privatize_into(xrow, orow, &mut key.stream(0))?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(MechanismError::Numerical("a worker thread panicked".into()))
                })
            })
            .collect()
    });
    results.into_iter().collect::<Result<(), _>>()
}

/// Privatizes every entry of `data` with a scalar mechanism, in blocks with their own streams.
fn privatize_scalars(
    m: &AnyRandomizer,
    data: &[f64],
    out: &mut [f64],
    rng: &mut NoiseRng,
    threads: Threads,
) -> Result<(), MechanismError> {
    let key = StreamKey::draw(rng);
    out.copy_from_slice(data);
    let results = for_each_block(&key, out, threads, |_, rng, chunk| {
        for v in chunk.iter_mut() {
            let x = [*v];
            let mut o = [0.0];
            m.privatize_into(&x, &mut o, rng)?;
            *v = o[0];
        }
        Ok::<(), MechanismError>(())
    });
    results.into_iter().collect::<Result<(), _>>()
}

impl Randomizer {
    fn check_shape(&self, dims: &[usize]) -> PyResult<()> {
        let dim = self.inner.dim();
        if dim == 1 {
            return Ok(());
        }
        match dims {
            [d] | [_, d] if *d == dim => Ok(()),
            _ => Err(error(
                Kind::InvalidInput,
                format!(
                    "{} has dimension {dim}: expected an array of shape ({dim},) or (n, {dim}); got shape {:?}",
                    self.inner.name(),
                    dims
                ),
            )),
        }
    }
}

#[pymethods]
impl Randomizer {
    /// Privatizes `x`: a vector of shape `(dim,)`, a batch of shape `(n, dim)` (each row
    /// privatized independently), or for scalar mechanisms (`dim == 1`) a float or an array of
    /// any shape (each entry privatized). `float32` and `float64` are accepted and returned as
    /// given. The work runs without the GIL on up to `threads` threads (default: every core);
    /// the output does not depend on the thread count.
    #[pyo3(signature = (x, *, threads=None))]
    fn privatize<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let threads = self::threads(threads)?;
        let f = read_private(x, "x")?;
        self.check_shape(&f.dims)?;
        let dim = self.inner.dim();
        let mut rng = self.rng.fork();
        let m = &self.inner;
        let out = new_output(py, &f.dims);
        {
            let input = f.array.readonly();
            let data = input.as_slice()?;
            let mut output = out.readwrite();
            let o = output.as_slice_mut()?;
            let vector = f.dims.len() == 1;
            py.detach(|| {
                if dim == 1 {
                    privatize_scalars(m, data, o, &mut rng, threads)
                } else if vector {
                    m.privatize_into_threads(data, o, &mut rng, threads)
                } else {
                    privatize_rows(m, data, o, dim, &mut rng, threads)
                }
            })
            .py()?;
        }
        finish_output(out, f.dtype, f.shape)
    }

    /// The exact `E‖M(x) − x‖²` at the input `x` (a vector of shape `(dim,)`, or a float).
    fn variance_at(&self, x: &Bound<'_, PyAny>) -> PyResult<f64> {
        let f = read_floats(x, "x")?;
        if f.shape == Shape::Array && f.dims.len() != 1 {
            return Err(error(
                Kind::InvalidInput,
                format!(
                    "variance_at takes one input of shape ({},); got shape {:?}",
                    self.inner.dim(),
                    f.dims
                ),
            ));
        }
        self.inner.variance_at(&f.data).py()
    }

    /// `sup_x E‖M(x) − x‖²` over the domain, exactly (the worst-case variance).
    #[getter]
    fn variance(&self) -> f64 {
        self.inner.worst_case_variance()
    }

    /// ε of the guarantee (natural log), computed from the parameters.
    #[getter]
    fn epsilon(&self) -> f64 {
        self.inner.guarantee().epsilon()
    }

    /// δ of the guarantee (0 for pure ε-DP).
    #[getter]
    fn delta(&self) -> f64 {
        self.inner.guarantee().delta()
    }

    /// Dimension of inputs and outputs (1 for scalar mechanisms).
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// The stable name (as on the command line, e.g. `"privunit2"`).
    #[getter]
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    /// The mechanism's parameters as a dict (its serde form: what `privfed describe` prints).
    #[getter]
    fn parameters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner)
    }

    /// The input domain as a dict (`kind`, `dim`, and `radius` or the interval).
    #[getter]
    fn domain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.domain())
    }

    /// Everything about the mechanism, as `privfed describe --json` prints it (`mechanism`, ε,
    /// δ, `dim`, worst-case `variance`, `domain`, `guarantee`, `params`), plus `name` and
    /// `parameters` (the same as `mechanism` and `params`). A dict, JSON-serializable.
    fn describe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = to_python(py, &self.inner.report())?.cast_into::<PyDict>()?;
        d.set_item("name", self.inner.name())?;
        d.set_item("parameters", to_python(py, &self.inner)?)?;
        Ok(d)
    }

    /// The privacy event of one release, for `privfed.accounting`: `GaussianDpEvent(σ/Δ₂)` for
    /// the Gaussian mechanism, `LaplaceDpEvent(b/Δ₁)` for Laplace (tighter under RDP than its
    /// pure ε), `PureDpEvent(ε)` for the ε-LDP randomizers.
    fn dp_event<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        event_to_py(py, &DpEvent::of_randomizer(&self.inner))
    }

    fn __repr__(&self) -> String {
        let g = self.inner.guarantee();
        let delta = if g.delta() > 0.0 {
            format!(", delta={}", g.delta())
        } else {
            String::new()
        };
        format!(
            "<{} epsilon={}{delta} dim={} variance={}>",
            self.inner.name(),
            g.epsilon(),
            self.inner.dim(),
            self.inner.worst_case_variance()
        )
    }
}

/// PrivUnit2 (papers 000 Alg. 1, 002 Alg. 1): unit vectors in, an unbiased spherical-cap
/// sample out, exact ε-LDP.
///
/// `parameterization="optimized"` (default) picks the variance-optimal cap at exact ε;
/// `"paper000"` uses paper 000's conditions (16a/16b) with the cap-probability budget
/// `epsilon0`.
#[pyclass(extends = Randomizer, frozen, module = "privfed")]
pub struct PrivUnit2;

#[pymethods]
impl PrivUnit2 {
    #[new]
    #[pyo3(signature = (epsilon, dim, *, parameterization="optimized", epsilon0=None, seed=None))]
    fn new(
        epsilon: f64,
        dim: i64,
        parameterization: &str,
        epsilon0: Option<f64>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let d = count("dim", dim, 1)?;
        let m = match (parameterization, epsilon0) {
            ("optimized", None) => PrivUnit2Mech::optimized(epsilon, d),
            ("optimized", Some(_)) => {
                return Err(invalid("epsilon0", "applies to parameterization=\"paper000\" only"));
            }
            ("paper000", Some(e0)) => PrivUnit2Mech::paper000(epsilon, e0, d),
            ("paper000", None) => {
                return Err(invalid(
                    "epsilon0",
                    "parameterization=\"paper000\" needs epsilon0 (the budget for the cap probability)",
                ));
            }
            (other, _) => {
                return Err(invalid(
                    "parameterization",
                    format!("expected \"optimized\" or \"paper000\", got {other:?}"),
                ));
            }
        }
        .py()?;
        Ok(PyClassInitializer::from(Randomizer::new(m, seed)?).add_subclass(Self))
    }
}

/// PrivUnitG (paper 002 Alg. 2): PrivUnit with a Gaussian cap, unit vectors, exact ε-LDP.
/// `parameterization="optimized"` (default) or `"dimension_free"` (paper 002's threshold).
#[pyclass(extends = Randomizer, frozen, module = "privfed")]
pub struct PrivUnitG;

#[pymethods]
impl PrivUnitG {
    #[new]
    #[pyo3(signature = (epsilon, dim, *, parameterization="optimized", seed=None))]
    fn new(
        epsilon: f64,
        dim: i64,
        parameterization: &str,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let d = count("dim", dim, 1)?;
        let m = match parameterization {
            "optimized" => PrivUnitGMech::optimized(epsilon, d),
            "dimension_free" => PrivUnitGMech::dimension_free(epsilon, d),
            other => {
                return Err(invalid(
                    "parameterization",
                    format!("expected \"optimized\" or \"dimension_free\", got {other:?}"),
                ));
            }
        }
        .py()?;
        Ok(PyClassInitializer::from(Randomizer::new(m, seed)?).add_subclass(Self))
    }
}

/// PrivUnitInf (paper 000 Alg. 2): vectors in `[-1, 1]^dim`, hypercube caps, exact ε-LDP.
#[pyclass(extends = Randomizer, frozen, module = "privfed")]
pub struct PrivUnitInf;

#[pymethods]
impl PrivUnitInf {
    #[new]
    #[pyo3(signature = (epsilon, dim, *, seed=None))]
    fn new(
        epsilon: f64,
        dim: i64,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let m = PrivUnitInfMech::optimized(epsilon, count("dim", dim, 1)?).py()?;
        Ok(PyClassInitializer::from(Randomizer::new(m, seed)?).add_subclass(Self))
    }
}

/// ScalarDP (paper 000 Alg. 3): randomized response on the uniform grid `{0, r_max/k, …,
/// r_max}`, unbiased on `[0, r_max]`; `k=None` picks the grid size minimizing the worst-case
/// variance.
#[pyclass(extends = Randomizer, frozen, module = "privfed")]
pub struct ScalarDP;

#[pymethods]
impl ScalarDP {
    #[new]
    #[pyo3(signature = (epsilon, r_max=1.0, *, k=None, seed=None))]
    fn new(
        epsilon: f64,
        r_max: f64,
        k: Option<i64>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let m = match k {
            Some(k) => GridRr::scalar_dp_with_k(epsilon, r_max, count("k", k, 1)?),
            None => GridRr::scalar_dp(epsilon, r_max),
        }
        .py()?;
        Ok(PyClassInitializer::from(Randomizer::new(m, seed)?).add_subclass(Self))
    }
}

/// ScalarRelDP (paper 000 Alg. 4): randomized response on the geometric grid `{0, a, aκ, …}` up
/// to `r_max`, for relative accuracy on `[0, r_max]`.
#[pyclass(extends = Randomizer, frozen, module = "privfed")]
pub struct ScalarRelDP;

#[pymethods]
impl ScalarRelDP {
    #[new]
    #[pyo3(signature = (epsilon, r_max, a, kappa, *, seed=None))]
    fn new(
        epsilon: f64,
        r_max: f64,
        a: f64,
        kappa: f64,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let m = GridRr::scalar_rel_dp(epsilon, r_max, a, kappa).py()?;
        Ok(PyClassInitializer::from(Randomizer::new(m, seed)?).add_subclass(Self))
    }
}

/// Unbiased generalized randomized response (paper 004 §3.3) on `2^bits` grid points over
/// `[lo, hi]` (dithered onto the grid, then randomized response, then debiased).
#[pyclass(extends = Randomizer, frozen, module = "privfed", name = "GRR")]
pub struct Grr;

#[pymethods]
impl Grr {
    #[new]
    #[pyo3(signature = (epsilon, bits, lo=-1.0, hi=1.0, *, seed=None))]
    fn new(
        epsilon: f64,
        bits: u32,
        lo: f64,
        hi: f64,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let m = GridRr::unbiased_grr(epsilon, bits, lo, hi).py()?;
        Ok(PyClassInitializer::from(Randomizer::new(m, seed)?).add_subclass(Self))
    }
}

/// Unbiased bitwise randomized response (paper 004): dithered to `bits` bits over `[lo, hi]`,
/// each bit flipped, debiased.
#[pyclass(extends = Randomizer, frozen, module = "privfed")]
pub struct BitwiseRR;

#[pymethods]
impl BitwiseRR {
    #[new]
    #[pyo3(signature = (epsilon, bits, lo=-1.0, hi=1.0, *, seed=None))]
    fn new(
        epsilon: f64,
        bits: u32,
        lo: f64,
        hi: f64,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let m = BitwiseRr::new(epsilon, bits, lo, hi).py()?;
        Ok(PyClassInitializer::from(Randomizer::new(m, seed)?).add_subclass(Self))
    }
}

/// The separated mechanism (paper 000 eq. 22): direction by PrivUnit2 at
/// `epsilon − magnitude_epsilon`, norm by ScalarDP on `[0, r_max]` at `magnitude_epsilon`
/// (default `min(epsilon/10, 1)`); vectors in the ℓ2 ball of radius `r_max`.
#[pyclass(extends = Randomizer, frozen, module = "privfed")]
pub struct Separated;

#[pymethods]
impl Separated {
    #[new]
    #[pyo3(signature = (epsilon, dim, r_max=1.0, *, magnitude_epsilon=None, seed=None))]
    fn new(
        epsilon: f64,
        dim: i64,
        r_max: f64,
        magnitude_epsilon: Option<f64>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let d = count("dim", dim, 1)?;
        let e2 = magnitude_epsilon.unwrap_or((epsilon / 10.0).min(1.0));
        if !(e2 > 0.0 && e2 < epsilon) {
            return Err(invalid(
                "magnitude_epsilon",
                format!("must lie in (0, epsilon) = (0, {epsilon}); got {e2}"),
            ));
        }
        let m = SeparatedMech::new(epsilon - e2, e2, d, r_max).py()?;
        Ok(PyClassInitializer::from(Randomizer::new(m, seed)?).add_subclass(Self))
    }
}

/// The domain of the Laplace / Gaussian baselines from `norm` and `radius`.
fn baseline_domain(dim: i64, norm: &str, radius: f64) -> PyResult<Domain> {
    let dim = count("dim", dim, 1)?;
    Ok(match norm {
        "sphere" => Domain::UnitSphere { dim },
        "l1" => Domain::L1Ball { dim, radius },
        "l2" => Domain::L2Ball { dim, radius },
        "linf" => Domain::LInfBall { dim, radius },
        other => {
            return Err(invalid(
                "norm",
                format!("expected \"sphere\", \"l1\", \"l2\" or \"linf\", got {other:?}"),
            ));
        }
    })
}

/// The Laplace mechanism calibrated to the ℓ1 diameter of the domain (`norm` ball of `radius`
/// in `dim` dimensions), pure ε-DP.
#[pyclass(extends = Randomizer, frozen, module = "privfed")]
pub struct Laplace;

#[pymethods]
impl Laplace {
    #[new]
    #[pyo3(signature = (epsilon, dim=1, *, norm="l2", radius=1.0, seed=None))]
    fn new(
        epsilon: f64,
        dim: i64,
        norm: &str,
        radius: f64,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let m = LaplaceMech::new(epsilon, baseline_domain(dim, norm, radius)?).py()?;
        Ok(PyClassInitializer::from(Randomizer::new(m, seed)?).add_subclass(Self))
    }
}

/// The Gaussian mechanism with the analytic calibration of Balle & Wang 2018 to (ε, δ) on the
/// ℓ2 diameter of the domain.
#[pyclass(extends = Randomizer, frozen, module = "privfed")]
pub struct Gaussian;

#[pymethods]
impl Gaussian {
    #[new]
    #[pyo3(signature = (epsilon, delta, dim=1, *, norm="l2", radius=1.0, seed=None))]
    fn new(
        epsilon: f64,
        delta: f64,
        dim: i64,
        norm: &str,
        radius: f64,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let m = GaussianMech::new(epsilon, delta, baseline_domain(dim, norm, radius)?).py()?;
        Ok(PyClassInitializer::from(Randomizer::new(m, seed)?).add_subclass(Self))
    }
}

/// The MVU mechanism (paper 004 Alg. 1) on `[lo, hi]`: designed here for
/// `input_bits`/`output_bits` (default `bits`) at ε-LDP, or built on a given `design`
/// (`privfed.mvu.MvuDesign`) whose exact ε must not exceed `epsilon`.
#[pyclass(extends = Randomizer, frozen, module = "privfed", name = "MVU")]
pub struct Mvu;

#[pymethods]
impl Mvu {
    #[new]
    #[pyo3(signature = (epsilon, bits=3, lo=-1.0, hi=1.0, *, input_bits=None, output_bits=None, design=None, seed=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        epsilon: f64,
        bits: u32,
        lo: f64,
        hi: f64,
        input_bits: Option<u32>,
        output_bits: Option<u32>,
        design: Option<PyRef<'_, crate::mvu::MvuDesign>>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let d = match design {
            Some(d) => {
                let e = d.inner.ldp_epsilon();
                if e.is_nan() || e > epsilon {
                    return Err(invalid(
                        "design",
                        format!("the design is {e}-LDP, more than epsilon = {epsilon}"),
                    ));
                }
                d.inner.clone()
            }
            None => {
                let (bi, bo) = (input_bits.unwrap_or(bits), output_bits.unwrap_or(bits));
                crate::mvu::design(py, bi, bo, epsilon, DpConstraint::Ldp, None)?.design
            }
        };
        let m = MvuMech::new(d, lo, hi).py()?;
        Ok(PyClassInitializer::from(Randomizer::new(m, seed)?).add_subclass(Self))
    }
}

/// Registers the classes.
/// The randomizer table (`privfed_mechanisms::spec::RANDOMIZERS`) as a list of dicts: `name`
/// (command line), `python_class`, `variant` (`AnyRandomizer`) and `params`, a list of
/// `{"name", "example"}` (the example as command-line text, or `None`). The Python test checks
/// every row against its class.
#[pyfunction]
fn _randomizer_specs(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    privfed_mechanisms::spec::RANDOMIZERS
        .iter()
        .map(|r| {
            let d = PyDict::new(py);
            d.set_item("name", r.name)?;
            d.set_item("python_class", r.python_class)?;
            d.set_item("variant", r.variant)?;
            let params = r
                .params
                .iter()
                .map(|p| {
                    let pd = PyDict::new(py);
                    pd.set_item("name", p.name)?;
                    pd.set_item("example", p.example)?;
                    Ok(pd)
                })
                .collect::<PyResult<Vec<_>>>()?;
            d.set_item("params", params)?;
            Ok(d)
        })
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_randomizer_specs, m)?)?;
    m.add_class::<Randomizer>()?;
    m.add_class::<PrivUnit2>()?;
    m.add_class::<PrivUnitG>()?;
    m.add_class::<PrivUnitInf>()?;
    m.add_class::<ScalarDP>()?;
    m.add_class::<ScalarRelDP>()?;
    m.add_class::<Grr>()?;
    m.add_class::<BitwiseRR>()?;
    m.add_class::<Separated>()?;
    m.add_class::<Laplace>()?;
    m.add_class::<Gaussian>()?;
    m.add_class::<Mvu>()?;
    Ok(())
}
