//! Looks for what some integration tests need, setting a cfg for each so those tests run, or are
//! ignored with a reason when it is missing:
//! * the team's shared datasets (`shared/data` beside the repository, with `mnist/` and
//!   `adult/`): `cfg(has_shared_data)`. Under `CI` the cfg is always set, so a missing copy fails
//!   those tests loudly;
//! * `redis-server` on PATH (the multi-process secure-aggregation tests start their own):
//!   `cfg(has_redis_server)`, as in privfed-server's build script. Under `CI` (which installs it)
//!   a missing `redis-server` fails the build instead of skipping tests.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_shared_data)");
    println!("cargo::rustc-check-cfg=cfg(has_redis_server)");
    println!("cargo::rerun-if-env-changed=CI");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-changed=build.rs");
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let data = Path::new(&manifest).join("../../../shared/data");
    let found = data.join("mnist").is_dir() && data.join("adult").is_dir();
    if found {
        println!("cargo::rerun-if-changed={}", data.display());
    }
    if found || std::env::var_os("CI").is_some() {
        println!("cargo::rustc-cfg=has_shared_data");
    } else {
        println!(
            "cargo::warning=shared data not found at {}: the tests on MNIST and Adult will be ignored (after adding it, `touch` this crate's build.rs)",
            data.display()
        );
    }
    redis_server();
}

/// Sets `cfg(has_redis_server)` when `redis-server` is on PATH; fails under `CI` when it is not.
fn redis_server() {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("redis-server"))
            .find(|p| is_executable(p))
    });
    if let Some(path) = &found {
        // Re-run (and re-test) if it goes away.
        println!("cargo::rerun-if-changed={}", path.display());
        println!("cargo::rustc-cfg=has_redis_server");
    } else if std::env::var_os("CI").is_some() {
        panic!(
            "redis-server is not on PATH and CI is set: CI must install it (apt-get install -y redis-server)"
        );
    } else {
        println!(
            "cargo::warning=redis-server not on PATH: the multi-process secure-aggregation tests will be ignored (after installing it, `touch crates/privfed/build.rs`)"
        );
    }
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
