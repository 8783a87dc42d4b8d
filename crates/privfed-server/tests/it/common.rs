//! Test helpers: temporary directories and a Redis server on a free loopback port.

use privfed_server::ddml::model::CreateModel;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let p =
            std::env::temp_dir().join(format!("privfed-test-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Opens an existing embedded store: the previous server's (or store's) writer thread may hold
/// the database for a moment after shutdown.
pub async fn reopen(dir: &std::path::Path) -> privfed_server::EmbeddedStore {
    let t0 = Instant::now();
    loop {
        match privfed_server::EmbeddedStore::open(dir) {
            Ok(s) => return s,
            Err(e) if t0.elapsed() < Duration::from_secs(10) => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("cannot reopen the store: {e}"),
        }
    }
}

/// A free TCP port on 127.0.0.1 (bound then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `redis-server` child on a free loopback port with its data directory, killed on drop; it
/// can be killed with SIGKILL and restarted on the same port and directory.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: TempDir,
    args: Vec<String>,
}

impl RedisServer {
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The data directory (`--dir`).
    #[allow(dead_code)]
    pub fn dir(&self) -> &std::path::Path {
        &self.dir.0
    }

    /// SIGKILL (`kill -9`): no shutdown, no final save.
    #[allow(dead_code)]
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends `signal` (a `kill` name: `STOP`, `CONT`, …) to the running process.
    #[allow(dead_code)]
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("redis-server is running").id();
        let ok = Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -{signal} {pid}");
    }

    /// Starts it again with the same port, directory and configuration (it then loads its
    /// AOF/RDB; it may answer `LOADING` for a moment).
    #[allow(dead_code)]
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

fn spawn_redis(port: u16, dir: &std::path::Path, args: &[String]) -> Child {
    let mut cmd = Command::new("redis-server");
    cmd.args([
        "--bind",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let child = cmd
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server");
    let t0 = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "redis-server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Starts `redis-server` on 127.0.0.1 in the configuration the strict Redis store requires
/// (`appendonly yes`, `appendfsync always`; no RDB snapshots). Tests that call it are
/// `#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]`: the build script
/// sets `has_redis_server` when it finds `redis-server` on PATH (and fails the build under `CI`
/// when it does not), so a missing server shows as an ignored test, never as a pass.
pub fn start_redis() -> RedisServer {
    start_redis_with(&[
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ])
}

/// Starts `redis-server` with these configuration arguments (after `--bind`, `--port`, `--dir`
/// in a fresh temporary directory); `&[]` is Redis' stock configuration.
pub fn start_redis_with(args: &[&str]) -> RedisServer {
    let dir = TempDir::new("redis");
    let port = free_port();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let child = spawn_redis(port, &dir.0, &args);
    RedisServer {
        child: Some(child),
        port,
        dir,
        args,
    }
}

/// A running server: its base URL, the sender that shuts it down, and its task.
pub type Running = (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

/// Serves `store` with `token` on 127.0.0.1 (OS-chosen port) on the current tokio runtime.
pub async fn serve_on_loopback<S: privfed_server::Store + 'static>(
    store: S,
    token: &str,
) -> Running {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let state = std::sync::Arc::new(privfed_server::AppState::new(store, token));
    let h = tokio::spawn(async move {
        privfed_server::serve(listener, state, async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    (url, tx, h)
}

/// A creation request with no initialization spread and no spam filter.
pub fn spec(name: &str, dim: usize, k: usize) -> CreateModel {
    CreateModel {
        name: name.into(),
        dim,
        k,
        init_std: None,
        spam_sigmas: None,
        spam_max_outside_fraction: None,
        // These tests post arbitrary finite vectors: no step to check.
        update_guard: Some(privfed_ddml::guard::UpdateGuard::Off(
            privfed_ddml::guard::GuardOff::Off,
        )),
    }
}
