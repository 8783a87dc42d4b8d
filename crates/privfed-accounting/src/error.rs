//! Typed errors of the accounting crate.

/// Everything that can go wrong when describing, composing or querying privacy events.
///
/// Every public function validates its input and returns one of these instead of panicking.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AccountingError {
    /// A parameter is outside its valid range (or not finite).
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name as the user knows it (e.g. `noise_multiplier`).
        name: &'static str,
        /// The rejected value.
        value: f64,
        /// What the valid range is.
        reason: String,
    },
    /// The accountant cannot compose this kind of event.
    #[error("the {accountant} accountant does not support the event {event}: {reason}")]
    UnsupportedEvent {
        /// Which accountant refused (`"rdp"` or `"pld"`).
        accountant: &'static str,
        /// The event's name (e.g. `PoissonSampled(Laplace)`).
        event: String,
        /// Why.
        reason: String,
    },
    /// A user-supplied RDP curve is malformed (lengths, orders, values).
    #[error("invalid RDP curve: {0}")]
    InvalidCurve(String),
    /// No parameter value meets the request (e.g. calibration target unreachable).
    #[error("infeasible request: {0}")]
    Infeasible(String),
    /// A numerical routine failed to reach its accuracy (a bug or an extreme input).
    #[error("numerical failure: {0}")]
    Numerical(String),
}

impl AccountingError {
    /// Shorthand for [`AccountingError::InvalidParameter`].
    pub fn invalid(name: &'static str, value: f64, reason: impl Into<String>) -> Self {
        Self::InvalidParameter {
            name,
            value,
            reason: reason.into(),
        }
    }
}

impl From<privfed_mechanisms::MechanismError> for AccountingError {
    /// Errors of the formulas accounting borrows from `privfed-mechanisms` (the analytic
    /// Gaussian): invalid parameters keep their name and value, anything else is numerical.
    fn from(e: privfed_mechanisms::MechanismError) -> Self {
        match e {
            privfed_mechanisms::MechanismError::InvalidParameter {
                name,
                value,
                reason,
            } => Self::InvalidParameter {
                name,
                value,
                reason,
            },
            privfed_mechanisms::MechanismError::Infeasible(m) => Self::Infeasible(m),
            other => Self::Numerical(other.to_string()),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = AccountingError> = std::result::Result<T, E>;

/// `value` must be finite and > 0.
pub(crate) fn check_positive(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(AccountingError::invalid(
            name,
            value,
            "must be finite and > 0",
        ))
    }
}

/// `value` must be finite and >= 0.
pub(crate) fn check_nonnegative(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(AccountingError::invalid(
            name,
            value,
            "must be finite and >= 0",
        ))
    }
}

/// `value` must lie in the open interval (0, 1) (a δ).
pub(crate) fn check_delta(value: f64) -> Result<f64> {
    if value > 0.0 && value < 1.0 {
        Ok(value)
    } else {
        Err(AccountingError::invalid(
            "delta",
            value,
            "must lie in (0, 1)",
        ))
    }
}

/// `value` must lie in (0, 1] (a sampling rate).
pub(crate) fn check_rate(value: f64) -> Result<f64> {
    if value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(AccountingError::invalid(
            "sampling_rate",
            value,
            "must lie in (0, 1]",
        ))
    }
}
