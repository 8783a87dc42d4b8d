//! `privfed serve` as an operator runs it (issue 16, items 5 and 8): JSON logs on stderr for
//! start-up, requests (at debug) and shutdown; SIGTERM with a client holding a partial request
//! exits within the shutdown deadline and releases the store for a replacement; bad flags fail.

use crate::common::fails_with;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
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

/// A `privfed serve` child whose stderr lines arrive on `lines`; killed on drop.
struct Served {
    child: Child,
    addr: String,
    lines: mpsc::Receiver<String>,
}

impl Served {
    fn start(dir: &std::path::Path, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_privfed"))
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--admin-token",
                "t",
                "--data-dir",
            ])
            .arg(dir)
            .args(extra)
            // A fresh directory needs an explicit new store; a restart reopens the old one.
            .args((!dir.join("privfed.redb").exists()).then_some("--init-store"))
            .env_remove("PRIVFED_LOG")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn privfed serve");
        let (tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let addr = loop {
            let line = lines
                .recv_timeout(Duration::from_secs(30))
                .expect("privfed serve did not start listening");
            if let Some(u) = line.strip_prefix("privfed serve: listening on http://") {
                break u.trim().to_string();
            }
        };
        Self { child, addr, lines }
    }

    fn sigterm(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(ok.success());
    }

    /// Waits for exit (up to `within`); true if it exited successfully.
    fn wait_exit(&mut self, within: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < within {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("privfed serve still running {within:?} after SIGTERM");
    }

    /// Every stderr line so far (and until the pipe closes, if the child exited).
    fn drain(&self) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(500)) {
            out.push(l);
        }
        out
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

/// Item 8: with `--log-format json --log-level debug`, stderr carries JSON lines for start-up,
/// for each request (method, route template, status, latency) and for shutdown (the old binary
/// installed no subscriber and logged nothing).
#[test]
fn json_logs_for_startup_requests_and_shutdown() {
    let dir = TempDir::new("logs");
    let mut srv = Served::start(&dir.0, &["--log-format", "json", "--log-level", "debug"]);
    assert!(get(&srv.addr, "/healthz").starts_with("HTTP/1.1 200"));
    assert!(get(&srv.addr, "/no/such/route").starts_with("HTTP/1.1 404"));
    srv.sigterm();
    assert!(srv.wait_exit(Duration::from_secs(30)));
    let events: Vec<Value> = srv
        .drain()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let message = |e: &Value| e["fields"]["message"].as_str().unwrap_or("").to_string();
    assert!(
        events
            .iter()
            .any(|e| message(e) == "privfed serve started" && e["level"] == "INFO"),
        "no start-up event in {events:#?}"
    );
    let request = |route: &str, status: u64| {
        events.iter().any(|e| {
            message(e) == "request"
                && e["level"] == "DEBUG"
                && e["fields"]["route"] == route
                && e["fields"]["status"] == status
                && e["fields"]["method"] == "GET"
                && e["fields"]["latency_us"].is_u64()
        })
    };
    assert!(request("/healthz", 200), "no request event in {events:#?}");
    assert!(request("other", 404), "no 404 event in {events:#?}");
    assert!(
        events.iter().any(|e| message(e) == "server stopped"),
        "no shutdown event in {events:#?}"
    );
}

/// Item 5: SIGTERM while a client holds a partial request exits within the shutdown deadline
/// (the old binary never exited and kept the store locked), and a replacement server opens the
/// same data directory.
#[test]
fn sigterm_with_a_partial_request_exits_and_releases_the_store() {
    let dir = TempDir::new("sigterm");
    let mut srv = Served::start(
        &dir.0,
        &[
            "--shutdown-deadline-secs",
            "1",
            "--header-timeout-secs",
            "600",
        ],
    );
    let mut partial = TcpStream::connect(&srv.addr).unwrap();
    partial
        .write_all(b"POST /v1/models/m/updates HTTP/1.1\r\nHost: x\r\nContent-Le")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    srv.sigterm();
    assert!(srv.wait_exit(Duration::from_secs(15)));
    let again = Served::start(&dir.0, &[]);
    assert!(get(&again.addr, "/healthz").starts_with("HTTP/1.1 200"));
}

/// The new flags are validated.
#[test]
fn serve_flags_are_validated() {
    let dir = TempDir::new("flags");
    let d = dir.0.to_str().unwrap();
    let base = [
        "serve",
        "--admin-token",
        "t",
        "--addr",
        "127.0.0.1:0",
        "--data-dir",
        d,
    ];
    let with = |extra: &[&'static str]| {
        let mut v: Vec<&str> = base.to_vec();
        v.extend_from_slice(extra);
        v
    };
    fails_with(&with(&["--max-connections", "0"]), "--max-connections");
    fails_with(&with(&["--rate-limit", "0"]), "--rate-limit");
    fails_with(
        &with(&["--rate-limit", "5", "--rate-burst", "0.5"]),
        "--rate-burst",
    );
    fails_with(
        &with(&["--header-timeout-secs", "0"]),
        "--header-timeout-secs",
    );
    fails_with(&with(&["--log-level", "=[bad"]), "--log-level");
    fails_with(&with(&["--log-format", "xml"]), "xml");
}
