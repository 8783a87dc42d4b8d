//! Support for system tests: what the integration tests of the server, the CLI, the simulator and
//! the reference tests need outside the process under test, written once.
//!
//! * [`TempDir`]: a fresh directory under the system temp dir, removed on drop;
//! * [`free_port`] and [`wait_until`] / [`wait_for_port`]: loopback ports and bounded waits;
//! * [`RedisServer`]: a `redis-server` child on 127.0.0.1 with its own port and data directory,
//!   killed by its own pid on drop;
//! * [`python_oracle`] and [`reference_script`]: an independent implementation in Python
//!   (`scripts/reference/*.py`) run on JSON queries.
//!
//! Whether a test can run at all (is `redis-server` on `PATH`, can `python3` import the oracle's
//! library) is decided at build time by [`crate::probe`]; these helpers assume it can and panic
//! with what went wrong when it cannot, so a missing program under `CI` is a failure, never a
//! silent pass.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long [`RedisServer`] waits for `redis-server` to accept connections after spawning it.
pub const REDIS_START_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the waits poll.
const POLL: Duration = Duration::from_millis(20);

/// A fresh directory under the system temp dir (`privfed-test-TAG-PID-NANOS-N`, unique within
/// and across processes), removed with its contents on drop. The path is the public field.
#[derive(Debug)]
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates the directory; `tag` names the test in the path (letters, digits, `-`).
    ///
    /// # Panics
    /// When the directory cannot be created.
    pub fn new(tag: &str) -> Self {
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!(
            "privfed-test-{tag}-{}-{nanos}-{n}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", p.display()));
        Self(p)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago: bound with port 0 (the OS chooses) and
/// released. Another process may take it before the caller binds it; tests use it where the
/// program under test must be told its port in advance (a restart on the same address).
///
/// # Panics
/// When no loopback port can be bound.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("cannot bind a loopback port: {e}"))
}

/// Polls `ready` every 20 ms until it returns `true`; returns how long that took.
///
/// # Panics
/// When `timeout` passes first, with `what` in the message.
pub fn wait_until(what: &str, timeout: Duration, ready: impl FnMut() -> bool) -> Duration {
    poll_until(timeout, ready).unwrap_or_else(|| panic!("{what}: not within {timeout:?}"))
}

/// [`wait_until`] without the panic: `None` when `timeout` passes first.
fn poll_until(timeout: Duration, mut ready: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    loop {
        if ready() {
            return Some(t0.elapsed());
        }
        if t0.elapsed() >= timeout {
            return None;
        }
        std::thread::sleep(POLL);
    }
}

/// Waits until 127.0.0.1:`port` accepts a TCP connection ([`wait_until`]).
///
/// # Panics
/// When `timeout` passes first.
pub fn wait_for_port(port: u16, timeout: Duration) -> Duration {
    wait_until(
        &format!("127.0.0.1:{port} accepting connections"),
        timeout,
        || TcpStream::connect(("127.0.0.1", port)).is_ok(),
    )
}

/// A `redis-server` child on a free 127.0.0.1 port with its own temporary data directory,
/// killed (SIGKILL, by its own pid) on drop. It can be killed and started again on the same
/// port and directory, with the same configuration, to play an outage.
///
/// Tests that start one are `#[cfg_attr(not(has_redis_server), ignore = "redis-server not on
/// PATH")]`, the cfg set by the crate's `build.rs` through [`crate::probe::redis_server`] (which
/// fails the build under `CI` when `redis-server` is missing), so a missing server shows as an
/// ignored test, never as a pass.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
    args: Vec<String>,
}

/// The configuration the strict Redis stores require: every write in the append-only file and
/// fsynced before it is acknowledged, no RDB snapshots.
pub const REDIS_STRICT: [&str; 6] = [
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
];

impl RedisServer {
    /// Starts one in the strict configuration ([`REDIS_STRICT`]) and waits until it accepts
    /// connections.
    ///
    /// # Panics
    /// When `redis-server` cannot be spawned or does not accept connections within
    /// [`REDIS_START_TIMEOUT`].
    pub fn start() -> Self {
        Self::start_with(&REDIS_STRICT)
    }

    /// Starts one with these configuration arguments (after `--bind 127.0.0.1 --port P --dir D`
    /// in a fresh temporary directory); `&[]` is Redis's stock configuration.
    ///
    /// # Panics
    /// As [`RedisServer::start`].
    pub fn start_with(args: &[&str]) -> Self {
        let dir = TempDir::new("redis");
        let port = free_port();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let child = spawn_redis(port, &dir.0, &args);
        Self {
            child: Some(child),
            port,
            dir,
            args,
        }
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Its data directory (`--dir`).
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// SIGKILL (`kill -9`) and reaps it: no shutdown, no final save. Nothing if it is not
    /// running.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `signal` (a `kill` name: `STOP`, `CONT`, …) to its pid.
    ///
    /// # Panics
    /// When it is not running or `kill` fails.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("redis-server is running").id();
        let ok = Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -{signal} {pid}");
    }

    /// Kills it ([`RedisServer::kill9`]) and starts it again with the same port, directory and
    /// configuration; it then loads its AOF/RDB and may answer `LOADING` for a moment.
    ///
    /// # Panics
    /// As [`RedisServer::start`].
    pub fn restart(&mut self) {
        self.kill9();
        self.child = Some(spawn_redis(self.port, &self.dir.0, &self.args));
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Spawns `redis-server` on 127.0.0.1:`port` with `dir` and `args` and waits (at most
/// [`REDIS_START_TIMEOUT`]) until it accepts connections; a child that exits first is reported
/// with its status instead of waiting out the deadline.
fn spawn_redis(port: u16, dir: &Path, args: &[String]) -> Child {
    let mut child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--dir"])
        .arg(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn redis-server: {e}"));
    let mut exited = None;
    let accepting = poll_until(REDIS_START_TIMEOUT, || {
        if let Ok(Some(status)) = child.try_wait() {
            exited = Some(status);
            return true;
        }
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    if let Some(status) = exited {
        panic!("redis-server on port {port} exited at start-up ({status}); args {args:?}");
    }
    if accepting.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "redis-server on port {port} did not accept connections within {REDIS_START_TIMEOUT:?}"
        );
    }
    child
}

/// `scripts/reference/NAME` in this repository: the reference implementations (oracles) the
/// reference tests run.
pub fn reference_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts/reference")
        .join(name)
}

/// Runs `python3 SCRIPT` with `queries` as JSON on stdin and returns its stdout parsed as JSON.
///
/// The tests that call it run only where their crate's build found the oracle's library
/// ([`crate::probe::python_module`], always under `CI`), so an oracle that cannot run here is a
/// failure, never a silent skip.
///
/// # Panics
/// When `python3` cannot be run, the script exits unsuccessfully (the message carries its exit
/// status and stderr), or its stdout is not JSON.
pub fn python_oracle(script: impl AsRef<Path>, queries: &serde_json::Value) -> serde_json::Value {
    let script = script.as_ref();
    let name = script.display();
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("oracle {name}: cannot run python3: {e}"));
    let mut stdin = child.stdin.take().expect("piped stdin");
    // A script that fails before reading its input closes the pipe: its stderr says why.
    let written = stdin.write_all(queries.to_string().as_bytes());
    drop(stdin);
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("oracle {name}: cannot wait for python3: {e}"));
    assert!(
        out.status.success(),
        "oracle {name} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    if let Err(e) = written {
        panic!("oracle {name}: cannot write the queries: {e}");
    }
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "oracle {name}: output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_dir_is_fresh_and_removed_on_drop() {
        let a = TempDir::new("kit");
        let b = TempDir::new("kit");
        assert_ne!(a.path(), b.path());
        assert!(a.path().is_dir());
        std::fs::create_dir_all(a.path().join("sub")).unwrap();
        std::fs::write(a.path().join("sub/f"), b"x").unwrap();
        let p = a.path().to_path_buf();
        drop(a);
        assert!(!p.exists(), "{} survived the drop", p.display());
        assert!(b.path().is_dir());
    }

    #[test]
    fn free_port_can_be_bound_and_waited_for() {
        let port = free_port();
        assert_ne!(port, 0);
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        assert_eq!(listener.local_addr().unwrap().port(), port);
        wait_for_port(port, Duration::from_secs(5));
    }

    #[test]
    #[should_panic(expected = "never: not within")]
    fn wait_until_panics_at_its_deadline() {
        wait_until("never", Duration::from_millis(60), || false);
    }

    #[test]
    fn wait_until_returns_once_ready() {
        let mut polls = 0;
        wait_until("third poll", Duration::from_secs(5), || {
            polls += 1;
            polls == 3
        });
        assert_eq!(polls, 3);
    }

    /// Runs a Python script with this body through [`python_oracle`], catching its panic.
    fn oracle_of(body: &str, queries: serde_json::Value) -> std::thread::Result<serde_json::Value> {
        let dir = TempDir::new("oracle");
        let p = dir.path().join("oracle.py");
        std::fs::write(&p, body).unwrap();
        std::panic::catch_unwind(|| python_oracle(&p, &queries))
    }

    #[test]
    fn python_oracle_answers_json_from_stdin() {
        let body = "import json, sys\nprint(json.dumps([x * 2 for x in json.load(sys.stdin)]))\n";
        let v = oracle_of(body, serde_json::json!([1, 2.5])).unwrap();
        assert_eq!(v, serde_json::json!([2, 5.0]));
    }

    #[test]
    fn python_oracle_failure_carries_stderr() {
        let body = "import sys\nsys.stderr.write('no such estimator: frob\\n')\nsys.exit(1)\n";
        let err = oracle_of(body, serde_json::json!({}))
            .expect_err("a script that exits 1 must fail the oracle");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("oracle.py failed"), "{msg}");
        assert!(msg.contains("no such estimator: frob"), "{msg}");
    }

    #[test]
    fn reference_script_finds_the_repository_scripts() {
        assert!(reference_script("dp_accounting_oracle.py").is_file());
    }

    #[test]
    #[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
    fn redis_server_starts_restarts_and_is_killed_on_drop() {
        let mut redis = RedisServer::start_with(&["--save", ""]);
        let port = redis.port();
        assert_eq!(redis.url(), format!("redis://127.0.0.1:{port}/"));
        assert!(redis.dir().is_dir());
        let ping = |port: u16| {
            let mut s = TcpStream::connect(("127.0.0.1", port))?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(b"PING\r\n")?;
            let mut buf = [0u8; 7];
            std::io::Read::read_exact(&mut s, &mut buf)?;
            Ok::<_, std::io::Error>(buf)
        };
        assert_eq!(&ping(port).unwrap(), b"+PONG\r\n");
        redis.kill9();
        assert!(ping(port).is_err(), "killed, yet it answers");
        redis.restart();
        assert_eq!(&ping(port).unwrap(), b"+PONG\r\n");
        drop(redis);
        assert!(ping(port).is_err(), "dropped, yet it answers");
    }
}
