//! The Python oracle and the tolerances of the reference tests (one place).
#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Stdio};

/// Relative tolerance of Clopper–Pearson bounds against scipy's `beta.ppf` (both are computed
/// to a few ulps; 1e-9 leaves room for the ill-conditioning of the quantile at large n).
pub const CP_RELATIVE: f64 = 1e-9;
/// Relative tolerance of one-run p-values against the scipy computation.
pub const ONE_RUN_P_RELATIVE: f64 = 1e-9;
/// Absolute tolerance of the one-run ε bound (ours: bisection to 1e-9; scipy's brentq to 1e-13).
pub const ONE_RUN_EPS_ABSOLUTE: f64 = 1e-8;

/// Runs `scripts/reference/audit_oracle.py` on `queries`. Only called from tests compiled where
/// the build found scipy (`cfg(has_scipy)`, see `build.rs`; always under `CI`), so an
/// unavailable oracle here is a failure, never a silent skip.
pub fn oracle(queries: &serde_json::Value) -> serde_json::Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/reference/audit_oracle.py"
    );
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("audit oracle: cannot run python3: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(queries.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("oracle output is JSON")
}

/// `|a − b| ≤ rel·|b|` (or both exactly equal).
pub fn close_rel(a: f64, b: f64, rel: f64) -> bool {
    a == b || (a - b).abs() <= rel * b.abs()
}
