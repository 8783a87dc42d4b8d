//! Privacy accounting: `privfed.accounting` (names a dp_accounting or Opacus user knows).
//!
//! Events are Python objects defined in `privfed/accounting.py` (each with `to_dict()`, the
//! serde form of `privfed_accounting::DpEvent`), or plain dicts in that form. The accountants
//! here compose them in Rust.

use crate::errors::{Kind, PyResultExt, error, invalid};
use crate::json::{from_python, to_python};
use privfed_accounting::calibrate::{
    calibrate_laplace_scale, calibrate_noise_multiplier, calibrate_skellam_variance,
};
use privfed_accounting::report::{self, AccountRequest, Calibrated, Query};
use privfed_accounting::{
    AccountantKind, DpEvent, Ledger, NeighbouringRelation, PldAccountant, PrivacyAccountant,
    PureCappedRdpAccountant, RdpAccountant,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

/// Reads an event: an object with `to_dict()`, a dict in the serde form, its JSON text, or a
/// dp_accounting event (converted by `privfed.accounting._from_dp_accounting`, by class name).
pub fn event_from_py(obj: &Bound<'_, PyAny>) -> PyResult<DpEvent> {
    let d = if obj.hasattr("to_dict")? {
        obj.call_method0("to_dict")?
    } else if obj.is_instance_of::<PyDict>() || obj.is_instance_of::<PyString>() {
        obj.clone()
    } else {
        let m = obj.py().import("privfed.accounting")?;
        if m.call_method1("_is_dp_accounting_event", (obj,))?
            .is_truthy()?
        {
            m.call_method1("_from_dp_accounting", (obj,))?
        } else {
            let ty = obj.get_type().name()?.to_string();
            return Err(invalid(
                "event",
                format!(
                    "expected a privfed.accounting event, its dict or a dp_accounting event, got {ty}"
                ),
            ));
        }
    };
    from_python(&d, "privacy event", Kind::InvalidParameter)
}

/// A neighbouring relation from Python: `"add_or_remove_one"`, `"replace_one"` (any case), or
/// dp_accounting's `NeighboringRelation` member (by its name); `None` is add/remove-one.
fn relation_from_py(obj: Option<&Bound<'_, PyAny>>) -> PyResult<NeighbouringRelation> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(NeighbouringRelation::AddOrRemoveOne);
    };
    let name: String = if let Ok(s) = obj.extract::<String>() {
        s
    } else if obj.hasattr("name")? {
        obj.getattr("name")?.extract()?
    } else {
        String::new()
    };
    match name.to_ascii_lowercase().as_str() {
        "add_or_remove_one" => Ok(NeighbouringRelation::AddOrRemoveOne),
        "replace_one" => Ok(NeighbouringRelation::ReplaceOne),
        _ => Err(invalid(
            "neighboring_relation",
            format!(
                "expected \"add_or_remove_one\" or \"replace_one\" (or dp_accounting's NeighboringRelation), got {}",
                obj.repr()?
            ),
        )),
    }
}

/// The one step of DP-SGD / DP-FedAvg: the Gaussian on a Poisson sample (the Gaussian alone at
/// rate 1), as `DpEvent::poisson_gaussian` builds it inside its `SelfComposed`.
fn step_event(sample_rate: f64, noise_multiplier: f64) -> DpEvent {
    let inner = DpEvent::Gaussian { noise_multiplier };
    if sample_rate == 1.0 {
        inner
    } else {
        DpEvent::PoissonSampled {
            rate: sample_rate,
            event: Box::new(inner),
        }
    }
}

/// The Python event object of a Rust event (`privfed.accounting.event_from_dict`).
pub fn event_to_py<'py>(py: Python<'py>, e: &DpEvent) -> PyResult<Bound<'py, PyAny>> {
    let d = to_python(py, e)?;
    py.import("privfed.accounting")?
        .call_method1("event_from_dict", (d,))
}

#[derive(Clone)]
enum AnyAccountant {
    Rdp(RdpAccountant),
    Pld(PldAccountant),
    Capped(PureCappedRdpAccountant),
}

impl AnyAccountant {
    fn get(&self) -> &dyn PrivacyAccountant {
        match self {
            Self::Rdp(a) => a,
            Self::Pld(a) => a,
            Self::Capped(a) => a,
        }
    }
    fn get_mut(&mut self) -> &mut dyn PrivacyAccountant {
        match self {
            Self::Rdp(a) => a,
            Self::Pld(a) => a,
            Self::Capped(a) => a,
        }
    }
    /// A fresh accountant with the same settings.
    fn fresh(&self) -> Self {
        match self {
            Self::Rdp(a) => Self::Rdp(
                RdpAccountant::with_relation(a.orders().to_vec(), a.relation()).unwrap_or_default(),
            ),
            Self::Pld(a) => Self::Pld(
                PldAccountant::with_discretization(a.value_discretization_interval())
                    .unwrap_or_default(),
            ),
            Self::Capped(a) => Self::Capped(PureCappedRdpAccountant::from_rdp(
                RdpAccountant::with_orders(a.rdp().orders().to_vec()).unwrap_or_default(),
            )),
        }
    }
    fn settings(&self, py: Python<'_>, d: &Bound<'_, PyDict>) -> PyResult<()> {
        match self {
            Self::Rdp(a) => {
                d.set_item("accountant", "rdp")?;
                d.set_item("orders", PyList::new(py, a.orders())?)?;
                d.set_item("neighbouring_relation", to_python(py, &a.relation())?)?;
            }
            Self::Pld(a) => {
                d.set_item("accountant", "pld")?;
                d.set_item("discretization", a.value_discretization_interval())?;
            }
            Self::Capped(a) => {
                d.set_item("accountant", "rdp_pure_capped")?;
                d.set_item("orders", PyList::new(py, a.rdp().orders())?)?;
            }
        }
        Ok(())
    }
}

/// Base class of the accountants: compose events, answer ε for δ and δ for ε, keep a ledger.
///
/// Contract: `supports(e)` is true exactly when `compose(e)` would succeed; a failed `compose`
/// changes nothing; the ledger holds exactly the composed events.
#[pyclass(subclass, module = "privfed.accounting", name = "PrivacyAccountant")]
pub struct Accountant {
    inner: AnyAccountant,
}

fn budget_pair(budget: &Bound<'_, PyAny>) -> PyResult<(f64, f64)> {
    if let Ok((e, d)) = budget.extract::<(f64, f64)>() {
        return Ok((e, d));
    }
    if budget.hasattr("epsilon")? && budget.hasattr("delta")? {
        return Ok((
            budget.getattr("epsilon")?.extract()?,
            budget.getattr("delta")?.extract()?,
        ));
    }
    Err(invalid(
        "budget",
        "expected (epsilon, delta) or an object with .epsilon and .delta",
    ))
}

/// One of two spellings of a required argument: positional (dp_accounting's `target_delta`)
/// or keyword (Opacus's `delta=`).
fn one_of(name: &str, positional: Option<f64>, keyword: Option<f64>) -> PyResult<f64> {
    match (positional, keyword) {
        (Some(v), None) | (None, Some(v)) => Ok(v),
        (None, None) => Err(invalid(name, "missing")),
        (Some(_), Some(_)) => Err(invalid(name, "given twice (positionally and by keyword)")),
    }
}

/// The ledger as Python events, a run of `count > 1` as `SelfComposedDpEvent(event, count)`.
fn ledger_to_py<'py>(py: Python<'py>, ledger: &Ledger) -> PyResult<Bound<'py, PyList>> {
    let items = match ledger.as_event() {
        DpEvent::Composed { events } => events
            .iter()
            .map(|e| event_to_py(py, e))
            .collect::<PyResult<Vec<_>>>()?,
        other => vec![event_to_py(py, &other)?],
    };
    PyList::new(py, items)
}

#[pymethods]
impl Accountant {
    /// A short name: `"rdp"`, `"pld"` or `"rdp_pure_capped"`.
    #[getter]
    fn name(&self) -> &'static str {
        self.inner.get().name()
    }

    /// The neighbouring relation of the reported guarantees (e.g. `"add_or_remove_one"`).
    #[getter]
    fn neighbouring_relation<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_python(py, &self.inner.get().neighbouring_relation())
    }

    /// Whether `event` is valid and of a kind this accountant composes (no state change).
    fn supports(&self, event: &Bound<'_, PyAny>) -> PyResult<bool> {
        match event_from_py(event) {
            Ok(e) => Ok(self.inner.get().supports(&e)),
            Err(_) => Ok(false),
        }
    }

    /// Composes `event` `count` times (validated first; on error nothing changes). Composing
    /// the last composed event again only extends the ledger's last run (O(1)). Returns `self`,
    /// so calls chain.
    #[pyo3(signature = (event, count=1))]
    fn compose<'py>(
        mut slf: PyRefMut<'py, Self>,
        event: &Bound<'py, PyAny>,
        count: u64,
    ) -> PyResult<PyRefMut<'py, Self>> {
        let e = event_from_py(event)?;
        let py = slf.py();
        let acc = &mut slf.inner;
        py.detach(|| acc.get_mut().compose_repeated(&e, count))
            .py()?;
        Ok(slf)
    }

    /// ε of everything composed so far at δ ∈ (0, 1), given positionally (dp_accounting's
    /// `target_delta`) or as `delta=` (Opacus).
    #[pyo3(signature = (target_delta=None, *, delta=None))]
    fn get_epsilon(
        &self,
        py: Python<'_>,
        target_delta: Option<f64>,
        delta: Option<f64>,
    ) -> PyResult<f64> {
        let d = one_of("delta", target_delta, delta)?;
        let a = &self.inner;
        py.detach(|| a.get().get_epsilon(d)).py()
    }

    /// δ of everything composed so far at ε ≥ 0, positionally (`target_epsilon`) or as
    /// `epsilon=`.
    #[pyo3(signature = (target_epsilon=None, *, epsilon=None))]
    fn get_delta(
        &self,
        py: Python<'_>,
        target_epsilon: Option<f64>,
        epsilon: Option<f64>,
    ) -> PyResult<f64> {
        let e = one_of("epsilon", target_epsilon, epsilon)?;
        let a = &self.inner;
        py.detach(|| a.get().get_delta(e)).py()
    }

    /// Opacus-style: `steps` steps of DP-SGD / DP-FedAvg — the Gaussian mechanism with
    /// `noise_multiplier` on a Poisson sample at `sample_rate` (the Gaussian alone at rate 1).
    /// Repeated identical steps cost O(1) each: they extend one ledger run, and ε is computed at
    /// query time.
    #[pyo3(signature = (*, noise_multiplier, sample_rate, steps=1))]
    fn step(&mut self, noise_multiplier: f64, sample_rate: f64, steps: u64) -> PyResult<()> {
        let e = step_event(sample_rate, noise_multiplier);
        self.inner.get_mut().compose_repeated(&e, steps).py()
    }

    /// Whether composing `event` (default: nothing more) would make ε at the budget's δ exceed
    /// the budget's ε. `budget` is `(epsilon, delta)` or an object with `.epsilon`, `.delta`.
    /// The accountant is not changed.
    #[pyo3(signature = (budget, event=None))]
    fn would_exceed(
        &self,
        py: Python<'_>,
        budget: &Bound<'_, PyAny>,
        event: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let (eps, delta) = budget_pair(budget)?;
        if eps.is_nan() || eps < 0.0 {
            return Err(invalid(
                "budget",
                format!("epsilon must be >= 0, got {eps}"),
            ));
        }
        let e = event.map(event_from_py).transpose()?;
        let mut a = self.inner.clone();
        let got = py
            .detach(|| {
                if let Some(e) = &e {
                    a.get_mut().compose(e)?;
                }
                a.get().get_epsilon(delta)
            })
            .py()?;
        Ok(got > eps)
    }

    /// The composed events, in order, runs of the same event coalesced: a run of `count > 1`
    /// is one `SelfComposedDpEvent(event, count)` (so `T` identical steps are one entry).
    #[getter]
    fn ledger<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        ledger_to_py(py, self.inner.get().ledger())
    }

    /// The ledger's runs: `(event, count)` pairs, in order.
    #[getter]
    fn ledger_runs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .get()
            .ledger()
            .runs()
            .iter()
            .map(|r| {
                let e = event_to_py(py, &r.event)?;
                PyTuple::new(py, [e, r.count.into_pyobject(py)?.into_any()])
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Number of compositions (a `compose(e, count)` or `step(steps=)` counts `count` / `steps`).
    fn __len__(&self) -> usize {
        self.inner.get().ledger().len()
    }

    /// Everything composed, as one event (`ComposedDpEvent` of the ledger's runs).
    fn as_event<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        event_to_py(py, &self.inner.get().ledger().as_event())
    }

    /// The state: the accountant's settings and its ledger's runs in serde form
    /// (JSON-serializable; `"runs": [{"event": ..., "count": n}, ...]`, so its size does not grow
    /// with repeated steps).
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        self.inner.settings(py, &d)?;
        d.set_item("runs", to_python(py, self.inner.get().ledger().runs())?)?;
        Ok(d)
    }

    /// Restores a `state_dict()`: the settings must match this accountant's; its runs are
    /// composed again, each once with its count (the accountants are deterministic functions of
    /// their ledger). A state with one entry per composition (`"events": [...]`, older
    /// versions) is read too.
    fn load_state_dict(&mut self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let mine = PyDict::new(py);
        self.inner.settings(py, &mine)?;
        for key in mine.keys() {
            let ours = mine.get_item(&key)?;
            let theirs = match state.get_item(&key)? {
                // Older states have no relation: they were add/remove-one.
                None if key.extract::<String>()? == "neighbouring_relation" => {
                    Some(PyString::new(py, "add_or_remove_one").into_any())
                }
                other => other,
            };
            let same = match (&theirs, &ours) {
                (Some(t), Some(o)) => t.eq(o)?,
                _ => false,
            };
            if !same {
                return Err(invalid(
                    "state",
                    format!("`{key}` differs from this accountant's ({ours:?} vs {theirs:?})"),
                ));
            }
        }
        let d = PyDict::new(py);
        match (state.get_item("runs")?, state.get_item("events")?) {
            (Some(runs), _) => d.set_item("runs", runs)?,
            (None, Some(events)) => d.set_item("events", events)?,
            (None, None) => return Err(invalid("state", "no `runs` (or `events`)")),
        }
        let ledger: Ledger = from_python(&d, "state", Kind::InvalidParameter)?;
        let mut fresh = self.inner.fresh();
        py.detach(|| {
            ledger
                .runs()
                .iter()
                .try_for_each(|r| fresh.get_mut().compose_repeated(&r.event, r.count))
        })
        .py()?;
        self.inner = fresh;
        Ok(())
    }

    fn __repr__(&self) -> String {
        let l = self.inner.get().ledger();
        format!(
            "<{} accountant, {} compositions in {} runs>",
            self.inner.get().name(),
            l.len(),
            l.runs().len()
        )
    }
}

/// The Rényi-DP accountant on an order grid (default: privfed's grid, fractional and integer
/// orders up to 10^4 (see `orders`)); supports every event.
#[pyclass(
    extends = Accountant,
    subclass,
    module = "privfed.accounting",
    name = "RdpAccountant"
)]
pub struct RdpAccountantPy;

#[pymethods]
impl RdpAccountantPy {
    #[new]
    #[pyo3(signature = (orders=None, neighboring_relation=None))]
    fn new(
        orders: Option<Vec<f64>>,
        neighboring_relation: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let relation = relation_from_py(neighboring_relation)?;
        let orders = orders.unwrap_or_else(privfed_accounting::rdp::default_orders);
        let a = RdpAccountant::with_relation(orders, relation).py()?;
        Ok(PyClassInitializer::from(Accountant {
            inner: AnyAccountant::Rdp(a),
        })
        .add_subclass(Self))
    }

    /// The Rényi orders.
    #[getter]
    fn orders(slf: PyRef<'_, Self>) -> Vec<f64> {
        match &slf.as_super().inner {
            AnyAccountant::Rdp(a) => a.orders().to_vec(),
            _ => Vec::new(),
        }
    }

    /// `(epsilon, optimal_order)` at `target_delta` (dp_accounting's name).
    fn get_epsilon_and_optimal_order(
        slf: PyRef<'_, Self>,
        target_delta: f64,
    ) -> PyResult<(f64, f64)> {
        match &slf.as_super().inner {
            AnyAccountant::Rdp(a) => {
                let r = a.get_epsilon_and_order(target_delta).py()?;
                Ok((r.epsilon, r.optimal_order))
            }
            _ => Err(error(Kind::Base, "not an RDP accountant")),
        }
    }

    /// Opacus's name and shape: `(epsilon, best_alpha)` at `delta` (the ε and the Rényi order
    /// that attains it). With `alphas`, the ledger is composed again on those orders (one curve
    /// per run) and answered there, as Opacus's `alphas=` does.
    #[pyo3(signature = (delta=None, alphas=None, *, target_delta=None))]
    fn get_privacy_spent(
        slf: PyRef<'_, Self>,
        delta: Option<f64>,
        alphas: Option<Vec<f64>>,
        target_delta: Option<f64>,
    ) -> PyResult<(f64, f64)> {
        let d = one_of("delta", delta, target_delta)?;
        let AnyAccountant::Rdp(a) = &slf.as_super().inner else {
            return Err(error(Kind::Base, "not an RDP accountant"));
        };
        let r = match alphas {
            None => a.get_epsilon_and_order(d).py()?,
            Some(orders) => {
                let mut b = RdpAccountant::with_relation(orders, a.relation()).py()?;
                slf.py()
                    .detach(|| {
                        a.ledger()
                            .runs()
                            .iter()
                            .try_for_each(|r| b.compose_repeated(&r.event, r.count))?;
                        b.get_epsilon_and_order(d)
                    })
                    .py()?
            }
        };
        Ok((r.epsilon, r.optimal_order))
    }
}

/// The privacy-loss-distribution accountant (discretization `value_discretization_interval`,
/// default privfed's); composes by FFT. Rejects Poisson sampling of anything but the Gaussian
/// and Laplace, and user RDP curves.
#[pyclass(
    extends = Accountant,
    subclass,
    module = "privfed.accounting",
    name = "PldAccountant"
)]
pub struct PldAccountantPy;

#[pymethods]
impl PldAccountantPy {
    #[new]
    #[pyo3(signature = (value_discretization_interval=None, *, neighboring_relation=None))]
    fn new(
        value_discretization_interval: Option<f64>,
        neighboring_relation: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        if relation_from_py(neighboring_relation)? != NeighbouringRelation::AddOrRemoveOne {
            return Err(invalid(
                "neighboring_relation",
                "the PLD accountant is add/remove-one only (sampling without replacement under \
                 replace-one: RdpAccountant(neighboring_relation=\"replace_one\"))",
            ));
        }
        let a = match value_discretization_interval {
            None => PldAccountant::new(),
            Some(h) => PldAccountant::with_discretization(h).py()?,
        };
        Ok(PyClassInitializer::from(Accountant {
            inner: AnyAccountant::Pld(a),
        })
        .add_subclass(Self))
    }
}

/// RDP capped by pure composition: when every composed event is pure ε-DP the answer is the
/// smaller of RDP's and `Σ ε_t` (local randomizers run many times).
#[pyclass(
    extends = Accountant,
    subclass,
    module = "privfed.accounting",
    name = "PureCappedRdpAccountant"
)]
pub struct PureCappedPy;

#[pymethods]
impl PureCappedPy {
    #[new]
    fn new() -> PyClassInitializer<Self> {
        PyClassInitializer::from(Accountant {
            inner: AnyAccountant::Capped(PureCappedRdpAccountant::new()),
        })
        .add_subclass(Self)
    }
}

fn kind(accountant: &str) -> PyResult<AccountantKind> {
    match accountant {
        "rdp" => Ok(AccountantKind::Rdp),
        "pld" => Ok(AccountantKind::Pld),
        other => Err(invalid(
            "accountant",
            format!("expected \"rdp\" or \"pld\", got {other:?}"),
        )),
    }
}

/// Opacus's name: the smallest noise multiplier `z` of the Poisson-sampled Gaussian (rate
/// `sample_rate`, `steps` steps) that is `(target_epsilon, target_delta)`-DP.
#[pyfunction]
#[pyo3(signature = (target_epsilon, target_delta, sample_rate, steps, *, accountant="rdp"))]
fn get_noise_multiplier(
    py: Python<'_>,
    target_epsilon: f64,
    target_delta: f64,
    sample_rate: f64,
    steps: u64,
    accountant: &str,
) -> PyResult<f64> {
    let k = kind(accountant)?;
    py.detach(|| calibrate_noise_multiplier(k, target_epsilon, target_delta, sample_rate, steps))
        .py()
        .map(|c| c.parameter)
}

/// The smallest Laplace scale (per unit ℓ1 sensitivity) of the Poisson-sampled Laplace
/// mechanism run `steps` times that is `(target_epsilon, target_delta)`-DP.
#[pyfunction]
#[pyo3(signature = (target_epsilon, target_delta, sample_rate=1.0, steps=1, *, accountant="rdp"))]
fn get_laplace_scale(
    py: Python<'_>,
    target_epsilon: f64,
    target_delta: f64,
    sample_rate: f64,
    steps: u64,
    accountant: &str,
) -> PyResult<f64> {
    let k = kind(accountant)?;
    py.detach(|| calibrate_laplace_scale(k, target_epsilon, target_delta, sample_rate, steps))
        .py()
        .map(|c| c.parameter)
}

/// The smallest Skellam variance μ (integer domain, sensitivities `l1_sensitivity`,
/// `l2_sensitivity`) meeting `(target_epsilon, target_delta)` over `steps` Poisson-sampled steps.
#[pyfunction]
#[pyo3(signature = (target_epsilon, target_delta, l1_sensitivity, l2_sensitivity, sample_rate=1.0, steps=1, *, accountant="rdp"))]
#[allow(clippy::too_many_arguments)]
fn get_skellam_variance(
    py: Python<'_>,
    target_epsilon: f64,
    target_delta: f64,
    l1_sensitivity: f64,
    l2_sensitivity: f64,
    sample_rate: f64,
    steps: u64,
    accountant: &str,
) -> PyResult<f64> {
    let k = kind(accountant)?;
    py.detach(|| {
        calibrate_skellam_variance(
            k,
            target_epsilon,
            target_delta,
            l1_sensitivity,
            l2_sensitivity,
            sample_rate,
            steps,
        )
    })
    .py()
    .map(|c| c.parameter)
}

/// The report of `privfed account --json` as a dict: `steps` uses of the per-step `event`, each
/// sampled at `sampling_rate` (Poisson for noise events, local for a pure ε-DP step), under
/// `accountant` ("rdp": capped by pure composition; "pld"), answering ε at `delta` or δ at
/// `epsilon` (exactly one).
#[pyfunction]
#[pyo3(signature = (event, steps, *, accountant, delta=None, epsilon=None, sampling_rate=1.0, value_discretization=None))]
#[allow(clippy::too_many_arguments)]
fn account<'py>(
    py: Python<'py>,
    event: &Bound<'_, PyAny>,
    steps: u64,
    accountant: &str,
    delta: Option<f64>,
    epsilon: Option<f64>,
    sampling_rate: f64,
    value_discretization: Option<f64>,
) -> PyResult<Bound<'py, PyAny>> {
    let query = match (delta, epsilon) {
        (Some(delta), None) => Query::EpsilonAt { delta },
        (None, Some(epsilon)) => Query::DeltaAt { epsilon },
        _ => return Err(invalid("delta", "give exactly one of delta and epsilon")),
    };
    let req = AccountRequest {
        accountant: kind(accountant)?,
        step: event_from_py(event)?,
        sampling_rate,
        steps,
        query,
        value_discretization,
    };
    let report = py.detach(|| report::account(&req)).py()?;
    to_python(py, &report)
}

/// The report of `privfed calibrate --json` as a dict: the smallest noise of `mechanism`
/// ("gaussian", "laplace", or "skellam" with `l1_sensitivity` and `l2_sensitivity`) whose
/// `steps` uses at Poisson rate `sampling_rate` meet (`target_epsilon`, `delta`).
#[pyfunction]
#[pyo3(signature = (mechanism, *, target_epsilon, delta, steps, accountant, sampling_rate=1.0, l1_sensitivity=None, l2_sensitivity=None))]
#[allow(clippy::too_many_arguments)]
fn calibrate<'py>(
    py: Python<'py>,
    mechanism: &str,
    target_epsilon: f64,
    delta: f64,
    steps: u64,
    accountant: &str,
    sampling_rate: f64,
    l1_sensitivity: Option<f64>,
    l2_sensitivity: Option<f64>,
) -> PyResult<Bound<'py, PyAny>> {
    let m = match (mechanism, l1_sensitivity, l2_sensitivity) {
        ("gaussian", None, None) => Calibrated::Gaussian,
        ("laplace", None, None) => Calibrated::Laplace,
        ("skellam", Some(l1), Some(l2)) => Calibrated::Skellam {
            l1_sensitivity: l1,
            l2_sensitivity: l2,
        },
        ("skellam", _, _) => {
            return Err(invalid(
                "l1_sensitivity",
                "skellam needs l1_sensitivity and l2_sensitivity",
            ));
        }
        ("gaussian" | "laplace", _, _) => {
            return Err(invalid(
                "l1_sensitivity",
                "the sensitivities apply to skellam only",
            ));
        }
        (other, _, _) => {
            return Err(invalid(
                "mechanism",
                format!("expected \"gaussian\", \"laplace\" or \"skellam\", got {other:?}"),
            ));
        }
    };
    let k = kind(accountant)?;
    let report = py
        .detach(|| report::calibrate(k, m, target_epsilon, delta, sampling_rate, steps))
        .py()?;
    to_python(py, &report)
}

/// The report of `privfed analyze ddml --json` as a dict
/// (`privfed_accounting::report::draw_and_discard_analysis`; paper 003 §IV): Draw-and-Discard
/// privacy of a client with local ε `local_epsilon` against adversary I (the channel listener),
/// II (sees the `instances` k instances) and III (sees an instance after `updates` T further
/// updates, at δ_T = `delta_t`; default `privfed_accounting::report::DRAW_AND_DISCARD_DELTA_T`,
/// 1e-8, as the CLI's).
#[pyfunction]
#[pyo3(signature = (local_epsilon, instances, updates, *, delta_t=None))]
fn draw_and_discard_analysis<'py>(
    py: Python<'py>,
    local_epsilon: f64,
    instances: u64,
    updates: u64,
    delta_t: Option<f64>,
) -> PyResult<Bound<'py, PyAny>> {
    let delta_t = delta_t.unwrap_or(report::DRAW_AND_DISCARD_DELTA_T);
    let r = report::draw_and_discard_analysis(local_epsilon, instances, updates, delta_t).py()?;
    to_python(py, &r)
}

/// The report of `privfed analyze reconstruction --json` as a dict
/// (`privfed_accounting::report::reconstruction_analysis`; paper 000 §2.3): for data uniform on
/// `S^{k−1}` (`dimension` k) and an adversary who wins if `⟨ĥ, Y⟩ ≥ threshold`, the bound on
/// its success probability against an `epsilon`-DP randomizer, or the largest ε whose bound
/// stays at or below `target_bound` (exactly one of the two).
#[pyfunction]
#[pyo3(signature = (dimension, threshold, *, epsilon=None, target_bound=None))]
fn reconstruction_analysis<'py>(
    py: Python<'py>,
    dimension: u64,
    threshold: f64,
    epsilon: Option<f64>,
    target_bound: Option<f64>,
) -> PyResult<Bound<'py, PyAny>> {
    let question = match (epsilon, target_bound) {
        (Some(epsilon), None) => report::Reconstruction::BoundAt { epsilon },
        (None, Some(target_bound)) => report::Reconstruction::MaxEpsilonFor { target_bound },
        _ => {
            return Err(invalid(
                "epsilon",
                "give exactly one of epsilon and target_bound",
            ));
        }
    };
    let r = report::reconstruction_analysis(dimension, threshold, question).py()?;
    to_python(py, &r)
}

/// The report of `privfed analyze gaussian --json` as a dict
/// (`privfed_accounting::report::analytic_gaussian_analysis`; Balle & Wang 2018): the smallest
/// Gaussian σ with an (`epsilon`, `delta`) guarantee at ℓ2 sensitivity `sensitivity`, and
/// `σ / sensitivity`.
#[pyfunction]
#[pyo3(signature = (epsilon, delta, *, sensitivity=1.0))]
fn analytic_gaussian_analysis<'py>(
    py: Python<'py>,
    epsilon: f64,
    delta: f64,
    sensitivity: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let r = report::analytic_gaussian_analysis(epsilon, delta, sensitivity).py()?;
    to_python(py, &r)
}

/// The report of `privfed analyze epsilon-vs-noise --sigmas ... --json` as a dict
/// (`privfed_sim::experiments::paper001::epsilon_vs_noise`; paper 001 Fig. 2): ε at `delta`
/// after `steps` releases of a sensitivity-1 query with central noise σ for each of `sigmas`,
/// under the Gaussian (analytic, PLD, RDP), Skellam (exact PLD, exact RDP, paper 001's bound)
/// and distributed discrete Gaussian (`clients` sharing the noise) accountants, Skellam and
/// DDG on the query scaled by the integer `scale`. `scale`, `clients`, `steps` and `delta` left
/// at `None` take the library's defaults (`EpsilonVsNoise::DEFAULT_*`), which are also those of
/// `privfed analyze epsilon-vs-noise`.
#[pyfunction]
#[pyo3(signature = (sigmas, *, scale=None, clients=None, steps=None, delta=None))]
fn epsilon_vs_noise<'py>(
    py: Python<'py>,
    sigmas: Vec<f64>,
    scale: Option<u64>,
    clients: Option<u64>,
    steps: Option<u64>,
    delta: Option<f64>,
) -> PyResult<Bound<'py, PyAny>> {
    use privfed_sim::experiments::paper001::{
        EpsilonVsNoise, epsilon_vs_noise as compute, epsilon_vs_noise_report,
    };
    let grid = EpsilonVsNoise {
        sigmas,
        scale: scale.unwrap_or(EpsilonVsNoise::DEFAULT_SCALE),
        clients: clients.unwrap_or(EpsilonVsNoise::DEFAULT_CLIENTS),
        steps: steps.unwrap_or(EpsilonVsNoise::DEFAULT_STEPS),
        delta: delta.unwrap_or(EpsilonVsNoise::DEFAULT_DELTA),
    };
    let points = py.detach(|| compute(&grid)).py()?;
    to_python(py, &epsilon_vs_noise_report(&grid, points))
}

/// Validates an event dict in Rust (the Python classes call this so that a bad parameter is an
/// `InvalidParameter` at construction, with the same message as the accountants').
#[pyfunction]
fn validate_event(event: &Bound<'_, PyAny>) -> PyResult<()> {
    event_from_py(event)?.validate().py()
}

/// One example of every `DpEvent` variant as its serde JSON text (`DpEvent::examples`): the
/// fixture of the Python test that keeps `privfed.accounting`'s dataclasses in step with the
/// Rust schema.
#[pyfunction]
fn _dp_event_examples() -> PyResult<Vec<String>> {
    DpEvent::examples()
        .iter()
        .map(|e| {
            serde_json::to_string(e)
                .map_err(|err| pyo3::exceptions::PyRuntimeError::new_err(err.to_string()))
        })
        .collect()
}

/// Registers the accounting classes and functions (re-exported by `privfed.accounting`).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Accountant>()?;
    m.add_class::<RdpAccountantPy>()?;
    m.add_class::<PldAccountantPy>()?;
    m.add_class::<PureCappedPy>()?;
    m.add_function(wrap_pyfunction!(get_noise_multiplier, m)?)?;
    m.add_function(wrap_pyfunction!(get_laplace_scale, m)?)?;
    m.add_function(wrap_pyfunction!(get_skellam_variance, m)?)?;
    m.add_function(wrap_pyfunction!(account, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(draw_and_discard_analysis, m)?)?;
    m.add_function(wrap_pyfunction!(reconstruction_analysis, m)?)?;
    m.add_function(wrap_pyfunction!(analytic_gaussian_analysis, m)?)?;
    m.add_function(wrap_pyfunction!(epsilon_vs_noise, m)?)?;
    m.add_function(wrap_pyfunction!(validate_event, m)?)?;
    m.add_function(wrap_pyfunction!(_dp_event_examples, m)?)?;
    Ok(())
}
