//! Every shell block of the guides runs, so a command shown in the documentation cannot rot.
//!
//! The guides are `README.md`, `CONTRIBUTING.md` and `docs/*.md`, except `docs/FLOWER.md` and
//! `docs/PYTHON.md` (their blocks need Python and Flower; `python/tests` runs those packages).
//! For each fenced block whose language is a shell:
//! * ```` ```sh ```` / ```` ```bash ````: the block is a script, run with `bash -e -o pipefail`;
//!   it must exit 0;
//! * ```` ```console ````: lines starting with `$ ` are commands (a trailing `\` continues one),
//!   the other lines their expected standard output, compared line by line; `…` in an expected
//!   line matches any text, and a line that is only `…` matches any number of lines;
//! * a block whose info string also says `no_run` (```` ```sh no_run ````) is not run: a synopsis
//!   with placeholders, a long job, a server, or a command that is itself a test run. The test
//!   lists these as skipped, so the count is visible.
//!
//! Blocks run with the `privfed` under test first on `PATH`, in a fresh temporary directory that
//! holds copies of the repository's `examples/` and `experiments/` (so relative paths in the
//! guides work and nothing a block writes lands in the repository), with `PRIVFED_DATA_DIR`
//! pointing at the team's datasets (`../shared/data` beside the repository) when they exist. Rust
//! blocks are doctests instead (`privfed-sim`'s `doc_blocks` module includes the same files).

use crate::common::TempDir;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longest a block may run.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(180);

/// The guides whose shell blocks are checked (paths from the repository root).
const GUIDES: &[&str] = &[
    "README.md",
    "CONTRIBUTING.md",
    "docs/ACCOUNTING.md",
    "docs/ALGORITHMS.md",
    "docs/ARCHITECTURE.md",
    "docs/AUDIT.md",
    "docs/CLI.md",
    "docs/FEDERATED_LEARNING.md",
    "docs/FLOATING_POINT.md",
    "docs/RANDOMNESS.md",
    "docs/SECURE_AGGREGATION.md",
    "docs/SERVER_OPERATIONS.md",
    "docs/SERVER_THREAT_MODEL.md",
];

/// Guides left out on purpose (their blocks are Python, run by `python/tests`).
const NOT_HERE: &[&str] = &["docs/FLOWER.md", "docs/PYTHON.md"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One fenced block.
#[derive(Debug)]
struct Block {
    /// `file:line` of the opening fence.
    at: String,
    /// The info string's words (language first).
    info: Vec<String>,
    body: String,
}

/// The fenced blocks of a markdown file (fences of three or more backticks, possibly indented).
fn blocks(file: &str) -> Vec<Block> {
    let text = std::fs::read_to_string(repo().join(file)).expect("read guide");
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let t = line.trim_start();
        if let Some(info) = t.strip_prefix("```") {
            let indent = line.len() - t.len();
            let info: Vec<String> = info
                .split([' ', ',', '\t'])
                .filter(|w| !w.is_empty())
                .map(str::to_string)
                .collect();
            let mut body = String::new();
            for (_, l) in lines.by_ref() {
                if l.trim_start().starts_with("```") {
                    break;
                }
                body.push_str(l.get(indent..).unwrap_or(l.trim_start()));
                body.push('\n');
            }
            out.push(Block {
                at: format!("{file}:{}", i + 1),
                info,
                body,
            });
        }
    }
    out
}

fn is_shell(b: &Block) -> bool {
    matches!(
        b.info.first().map(String::as_str),
        Some("sh" | "bash" | "shell" | "console")
    )
}

/// A fresh working directory with copies of `examples/` and `experiments/`.
fn workdir() -> TempDir {
    let dir = TempDir::new("docblock");
    for sub in ["examples", "experiments"] {
        copy_dir(&repo().join(sub), &dir.0.join(sub));
    }
    dir
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// Runs `script` with bash in `dir`; (success, stdout, stderr).
fn run_script(script: &str, dir: &Path) -> (bool, String, String) {
    let bin = Path::new(env!("CARGO_BIN_EXE_privfed")).parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut cmd = Command::new("bash");
    cmd.args(["-e", "-o", "pipefail", "-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let data = repo().join("../shared/data");
    if data.is_dir() {
        cmd.env("PRIVFED_DATA_DIR", data);
    }
    let mut child = cmd.spawn().expect("run bash");
    // Read both pipes on threads so a chatty block cannot fill one and stall.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > BLOCK_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (out, mut err) = (out.join().unwrap(), err.join().unwrap());
    if status.is_none() {
        err.push_str(&format!("\n(killed after {BLOCK_TIMEOUT:?})"));
    }
    (status.is_some_and(|s| s.success()), out, err)
}

/// Whether `actual` matches `expected`, where `…` stands for any text.
fn line_matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.split('…').collect();
    if parts.len() == 1 {
        return expected.trim_end() == actual.trim_end();
    }
    let actual = actual.trim_end();
    let (first, last) = (parts[0], parts[parts.len() - 1].trim_end());
    if !actual.starts_with(first) || actual.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &actual[first.len()..];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(p) => rest = &rest[p + mid.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// Whether the output lines match the expected ones (a line `…` matches any number of lines).
fn output_matches(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e.trim() == "…" => {
            (0..=actual.len()).any(|skip| output_matches(rest, &actual[skip..]))
        }
        Some((e, rest)) => actual
            .split_first()
            .is_some_and(|(a, arest)| line_matches(e, a) && output_matches(rest, arest)),
    }
}

/// The commands of a console block and the output each is expected to print.
fn console_steps(body: &str) -> Vec<(String, Vec<&str>)> {
    let mut steps: Vec<(String, Vec<&str>)> = Vec::new();
    let mut continuing = false;
    for line in body.lines() {
        if continuing {
            let (cmd, _) = steps.last_mut().unwrap();
            cmd.push('\n');
            cmd.push_str(line);
            continuing = line.ends_with('\\');
        } else if let Some(cmd) = line.strip_prefix("$ ") {
            steps.push((cmd.to_string(), Vec::new()));
            continuing = cmd.ends_with('\\');
        } else if let Some((_, out)) = steps.last_mut() {
            out.push(line);
        } else {
            panic!("console block: output before the first `$ ` command: {line:?}");
        }
    }
    steps
}

/// Runs the shell blocks of `file`: returns (ran, skipped, failures).
fn check_guide(file: &str) -> (usize, Vec<String>, Vec<String>) {
    let (mut ran, mut skipped, mut failures) = (0, Vec::new(), Vec::new());
    for b in blocks(file).into_iter().filter(is_shell) {
        if b.info.iter().any(|w| w == "no_run") {
            skipped.push(b.at);
            continue;
        }
        ran += 1;
        let dir = workdir();
        if b.info[0] == "console" {
            // The commands run in sequence in one directory (a later one may read what an
            // earlier one wrote).
            for (cmd, expected) in console_steps(&b.body) {
                let (ok, out, err) = run_script(&cmd, &dir.0);
                let actual: Vec<&str> = out.lines().collect();
                if !ok {
                    failures.push(format!("{}: `{cmd}` failed:\n{err}", b.at));
                    break;
                }
                if !output_matches(&expected, &actual) {
                    failures.push(format!(
                        "{}: `{cmd}` printed\n{out}\nexpected\n{}",
                        b.at,
                        expected.join("\n")
                    ));
                    break;
                }
            }
        } else {
            let (ok, out, err) = run_script(&b.body, &dir.0);
            if !ok {
                failures.push(format!("{}: block failed:\n{out}\n{err}", b.at));
            }
        }
    }
    (ran, skipped, failures)
}

fn check(file: &str) {
    let (ran, skipped, failures) = check_guide(file);
    println!(
        "{file}: {ran} shell block(s) run, {} skipped (no_run): {}",
        skipped.len(),
        skipped.join(", ")
    );
    assert!(
        failures.is_empty(),
        "{} block(s) of {file} failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_guide_is_checked() {
    let mut found: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .filter(|n| !NOT_HERE.contains(&n.as_str()))
        .collect();
    found.extend(["README.md".to_string(), "CONTRIBUTING.md".to_string()]);
    found.sort();
    let mut listed: Vec<String> = GUIDES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(found, listed, "add the new guide to GUIDES (or NOT_HERE)");
}

#[test]
fn console_matching() {
    assert!(line_matches("a … b", "a xyz b"));
    assert!(line_matches("\"epsilon\": 1.23…,", "\"epsilon\": 1.2345,"));
    assert!(!line_matches("\"epsilon\": 1.23…,", "\"epsilon\": 1.3,"));
    assert!(output_matches(&["x", "…", "z"], &["x", "1", "2", "z"]));
    assert!(output_matches(&["x", "…"], &["x"]));
    assert!(!output_matches(&["x", "z"], &["x", "y", "z"]));
    let steps = console_steps("$ a \\\n  b\nout\n$ c\n");
    assert_eq!(steps[0].0, "a \\\n  b");
    assert_eq!(steps[0].1, vec!["out"]);
    assert_eq!(steps[1].0, "c");
}

#[test]
fn readme() {
    check("README.md");
}

#[test]
fn contributing() {
    check("CONTRIBUTING.md");
}

#[test]
fn accounting() {
    check("docs/ACCOUNTING.md");
}

#[test]
fn algorithms_architecture_floating_point_randomness() {
    for f in [
        "docs/ALGORITHMS.md",
        "docs/ARCHITECTURE.md",
        "docs/FLOATING_POINT.md",
        "docs/RANDOMNESS.md",
    ] {
        check(f);
    }
}

#[test]
fn audit() {
    check("docs/AUDIT.md");
}

#[test]
fn cli() {
    check("docs/CLI.md");
}

#[test]
fn federated_learning() {
    check("docs/FEDERATED_LEARNING.md");
}

#[test]
fn secure_aggregation() {
    check("docs/SECURE_AGGREGATION.md");
}

#[test]
fn server_docs() {
    check("docs/SERVER_OPERATIONS.md");
    check("docs/SERVER_THREAT_MODEL.md");
}
