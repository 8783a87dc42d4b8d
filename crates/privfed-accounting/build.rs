//! Looks for the Python oracle of the integration tests (Google's `dp_accounting`, importable by
//! `python3`): sets `cfg(has_dp_accounting)` when it imports, so the agreement tests run;
//! otherwise they are ignored with a reason. Under `CI` (which installs it) the cfg is always set:
//! a missing oracle then fails those tests loudly instead of skipping them.

use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_dp_accounting)");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-changed=build.rs");
    let importable = Command::new("python3")
        .args(["-c", "import dp_accounting"])
        .output()
        .is_ok_and(|o| o.status.success());
    if importable || std::env::var_os("CI").is_some() {
        println!("cargo::rustc-cfg=has_dp_accounting");
    } else {
        println!(
            "cargo::warning=python3 cannot import dp_accounting: the dp_accounting agreement tests will be ignored (pip install dp-accounting==0.6.0, then `touch crates/privfed-accounting/build.rs`)"
        );
    }
}
