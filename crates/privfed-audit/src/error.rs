//! Typed errors of the audit crate.

use privfed_mechanisms::MechanismError;

/// Everything that can go wrong in an audit computation.
///
/// Functions validate their inputs (counts, probabilities, confidence levels) and return one of
/// these instead of panicking; messages name the offending parameter and value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// A parameter is outside its valid range (or not finite).
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name (e.g. `alpha`).
        name: &'static str,
        /// The rejected value.
        value: f64,
        /// What the valid range is.
        reason: String,
    },
    /// A sample set is empty, or too small for the requested split.
    #[error("not enough samples: {0}")]
    TooFewSamples(String),
    /// The mechanism has no worst-case pair or statistic known to this crate.
    #[error("unsupported mechanism: {0}")]
    Unsupported(String),
    /// The mechanism refused an input or a parameter.
    #[error(transparent)]
    Mechanism(#[from] MechanismError),
    /// The accountant refused a computation (the Skellam claim or pmf).
    #[error(transparent)]
    Accounting(#[from] privfed_accounting::AccountingError),
}

impl AuditError {
    /// Shorthand for [`AuditError::InvalidParameter`].
    pub fn invalid(name: &'static str, value: f64, reason: impl Into<String>) -> Self {
        Self::InvalidParameter {
            name,
            value,
            reason: reason.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = AuditError> = std::result::Result<T, E>;

/// Checks `0 < alpha < 1` (a significance level).
pub(crate) fn check_alpha(alpha: f64) -> Result<f64> {
    if alpha > 0.0 && alpha < 1.0 {
        Ok(alpha)
    } else {
        Err(AuditError::invalid(
            "alpha",
            alpha,
            "a significance level must be in (0, 1)",
        ))
    }
}

/// Checks `0 ≤ delta < 1`.
pub(crate) fn check_delta(delta: f64) -> Result<f64> {
    if (0.0..1.0).contains(&delta) {
        Ok(delta)
    } else {
        Err(AuditError::invalid("delta", delta, "must be in [0, 1)"))
    }
}

/// Checks `epsilon ≥ 0` and finite.
pub(crate) fn check_epsilon(epsilon: f64) -> Result<f64> {
    if epsilon.is_finite() && epsilon >= 0.0 {
        Ok(epsilon)
    } else {
        Err(AuditError::invalid(
            "epsilon",
            epsilon,
            "must be finite and non-negative",
        ))
    }
}
