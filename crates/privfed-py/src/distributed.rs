//! Distributed DP with the Skellam mechanism (paper 001, Agarwal, Kairouz and Liu 2021;
//! `privfed_distributed`): the planner, the client's encoder, the modular sum, the server's
//! decoder and the round's privacy event — re-exported by `privfed.distributed`.
//!
//! A round: the server plans (`plan`) and fixes a session id; everyone derives the round's
//! rotation seed (`rotation_seed`); each client encodes its vector (`SkellamEncoder.encode`, an
//! integer vector mod 2^bits); secure aggregation (`privfed.secagg`, or `ModularSum` in
//! process) sums the encodings; the server decodes the mean (`SkellamDecoder.decode`) and
//! accounts the round with the clients that actually contributed (`round_event`).

use crate::accounting::event_to_py;
use crate::arrays::{Floats, read_floats};
use crate::errors::{Kind, PyResultExt, error, invalid};
use crate::intarrays::{read_u64, read_u64_vector, write_u64};
use crate::json::{from_python, from_value, to_python};
use crate::mechanisms::count;
use crate::rng::{SharedRng, threads};
use numpy::PyArray1;
use privfed_distributed::{
    Decoded as DecodedRs, ModularSum as ModularSumRs, NoiseShare, NoiseTarget, Plan, PlanPolicy,
    PlanRequest, SkellamConfig, SkellamDecoder as DecoderRs, SkellamEncoder as EncoderRs,
    SkellamParams, round_event_for,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

// `plan`'s default β is written as a literal in its signature so that Python's
// `inspect.signature` shows the number; it must stay the simulator's and the CLI's default.
const _: () = assert!(privfed_fl::privacy::DEFAULT_BETA == 0.606_530_659_712_633_4);

fn share_from_str(share: &str) -> PyResult<NoiseShare> {
    match share {
        "skellam" => Ok(NoiseShare::Skellam),
        "ddg" | "discrete_gaussian" => Ok(NoiseShare::DiscreteGaussian),
        other => Err(invalid(
            "share",
            format!("expected \"skellam\" or \"ddg\", got {other:?}"),
        )),
    }
}

fn share_name(share: NoiseShare) -> &'static str {
    match share {
        NoiseShare::Skellam => "skellam",
        NoiseShare::DiscreteGaussian => "ddg",
    }
}

/// The parameters every client and the server of a round share, as a dict (the serde form of
/// `privfed_distributed::SkellamConfig` plus `padded_dim`).
fn params_dict<'py>(py: Python<'py>, p: &SkellamParams) -> PyResult<Bound<'py, PyDict>> {
    let d = to_python(py, p.config())?.cast_into::<PyDict>()?;
    d.set_item("padded_dim", p.padded_dim())?;
    Ok(d)
}

/// A 32-byte rotation seed from Python bytes.
fn seed32(obj: &Bound<'_, PyAny>) -> PyResult<[u8; 32]> {
    let b = obj.cast::<PyBytes>().map_err(|_| {
        invalid(
            "rotation_seed",
            "expected 32 bytes (from privfed.distributed.rotation_seed)",
        )
    })?;
    b.as_bytes().try_into().map_err(|_| {
        invalid(
            "rotation_seed",
            format!("expected 32 bytes, got {}", b.as_bytes().len()),
        )
    })
}

/// A round's parameters and noise share from a `SkellamPlan`, or from a params dict (as
/// `SkellamPlan.params` gives it, so a server can send the parameters to its clients).
fn params_of(obj: &Bound<'_, PyAny>, share: Option<&str>) -> PyResult<(SkellamParams, NoiseShare)> {
    if let Ok(p) = obj.cast::<SkellamPlan>() {
        let p = p.get();
        let s = match share {
            Some(s) => share_from_str(s)?,
            None => p.inner.share,
        };
        return Ok((p.inner.params, s));
    }
    let mut d: serde_json::Value = from_python(obj, "plan parameters", Kind::InvalidParameter)?;
    if let Some(m) = d.as_object_mut() {
        m.remove("padded_dim");
    }
    let config: SkellamConfig = from_value(d, "plan parameters", Kind::InvalidParameter)?;
    let params = SkellamParams::new(config).py()?;
    Ok((params, share_from_str(share.unwrap_or("skellam"))?))
}

/// Paper 001's round plan (`privfed_distributed::plan`): the scale `s`, the local and central
/// noise, the wrap probability, the expected error by source and ε. Immutable.
#[pyclass(frozen, module = "privfed.distributed", name = "SkellamPlan")]
pub struct SkellamPlan {
    inner: Plan,
}

#[pymethods]
impl SkellamPlan {
    /// ε after `rounds` rounds at `delta` with all `clients` contributing (`None` without δ;
    /// `inf` without noise).
    #[getter]
    fn epsilon(&self) -> Option<f64> {
        self.inner.epsilon
    }
    /// δ of the ε report.
    #[getter]
    fn delta(&self) -> Option<f64> {
        self.inner.delta
    }
    /// Scale `s` applied before rounding.
    #[getter]
    fn scale(&self) -> f64 {
        self.inner.scale
    }
    /// Dimension `d`.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim
    }
    /// Padded dimension `d' = 2^⌈log₂ d⌉`: the length of every encoding and of the sum.
    #[getter]
    fn padded_dim(&self) -> usize {
        self.inner.padded_dim
    }
    /// Bits `b` of the modular arithmetic.
    #[getter]
    fn bits(&self) -> u32 {
        self.inner.bits
    }
    /// ℓ2 clip norm `c`.
    #[getter]
    fn clip(&self) -> f64 {
        self.inner.clip
    }
    /// Clients `n` the noise is split over (the minimum expected to survive).
    #[getter]
    fn clients(&self) -> usize {
        self.inner.clients
    }
    /// The most contributors the modular range and the wrap probability are sized for.
    #[getter]
    fn max_contributors(&self) -> usize {
        self.inner.max_contributors
    }
    /// The fraction γ of the cohort assumed to collude with the server.
    #[getter]
    fn colluding_fraction(&self) -> f64 {
        self.inner.colluding_fraction
    }
    /// The colluders assumed, `⌈γ·max_contributors⌉`.
    #[getter]
    fn colluders(&self) -> usize {
        self.inner.colluders
    }
    /// The honest lower bound `clients − colluders` whose noise the ε counts.
    #[getter]
    fn honest_contributors(&self) -> usize {
        self.inner.honest_contributors
    }
    /// Local (per-client) noise standard deviation σ, unscaled.
    #[getter]
    fn local_noise_stddev(&self) -> f64 {
        self.inner.local_noise_stddev
    }
    /// Central noise standard deviation `σ·√n`, unscaled.
    #[getter]
    fn central_noise_stddev(&self) -> f64 {
        self.inner.central_noise_stddev
    }
    /// Probability that one coordinate of the aggregate wraps.
    #[getter]
    fn wrap_probability(&self) -> f64 {
        self.inner.wrap_probability
    }
    /// `"skellam"` or `"ddg"`: the noise each client adds.
    #[getter]
    fn share(&self) -> &'static str {
        share_name(self.inner.share)
    }
    /// The parameters every client and the server need (dim, clip, bits, scale,
    /// local_noise_stddev, beta, k, padded_dim): send them to the clients, who pass the dict to
    /// `SkellamEncoder`.
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        params_dict(py, &self.inner.params)
    }
    /// The expected `E‖x̂ − x̄‖²` of the decoded mean over `contributors` clients, by source
    /// (`quantization`, `noise`, `wrap`, `total`).
    fn predicted_mse<'py>(
        &self,
        py: Python<'py>,
        contributors: i64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let m = count("contributors", contributors, 1)?;
        to_python(py, &self.inner.predicted_mse(m))
    }
    /// Everything the planner computed (a JSON-serializable dict), with `params`.
    fn describe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = to_python(py, &self.inner)?.cast_into::<PyDict>()?;
        d.set_item("params", params_dict(py, &self.inner.params)?)?;
        Ok(d)
    }
    fn __repr__(&self) -> String {
        let p = &self.inner;
        let eps = p.epsilon.map_or(String::new(), |e| {
            format!(" epsilon={e} delta={:?}", p.delta)
        });
        format!(
            "<SkellamPlan dim={} bits={} clients={} honest_contributors={} scale={} local_noise_stddev={}{eps}>",
            p.dim, p.bits, p.clients, p.honest_contributors, p.scale, p.local_noise_stddev
        )
    }
}

/// Plans a round of paper 001's pipeline. Give exactly one of `epsilon` (a target, with
/// `delta`: the smallest noise that reaches it after `rounds` rounds at `sampling_rate`) and
/// `noise_stddev` (the local σ per client, unscaled). `beta` is the conditional-rounding
/// parameter (default `e^{−1/2}`, as paper 001, `privfed dme skellam` and the FL config's
/// `privfed_fl::privacy::DEFAULT_BETA`; 0: plain stochastic rounding), `k` the aggregate
/// standard deviations the modular range holds. `clients` is the minimum number of
/// contributors the noise and ε are for; `max_contributors` (default `clients`) the most
/// encodings a sum can hold (the cohort before dropouts), which the range is sized for.
/// `colluding_fraction` γ ∈ [0, 1) is the fraction of that cohort that may collude with the
/// server: the noise and ε are for the honest lower bound `clients − ⌈γ·max_contributors⌉`
/// (reported as `colluding_fraction`, `colluders` and `honest_contributors`). Raises
/// `InfeasibleParameters` naming the knob to move when no parameters reach the target.
#[pyfunction]
#[pyo3(signature = (dim, clip, bits, clients, *, epsilon=None, delta=None, noise_stddev=None, sampling_rate=1.0, rounds=1, k=4.0, beta=0.6065306597126334, share="skellam", max_contributors=None, colluding_fraction=0.0))]
#[allow(clippy::too_many_arguments)]
fn plan(
    py: Python<'_>,
    dim: i64,
    clip: f64,
    bits: u32,
    clients: i64,
    epsilon: Option<f64>,
    delta: Option<f64>,
    noise_stddev: Option<f64>,
    sampling_rate: f64,
    rounds: u64,
    k: f64,
    beta: f64,
    share: &str,
    max_contributors: Option<i64>,
    colluding_fraction: f64,
) -> PyResult<SkellamPlan> {
    let noise = match (epsilon, noise_stddev) {
        (Some(e), None) => {
            if delta.is_none() {
                return Err(invalid("delta", "a target epsilon needs delta"));
            }
            NoiseTarget::Epsilon(e)
        }
        (None, Some(s)) => NoiseTarget::LocalStddev(s),
        (Some(_), Some(_)) => {
            return Err(invalid(
                "noise_stddev",
                "give either epsilon (a target, with delta) or noise_stddev, not both",
            ));
        }
        (None, None) => {
            return Err(invalid(
                "epsilon",
                "give epsilon with delta (a target) or noise_stddev",
            ));
        }
    };
    let req = PlanRequest {
        dim: count("dim", dim, 1)?,
        clip,
        bits,
        clients: count("clients", clients, 1)?,
        max_contributors: max_contributors
            .map(|m| count("max_contributors", m, 1))
            .transpose()?,
        k,
        beta,
        noise,
        delta,
        sampling_rate,
        rounds,
        share: share_from_str(share)?,
        colluding_fraction,
    };
    let inner = py.detach(|| privfed_distributed::plan(&req)).py()?;
    Ok(SkellamPlan { inner })
}

/// Checks the server's plan (a `SkellamPlan` or its params dict, as a client receives it)
/// against the client's plan policy: `None` (the defaults: refuse a plan without local noise),
/// `"permissive"`, or a dict of `allow_no_noise`, `min_local_noise_stddev`, `max_clip` (missing
/// fields keep their defaults). Raises `ProtocolAbort` naming the rule, the plan's value and the
/// limit; `InvalidParameter` for a malformed plan or policy.
#[pyfunction]
#[pyo3(signature = (plan, policy=None))]
fn check_plan(plan: &Bound<'_, PyAny>, policy: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    let policy = match policy.filter(|p| !p.is_none()) {
        None => PlanPolicy::default(),
        Some(p) => match p.extract::<String>().ok().as_deref() {
            Some("default") => PlanPolicy::default(),
            Some("permissive") => PlanPolicy::permissive(),
            _ => from_python(p, "plan policy", Kind::InvalidParameter)?,
        },
    };
    let (params, _) = params_of(plan, None)?;
    policy.check(&params).py()
}

/// The 256-bit seed of round `round`'s rotation in session `session_id`
/// (HKDF-SHA256; every client and the server derive the same one). 32 bytes.
#[pyfunction]
fn rotation_seed<'py>(py: Python<'py>, session_id: &[u8], round: u64) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &privfed_distributed::rotation_seed(session_id, round))
}

/// A client's encoder for one round (paper 001 Alg. 1): clip to `c`, scale, pad and rotate,
/// conditional stochastic rounding, add a Skellam (or discrete-Gaussian) share, wrap mod
/// `2^bits`. `plan` is a `SkellamPlan` or its `params` dict; `rotation_seed` the round's 32
/// bytes. The noise and the rounding come from an OS-seeded CSPRNG (`seed=` for experiments).
#[pyclass(frozen, module = "privfed.distributed", name = "SkellamEncoder")]
pub struct SkellamEncoder {
    inner: EncoderRs,
    share: NoiseShare,
    rng: SharedRng,
}

fn stats_dict<'py>(
    py: Python<'py>,
    s: &privfed_distributed::EncodeStats,
) -> PyResult<Bound<'py, PyAny>> {
    to_python(py, s)
}

#[pymethods]
impl SkellamEncoder {
    #[new]
    #[pyo3(signature = (plan, rotation_seed, *, share=None, seed=None))]
    fn new(
        plan: &Bound<'_, PyAny>,
        rotation_seed: &Bound<'_, PyAny>,
        share: Option<&str>,
        seed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let (params, share) = params_of(plan, share)?;
        let inner = EncoderRs::with_noise(params, seed32(rotation_seed)?, share).py()?;
        Ok(Self {
            inner,
            share,
            rng: SharedRng::new(seed)?,
        })
    }

    /// Encodes `x` (float32/float64 of shape `(dim,)`, or `(n, dim)`: each row one client's
    /// vector) into `uint64` entries in `[0, 2^bits)` of length `padded_dim`. With
    /// `return_stats=True` also returns the stats (`clipped`, `rounding_tries`; a list for a
    /// batch). The GIL is released; the noise is drawn on up to `threads` threads and does not
    /// depend on their number.
    #[pyo3(signature = (x, *, return_stats=false, threads=None))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        return_stats: bool,
        threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let threads = self::threads(threads)?;
        let f: Floats = read_floats(x, "x")?;
        let p = self.inner.params();
        let (dim, padded) = (p.dim(), p.padded_dim());
        let rows = match f.dims.as_slice() {
            [d] if *d == dim => None,
            [n, d] if *d == dim => Some(*n),
            _ => {
                return Err(error(
                    Kind::InvalidInput,
                    format!(
                        "expected x of shape ({dim},) or (n, {dim}); got shape {:?}",
                        f.dims
                    ),
                ));
            }
        };
        let mut rng = self.rng.fork();
        let enc = &self.inner;
        let n = rows.unwrap_or(1);
        let (out, stats) = py
            .detach(|| {
                let mut out = vec![0u64; n * padded];
                let mut stats = Vec::with_capacity(n);
                for (o, xr) in out.chunks_mut(padded).zip(f.data.chunks(dim)) {
                    stats.push(enc.encode_into_threads(xr, o, &mut rng, threads)?);
                }
                Ok::<_, privfed_distributed::DistributedError>((out, stats))
            })
            .py()?;
        let dims: Vec<usize> = match rows {
            None => vec![padded],
            Some(n) => vec![n, padded],
        };
        let arr = write_u64(py, out, &dims)?;
        if !return_stats {
            return Ok(arr);
        }
        let s = match rows {
            None => stats_dict(py, &stats[0])?,
            Some(_) => to_python(py, &stats)?,
        };
        Ok((arr, s).into_pyobject(py)?.into_any())
    }

    /// The round's parameters (the dict `SkellamPlan.params` gives).
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        params_dict(py, self.inner.params())
    }
    /// `"skellam"` or `"ddg"`.
    #[getter]
    fn share(&self) -> &'static str {
        share_name(self.share)
    }
    /// Length of an encoding, `padded_dim`.
    #[getter]
    fn padded_dim(&self) -> usize {
        self.inner.params().padded_dim()
    }
    fn __repr__(&self) -> String {
        let p = self.inner.params();
        format!(
            "<SkellamEncoder dim={} padded_dim={} bits={} share={}>",
            p.dim(),
            p.padded_dim(),
            p.bits(),
            share_name(self.share)
        )
    }
}

/// A running sum of vectors in `Z_{2^bits}^length`: the in-process stand-in for secure
/// aggregation (which computes the same value without anyone seeing a summand).
#[pyclass(module = "privfed.distributed", name = "ModularSum")]
pub struct ModularSum {
    inner: ModularSumRs,
}

#[pymethods]
impl ModularSum {
    #[new]
    fn new(bits: u32, length: i64) -> PyResult<Self> {
        let len = count("length", length, 1)?;
        Ok(Self {
            inner: ModularSumRs::new(bits, len).py()?,
        })
    }

    /// Adds one client's vector (integers in `[0, 2^bits)`, shape `(length,)`), or each row of a
    /// `(n, length)` batch as one contribution. Untrusted input: on any error nothing is added.
    fn add(&mut self, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let ints = read_u64(v, "v")?;
        let len = self.inner.value().len();
        match ints.dims.as_slice() {
            [_] => self.inner.add(&ints.data).py(),
            [_, l] if *l == len => {
                let mut next = self.inner.clone();
                for row in ints.data.chunks(len) {
                    next.add(row).py()?;
                }
                self.inner = next;
                Ok(())
            }
            _ => Err(error(
                Kind::InvalidInput,
                format!(
                    "expected a vector of shape ({len},) or (n, {len}); got shape {:?}",
                    ints.dims
                ),
            )),
        }
    }

    /// The sum so far (`uint64`, a copy).
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, self.inner.value())
    }
    /// How many vectors were added.
    #[getter]
    fn contributions(&self) -> usize {
        self.inner.contributions()
    }
    /// The bit width.
    #[getter]
    fn bits(&self) -> u32 {
        self.inner.bits()
    }
    /// The vector length.
    #[getter]
    fn length(&self) -> usize {
        self.inner.value().len()
    }
    fn __repr__(&self) -> String {
        format!(
            "<ModularSum bits={} length={} contributions={}>",
            self.inner.bits(),
            self.inner.value().len(),
            self.inner.contributions()
        )
    }
}

/// The decoded aggregate of one round: the private `mean` and `sum` (float64, length `dim`),
/// and the wrap report (`near_boundary` coordinates against `expected_near_boundary`;
/// `wrap_suspected`: the modular range was too small and the mean is not to be trusted).
#[pyclass(frozen, module = "privfed.distributed", name = "Decoded")]
pub struct Decoded {
    inner: DecodedRs,
}

#[pymethods]
impl Decoded {
    /// `sum / contributors` (float64).
    #[getter]
    fn mean<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, &self.inner.mean)
    }
    /// The private sum of the contributions (float64, unscaled).
    #[getter]
    fn sum<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, &self.inner.sum)
    }
    /// How many clients contributed.
    #[getter]
    fn contributors(&self) -> usize {
        self.inner.contributors
    }
    /// Coordinates of the sum within one planned standard deviation of `±2^(bits−1)`.
    #[getter]
    fn near_boundary(&self) -> usize {
        self.inner.near_boundary
    }
    /// How many such coordinates the plan expects without any wrap.
    #[getter]
    fn expected_near_boundary(&self) -> f64 {
        self.inner.expected_near_boundary
    }
    /// `near_boundary` exceeds its expectation by more than `6·√expected + 6`: a wrap.
    #[getter]
    fn wrap_suspected(&self) -> bool {
        self.inner.wrap_suspected
    }
    /// Everything as a dict (lists for the vectors).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner)
    }
    fn __repr__(&self) -> String {
        format!(
            "<Decoded contributors={} near_boundary={} wrap_suspected={}>",
            self.inner.contributors, self.inner.near_boundary, self.inner.wrap_suspected
        )
    }
}

/// The server's decoder for one round: `plan` (a `SkellamPlan` or its params dict) and the
/// round's `rotation_seed`.
#[pyclass(frozen, module = "privfed.distributed", name = "SkellamDecoder")]
pub struct SkellamDecoder {
    inner: DecoderRs,
}

#[pymethods]
impl SkellamDecoder {
    #[new]
    fn new(plan: &Bound<'_, PyAny>, rotation_seed: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (params, _) = params_of(plan, None)?;
        Ok(Self {
            inner: DecoderRs::new(params, seed32(rotation_seed)?).py()?,
        })
    }

    /// Decodes the modular sum (`uint64`, length `padded_dim`, from `ModularSum.value` or a
    /// secure-aggregation round) of `contributors ≥ 1` encodings. The GIL is released.
    fn decode(
        &self,
        py: Python<'_>,
        modular_sum: &Bound<'_, PyAny>,
        contributors: i64,
    ) -> PyResult<Decoded> {
        let v = read_u64_vector(modular_sum, "modular_sum")?;
        let m = count("contributors", contributors, 1)?;
        let dec = &self.inner;
        let inner = py.detach(|| dec.decode(&v, m)).py()?;
        Ok(Decoded { inner })
    }
}

/// The privacy event of one round in which `contributors` clients' shares reached the sum
/// (`privfed.accounting.SkellamDpEvent`, or the DDG event for `share="ddg"` plans): accounted
/// with the noise of those who actually contributed, never the planned cohort's.
#[pyfunction]
fn round_event<'py>(
    py: Python<'py>,
    plan: &Bound<'py, PyAny>,
    contributors: i64,
) -> PyResult<Bound<'py, PyAny>> {
    let (params, share) = params_of(plan, None)?;
    let m = count("contributors", contributors, 0)?;
    let e = round_event_for(share, &params, m).py()?;
    event_to_py(py, &e)
}

/// The honest lower bound `contributors − ⌈γ·cohort⌉` on the clients whose noise protects a
/// client when a fraction `colluding_fraction` = γ of `cohort` may collude with the server
/// (`privfed_distributed::honest_contributors`). Raises InvalidParameter for γ outside [0, 1)
/// or when the colluders could be every contributor.
#[pyfunction]
fn honest_contributors(cohort: i64, contributors: i64, colluding_fraction: f64) -> PyResult<usize> {
    let n = count("cohort", cohort, 1)?;
    let m = count("contributors", contributors, 0)?;
    privfed_distributed::honest_contributors(n, m, colluding_fraction).py()
}

/// Registers the classes and functions (re-exported by `privfed.distributed`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SkellamPlan>()?;
    m.add_class::<SkellamEncoder>()?;
    m.add_class::<ModularSum>()?;
    m.add_class::<Decoded>()?;
    m.add_class::<SkellamDecoder>()?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(rotation_seed, m)?)?;
    m.add_function(wrap_pyfunction!(round_event, m)?)?;
    m.add_function(wrap_pyfunction!(honest_contributors, m)?)?;
    m.add_function(wrap_pyfunction!(check_plan, m)?)?;
    Ok(())
}
