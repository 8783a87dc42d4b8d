//! Looks for the team's shared datasets (`shared/data` beside the repository, with `mnist/`,
//! `adult/` and `tinyshakespeare/`): sets `cfg(has_shared_data)` so the tests on real data run;
//! otherwise they are ignored with a reason. Under `CI` the cfg is always set, so a missing copy fails them loudly.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_shared_data)");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-changed=build.rs");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let data = Path::new(&manifest).join("../../../shared/data");
    let found = ["mnist", "adult", "tinyshakespeare"]
        .iter()
        .all(|d| data.join(d).is_dir());
    if found {
        println!("cargo::rerun-if-changed={}", data.display());
    }
    if found || std::env::var_os("CI").is_some() {
        println!("cargo::rustc-cfg=has_shared_data");
    } else {
        println!(
            "cargo::warning=shared data not found at {}: the tests on MNIST, Adult and Shakespeare will be ignored (after adding it, `touch` this crate's build.rs)",
            data.display()
        );
    }
}
