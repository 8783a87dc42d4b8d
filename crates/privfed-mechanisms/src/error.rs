//! Typed errors of the mechanisms crate.

/// Everything that can go wrong when building or using a mechanism.
///
/// Constructors validate every parameter and return one of these instead of panicking;
/// `privatize` validates its input the same way. Messages name the offending parameter and value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MechanismError {
    /// A parameter is outside its valid range (or not finite).
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name as the user knows it (e.g. `epsilon`).
        name: &'static str,
        /// The rejected value.
        value: f64,
        /// What the valid range is.
        reason: String,
    },
    /// An input vector has the wrong length.
    #[error("input has length {got}, expected {expected}")]
    DimensionMismatch {
        /// The mechanism's dimension.
        expected: usize,
        /// The input's length.
        got: usize,
    },
    /// An input coordinate is NaN or infinite.
    #[error("input coordinate {index} is not finite ({value})")]
    NonFiniteInput {
        /// Index of the first non-finite coordinate.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// An input is finite but outside the mechanism's input domain.
    #[error("input outside the mechanism's domain: {0}")]
    OutOfDomain(String),
    /// No parameters satisfy the request (e.g. a budget too small for any grid).
    #[error("infeasible request: {0}")]
    Infeasible(String),
    /// A numerical routine failed to reach its accuracy (a bug or an extreme input).
    #[error("numerical failure: {0}")]
    Numerical(String),
}

impl MechanismError {
    /// Shorthand for [`MechanismError::InvalidParameter`].
    pub fn invalid(name: &'static str, value: f64, reason: impl Into<String>) -> Self {
        Self::InvalidParameter {
            name,
            value,
            reason: reason.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = MechanismError> = std::result::Result<T, E>;

/// Checks that `value` is finite and strictly positive.
pub(crate) fn check_positive(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(MechanismError::invalid(
            name,
            value,
            "must be finite and > 0",
        ))
    }
}

/// Checks that `value` lies in the open interval (lo, hi).
pub(crate) fn check_open_interval(name: &'static str, value: f64, lo: f64, hi: f64) -> Result<f64> {
    if value.is_finite() && value > lo && value < hi {
        Ok(value)
    } else {
        Err(MechanismError::invalid(
            name,
            value,
            format!("must lie in the open interval ({lo}, {hi})"),
        ))
    }
}

/// Checks a pure-DP budget: finite, `> 0` and at most 700 (so that `e^ε` is finite).
pub(crate) fn check_epsilon_budget(epsilon: f64) -> Result<f64> {
    check_positive("epsilon", epsilon)?;
    if epsilon > 700.0 {
        return Err(MechanismError::invalid(
            "epsilon",
            epsilon,
            "must be at most 700 (e^ε must be finite)",
        ));
    }
    Ok(epsilon)
}

/// Checks that a sphere mechanism has dimension at least 2.
pub(crate) fn check_sphere_dim(dim: usize, mechanism: &str) -> Result<()> {
    if dim < 2 {
        Err(MechanismError::invalid(
            "dim",
            dim as f64,
            format!("{mechanism} needs dimension at least 2"),
        ))
    } else {
        Ok(())
    }
}
