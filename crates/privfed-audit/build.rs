//! Looks for the Python oracle of the reference tests (`scipy`, importable by `python3`): sets
//! `cfg(has_scipy)` when it imports, so `tests/it/reference.rs` runs; otherwise those tests are
//! ignored with a reason. Under `CI` (whose `.ci/run` installs scipy) the cfg is always set: a
//! missing oracle then fails those tests loudly instead of skipping them. The same policy as
//! privfed-accounting's `build.rs` for dp_accounting.
//!
//! Likewise `cfg(has_jax_privacy)` for the tests against jax_privacy's own estimators
//! (`scripts/reference/audit_jax_privacy.py --probe` succeeds; `pip install --no-deps
//! jax-privacy==2.0.0`).

use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_scipy)");
    println!("cargo::rustc-check-cfg=cfg(has_jax_privacy)");
    println!("cargo::rerun-if-changed=../../scripts/reference/audit_jax_privacy.py");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-changed=build.rs");
    let importable = Command::new("python3")
        .args(["-c", "import scipy.stats, scipy.optimize"])
        .output()
        .is_ok_and(|o| o.status.success());
    if importable || std::env::var_os("CI").is_some() {
        println!("cargo::rustc-cfg=has_scipy");
    } else {
        println!(
            "cargo::warning=python3 cannot import scipy: the privfed-audit reference tests will be ignored (pip install scipy, then `touch crates/privfed-audit/build.rs`)"
        );
    }
    let jax_privacy = Command::new("python3")
        .args(["../../scripts/reference/audit_jax_privacy.py", "--probe"])
        .output()
        .is_ok_and(|o| o.status.success());
    if jax_privacy || std::env::var_os("CI").is_some() {
        println!("cargo::rustc-cfg=has_jax_privacy");
    } else {
        println!(
            "cargo::warning=python3 cannot load jax_privacy's auditing module: the privfed-audit tests against jax_privacy will be ignored (pip install --no-deps jax-privacy==2.0.0 dp-accounting scipy, then `touch crates/privfed-audit/build.rs`)"
        );
    }
}
