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
use privfed_accounting::{
    AccountantKind, DpEvent, PldAccountant, PrivacyAccountant, PureCappedRdpAccountant,
    RdpAccountant,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Reads an event: an object with `to_dict()`, a dict in the serde form, or its JSON text.
pub fn event_from_py(obj: &Bound<'_, PyAny>) -> PyResult<DpEvent> {
    let d = if obj.hasattr("to_dict")? {
        obj.call_method0("to_dict")?
    } else {
        obj.clone()
    };
    from_python(&d, "privacy event", Kind::InvalidParameter)
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
            Self::Rdp(a) => {
                Self::Rdp(RdpAccountant::with_orders(a.orders().to_vec()).unwrap_or_default())
            }
            Self::Pld(a) => Self::Pld(
                PldAccountant::with_discretization(a.discretization()).unwrap_or_default(),
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
            }
            Self::Pld(a) => {
                d.set_item("accountant", "pld")?;
                d.set_item("discretization", a.discretization())?;
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

    /// Composes `event` (validated first; on error nothing changes). `count` repeats it.
    /// Returns `self`, so calls chain.
    #[pyo3(signature = (event, count=1))]
    fn compose<'py>(
        mut slf: PyRefMut<'py, Self>,
        event: &Bound<'py, PyAny>,
        count: u64,
    ) -> PyResult<PyRefMut<'py, Self>> {
        let mut e = event_from_py(event)?;
        if count != 1 {
            e = DpEvent::SelfComposed {
                event: Box::new(e),
                count,
            };
        }
        let py = slf.py();
        let acc = &mut slf.inner;
        py.detach(|| acc.get_mut().compose(&e)).py()?;
        Ok(slf)
    }

    /// ε at `target_delta` ∈ (0, 1) of everything composed so far.
    fn get_epsilon(&self, py: Python<'_>, target_delta: f64) -> PyResult<f64> {
        let a = &self.inner;
        py.detach(|| a.get().get_epsilon(target_delta)).py()
    }

    /// δ at `target_epsilon` ≥ 0 of everything composed so far.
    fn get_delta(&self, py: Python<'_>, target_epsilon: f64) -> PyResult<f64> {
        let a = &self.inner;
        py.detach(|| a.get().get_delta(target_epsilon)).py()
    }

    /// Opacus-style: one step of DP-SGD / DP-FedAvg — the Gaussian mechanism with
    /// `noise_multiplier` on a Poisson sample at `sample_rate` — composed `steps` times.
    #[pyo3(signature = (*, noise_multiplier, sample_rate, steps=1))]
    fn step(
        &mut self,
        py: Python<'_>,
        noise_multiplier: f64,
        sample_rate: f64,
        steps: u64,
    ) -> PyResult<()> {
        let e = DpEvent::poisson_gaussian(sample_rate, noise_multiplier, steps);
        let a = &mut self.inner;
        py.detach(|| a.get_mut().compose(&e)).py()
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

    /// The composed events, in order (event objects).
    #[getter]
    fn ledger<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .inner
            .get()
            .ledger()
            .events()
            .iter()
            .map(|e| event_to_py(py, e))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Everything composed, as one event (`ComposedDpEvent` of the ledger).
    fn as_event<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        event_to_py(py, &self.inner.get().ledger().as_event())
    }

    /// The state: the accountant's settings and its ledger in serde form (JSON-serializable).
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        self.inner.settings(py, &d)?;
        d.set_item("events", to_python(py, self.inner.get().ledger().events())?)?;
        Ok(d)
    }

    /// Restores a `state_dict()`: the settings must match this accountant's; its events are
    /// composed again (the accountants are deterministic functions of their ledger).
    fn load_state_dict(&mut self, py: Python<'_>, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let mine = PyDict::new(py);
        self.inner.settings(py, &mine)?;
        for key in mine.keys() {
            let theirs = state.get_item(&key)?;
            let ours = mine.get_item(&key)?;
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
        let Some(events) = state.get_item("events")? else {
            return Err(invalid("state", "no `events`"));
        };
        let events: Vec<DpEvent> = from_python(&events, "ledger", Kind::InvalidParameter)?;
        let mut fresh = self.inner.fresh();
        py.detach(|| events.iter().try_for_each(|e| fresh.get_mut().compose(e)))
            .py()?;
        self.inner = fresh;
        Ok(())
    }

    fn __repr__(&self) -> String {
        format!(
            "<{} accountant, {} events>",
            self.inner.get().name(),
            self.inner.get().ledger().len()
        )
    }
}

/// The Rényi-DP accountant on an order grid (default: privfed's grid, fractional and integer
/// orders up to 10^4 (see `orders`)); supports every event.
#[pyclass(extends = Accountant, module = "privfed.accounting", name = "RdpAccountant")]
pub struct RdpAccountantPy;

#[pymethods]
impl RdpAccountantPy {
    #[new]
    #[pyo3(signature = (orders=None))]
    fn new(orders: Option<Vec<f64>>) -> PyResult<PyClassInitializer<Self>> {
        let a = match orders {
            None => RdpAccountant::new(),
            Some(o) => RdpAccountant::with_orders(o).py()?,
        };
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
}

/// The privacy-loss-distribution accountant (discretization `value_discretization_interval`,
/// default privfed's); composes by FFT. Rejects Poisson sampling of anything but the Gaussian
/// and Laplace, and user RDP curves.
#[pyclass(extends = Accountant, module = "privfed.accounting", name = "PldAccountant")]
pub struct PldAccountantPy;

#[pymethods]
impl PldAccountantPy {
    #[new]
    #[pyo3(signature = (value_discretization_interval=None))]
    fn new(value_discretization_interval: Option<f64>) -> PyResult<PyClassInitializer<Self>> {
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
#[pyclass(extends = Accountant, module = "privfed.accounting", name = "PureCappedRdpAccountant")]
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

/// Validates an event dict in Rust (the Python classes call this so that a bad parameter is an
/// `InvalidParameter` at construction, with the same message as the accountants').
#[pyfunction]
fn validate_event(event: &Bound<'_, PyAny>) -> PyResult<()> {
    event_from_py(event)?.validate().py()
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
    m.add_function(wrap_pyfunction!(validate_event, m)?)?;
    Ok(())
}
