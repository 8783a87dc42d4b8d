//! Looks for the Python oracle of the reference tests (`scipy`, importable by `python3`): sets
//! `cfg(has_scipy)` when it imports, so `tests/it/reference.rs` runs; otherwise those tests are
//! ignored with a reason. Under `CI` (whose `.ci/run` installs scipy) the cfg is always set: a
//! missing oracle then fails those tests loudly instead of skipping them. The same policy as
//! privfed-accounting's `build.rs` for dp_accounting.

use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_scipy)");
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
}
