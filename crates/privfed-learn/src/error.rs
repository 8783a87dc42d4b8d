//! Typed errors of the learning crate, shared by the crates built on it (`privfed-ddml`,
//! `privfed-fl`, `privfed-sim`). Dataset files are read above this crate, and their errors are
//! `privfed_fl::datasets::DataError`.

/// Everything that can go wrong in models, and in the client steps, Draw-and-Discard logic and
/// simulations built on them.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LearnError {
    /// A parameter is outside its valid range (or not finite).
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name.
        name: &'static str,
        /// The rejected value.
        value: f64,
        /// What the valid range is.
        reason: String,
    },
    /// A vector has the wrong length.
    #[error("{what} has length {got}, expected {expected}")]
    DimensionMismatch {
        /// Which vector (e.g. `update`, `features`).
        what: &'static str,
        /// The expected length.
        expected: usize,
        /// The actual length.
        got: usize,
    },
    /// A value is NaN or infinite.
    #[error("{what}[{index}] is not finite ({value})")]
    NonFinite {
        /// Which vector.
        what: &'static str,
        /// Index of the first non-finite value.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// A label is not valid for the model (e.g. a class index out of range).
    #[error("invalid label {label}: {reason}")]
    InvalidLabel {
        /// The label.
        label: f64,
        /// Why it is invalid.
        reason: String,
    },
    /// An input collection is empty where at least one element is needed.
    #[error("{0} must not be empty")]
    Empty(&'static str),
    /// An error from the mechanisms crate (noise calibration).
    #[error(transparent)]
    Mechanism(#[from] privfed_mechanisms::MechanismError),
    /// A combination of components that cannot work together (e.g. a simulation configured for
    /// one server strategy run against a server that uses another).
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl LearnError {
    /// Shorthand for [`LearnError::InvalidParameter`].
    pub fn invalid(name: &'static str, value: f64, reason: impl Into<String>) -> Self {
        Self::InvalidParameter {
            name,
            value,
            reason: reason.into(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = LearnError> = std::result::Result<T, E>;

/// Checks that `value` is finite and strictly positive (shared with the crates built on this one,
/// e.g. `privfed-ddml`, so that their errors read the same).
pub fn check_positive(name: &'static str, value: f64) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(LearnError::invalid(name, value, "must be finite and > 0"))
    }
}

/// Checks the length and finiteness of a vector (generic over `f32`/`f64`).
pub fn check_vector<T: Copy + Into<f64>>(
    what: &'static str,
    v: &[T],
    expected: usize,
) -> Result<()> {
    if v.len() != expected {
        return Err(LearnError::DimensionMismatch {
            what,
            expected,
            got: v.len(),
        });
    }
    if let Some((index, &x)) = v
        .iter()
        .enumerate()
        .find(|(_, x)| !(**x).into().is_finite())
    {
        return Err(LearnError::NonFinite {
            what,
            index,
            value: x.into(),
        });
    }
    Ok(())
}
