//! Errors of the distributed-DP pipeline.

use thiserror::Error;

/// What went wrong in planning, encoding, summing or decoding.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DistributedError {
    /// A parameter or input is outside its valid range (or not finite, or the wrong length).
    #[error("invalid parameter `{name}` = {value}: {reason}")]
    InvalidParameter {
        /// The parameter's name as the user knows it (e.g. `bits`).
        name: &'static str,
        /// The rejected value (lengths and indices as `f64`).
        value: f64,
        /// What the valid range is.
        reason: String,
    },
    /// No parameters meet the request; `knob` names what to change.
    #[error("infeasible: {reason} (move `{knob}`: {advice})")]
    Infeasible {
        /// The option to move (`bits`, `clients`, `epsilon`, `k`, …).
        knob: &'static str,
        /// Why nothing fits.
        reason: String,
        /// Which way to move it, with a value where one can be computed.
        advice: String,
    },
    /// The colluding fraction leaves no honest contributor: the colluders alone could make up
    /// every contribution, so no honest noise is guaranteed in the sum.
    #[error(
        "no honest contributor: {colluders} colluders (colluding fraction {colluding_fraction}) could be all {contributors} contributors; lower the colluding fraction or plan for more contributors"
    )]
    NoHonestContributor {
        /// The contributors.
        contributors: usize,
        /// The colluders assumed, `⌈γ·cohort⌉`.
        colluders: usize,
        /// γ.
        colluding_fraction: f64,
    },
    /// Conditional stochastic rounding did not meet its norm bound within the retry cap.
    #[error(
        "conditional rounding failed {tries} times in a row (each try fails with probability ≤ β = {beta}); the input or β is not what the plan assumed"
    )]
    RoundingFailed {
        /// Tries made.
        tries: u32,
        /// The rounding bias parameter.
        beta: f64,
    },
    /// The client's [`crate::policy::PlanPolicy`] refuses the server's plan: `rule` is the
    /// policy's field, `value` the plan's, `limit` what the rule asks.
    #[error("the client's policy refuses this plan: {rule}: {value}, the policy asks {limit}")]
    Refused {
        /// The rule broken (a [`crate::policy::PlanPolicy`] field name).
        rule: &'static str,
        /// The plan's value, printed.
        value: String,
        /// What the rule asks, printed.
        limit: String,
    },
    /// An error from a mechanism (sampler, rotation).
    #[error(transparent)]
    Mechanism(#[from] privfed_mechanisms::MechanismError),
    /// An error from the accountant.
    #[error(transparent)]
    Accounting(#[from] privfed_accounting::AccountingError),
}

/// Result alias.
pub type Result<T> = std::result::Result<T, DistributedError>;

impl DistributedError {
    /// An [`DistributedError::InvalidParameter`].
    pub fn invalid(name: &'static str, value: f64, reason: impl Into<String>) -> Self {
        DistributedError::InvalidParameter {
            name,
            value,
            reason: reason.into(),
        }
    }
}
