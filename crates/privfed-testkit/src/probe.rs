//! Build-time probes for what some tests need outside the repository, for the crates' `build.rs`
//! (`privfed-testkit` as a build-dependency). Each sets a `cfg` when the thing is there, so the
//! tests that need it run, and otherwise prints a warning saying what will be ignored and how to
//! add it. Under `CI` each is required: the cfg is always set (a missing dataset or oracle fails
//! its tests loudly) or, for a missing program, the build fails with what CI must install.
//!
//! A crate's `build.rs` calls the probes its tests need, e.g.
//! `privfed_testkit::probe::shared_data(&["mnist", "adult"])` and
//! `privfed_testkit::probe::redis_server()`.

use std::path::{Path, PathBuf};

fn under_ci() -> bool {
    println!("cargo::rerun-if-env-changed=CI");
    std::env::var_os("CI").is_some()
}

/// The calling crate's `build.rs`, for the hint printed when something is missing.
fn build_script() -> String {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    Path::new(&manifest).join("build.rs").display().to_string()
}

/// `cfg(has_shared_data)`: the team's shared datasets are beside the repository
/// (`shared/data` with each of `dirs`, e.g. `mnist`, `adult`, `tinyshakespeare`).
pub fn shared_data(dirs: &[&str]) {
    println!("cargo::rustc-check-cfg=cfg(has_shared_data)");
    println!("cargo::rerun-if-changed=build.rs");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let data = Path::new(&manifest).join("../../../shared/data");
    let found = dirs.iter().all(|d| data.join(d).is_dir());
    if found {
        println!("cargo::rerun-if-changed={}", data.display());
    }
    if found || under_ci() {
        println!("cargo::rustc-cfg=has_shared_data");
    } else {
        println!(
            "cargo::warning=shared data ({}) not found at {}: the tests on it will be ignored (after adding it, `touch {}`)",
            dirs.join(", "),
            data.display(),
            build_script()
        );
    }
}

/// `cfg(has_redis_server)`: `redis-server` is on `PATH` (the tests start their own on a free
/// 127.0.0.1 port). Under `CI` a missing one fails the build.
///
/// # Panics
/// Under `CI` without `redis-server` on `PATH` (CI must install it).
pub fn redis_server() {
    println!("cargo::rustc-check-cfg=cfg(has_redis_server)");
    println!("cargo::rerun-if-env-changed=PATH");
    match on_path("redis-server") {
        Some(path) => {
            // Re-run (and re-test) if it goes away.
            println!("cargo::rerun-if-changed={}", path.display());
            println!("cargo::rustc-cfg=has_redis_server");
        }
        None if under_ci() => panic!(
            "redis-server is not on PATH and CI is set: CI must install it (apt-get install -y redis-server)"
        ),
        None => println!(
            "cargo::warning=redis-server not on PATH: the tests that need it will be ignored (after installing it, `touch {}`)",
            build_script()
        ),
    }
}

/// `cfg(has_<name>)` (e.g. `has_dp_accounting`): `python3 -c "import <module>"` succeeds.
/// `install` says how to get it (`pip install dp-accounting==0.6.0`).
pub fn python_module(module: &str, install: &str) {
    python_runs(
        &format!("has_{module}"),
        &["-c", &format!("import {module}")],
        &format!("python3 cannot import {module}"),
        install,
    );
}

/// `cfg(<cfg>)` (e.g. `has_jax_privacy`): `python3 ARGS…` exits successfully (run in the
/// calling crate's directory: an import of several modules, or a reference script's `--probe`).
/// `missing` says what failed (`python3 cannot load jax_privacy's auditing module`), `install`
/// how to fix it. Under `CI` the cfg is always set.
pub fn python_runs(cfg: &str, args: &[&str], missing: &str, install: &str) {
    println!("cargo::rustc-check-cfg=cfg({cfg})");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-changed=build.rs");
    let runs = std::process::Command::new("python3")
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if runs || under_ci() {
        println!("cargo::rustc-cfg={cfg}");
    } else {
        println!(
            "cargo::warning={missing}: the tests that need it will be ignored ({install}, then `touch {}`)",
            build_script()
        );
    }
}

/// The first executable `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file() || p.with_extension("exe").is_file()
}
