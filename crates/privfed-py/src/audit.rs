//! Empirical privacy auditing (`privfed_audit`; `docs/AUDIT.md`) and the canaries of a
//! federated-learning audit (`privfed_fl::audit`) — re-exported by `privfed.audit`.
//!
//! Thin glue: every number is computed by the Rust crates (the one-run bound, the one-shot
//! estimate, Clopper–Pearson, GDP conversions, the canary directions and the per-round audit of
//! `privfed fl train`), so Python, the CLI and the Flower integration agree exactly.

use crate::arrays::read_vector;
use crate::errors::{Kind, PyResultExt, ToPyErr, error, invalid};
use crate::json::to_python;
use numpy::{PyArray1, PyArrayMethods};
use privfed_audit::AuditError;
use privfed_fl::audit::{Canaries, RoundAudit, canary_directions as fl_directions};
use privfed_fl::config::{AuditConfig, Seed};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyString};

impl ToPyErr for AuditError {
    fn to_pyerr(self) -> PyErr {
        let kind = match self {
            AuditError::InvalidParameter { .. } => Kind::InvalidParameter,
            AuditError::TooFewSamples(_) => Kind::InvalidInput,
            AuditError::Mechanism(e) => return e.to_pyerr(),
            AuditError::Accounting(e) => return e.to_pyerr(),
            _ => Kind::Base,
        };
        error(kind, self.to_string())
    }
}

/// `alpha = 1 − confidence`, checked.
fn alpha_of(confidence: f64) -> PyResult<f64> {
    if confidence > 0.0 && confidence < 1.0 {
        Ok(1.0 - confidence)
    } else {
        Err(invalid(
            "confidence",
            format!("must lie in (0, 1), got {confidence}"),
        ))
    }
}

/// The one-run audit's lower bound on ε (Steinke, Nasr, Jagielski 2023, "Privacy Auditing with
/// One (1) Training Run", Theorem 5.2): the largest ε whose p-value of `correct` or more right
/// guesses out of `guesses`, with `canaries` canaries each included with probability ½, is at
/// most `1 − confidence`. If the algorithm is (ε, δ)-DP per canary, the bound exceeds ε with
/// probability at most `1 − confidence`.
#[pyfunction]
#[pyo3(name = "epsilon_lower_bound", signature = (canaries, guesses, correct, delta, confidence=0.95))]
fn epsilon_lower_bound(
    canaries: u64,
    guesses: u64,
    correct: u64,
    delta: f64,
    confidence: f64,
) -> PyResult<f64> {
    let alpha = alpha_of(confidence)?;
    privfed_audit::one_run::epsilon_lower_bound(canaries, guesses, correct, delta, alpha).py()
}

/// The one-run audit's p-value `min(1, β + α·δ·2m)` of `correct` or more right guesses out of
/// `guesses` among `canaries` when the algorithm is (ε, δ)-DP (Steinke et al. 2023, Thm 5.2).
#[pyfunction]
#[pyo3(name = "one_run_p_value")]
fn one_run_p_value(
    canaries: u64,
    guesses: u64,
    correct: u64,
    epsilon: f64,
    delta: f64,
) -> PyResult<f64> {
    privfed_audit::one_run::p_value(canaries, guesses, correct, epsilon, delta).py()
}

/// The one-run audit's guesses from canary scores: the `k_plus` highest scores guess
/// "included", the `k_minus` lowest "excluded", the rest abstain (ties by index). Returns
/// `(guesses, correct)`.
#[pyfunction]
#[pyo3(name = "guesses")]
fn guesses(
    scores: &Bound<'_, PyAny>,
    included: Vec<bool>,
    k_plus: usize,
    k_minus: usize,
) -> PyResult<(u64, u64)> {
    let s = read_vector(scores, "scores")?;
    privfed_audit::one_run::guesses(&s, &included, k_plus, k_minus).py()
}

/// `⟨c, Δ⟩/(‖c‖·‖Δ‖)`, the score of a canary direction `c` against a model delta `Δ`
/// (Andrew et al. 2024).
#[pyfunction]
#[pyo3(name = "cosine")]
fn cosine(canary: &Bound<'_, PyAny>, model_delta: &Bound<'_, PyAny>) -> PyResult<f64> {
    let c = read_vector(canary, "canary")?;
    let d = read_vector(model_delta, "model_delta")?;
    privfed_audit::one_shot::cosine(&c, &d).py()
}

/// The one-shot estimate (Andrew, Kairouz, Oh, Oprea, McMahan, Suriyakumar 2024, "One-shot
/// empirical privacy estimation for federated learning"), read as μ-GDP with equal variances:
/// `μ̂ = (m̂_in − m̂_out)/ŝ`, `ε̂ = ε_μ̂(δ)`. Returns a dict with `epsilon`, `mu`,
/// `mean_included`, `mean_excluded`, `sd`. An estimate, not a bound.
#[pyfunction]
#[pyo3(name = "one_shot_epsilon")]
fn one_shot_epsilon<'py>(
    py: Python<'py>,
    included: &Bound<'py, PyAny>,
    excluded: &Bound<'py, PyAny>,
    delta: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let i = read_vector(included, "included")?;
    let e = read_vector(excluded, "excluded")?;
    let est = privfed_audit::one_shot::one_shot_epsilon(&i, &e, delta).py()?;
    to_python(py, &est)
}

/// One-sided Clopper–Pearson bounds on a binomial proportion (Clopper & Pearson 1934):
/// `lower = B⁻¹(α; k, n−k+1)`, `upper = B⁻¹(1−α; k+1, n−k)`, each holding with probability at
/// least `confidence`. Returns `(lower, upper)`; `two_sided=True` gives the two-sided interval
/// at `confidence` (each side at `α/2`).
#[pyfunction]
#[pyo3(name = "clopper_pearson", signature = (successes, trials, confidence=0.95, *, two_sided=false))]
fn clopper_pearson(
    successes: u64,
    trials: u64,
    confidence: f64,
    two_sided: bool,
) -> PyResult<(f64, f64)> {
    use privfed_audit::clopper_pearson as cp;
    let alpha = alpha_of(confidence)?;
    if two_sided {
        cp::interval(successes, trials, alpha).py()
    } else {
        Ok((
            cp::lower(successes, trials, alpha).py()?,
            cp::upper(successes, trials, alpha).py()?,
        ))
    }
}

/// ε at δ of a μ-GDP mechanism (Dong, Roth, Su 2022, Cor. 2.13): the smallest ε with
/// `Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) ≤ δ` (0 for `μ ≤ 0`).
#[pyfunction]
#[pyo3(name = "gdp_epsilon")]
fn gdp_epsilon(mu: f64, delta: f64) -> PyResult<f64> {
    privfed_audit::gdp::epsilon_for_mu(mu, delta).py()
}

/// `μ = Φ⁻¹(1 − FPR) − Φ⁻¹(FNR)`: the μ of the GDP tradeoff curve through `(FPR, FNR)`
/// (Dong, Roth, Su 2022).
#[pyfunction]
#[pyo3(name = "gdp_mu_from_tradeoff")]
fn gdp_mu_from_tradeoff(fpr: f64, fnr: f64) -> PyResult<f64> {
    privfed_audit::gdp::mu_from_tradeoff(fpr, fnr).py()
}

/// A run seed as `privfed fl train` reads one: an `int` in `[0, 2^64)` (its 8 little-endian
/// bytes then zeros), 64 hex digits, or 32 bytes; `None` draws one from the OS.
fn fl_seed(seed: Option<&Bound<'_, PyAny>>) -> PyResult<Seed> {
    let Some(seed) = seed.filter(|s| !s.is_none()) else {
        return Ok(Seed::from_os());
    };
    if seed.is_instance_of::<PyInt>() {
        let v: u64 = seed
            .extract()
            .map_err(|_| invalid("seed", "an int seed must lie in [0, 2**64)"))?;
        return Ok(Seed::from_u64(v));
    }
    if let Ok(b) = seed.cast::<PyBytes>() {
        let bytes = b.as_bytes();
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| invalid("seed", format!("expected 32 bytes, got {}", bytes.len())))?;
        return Ok(Seed(key));
    }
    if let Ok(s) = seed.cast::<PyString>() {
        return Seed::from_hex(&s.to_cow()?).py();
    }
    Err(invalid(
        "seed",
        "expected an int, 32 bytes or 64 hex digits",
    ))
}

/// The `canaries` unit directions of a `privfed fl train` run with `seed` in dimension `dim`
/// (float64, shape `(canaries, dim)`): exactly those the run inserts with `[audit] canaries`.
#[pyfunction]
#[pyo3(name = "canary_directions")]
fn canary_directions<'py>(
    py: Python<'py>,
    seed: &Bound<'py, PyAny>,
    canaries: usize,
    dim: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let s = fl_seed(Some(seed))?;
    let v = py.detach(|| fl_directions(&s, canaries, dim)).py()?;
    Ok(PyArray1::from_vec(py, v)
        .reshape([canaries, dim])?
        .into_any())
}

/// The canaries of a federated-learning audit (`privfed_fl::audit::Canaries`; docs/AUDIT.md):
/// `canaries` seeded unit directions in the model's `dim` parameters, each included with
/// probability ½, and the per-round audit of `privfed fl train` — cosines with the cumulative
/// model delta, the one-run lower bound (Steinke et al. 2023) at `confidence`, the one-shot
/// estimate (Andrew et al. 2024) and, under central DP, the canaries' own accounted ε.
///
/// The same `seed` (an int as in a run's `seed`, 64 hex digits or 32 bytes; `None`: from the
/// OS) gives the same directions and inclusion bits as `privfed fl train`. Whoever knows the seed
/// knows which canaries were included: the auditor keeps it secret.
#[pyclass(frozen, module = "privfed.audit", name = "CanarySet")]
pub struct CanarySet {
    inner: Canaries,
}

#[pymethods]
impl CanarySet {
    #[new]
    #[pyo3(signature = (canaries, dim, *, seed=None, delta=1e-5, confidence=0.95, guesses=None, norm=None, clip_norm=None, noise_multiplier=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        canaries: usize,
        dim: usize,
        seed: Option<&Bound<'_, PyAny>>,
        delta: f64,
        confidence: f64,
        guesses: Option<usize>,
        norm: Option<f64>,
        clip_norm: Option<f64>,
        noise_multiplier: Option<f64>,
    ) -> PyResult<Self> {
        let cfg = AuditConfig {
            canaries,
            confidence,
            guesses,
            norm,
        };
        cfg.validate().py()?;
        if canaries >= dim {
            return Err(error(
                Kind::ConfigError,
                format!(
                    "{canaries} canaries in a model of {dim} parameters: the audit needs fewer \
                     canaries than parameters (nearly orthogonal directions)"
                ),
            ));
        }
        if !(delta > 0.0 && delta < 1.0) {
            return Err(invalid("delta", format!("must lie in (0, 1), got {delta}")));
        }
        let clip_and_z = match (clip_norm, noise_multiplier) {
            (None, None) => None,
            (Some(c), Some(z)) if c.is_finite() && c > 0.0 && z.is_finite() && z > 0.0 => {
                Some((c, z))
            }
            _ => {
                return Err(invalid(
                    "clip_norm, noise_multiplier",
                    "central DP needs both, finite and > 0 (or neither, without privacy)",
                ));
            }
        };
        let seed = fl_seed(seed)?;
        let inner = py
            .detach(|| Canaries::from_seed(&cfg, dim, clip_and_z, delta, &seed))
            .py()?;
        Ok(Self { inner })
    }

    /// K, the number of canaries.
    #[getter]
    fn canaries(&self) -> usize {
        self.inner.included().len()
    }

    /// `d`, the model's number of parameters.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// The inclusion bits `S_i` (a list of bool; secret until the audit is published).
    #[getter]
    fn included(&self) -> Vec<bool> {
        self.inner.included().to_vec()
    }

    /// The unit directions `c_i` (float64, shape `(canaries, dim)`).
    #[getter]
    fn directions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = self.inner.directions().to_vec();
        Ok(PyArray1::from_vec(py, v)
            .reshape([self.canaries(), self.dim()])?
            .into_any())
    }

    /// The canary norm of a round: the fixed `norm` if given, else the clip norm under central
    /// DP, else `largest_update` (the round's largest real update norm), else `previous`, else 1.
    #[pyo3(signature = (largest_update=None, previous=None))]
    fn norm_for_round(&self, largest_update: Option<f64>, previous: Option<f64>) -> f64 {
        self.inner.norm_for_round(largest_update, previous)
    }

    /// The audit of the cumulative model delta `Δ = θ_t − θ_0` (1-D, `dim` numbers) after
    /// `rounds` rounds in which the included canaries were sent at `norm`: a dict in the shape of
    /// a round's `audit` in `privfed fl train --json` (`epsilon_lower_bound`, `epsilon_estimate`,
    /// `accounted_canary_epsilon`, `correct`, `norm`, and the other estimates it carries).
    fn audit<'py>(
        &self,
        py: Python<'py>,
        model_delta: &Bound<'py, PyAny>,
        norm: f64,
        rounds: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let d = read_vector(model_delta, "model_delta")?;
        let a = py.detach(|| self.inner.audit(&d, norm, rounds)).py()?;
        to_python(py, &a)
    }

    /// The run's audit from its last round's (a dict from [`CanarySet::audit`], or `None`):
    /// the shape of `audit` in `privfed fl train --json` (`canaries`, `included`, `norm`,
    /// `confidence`, `guesses`, `correct`, `epsilon_lower_bound`, `epsilon_estimate`, …).
    #[pyo3(signature = (last=None))]
    fn summary<'py>(
        &self,
        py: Python<'py>,
        last: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let last: Option<RoundAudit> = match last.filter(|l| !l.is_none()) {
            None => None,
            Some(l) => Some(crate::json::from_python(l, "last", Kind::InvalidInput)?),
        };
        to_python(py, &self.inner.summary(last.as_ref()))
    }
}

/// Registers the functions and the class.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(epsilon_lower_bound, m)?)?;
    m.add_function(wrap_pyfunction!(one_run_p_value, m)?)?;
    m.add_function(wrap_pyfunction!(guesses, m)?)?;
    m.add_function(wrap_pyfunction!(cosine, m)?)?;
    m.add_function(wrap_pyfunction!(one_shot_epsilon, m)?)?;
    m.add_function(wrap_pyfunction!(clopper_pearson, m)?)?;
    m.add_function(wrap_pyfunction!(gdp_epsilon, m)?)?;
    m.add_function(wrap_pyfunction!(gdp_mu_from_tradeoff, m)?)?;
    m.add_function(wrap_pyfunction!(canary_directions, m)?)?;
    m.add_class::<CanarySet>()?;
    Ok(())
}
