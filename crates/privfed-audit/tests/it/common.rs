//! The Python oracle and the tolerances of the reference tests (one place).
#![allow(dead_code)]

use privfed_testkit::sys::{python_oracle, reference_script};

/// Relative tolerance of Clopper–Pearson bounds against scipy's `beta.ppf` (both are computed
/// to a few ulps; 1e-9 leaves room for the ill-conditioning of the quantile at large n).
pub const CP_RELATIVE: f64 = 1e-9;
/// Relative tolerance of one-run p-values against the scipy computation.
pub const ONE_RUN_P_RELATIVE: f64 = 1e-9;
/// Absolute tolerance of the one-run ε bound (ours: bisection to 1e-9; scipy's brentq to 1e-13).
pub const ONE_RUN_EPS_ABSOLUTE: f64 = 1e-8;

/// Absolute tolerance of the one-run ε bound against jax_privacy (its brentq stops at
/// xtol = 1e-6; ours bisects to 1e-9).
pub const JAX_ONE_RUN_EPS_ABSOLUTE: f64 = 2e-6;
/// One-run p-values against jax_privacy: `|a − b| ≤ 1e-9·|b| + 1e-15`. jax_privacy forms the δ
/// term from differences of binomial tails (`sf(v−i−1) − sf(v−1)`), which loses its relative
/// accuracy when the tails are near 1; the absolute floor covers that cancellation.
pub const JAX_ONE_RUN_P_RELATIVE: f64 = 1e-9;
/// The absolute floor of [`JAX_ONE_RUN_P_RELATIVE`].
pub const JAX_ONE_RUN_P_ABSOLUTE: f64 = 1e-15;
/// The Clopper–Pearson bound of one event against jax_privacy (both from beta quantiles to a few
/// ulps; the logarithm of a difference near `δ` amplifies them a little).
pub const JAX_EVENT_EPS_RELATIVE: f64 = 1e-8;

/// Runs `scripts/reference/audit_oracle.py` on `queries`. Only called from tests compiled where
/// the build found scipy (`cfg(has_scipy)`, see `build.rs`; always under `CI`), so an
/// unavailable oracle here is a failure, never a silent skip.
pub fn oracle(queries: &serde_json::Value) -> serde_json::Value {
    python_oracle(reference_script("audit_oracle.py"), queries)
}

/// Runs `scripts/reference/audit_jax_privacy.py` (jax_privacy's own estimators) on `queries`.
/// Only called from tests compiled with `cfg(has_jax_privacy)` (always under `CI`).
pub fn jax_privacy(queries: &serde_json::Value) -> serde_json::Value {
    python_oracle(reference_script("audit_jax_privacy.py"), queries)
}

/// `|a − b| ≤ rel·|b|` (or both exactly equal).
pub fn close_rel(a: f64, b: f64, rel: f64) -> bool {
    a == b || (a - b).abs() <= rel * b.abs()
}
