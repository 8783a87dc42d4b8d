//! The Draw-and-Discard server through the real binary: `kill -9` under load and restart,
//! `privfed loadgen` and `privfed ddml simulate --server` against it.

use crate::common::{TempDir, loopback_addr, words};
use privfed_client::client::{Client, ModelInfo, Submitted};
use privfed_ddml::wire::CreateModel;
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const TOKEN: &str = "crash-test-token";

/// A `privfed serve` child on 127.0.0.1 with an OS-chosen port; killed (SIGKILL) on drop.
struct Server {
    child: Child,
    url: String,
    /// What it logged before listening (opening the store: journal replay, quarantine).
    startup_log: Vec<String>,
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
            // A fresh directory needs an explicit new store; a restart reopens the old one.
            .args((!dir.join("privfed.redb").exists()).then_some("--init-store"))
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn privfed serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut startup_log = Vec::new();
        let url = loop {
            let line = lines
                .next()
                .expect("privfed serve exited before listening")
                .unwrap();
            if let Some(u) = line.strip_prefix("privfed serve: listening on ") {
                break u.trim().to_string();
            }
            startup_log.push(line);
        };
        // Keep draining stderr so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Self {
            child,
            url,
            startup_log,
        }
    }

    /// After a crash: the updates acknowledged since the last checkpoint came back from the
    /// update journal (its replay is logged at start-up).
    fn assert_replayed(&self) {
        assert!(
            self.startup_log
                .iter()
                .any(|l| l.contains("update journal replayed")),
            "no journal replay logged at start-up: {:?}",
            self.startup_log
        );
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

/// A creation request with no initialization spread, no spam filter and no update guard (these
/// tests post arbitrary finite vectors: no step to check).
fn spec(name: &str, dim: usize, k: usize) -> CreateModel {
    CreateModel::unguarded(name, dim, k)
}

/// Draws until every instance has been seen with overwhelming probability (600 draws for
/// k = 20 miss one with probability 20·(19/20)^600 ≈ 9e-13) and checks each is untorn
/// (a constant vector) and was either initialized (0) or sent by a client.
async fn check_instances(c: &Client, sent: &HashSet<u32>) -> HashSet<u32> {
    let mut seen = HashSet::new();
    for _ in 0..600 {
        let w = c.draw("m").await.unwrap().weights;
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

/// kill -9 of `privfed serve` after load and in the middle of it: every acknowledged update is
/// there after the restart (replayed from the update journal), instances are untorn, and nothing
/// is counted that was not sent.
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
                match c.submit("m", None, &vec![v; 387]).await {
                    Ok(Submitted::Accepted | Submitted::Replayed) => *acked.lock().unwrap() += 1,
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
    server.assert_replayed();
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
    server.assert_replayed();
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
        c.submit("m", None, &vec![7.0; 387]).await.unwrap(),
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

/// `GET /v1/models/{name}` from a plain (non-async) test.
fn model_info(url: &str, name: &str) -> Result<ModelInfo, privfed_client::client::ClientError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(Client::new(url).unwrap().model(name))
}

/// `privfed` with `args`, without `PRIVFED_ADMIN_TOKEN` from the environment.
fn privfed_no_env(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_privfed"))
        .args(args)
        .env_remove("PRIVFED_ADMIN_TOKEN")
        .output()
        .unwrap()
}

/// `ddml simulate` on synthetic-production: `train` rows (1,000 held out), k = 5, γ = 0.1,
/// one pass of N_c = 10 (train/10 updates), against `url`, plus `extra`.
fn simulate_args<'a>(url: &'a str, train: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "ddml",
        "simulate",
        "--dataset",
        "synthetic-production",
        "--synthetic-train",
        train,
        "--synthetic-test",
        "5000",
        "--k",
        "5",
        "--learning-rate",
        "0.1",
        "--passes",
        "1",
        "--server",
        url,
        "--json",
        "--quiet",
    ];
    v.extend_from_slice(extra);
    v
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `ddml simulate --server` against the real `privfed serve`:
/// * no noise, 20,000 rows, 2,000 updates, `--keep-model`: every update reached the server (its
///   counters equal the report's), the report's weights and intra-model variance are the
///   server's, and it learned: held-out loss < 0.6, where the zero model has ln 2 ≈ 0.693 and
///   the random initial mean at least that in expectation (the loss is convex: Jensen). Measured
///   0.504–0.534 over seven seeds against the server and 0.487–0.518 over five in process. The
///   largest weight error is reported but not asserted to fall: at this budget it does not, in
///   process either (measured 1.43–1.99 in process and 1.59–2.33 against the server, where the
///   zero model has 1.72; the sparse crosses converge slowly, see `cli_ddml.rs`);
/// * ε = 3 with a 3-sd spam filter: rejections happen (measured 99% of the updates with another
///   seed), counted identically by the report and the server, and the privacy report uses the
///   overwrites;
/// * without `--keep-model` the model is gone afterwards.
#[test]
fn simulate_against_a_live_server() {
    let dir = TempDir::new("sim");
    let server = Server::start(&dir.0, &[]);
    let url = server.url.as_str();
    let v = json_of(&privfed_no_env(&simulate_args(
        url,
        "20000",
        &[
            "--no-noise",
            "--seed",
            "21",
            "--admin-token",
            TOKEN,
            "--model",
            "sim-a",
            "--keep-model",
        ],
    )));
    assert_eq!(v["server"], url);
    assert_eq!(v["model"], "sim-a");
    assert_eq!(v["strategy"]["kind"], "draw_and_discard");
    assert_eq!(v["updates"], 2000);
    let info = model_info(url, "sim-a").unwrap();
    assert_eq!((info.k, info.dim), (5, 33));
    // σ²_init = 8γ² = 0.08 without noise; init std √((k/2)·0.08) = √0.2.
    assert!(
        (info.init_std - 0.2f64.sqrt()).abs() < 1e-12,
        "{}",
        info.init_std
    );
    assert_eq!(
        (info.updates_accepted, info.updates_rejected),
        (2000, 0),
        "the server did not count every update"
    );
    assert_eq!(v["updates_accepted"], 2000);
    assert_eq!(v["overwrites"], 2000);
    let est: Vec<f64> = serde_json::from_value(v["estimated_weights"].clone()).unwrap();
    assert_eq!(
        est, info.mean,
        "the evaluation did not use the server's mean"
    );
    assert_eq!(
        v["intra_model_variance"].as_f64().unwrap(),
        info.intra_model_variance
    );
    let loss = v["loss"].as_f64().unwrap();
    eprintln!(
        "server run: loss {loss}, accuracy {}, weights_max_abs_error {}",
        v["accuracy"], v["weights_max_abs_error"]
    );
    assert!(loss < 0.6, "held-out loss {loss}");
    assert!(v["weights_max_abs_error"].as_f64().unwrap().is_finite());
    assert!(v["privacy"].is_null());

    let v = json_of(&privfed_no_env(&simulate_args(
        url,
        "20000",
        &[
            "--epsilon",
            "3",
            "--spam-sigmas",
            "3",
            "--seed",
            "22",
            "--admin-token",
            TOKEN,
            "--keep-model",
        ],
    )));
    assert_eq!(v["model"], "ddml-sim-22");
    let info = model_info(url, "ddml-sim-22").unwrap();
    assert_eq!(info.spam_sigmas, Some(3.0));
    let (acc, rej) = (
        v["updates_accepted"].as_u64().unwrap(),
        v["updates_rejected"].as_u64().unwrap(),
    );
    assert_eq!((info.updates_accepted, info.updates_rejected), (acc, rej));
    assert_eq!(acc + rej, 2000);
    assert!(rej > 0 && acc > 0, "accepted {acc}, rejected {rej}");
    assert_eq!(v["overwrites"], acc);
    assert_eq!(
        v["privacy"]["further_updates"].as_u64().unwrap(),
        (acc / 5).max(1)
    );
    assert!(v["intra_model_variance"].as_f64().unwrap() > 0.0);
    // σ² = 2(2γ/ε)² and (k/2)σ², reported as in process.
    let pred = v["predicted_intra_model_variance"].as_f64().unwrap();
    assert!(
        (pred - 2.5 * 2.0 * (0.2f64 / 3.0).powi(2)).abs() < 1e-12,
        "{pred}"
    );

    // The token from the environment; the model is deleted at the end.
    let out = Command::new(env!("CARGO_BIN_EXE_privfed"))
        .args(simulate_args(url, "2000", &words("--no-noise --seed 23")))
        .env("PRIVFED_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["updates"], 200);
    assert_eq!(v["model"], "ddml-sim-23");
    assert_eq!(
        model_info(url, "ddml-sim-23").unwrap_err().status(),
        Some(404),
        "the model was not deleted"
    );
    // The kept models are still there.
    assert!(model_info(url, "sim-a").is_ok());
}

/// Clear errors and a non-zero exit: an unreachable server, a wrong or missing admin token, a
/// model that exists, and the strategies a server cannot run.
#[test]
fn simulate_server_errors() {
    let fails = |args: &[&str], needle: &str| {
        let out = privfed_no_env(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(
            err.contains(needle),
            "{args:?}: stderr {err:?} lacks {needle:?}"
        );
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert!(out.stdout.is_empty(), "{args:?} printed a report");
    };
    // Nothing listens on a port just released.
    let dead = format!("http://{}", loopback_addr());
    fails(
        &simulate_args(&dead, "2000", &["--no-noise", "--admin-token", TOKEN]),
        "Connection refused",
    );
    // Rejected before any request: no server needed.
    fails(
        &simulate_args(
            &dead,
            "2000",
            &[
                "--no-noise",
                "--admin-token",
                TOKEN,
                "--strategy",
                "replace-drawn",
            ],
        ),
        "--server supports only --strategy draw-and-discard",
    );
    fails(
        &simulate_args(
            &dead,
            "2000",
            &["--no-noise", "--admin-token", TOKEN, "--server-batch", "10"],
        ),
        "run in process only",
    );
    fails(
        &simulate_args(&dead, "2000", &["--no-noise"]),
        "--server needs --admin-token",
    );
    crate::common::fails_with(
        &words(
            "ddml simulate --dataset synthetic-production --k 5 --learning-rate 0.1 --no-noise --model m",
        ),
        "--server",
    );

    let dir = TempDir::new("sim-err");
    let server = Server::start(&dir.0, &[]);
    let url = server.url.as_str();
    fails(
        &simulate_args(url, "2000", &words("--no-noise --admin-token wrong-token")),
        "403 forbidden",
    );
    let admin = Client::new(url).unwrap().with_admin_token(TOKEN);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(admin.create_model(&spec("taken", 33, 5)))
        .unwrap();
    fails(
        &simulate_args(
            url,
            "2000",
            &["--no-noise", "--admin-token", TOKEN, "--model", "taken"],
        ),
        "409 conflict",
    );
    // The existing model was left alone.
    assert_eq!(model_info(url, "taken").unwrap().updates_accepted, 0);
}

/// `privfed serve` on a directory without a store refuses to start (the old
/// binary silently created an empty store, losing every model without a word); `--init-store`
/// creates one, and refuses when one exists.
#[test]
fn serve_refuses_a_missing_store_unless_asked_to_create_one() {
    let dir = TempDir::new("missing-store");
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_privfed"))
            .args(["serve", "--addr", "127.0.0.1:0", "--admin-token", TOKEN])
            .arg("--data-dir")
            .arg(dir.0.join("data"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no store at") && err.contains("--init-store"),
        "{err}"
    );
    assert!(!dir.0.join("data").exists(), "nothing may be created");
    {
        let _server = Server::start(&dir.0.join("data"), &[]);
    }
    let out = run(&["--init-store"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exists already"), "{err}");
}

/// Tickets of the embedded store survive `kill -9`. A ticket drawn before the crash
/// and used after it is applied exactly once (a retry answers its first outcome); a ticket used
/// before the crash (its rejection durable in the update journal) answers that outcome after it
/// and is not applied again; forged and made-up tickets are refused; and across a second
/// `kill -9` the ticket used in between is still not applied again. Before, every ticket was
/// forgotten at a restart: the post after the crash got 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_drawn_before_kill_9_is_applied_once_after_restart() {
    let dir = TempDir::new("tickets-crash");
    let mut server = Server::start(&dir.0, &[]);
    let admin = Client::new(&server.url).unwrap().with_admin_token(TOKEN);
    // Many instances, so that an accepted update rarely overwrites the instance a ticket drew
    // (a ticket whose instance value is gone is refused after a restart, as documented); a spam
    // band, so that an update can be rejected (and the rejection is durable without overwriting
    // anything).
    let model = CreateModel {
        init_std: Some(1.0),
        spam_sigmas: Some(3.0),
        ..spec("t", 4, 1000)
    };
    admin.create_model(&model).await.unwrap();
    let c = Client::new(&server.url).unwrap();
    let a = c.draw("t").await.unwrap().ticket.expect("a ticket");
    let b = c.draw("t").await.unwrap().ticket.expect("a ticket");
    let far = vec![1e4f32; 4];
    let near = vec![0.0f32; 4];
    assert!(matches!(
        c.submit("t", Some(&b), &far).await.unwrap(),
        Submitted::Rejected(_)
    ));

    server.kill9();
    let mut server = Server::start(&dir.0, &[]);
    server.assert_replayed();
    let c = Client::new(&server.url).unwrap();
    let status = |r: Result<Submitted, privfed_client::client::ClientError>| match r {
        Ok(s) => Err(s),
        Err(e) => Ok(e.status()),
    };
    // Forged: one bit of a genuine ticket changed; made up: any 32 hex digits.
    let mut forged = a.clone().into_bytes();
    forged[31] = if forged[31] == b'0' { b'1' } else { b'0' };
    let forged = String::from_utf8(forged).unwrap();
    for t in [forged.as_str(), "0123456789abcdef0123456789abcdef"] {
        assert_eq!(
            status(c.submit("t", Some(t), &near).await),
            Ok(Some(409)),
            "{t}"
        );
    }
    assert_eq!(
        c.submit("t", Some(&a), &near).await.unwrap(),
        Submitted::Accepted
    );
    assert_eq!(
        c.submit("t", Some(&a), &near).await.unwrap(),
        Submitted::Replayed
    );
    // Its first outcome, not a second application (the zeros would be accepted now).
    assert!(matches!(
        c.submit("t", Some(&b), &near).await.unwrap(),
        Submitted::Rejected(_)
    ));
    let info = c.model("t").await.unwrap();
    assert_eq!((info.updates_accepted, info.updates_rejected), (1, 1));

    // A second crash: the ticket used in between is not applied again. It answers its outcome,
    // or 409 if its own update overwrote the instance it drew (one chance in 1000).
    server.kill9();
    let server = Server::start(&dir.0, &[]);
    let c = Client::new(&server.url).unwrap();
    match c.submit("t", Some(&a), &near).await {
        Ok(Submitted::Replayed) => {}
        Err(e) if e.status() == Some(409) => {}
        other => panic!("ticket a after the second crash: {other:?}"),
    }
    match c.submit("t", Some(&b), &near).await {
        Ok(Submitted::Rejected(_)) => {}
        Err(e) if e.status() == Some(409) => {}
        other => panic!("ticket b after the second crash: {other:?}"),
    }
    let info = c.model("t").await.unwrap();
    assert_eq!((info.updates_accepted, info.updates_rejected), (1, 1));
    // New draws are served and their tickets work.
    let d = c.draw("t").await.unwrap().ticket.expect("a ticket");
    assert_eq!(
        c.submit("t", Some(&d), &near).await.unwrap(),
        Submitted::Accepted
    );
}
