//! Helpers shared by the CLI integration tests: run the real `privfed` binary.
#![allow(dead_code)]

/// Temporary directories and a `redis-server` per test (strict configuration:
/// `RedisServer::start()`) come from the test kit; tests that start Redis are
/// `#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]`.
pub use privfed_testkit::sys::{RedisServer, TempDir, free_port};
use serde_json::Value;
use std::process::{Command, Output};

/// Runs `privfed` with `args`.
pub fn privfed(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_privfed"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .expect("run privfed")
}

/// The words of a command line written as one string (no quoting: words are split on spaces).
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Runs `privfed` on a command line written as one string ([`words`]), asserts success and
/// parses stdout as JSON.
pub fn run(line: &str) -> Value {
    json_ok(&words(line))
}

/// A table of failing command lines: each row `(command line, stderr substring)` must exit
/// non-zero with the substring in stderr and no panic ([`fails_with`]).
pub fn fail_table(rows: &[(&str, &str)]) {
    for (line, needle) in rows {
        fails_with(&words(line), needle);
    }
}

/// A table of succeeding command lines: each row `(command line, keys)` must exit zero with
/// JSON on stdout that has every key; returns the reports in row order for further checks.
pub fn keys_table(rows: &[(&str, &[&str])]) -> Vec<Value> {
    rows.iter()
        .map(|(line, keys)| {
            let v = run(line);
            for key in *keys {
                assert!(v.get(key).is_some(), "privfed {line}: missing {key}: {v}");
            }
            v
        })
        .collect()
}

/// Runs `privfed`, asserts success, and parses stdout as JSON.
pub fn json_ok(args: &[&str]) -> Value {
    let out = privfed(args);
    assert!(
        out.status.success(),
        "privfed {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON on stdout")
}

/// Runs `privfed`, asserts a non-zero exit with `needle` in stderr and no panic.
pub fn fails_with(args: &[&str], needle: &str) {
    let out = privfed(args);
    assert!(!out.status.success(), "privfed {args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(needle),
        "privfed {args:?}: stderr {err:?} lacks {needle:?}"
    );
    assert!(
        !err.contains("panicked"),
        "privfed {args:?} panicked: {err}"
    );
}

/// A JSON array of numbers as `Vec<f64>` (panics on anything else).
pub fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("a JSON array")
        .iter()
        .map(|x| x.as_f64().expect("a number"))
        .collect()
}

/// A JSON array of arrays of numbers (e.g. a design's `P`) as rows of `f64`.
pub fn matrix(v: &Value) -> Vec<Vec<f64>> {
    v.as_array()
        .expect("a JSON array")
        .iter()
        .map(floats)
        .collect()
}

/// `127.0.0.1:PORT` on a port that was free a moment ago ([`free_port`]): for `privfed serve
/// --addr` where the address must be known before the server starts (a restart on the same
/// address, a URL nothing listens on).
pub fn loopback_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}
