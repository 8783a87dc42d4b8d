//! The MVU designer (paper 004 §3.4): `privfed.mvu.design(...)` and the `MvuDesign` class.

use crate::errors::{PyResultExt, invalid};
use crate::json::{from_python, json_to_python, to_json, to_python};
use numpy::{PyArray1, PyArray2};
use privfed_compression::designer::{DesignOptions, DesignReport, design_mvu};
use privfed_compression::rdp::REPORT_ORDERS;
use privfed_mechanisms::mvu::{DpConstraint, MvuDesign as Design};
use pyo3::prelude::*;
use std::time::Instant;

/// A validated MVU design: the input grid's `2^input_bits` rows of probabilities over the
/// `2^output_bits` letters of `alphabet` (paper 004 Alg. 1, offline phase). Round-trips through
/// `to_json()` / `MvuDesign.from_json()` (the format of `privfed mvu design --out`).
#[pyclass(frozen, module = "privfed.mvu", name = "MvuDesign")]
pub struct MvuDesign {
    pub(crate) inner: Design,
    report: Option<String>,
}

/// Runs the designer without the GIL.
pub fn design(
    py: Python<'_>,
    input_bits: u32,
    output_bits: u32,
    epsilon: f64,
    constraint: DpConstraint,
    options: Option<DesignOptions>,
) -> PyResult<DesignReport> {
    if output_bits == 0 {
        return Err(invalid(
            "output_bits",
            "an unbiased mechanism needs at least 1 output bit (2 letters)",
        ));
    }
    let options = options.unwrap_or_default();
    py.detach(|| design_mvu(input_bits, output_bits, epsilon, constraint, &options))
        .py()
}

fn constraint(kind: &str, power: u32) -> PyResult<DpConstraint> {
    match kind {
        "ldp" => Ok(DpConstraint::Ldp),
        "metric" => Ok(DpConstraint::Metric { power }),
        other => Err(invalid(
            "constraint",
            format!("expected \"ldp\" or \"metric\", got {other:?}"),
        )),
    }
}

/// Designs the MVU mechanism for `input_bits` → `output_bits` at budget `epsilon`
/// (`constraint="ldp"`, or `"metric"` with distance power `power` ∈ {1, 2}: paper 004 §4).
/// Returns the design with the designer's report (`report`: the dict `privfed mvu design --json`
/// prints, `privfed_compression::designer::DesignSummary` — variance, worst-case variance, the
/// exact ε, gRR's variance at the same budget, violations, solver calls, seconds, P, alphabet).
#[pyfunction]
#[pyo3(name = "design", signature = (input_bits, output_bits, epsilon, *, constraint="ldp", power=1))]
fn design_py(
    py: Python<'_>,
    input_bits: u32,
    output_bits: u32,
    epsilon: f64,
    constraint: &str,
    power: u32,
) -> PyResult<MvuDesign> {
    let c = self::constraint(constraint, power)?;
    let start = Instant::now();
    let r = design(py, input_bits, output_bits, epsilon, c, None)?;
    let summary = r.summary(
        input_bits,
        output_bits,
        c,
        epsilon,
        start.elapsed().as_secs_f64(),
    );
    let report = to_json(&summary)?;
    Ok(MvuDesign {
        inner: r.design,
        report: Some(report),
    })
}

/// The report of `privfed mvu rdp --json` as a dict (`privfed_compression::rdp::rdp_report`,
/// paper 004 §4.3): the design's exact scalar Rényi DP `ε(α)` at each of `orders` and its exact
/// ε-LDP; with `dim` and `sensitivity` (both or neither) also the vector bounds — the greedy
/// bound (Lemma 7) and the LP relaxation — for `dim` coordinates whose neighbouring rescaled
/// inputs are `sensitivity` apart in ℓp (p from the design's metric; 1 for an LDP design).
#[pyfunction]
#[pyo3(signature = (design, orders=None, *, dim=None, sensitivity=None))]
fn rdp_report<'py>(
    py: Python<'py>,
    design: &MvuDesign,
    orders: Option<Vec<f64>>,
    dim: Option<usize>,
    sensitivity: Option<f64>,
) -> PyResult<Bound<'py, PyAny>> {
    let orders = orders.unwrap_or_else(|| REPORT_ORDERS.to_vec());
    let vector = match (dim, sensitivity) {
        (Some(dim), Some(sensitivity)) => Some((dim, sensitivity)),
        (None, None) => None,
        (None, Some(_)) => {
            return Err(invalid("dim", "the vector bounds need dim and sensitivity"));
        }
        (Some(_), None) => {
            return Err(invalid(
                "sensitivity",
                "the vector bounds need dim and sensitivity",
            ));
        }
    };
    let report = py
        .detach(|| privfed_compression::rdp::rdp_report(&design.inner, &orders, vector))
        .py()?;
    to_python(py, &report)
}

#[pymethods]
impl MvuDesign {
    /// A design from its JSON (a `str` or the dict of `to_dict()`), validated.
    #[staticmethod]
    fn from_json(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(Self {
            inner: from_python(obj, "MVU design", crate::errors::Kind::InvalidParameter)?,
            report: None,
        })
    }

    /// The design as JSON text.
    fn to_json(&self) -> String {
        serde_json::to_string(&self.inner).unwrap_or_default()
    }

    /// The design as a dict.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner)
    }

    /// The designer's report (None for a loaded design).
    #[getter]
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match &self.report {
            Some(s) => json_to_python(py, s).map(Some),
            None => Ok(None),
        }
    }

    /// Input bits `b_in`.
    #[getter]
    fn input_bits(&self) -> u32 {
        self.inner.input_bits()
    }

    /// Output bits `b_out`.
    #[getter]
    fn output_bits(&self) -> u32 {
        self.inner.output_bits()
    }

    /// The exact ε-LDP of the design (largest log ratio of a column; metric designs included).
    #[getter]
    fn epsilon(&self) -> f64 {
        self.inner.ldp_epsilon()
    }

    /// The exact ε of the design's own constraint (metric designs: per unit distance).
    #[getter]
    fn constraint_epsilon(&self) -> f64 {
        self.inner.exact_epsilon()
    }

    /// The constraint as a dict (`{"kind": "ldp"}` or `{"kind": "metric", "power": p}`).
    #[getter]
    fn constraint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.constraint())
    }

    /// The probabilities `P[i, j]` (inputs × letters).
    #[getter]
    fn p<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        Ok(PyArray2::from_vec2(py, self.inner.p())?)
    }

    /// The output alphabet `a` on `[0, 1]` (the design's scale).
    #[getter]
    fn alphabet<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_slice(py, self.inner.alphabet())
    }

    /// `E[(a_J − x_i)²]` at each input grid point.
    #[getter]
    fn grid_variances<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        PyArray1::from_vec(py, self.inner.grid_variances())
    }

    fn __repr__(&self) -> String {
        format!(
            "<MvuDesign input_bits={} output_bits={} epsilon={}>",
            self.inner.input_bits(),
            self.inner.output_bits(),
            self.inner.ldp_epsilon()
        )
    }
}

/// Registers `MvuDesign`, `design` and `rdp_report` (re-exported by `privfed.mvu`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<MvuDesign>()?;
    m.add_function(wrap_pyfunction!(design_py, m)?)?;
    m.add_function(wrap_pyfunction!(rdp_report, m)?)?;
    Ok(())
}
