//! Looks for the Python oracles of the reference tests (`privfed_testkit::probe`):
//! `cfg(has_scipy)` when `python3` imports scipy, so `tests/it/reference.rs` runs, and
//! `cfg(has_jax_privacy)` for the tests against jax_privacy's own estimators
//! (`scripts/reference/audit_jax_privacy.py --probe` succeeds). Otherwise those tests are ignored
//! with a reason; under `CI` (whose `.ci/run` installs both) the cfgs are always set, so a missing
//! oracle fails its tests loudly instead of skipping them.

use privfed_testkit::probe::python_runs;

fn main() {
    println!("cargo::rerun-if-changed=../../scripts/reference/audit_jax_privacy.py");
    python_runs(
        "has_scipy",
        &["-c", "import scipy.stats, scipy.optimize"],
        "python3 cannot import scipy",
        "pip install scipy",
    );
    python_runs(
        "has_jax_privacy",
        &["../../scripts/reference/audit_jax_privacy.py", "--probe"],
        "python3 cannot load jax_privacy's auditing module",
        "pip install --no-deps jax-privacy==2.0.0 dp-accounting scipy",
    );
}
