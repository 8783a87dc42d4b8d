//! Looks for `redis-server` on PATH for the integration tests: sets `cfg(has_redis_server)` when
//! it is there, so the tests that need it run; otherwise they are ignored with a reason. Under
//! `CI` (which installs it) a missing `redis-server` fails the build instead of skipping tests.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(has_redis_server)");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=CI");
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
            "cargo::warning=redis-server not on PATH: the Redis integration tests will be ignored (after installing it, `touch crates/privfed-server/build.rs`)"
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
