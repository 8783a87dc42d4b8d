//! Helpers shared by the CLI integration tests: run the real `privfed` binary.
#![allow(dead_code)]

/// Temporary directories and a `redis-server` per test (strict configuration:
/// `RedisServer::start()`) come from the test kit; tests that start Redis are
/// `#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]`.
pub use privfed_testkit::sys::{RedisServer, TempDir, free_port};
use serde_json::Value;
use std::process::{Command, Output};

/// A path `name` in a fresh directory (`tag` names the test in it), deleted when the returned
/// guard drops.
pub fn temp_file(tag: &str, name: &str) -> (TempDir, std::path::PathBuf) {
    let dir = TempDir::new(tag);
    let path = dir.path().join(name);
    (dir, path)
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

/// The words of a command line written as one string with `{name}` placeholders, for lines that
/// carry temp paths or other values: the template is split on whitespace first ([`words`]), then
/// every placeholder is replaced by its value from `vars`, so a value (a path, a title with
/// spaces) always stays inside its own word and is never split. A placeholder may be a whole word
/// (`--out {out}`) or part of one (`--out={out}`). Values may go unused (rows of a table share
/// them). Panics on a placeholder without a value (a misspelt name) and on an unclosed `{`.
pub fn line(template: &str, vars: &[(&str, &str)]) -> Vec<String> {
    words(template)
        .into_iter()
        .map(|word| {
            let mut filled = String::new();
            let mut rest = word;
            while let Some(open) = rest.find('{') {
                filled.push_str(&rest[..open]);
                let close = rest[open..]
                    .find('}')
                    .unwrap_or_else(|| panic!("unclosed {{ in {template:?}"))
                    + open;
                let name = &rest[open + 1..close];
                let i = vars
                    .iter()
                    .position(|(n, _)| *n == name)
                    .unwrap_or_else(|| panic!("no value for {{{name}}} in {template:?}"));
                filled.push_str(vars[i].1);
                rest = &rest[close + 1..];
            }
            filled.push_str(rest);
            filled
        })
        .collect()
}

/// A path as the `&str` a command line takes (panics on a path that is not UTF-8).
pub fn path(p: &std::path::Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// `words` as the `&str` slice [`privfed`] and [`json_ok`] take.
fn strs(words: &[String]) -> Vec<&str> {
    words.iter().map(String::as_str).collect()
}

/// Runs `privfed` on [`line`]`(template, vars)`, asserts success and parses stdout as JSON.
pub fn run_line(template: &str, vars: &[(&str, &str)]) -> Value {
    json_ok(&strs(&line(template, vars)))
}

/// Runs `privfed` on [`line`]`(template, vars)` and asserts success (stderr in the message
/// otherwise); returns the output, for commands whose product is a file or a message on stderr.
pub fn ok_line(template: &str, vars: &[(&str, &str)]) -> Output {
    let args = line(template, vars);
    let out = privfed(&strs(&args));
    assert!(
        out.status.success(),
        "privfed {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `privfed` on [`line`]`(template, vars)` and asserts a non-zero exit with `needle` in
/// stderr and no panic ([`fails_with`]).
pub fn fail_line(template: &str, vars: &[(&str, &str)], needle: &str) {
    fails_with(&strs(&line(template, vars)), needle);
}

/// [`fail_table`] over templates that share `vars` (e.g. the paths of one temp dir): each row
/// `(template, stderr substring)` must fail with the substring and no panic.
pub fn fail_lines(vars: &[(&str, &str)], rows: &[(&str, &str)]) {
    for (template, needle) in rows {
        fail_line(template, vars, needle);
    }
}

/// [`keys_table`] over templates that share `vars`: each row `(template, keys)` must succeed with
/// JSON on stdout that has every key; returns the reports in row order for further checks.
pub fn keys_lines(vars: &[(&str, &str)], rows: &[(&str, &[&str])]) -> Vec<Value> {
    rows.iter()
        .map(|(template, keys)| {
            let v = run_line(template, vars);
            for key in *keys {
                assert!(
                    v.get(key).is_some(),
                    "privfed {template}: missing {key}: {v}"
                );
            }
            v
        })
        .collect()
}

/// The team's shared datasets beside the repository (`../shared/data`); the tests that read them
/// run only with `cfg(has_shared_data)` (see the crate's `build.rs`).
pub fn shared_data() -> String {
    privfed_testkit::shared_data()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn line_fills_placeholders_after_splitting() {
    let vars = [("dir", "/tmp/a b"), ("n", "3"), ("unused", "x")];
    assert_eq!(
        line("plot {dir}/t.csv  --title {dir} --n={n}", &vars),
        ["plot", "/tmp/a b/t.csv", "--title", "/tmp/a b", "--n=3"]
    );
    assert_eq!(line("fl train", &[]), ["fl", "train"]);
}

#[test]
#[should_panic(expected = "no value for {out}")]
fn line_refuses_a_placeholder_without_a_value() {
    line("plot --out {out}", &[("csv", "c.csv")]);
}

#[test]
#[should_panic(expected = "unclosed")]
fn line_refuses_an_unclosed_brace() {
    line("plot --out {out", &[("out", "o")]);
}
