//! Rust errors → the Python exception hierarchy of `privfed.errors`.
//!
//! The classes are defined in Python (so that, e.g., `InvalidParameter` is also a `ValueError`)
//! and looked up when an error is raised; errors are rare, so nothing is cached.

use privfed_accounting::AccountingError;
use privfed_distributed::DistributedError;
use privfed_fl::FlError;
use privfed_learn::LearnError;
use privfed_mechanisms::MechanismError;
use privfed_secagg::SecAggError;
use privfed_sim::experiments::ExperimentError;
use privfed_sim::secagg::SecAggSimError;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// The Python exception classes of `privfed.errors` (names as in Python).
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)] // every class is mapped, some only by later modules
pub enum Kind {
    /// `PrivfedError`: the base class.
    Base,
    /// `InvalidParameter` (a `ValueError`): a constructor argument out of range.
    InvalidParameter,
    /// `InvalidInput` (a `ValueError`): a vector of the wrong shape, non-finite or outside the
    /// mechanism's domain.
    InvalidInput,
    /// `InvalidDtype` (a `TypeError`): an array of the wrong dtype.
    InvalidDtype,
    /// `InfeasibleParameters` (a `ValueError`): no parameters meet the request.
    InfeasibleParameters,
    /// `UnsupportedEvent` (a `ValueError`): the accountant cannot compose this event.
    UnsupportedEvent,
    /// `PrivacyBudgetExceeded`.
    PrivacyBudgetExceeded,
    /// `TrainingDiverged` (an `ArithmeticError`): a training run's model or update stopped
    /// being finite.
    TrainingDiverged,
    /// `ProtocolError` (a `ValueError`): a malformed, forged, replayed or out-of-order message.
    ProtocolError,
    /// `ProtocolAbort`: the round aborted (too few survivors, an inconsistent server request).
    ProtocolAbort,
    /// `NumericalError` (an `ArithmeticError`).
    NumericalError,
    /// `ConfigError` (a `ValueError`): a run configuration or data set that cannot be used.
    ConfigError,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Base => "PrivfedError",
            Kind::InvalidParameter => "InvalidParameter",
            Kind::InvalidInput => "InvalidInput",
            Kind::InvalidDtype => "InvalidDtype",
            Kind::InfeasibleParameters => "InfeasibleParameters",
            Kind::UnsupportedEvent => "UnsupportedEvent",
            Kind::PrivacyBudgetExceeded => "PrivacyBudgetExceeded",
            Kind::TrainingDiverged => "TrainingDiverged",
            Kind::ProtocolError => "ProtocolError",
            Kind::ProtocolAbort => "ProtocolAbort",
            Kind::NumericalError => "NumericalError",
            Kind::ConfigError => "ConfigError",
        }
    }
}

/// A Python exception of class `kind` with `message`.
pub fn error(kind: Kind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| {
        let class = py
            .import("privfed.errors")
            .and_then(|m| m.getattr(kind.class_name()))
            .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
        match class {
            Ok(c) => PyErr::from_type(c, message),
            // Only if the package is broken: still an exception, never a panic.
            Err(e) => pyo3::exceptions::PyRuntimeError::new_err(format!("{message} (and {e})")),
        }
    })
}

/// A Rust error that becomes a typed Python exception.
pub trait ToPyErr {
    /// The exception.
    fn to_pyerr(self) -> PyErr;
}

/// `result.py()?`: a library result as a Python result.
pub trait PyResultExt<T> {
    /// Maps the error to its Python exception.
    fn py(self) -> PyResult<T>;
}

impl<T, E: ToPyErr> PyResultExt<T> for Result<T, E> {
    fn py(self) -> PyResult<T> {
        self.map_err(ToPyErr::to_pyerr)
    }
}

impl ToPyErr for MechanismError {
    fn to_pyerr(self) -> PyErr {
        let kind = match &self {
            MechanismError::InvalidParameter { .. } => Kind::InvalidParameter,
            MechanismError::DimensionMismatch { .. }
            | MechanismError::NonFiniteInput { .. }
            | MechanismError::OutOfDomain(_) => Kind::InvalidInput,
            MechanismError::Infeasible(_) => Kind::InfeasibleParameters,
            MechanismError::Numerical(_) => Kind::NumericalError,
            _ => Kind::Base,
        };
        error(kind, self.to_string())
    }
}

impl ToPyErr for AccountingError {
    fn to_pyerr(self) -> PyErr {
        let kind = match &self {
            AccountingError::InvalidParameter { .. } | AccountingError::InvalidCurve(_) => {
                Kind::InvalidParameter
            }
            AccountingError::UnsupportedEvent { .. } => Kind::UnsupportedEvent,
            AccountingError::Infeasible(_) => Kind::InfeasibleParameters,
            AccountingError::Numerical(_) => Kind::NumericalError,
            _ => Kind::Base,
        };
        error(kind, self.to_string())
    }
}

impl ToPyErr for DistributedError {
    fn to_pyerr(self) -> PyErr {
        let kind = match self {
            DistributedError::InvalidParameter { .. } => Kind::InvalidParameter,
            // The message keeps the planner's "move `knob`: advice" intact.
            DistributedError::Infeasible { .. } => Kind::InfeasibleParameters,
            DistributedError::NoHonestContributor { .. } => Kind::InvalidParameter,
            DistributedError::RoundingFailed { .. } => Kind::NumericalError,
            // The client refuses the server's plan: the round is over for it.
            DistributedError::Refused { .. } => Kind::ProtocolAbort,
            DistributedError::Mechanism(e) => return e.to_pyerr(),
            DistributedError::Accounting(e) => return e.to_pyerr(),
            _ => Kind::Base,
        };
        error(kind, self.to_string())
    }
}

impl ToPyErr for LearnError {
    fn to_pyerr(self) -> PyErr {
        let kind = match self {
            LearnError::InvalidParameter { .. } => Kind::InvalidParameter,
            LearnError::DimensionMismatch { .. }
            | LearnError::NonFinite { .. }
            | LearnError::InvalidLabel { .. }
            | LearnError::Empty(_)
            | LearnError::Unsupported(_) => Kind::InvalidInput,
            LearnError::Mechanism(e) => return e.to_pyerr(),
            _ => Kind::Base,
        };
        error(kind, self.to_string())
    }
}

impl ToPyErr for FlError {
    fn to_pyerr(self) -> PyErr {
        let kind = match self {
            // A config field, a data set that cannot be loaded, a model that does not fit the
            // data, a checkpoint from another run: all things the run's configuration must fix.
            FlError::Config(_)
            | FlError::Learn(_)
            | FlError::Data(_)
            | FlError::Dataset(_)
            | FlError::Checkpoint(_) => Kind::ConfigError,
            // A run's directory or output file: the operating system's refusal.
            FlError::Io(m) => return pyo3::exceptions::PyOSError::new_err(m),
            FlError::Mechanism(e) => return e.to_pyerr(),
            FlError::Accounting(e) => return e.to_pyerr(),
            FlError::Distributed(e) => return e.to_pyerr(),
            FlError::SecAgg(_) => Kind::ProtocolError,
            _ => Kind::Base,
        };
        error(kind, self.to_string())
    }
}

impl ToPyErr for ExperimentError {
    fn to_pyerr(self) -> PyErr {
        let kind = match self {
            ExperimentError::Options(_) => Kind::InvalidParameter,
            ExperimentError::Mechanism(e) => return e.to_pyerr(),
            ExperimentError::Accounting(e) => return e.to_pyerr(),
            ExperimentError::Learn(e) => return e.to_pyerr(),
            ExperimentError::Data(_) | ExperimentError::Load { .. } => Kind::ConfigError,
            _ => Kind::Base,
        };
        error(kind, self.to_string())
    }
}

impl ToPyErr for SecAggSimError {
    fn to_pyerr(self) -> PyErr {
        let kind = match self {
            SecAggSimError::Invalid(..) => Kind::InvalidParameter,
            SecAggSimError::Aborted(_) => Kind::ProtocolAbort,
            SecAggSimError::Protocol(e) => return e.to_pyerr(),
            _ => Kind::Base,
        };
        error(kind, self.to_string())
    }
}

impl ToPyErr for SecAggError {
    fn to_pyerr(self) -> PyErr {
        let kind = match &self {
            SecAggError::InvalidConfig { .. } => Kind::InvalidParameter,
            SecAggError::Aborted(_)
            | SecAggError::InconsistentRequest(_)
            | SecAggError::Inconsistent(_)
            | SecAggError::Signature(_)
            | SecAggError::SealedState(_)
            | SecAggError::Policy(_)
            | SecAggError::Refused { .. }
            | SecAggError::TooLarge { .. } => Kind::ProtocolAbort,
            SecAggError::Input(_) => Kind::InvalidInput,
            _ => Kind::ProtocolError,
        };
        error(kind, self.to_string())
    }
}

/// An `InvalidParameter` naming the argument.
pub fn invalid(name: &str, reason: impl std::fmt::Display) -> PyErr {
    error(
        Kind::InvalidParameter,
        format!("invalid `{name}`: {reason}"),
    )
}
