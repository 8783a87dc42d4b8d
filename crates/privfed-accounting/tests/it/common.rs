//! Shared helpers of the integration tests: the dp_accounting oracle and **all tolerances**.
#![allow(dead_code)]

use privfed_testkit::sys::{python_oracle, reference_script};

/// Every tolerance used against the reference implementation, in one place.
pub mod tol {
    /// RDP ε may exceed dp_accounting's by at most this relative amount. Our grid
    /// contains dp_accounting's, so for equal per-order values it can only be smaller.
    pub const RDP_EPS_MAX_LOOSER: f64 = 0.005;
    /// Per-order RDP values at dp_accounting's orders: relative agreement (both directions)
    /// where dp_accounting returns a finite value. Both compute the same closed forms, so only
    /// rounding differences (and its series truncation at `exp(-30)` relative) remain.
    pub const RDP_CURVE_REL: f64 = 1e-6;
    /// Absolute slack for tiny curve values (dp_accounting's `ln A` loses relative accuracy
    /// when `A − 1 < 1e-10`).
    pub const RDP_CURVE_ABS: f64 = 1e-12;
    /// Fractional-order subsampled-Gaussian RDP against 40-digit mpmath quadrature (relative).
    /// The largest error seen is 4.1e-15 (q = 0.01, z = 1.1, α = 1.1).
    pub const RDP_FRACTIONAL_REL: f64 = 1e-13;
    /// PLD ε within this relative distance of dp_accounting's (the target: 0.5%).
    pub const PLD_EPS_REL: f64 = 0.005;
    /// PLD ε may be below dp_accounting's by at most this relative amount ("never meaningfully
    /// below": both are pessimistic approximations of the same true ε; a difference beyond
    /// discretization error would mean we are optimistic).
    pub const PLD_EPS_MAX_BELOW: f64 = 0.002;
    /// PLD δ at a fixed ε, relative (δ moves much faster than ε: 2% in δ is well under 0.5%
    /// in ε for these cases).
    pub const PLD_DELTA_REL: f64 = 0.02;
    /// Calibrated noise multipliers within this relative distance (the target: 1%).
    pub const CALIBRATION_REL: f64 = 0.01;
}

/// Runs `scripts/reference/dp_accounting_oracle.py` on `queries` (`privfed_testkit::sys::
/// python_oracle`): one answer per query. The tests that call it run only where the build found
/// dp_accounting (`cfg(has_dp_accounting)`, see `build.rs`; always under `CI`), so an unavailable
/// oracle here is a failure, never a silent skip.
pub fn oracle(queries: &serde_json::Value) -> Vec<serde_json::Value> {
    let answers = python_oracle(reference_script("dp_accounting_oracle.py"), queries);
    serde_json::from_value(answers).expect("the dp_accounting oracle answers a JSON array")
}

/// dp_accounting 0.6.0's default RDP orders.
pub fn dp_accounting_orders() -> Vec<f64> {
    let mut v: Vec<f64> = (1..100).map(|x| 1.0 + x as f64 / 10.0).collect();
    v.extend((12..64).map(|x| x as f64));
    v.extend([128.0, 256.0, 512.0, 1024.0]);
    v
}
