//! Helpers shared by the CLI integration tests: run the real `privfed` binary.
#![allow(dead_code)]

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

/// A fresh directory under the system temp dir (`privfed-TAG-PID-NANOS`), removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates the directory.
    pub fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let p = std::env::temp_dir().join(format!("privfed-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `privfed` with `args`.
pub fn privfed(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_privfed"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .expect("run privfed")
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
