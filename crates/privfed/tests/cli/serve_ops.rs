//! `privfed serve` as an operator runs it: JSON logs on stderr for
//! start-up, requests (at debug) and shutdown; SIGTERM with a client holding a partial request
//! exits within the shutdown deadline and releases the store for a replacement; a failing disk
//! makes the server fail closed; bad flags fail; both group-commit modes acknowledge and count
//! every update.

use crate::common::fails_with;
use crate::common::{TempDir, words};
use privfed_testkit::sys::wait_until;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A `privfed serve` child whose stderr lines arrive on `lines`; killed on drop.
pub(crate) struct Served {
    pub(crate) child: Child,
    pub(crate) addr: String,
    lines: mpsc::Receiver<String>,
}

impl Served {
    pub(crate) fn start(dir: &std::path::Path, extra: &[&str]) -> Self {
        Self::start_limited(dir, extra, None)
    }

    /// [`Served::start`] listening on `addr` (e.g. to restart on the same port).
    pub(crate) fn start_on(dir: &std::path::Path, addr: &str, extra: &[&str]) -> Self {
        Self::start_at(dir, addr, extra, None)
    }

    /// [`Served::start`] with the file-size limit `ulimit -f BLOCKS` (512-byte blocks) and
    /// SIGXFSZ ignored, so writes beyond it fail with `EFBIG`: a disk that fails under the store.
    fn start_limited(dir: &std::path::Path, extra: &[&str], fsize_blocks: Option<u64>) -> Self {
        Self::start_at(dir, "127.0.0.1:0", extra, fsize_blocks)
    }

    fn start_at(
        dir: &std::path::Path,
        addr: &str,
        extra: &[&str],
        fsize_blocks: Option<u64>,
    ) -> Self {
        let bin = env!("CARGO_BIN_EXE_privfed");
        let mut cmd = match fsize_blocks {
            None => Command::new(bin),
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("trap '' XFSZ; ulimit -f {n}; exec \"$0\" \"$@\""))
                    .arg(bin);
                c
            }
        };
        let mut child = cmd
            .args(["serve", "--addr", addr, "--admin-token", "t", "--data-dir"])
            .arg(dir)
            .args(extra)
            // A fresh directory needs an explicit new store; a restart reopens the old one. (A
            // Redis store needs neither.)
            .args(
                (!dir.join("privfed.redb").exists() && !extra.contains(&"--store"))
                    .then_some("--init-store"),
            )
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
            // With --log-format json the same line is a JSON event.
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && let Some(u) = v["fields"]["message"]
                    .as_str()
                    .and_then(|m| m.strip_prefix("listening on http://"))
            {
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

/// A store outage is logged once when it starts (WARN, with its cause) and once when it ends
/// (INFO, with how many requests it refused), not once per request as before (a Redis outage
/// logged one WARN per 503).
#[test]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
fn a_store_outage_is_logged_once_per_transition() {
    let mut redis = crate::common::RedisServer::start();
    let dir = TempDir::new("outage");
    let url = redis.url();
    let srv = Served::start(
        &dir.0,
        &[
            "--store",
            &url,
            "--log-format",
            "json",
            "--log-level",
            "info",
        ],
    );
    let created = create_model(
        &srv.addr,
        r#"{"name":"m","dim":2,"k":2,"update_guard":"off"}"#,
    );
    assert!(created.starts_with("HTTP/1.1 201"), "{created}");
    assert!(get(&srv.addr, "/v1/models/m/draw").starts_with("HTTP/1.1 200"));
    redis.kill9();
    let mut refused = 0;
    for _ in 0..20 {
        if get(&srv.addr, "/v1/models/m/draw").starts_with("HTTP/1.1 503") {
            refused += 1;
        }
    }
    assert!(
        refused >= 10,
        "only {refused} of 20 draws answered 503 during the outage"
    );
    redis.restart();
    wait_until(
        "recovery after Redis restarted",
        Duration::from_secs(30),
        || get(&srv.addr, "/v1/models/m/draw").starts_with("HTTP/1.1 200"),
    );
    let events: Vec<Value> = srv
        .drain()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    let count = |level: &str, text: &str| {
        events
            .iter()
            .filter(|e| {
                e["level"] == level
                    && e["fields"]["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with(text))
            })
            .count()
    };
    assert_eq!(count("WARN", "store unavailable"), 1, "{events:#?}");
    assert_eq!(count("INFO", "store available again"), 1, "{events:#?}");
}

/// Item 8: with `--log-format json --log-level debug`, stderr carries JSON lines for start-up,
/// for each request (method, route template, status, latency) and for shutdown (the old binary
/// installed no subscriber and logged nothing).
#[test]
fn json_logs_for_startup_requests_and_shutdown() {
    let dir = TempDir::new("logs");
    let mut srv = Served::start(&dir.0, &words("--log-format json --log-level debug"));
    assert!(get(&srv.addr, "/healthz").starts_with("HTTP/1.1 200"));
    assert!(get(&srv.addr, "/no/such/route").starts_with("HTTP/1.1 404"));
    srv.sigterm();
    assert!(srv.wait_exit(Duration::from_secs(30)));
    let lines = srv.drain();
    let events: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    // JSON mode is JSON only: the start-up and shutdown lines are events too.
    assert_eq!(
        events.len(),
        lines.len(),
        "stderr mixes plain lines into the JSON: {lines:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["fields"]["message"] == "shutdown requested"),
        "no shutdown event in {events:#?}"
    );
    let message = |e: &Value| e["fields"]["message"].as_str().unwrap_or("").to_string();
    assert!(
        events.iter().any(|e| message(e) == "privfed serve started"
            && e["level"] == "INFO"
            && e["fields"]["group_commit"] == "idle"
            && e["fields"]["group_commit_max_delay_us"] == 2000),
        "no start-up event (with the group-commit mode) in {events:#?}"
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
        &words("--shutdown-deadline-secs 1 --header-timeout-secs 600"),
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

/// Item 7: a disk that fails under the store (writes beyond the process's file-size limit fail
/// with `EFBIG`, as a full or failing disk would) makes the server fail closed: the failed write
/// and every later one answer 503, `/healthz` answers 503 (the old server answered 500 per write
/// while `/healthz` said 200), and after a restart on a working disk exactly the acknowledged
/// updates are there.
#[test]
#[cfg(unix)]
fn a_failing_disk_fails_closed_and_loses_nothing_acknowledged() {
    let dir = TempDir::new("diskfault");
    {
        let srv = Served::start(&dir.0, &[]);
        create_model(
            &srv.addr,
            r#"{"name":"m","dim":2000,"k":4,"update_guard":"off"}"#,
        );
        drop(srv);
    }
    std::thread::sleep(Duration::from_millis(300));
    let size = std::fs::metadata(dir.0.join("privfed.redb")).unwrap().len();
    // Room for the updates (redb reuses freed pages), not for a new model of 1.6 MB.
    let srv = Served::start_limited(&dir.0, &[], Some((size + 256 * 1024) / 512));
    let update = |v: f32| {
        let body: Vec<u8> = std::iter::repeat_n(v.to_le_bytes(), 2000)
            .flatten()
            .collect();
        post(
            &srv.addr,
            "/v1/models/m/updates",
            None,
            "application/octet-stream",
            &body,
        )
    };
    let mut acked = 0;
    for i in 0..20 {
        assert!(update(i as f32).starts_with("HTTP/1.1 202"));
        acked += 1;
    }
    let big = create_model(
        &srv.addr,
        r#"{"name":"big","dim":100000,"k":4,"update_guard":"off"}"#,
    );
    assert!(big.starts_with("HTTP/1.1 503"), "{big}");
    assert!(big.to_ascii_lowercase().contains("retry-after"), "{big}");
    for i in 0..5 {
        let a = update(100.0 + i as f32);
        assert!(a.starts_with("HTTP/1.1 503"), "{a}");
    }
    assert!(get(&srv.addr, "/healthz").starts_with("HTTP/1.1 503"));
    let (again, accepted) = restart_and_count(srv, &dir.0, "m");
    assert_eq!(accepted, acked);
    assert!(get(&again.addr, "/v1/models/big").starts_with("HTTP/1.1 404"));
}

fn post(addr: &str, path: &str, token: Option<&str>, ct: &str, body: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: {ct}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(body).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

/// Stops `srv`, starts a server on the same data directory and reads the model's durable
/// accepted-update counter.
fn restart_and_count(srv: Served, dir: &std::path::Path, model: &str) -> (Served, u64) {
    drop(srv);
    std::thread::sleep(Duration::from_millis(300));
    let again = Served::start(dir, &[]);
    let view = get(&again.addr, &format!("/v1/models/{model}"));
    let body = &view[view.find("\r\n\r\n").unwrap() + 4..];
    let v: Value = serde_json::from_str(body).unwrap();
    let accepted = v["updates_accepted"]
        .as_u64()
        .unwrap_or_else(|| panic!("no updates_accepted in {body}"));
    (again, accepted)
}

/// `POST /v1/models` with the test's admin token; the raw answer.
fn create_model(addr: &str, json: &str) -> String {
    post(
        addr,
        "/v1/models",
        Some("t"),
        "application/json",
        json.as_bytes(),
    )
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
    fails_with(
        &with(&["--max-connections-per-address", "0"]),
        "--max-connections-per-address",
    );
    fails_with(
        &with(&["--commit-deadline-secs", "0"]),
        "--commit-deadline-secs",
    );
    fails_with(
        &with(&["--max-body-bytes-in-flight", "10"]),
        "--max-body-bytes-in-flight",
    );
    fails_with(&with(&["--ticket-step-secs", "x"]), "--ticket-step-secs");
    fails_with(&with(&["--rate-limit", "0"]), "--rate-limit");
    fails_with(
        &with(&words("--rate-limit 5 --rate-burst 0.5")),
        "--rate-burst",
    );
    fails_with(
        &with(&["--header-timeout-secs", "0"]),
        "--header-timeout-secs",
    );
    fails_with(&with(&["--log-level", "=[bad"]), "--log-level");
    fails_with(
        &with(&["--group-commit-max-delay-us", "0"]),
        "--group-commit-max-delay-us",
    );
    fails_with(&with(&["--group-commit", "lazy"]), "lazy");
    fails_with(&with(&["--log-format", "xml"]), "xml");
    fails_with(
        &with(&words("--init-store --journal-bytes 100")),
        "--journal-bytes must be between 4096",
    );
    // An existing store keeps its journal: the size is for a new one only.
    fails_with(&with(&["--journal-bytes", "65536"]), "--init-store");
    // Checked before connecting to Redis (nothing listens on port 1).
    fails_with(
        &with(&["--store", "redis://127.0.0.1:1", "--secagg-prefix", ""]),
        "--secagg-prefix must not be empty",
    );
}

/// `--journal-bytes` sizes a new store's update journal, and the store works with it.
#[test]
fn journal_bytes_sizes_the_new_stores_journal() {
    let dir = TempDir::new("journal-bytes");
    let srv = Served::start(&dir.0, &["--journal-bytes", "65536"]);
    let journal = dir
        .0
        .join(privfed_server::ddml::store::journal::JOURNAL_FILE);
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), 65536);
    let created = create_model(
        &srv.addr,
        r#"{"name":"m","dim":4,"k":2,"update_guard":"off"}"#,
    );
    assert!(created.starts_with("HTTP/1.1 201"), "{created}");
    let body: Vec<u8> = std::iter::repeat_n(1.5f32.to_le_bytes(), 4)
        .flatten()
        .collect();
    let a = post(
        &srv.addr,
        "/v1/models/m/updates",
        None,
        "application/octet-stream",
        &body,
    );
    assert!(a.starts_with("HTTP/1.1 202"), "{a}");
    let (_again, accepted) = restart_and_count(srv, &dir.0, "m");
    assert_eq!(accepted, 1);
    assert_eq!(std::fs::metadata(&journal).unwrap().len(), 65536);
}

/// A counter from `/metrics`.
fn metric(addr: &str, name: &str) -> u64 {
    let text = get(addr, "/metrics");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .trim()
        .parse()
        .unwrap()
}

/// Both group-commit modes (`idle`, the default, and `eager`): 4 clients × 25 concurrent
/// updates over real sockets are all acknowledged and stored, `/metrics` counts them in its
/// commit counters (at most one commit per update, no journal checkpoint), and they are there
/// after a restart.
#[test]
fn group_commit_modes_acknowledge_and_count_every_update() {
    for mode in ["idle", "eager"] {
        let dir = TempDir::new(&format!("group-commit-{mode}"));
        let srv = Served::start(&dir.0, &["--group-commit", mode]);
        let created = create_model(
            &srv.addr,
            r#"{"name":"m","dim":8,"k":4,"update_guard":"off"}"#,
        );
        assert!(created.starts_with("HTTP/1.1 201"), "{created}");
        std::thread::scope(|s| {
            for c in 0..4 {
                let addr = srv.addr.clone();
                s.spawn(move || {
                    for i in 0..25 {
                        let v = (c * 100 + i) as f32;
                        let body: Vec<u8> =
                            std::iter::repeat_n(v.to_le_bytes(), 8).flatten().collect();
                        let a = post(
                            &addr,
                            "/v1/models/m/updates",
                            None,
                            "application/octet-stream",
                            &body,
                        );
                        assert!(a.starts_with("HTTP/1.1 202"), "{mode}: {a}");
                    }
                });
            }
        });
        assert_eq!(
            metric(&srv.addr, "privfed_store_committed_updates_total"),
            100,
            "{mode}"
        );
        let commits = metric(&srv.addr, "privfed_store_commits_total");
        assert!((1..=100).contains(&commits), "{mode}: {commits} commits");
        // 100 small records fill none of the 8 MiB update journal.
        assert_eq!(
            metric(&srv.addr, "privfed_store_checkpoints_total"),
            0,
            "{mode}"
        );
        let (_again, accepted) = restart_and_count(srv, &dir.0, "m");
        assert_eq!(accepted, 100, "{mode}");
    }
}
