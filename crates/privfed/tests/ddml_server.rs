//! The Draw-and-Discard server through the real binary: `kill -9` under load and restart, and
//! `privfed loadgen` against it.

use privfed_server::client::{Client, Submitted};
use privfed_server::model::CreateModel;
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "crash-test-token";

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

/// A `privfed serve` child on 127.0.0.1 with an OS-chosen port; killed (SIGKILL) on drop.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(dir: &Path, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_privfed"))
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--admin-token",
                TOKEN,
                "--data-dir",
            ])
            .arg(dir)
            .args(extra)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn privfed serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("privfed serve exited before listening")
                .unwrap();
            if let Some(u) = line.strip_prefix("privfed serve: listening on ") {
                break u.trim().to_string();
            }
        };
        // Keep draining stderr so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self { child, url }
    }

    /// `kill -9`.
    fn kill9(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spec(name: &str, dim: usize, k: usize) -> CreateModel {
    CreateModel {
        name: name.into(),
        dim,
        k,
        init_std: None,
        spam_sigmas: None,
        spam_max_outside_fraction: None,
    }
}

/// Draws until every instance has been seen with overwhelming probability (600 draws for
/// k = 20 miss one with probability 20·(19/20)^600 ≈ 9e-13) and checks each is untorn
/// (a constant vector) and was either initialized (0) or sent by a client.
async fn check_instances(c: &Client, sent: &HashSet<u32>) -> HashSet<u32> {
    let mut seen = HashSet::new();
    for _ in 0..600 {
        let w = c.draw("m").await.unwrap();
        assert_eq!(w.len(), 387);
        assert!(
            w.iter().all(|x| x.to_bits() == w[0].to_bits()),
            "torn instance after crash"
        );
        assert!(
            w[0] == 0.0 || sent.contains(&w[0].to_bits()),
            "instance holds a value no client sent: {}",
            w[0]
        );
        seen.insert(w[0].to_bits());
    }
    assert!(seen.len() <= 20);
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_loses_nothing_acknowledged() {
    let dir = TempDir::new("crash");
    let mut server = Server::start(&dir.0, &[]);
    let admin = Client::new(&server.url).unwrap().with_admin_token(TOKEN);
    admin.create_model(&spec("m", 387, 20)).await.unwrap();

    // Phase 1: load, then quiesce; the acknowledged state must survive kill -9 exactly.
    let sent = Arc::new(Mutex::new(HashSet::new()));
    let acked = Arc::new(Mutex::new(0u64));
    let load = |url: String, base: u32, stop_after: Option<Duration>| {
        let sent = sent.clone();
        let acked = acked.clone();
        tokio::spawn(async move {
            let c = Client::new(&url).unwrap();
            let t0 = Instant::now();
            let mut s = 0u32;
            loop {
                if let Some(d) = stop_after
                    && t0.elapsed() > d
                {
                    break;
                }
                s += 1;
                let v = (base + s) as f32;
                sent.lock().unwrap().insert(v.to_bits());
                match c.submit("m", &vec![v; 387]).await {
                    Ok(Submitted::Accepted) => *acked.lock().unwrap() += 1,
                    Ok(Submitted::Rejected(r)) => panic!("no spam filter, yet rejected: {r}"),
                    Err(_) => break, // the server died
                }
            }
        })
    };
    let tasks: Vec<_> = (0..16)
        .map(|t| {
            load(
                server.url.clone(),
                1 + t * 100_000,
                Some(Duration::from_millis(700)),
            )
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let c = Client::new(&server.url).unwrap();
    let before = c.model("m").await.unwrap();
    let acked1 = *acked.lock().unwrap();
    assert!(acked1 > 100, "too little load: {acked1}");
    assert_eq!(before.updates_accepted, acked1);
    server.kill9();
    let mut server = Server::start(&dir.0, &[]);
    let c = Client::new(&server.url).unwrap();
    let after = c.model("m").await.unwrap();
    assert_eq!(after.updates_accepted, acked1, "acknowledged updates lost");
    assert_eq!(after.mean, before.mean, "instances changed across kill -9");
    let snapshot = sent.lock().unwrap().clone();
    check_instances(&c, &snapshot).await;

    // Phase 2: kill -9 in the middle of the load.
    let tasks: Vec<_> = (0..16)
        .map(|t| load(server.url.clone(), 2_000_001 + t * 100_000, None))
        .collect();
    tokio::time::sleep(Duration::from_millis(600)).await;
    server.kill9();
    for t in tasks {
        t.await.unwrap();
    }
    let acked2 = *acked.lock().unwrap();
    let sent_total = sent.lock().unwrap().len() as u64;
    assert!(acked2 > acked1 + 100, "too little load before the kill");
    let server = Server::start(&dir.0, &[]);
    let c = Client::new(&server.url).unwrap();
    let info = c.model("m").await.unwrap();
    // Every acknowledged update counted; nothing counted that was not sent (at most the
    // in-flight ones beyond the acknowledged).
    assert!(
        info.updates_accepted >= acked2 && info.updates_accepted <= sent_total,
        "accepted {} not in [{acked2}, {sent_total}]",
        info.updates_accepted
    );
    assert_eq!(info.updates_rejected, 0);
    let snapshot = sent.lock().unwrap().clone();
    check_instances(&c, &snapshot).await;
    // And the server keeps working.
    assert_eq!(
        c.submit("m", &vec![7.0; 387]).await.unwrap(),
        Submitted::Accepted
    );
    assert_eq!(
        c.model("m").await.unwrap().updates_accepted,
        info.updates_accepted + 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadgen_reports_json_against_a_live_server() {
    let dir = TempDir::new("loadgen");
    let server = Server::start(&dir.0, &["--bench-routes"]);
    let admin = Client::new(&server.url).unwrap().with_admin_token(TOKEN);
    let mut s = spec("lg", 387, 20);
    s.init_std = Some(0.1);
    admin.create_model(&s).await.unwrap();
    let url = server.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_privfed"))
            .args([
                "loadgen",
                "--server",
                &url,
                "--model",
                "lg",
                "--concurrency",
                "4",
            ])
            .args([
                "--duration",
                "0.5",
                "--warmup",
                "0.1",
                "--json",
                "--seed",
                "1",
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "updates_per_second",
        "p50_ms",
        "p99_ms",
        "errors",
        "updates",
    ] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    assert_eq!(v["errors"], 0);
    let n = v["updates"].as_u64().unwrap();
    assert!(n > 0);
    let info = Client::new(&server.url).unwrap().model("lg").await.unwrap();
    // The server accepted at least the measured updates (plus warm-up and tail).
    assert!(
        info.updates_accepted >= n,
        "{} < {n}",
        info.updates_accepted
    );
    // The devices' updates moved the model away from its zero-mean initialization.
    assert!(info.mean.iter().any(|m| *m != 0.0));
    // Ceiling mode against the same server.
    let url = server.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_privfed"))
            .args([
                "loadgen",
                "--server",
                &url,
                "--ceiling",
                "387",
                "--concurrency",
                "2",
            ])
            .args(["--duration", "0.3", "--warmup", "0", "--json"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["target"], "ceiling");
    assert_eq!(v["errors"], 0);
}
