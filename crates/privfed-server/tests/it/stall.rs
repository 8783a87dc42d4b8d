//! A stalled disk: the embedded store's data directory on a real ext4 file system (a loop
//! mount) frozen with `fsfreeze`, so every write to it blocks as on a hung device. Needs root,
//! loop devices and `fsfreeze`; without them the test says it was skipped, unless
//! `PRIVFED_REQUIRE_FSFREEZE` is set (CI sets it where it can), when it fails instead.

use crate::serving::{TOKEN, fast, secs};
use privfed_server::ddml::store::embedded::{EmbeddedOptions, OpenMode};
use privfed_server::{AppState, EmbeddedStore};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An ext4 image mounted on a fresh directory, which can be frozen; always thawed and
/// unmounted on drop. A dead-man child thaws it after 120 s should this process die frozen.
struct FreezableMount {
    dir: PathBuf,
    /// Removed (with the image) on drop, after the unmount.
    _base: crate::common::TempDir,
    deadman: Option<Child>,
}

fn run(cmd: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl FreezableMount {
    fn new() -> Result<Self, String> {
        let base = crate::common::TempDir::new("stall");
        let img = base.0.join("disk.img");
        let dir = base.0.join("mnt");
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(128 << 20))
            .map_err(|e| e.to_string())?;
        std::fs::create_dir(&dir).map_err(|e| e.to_string())?;
        run("mkfs.ext4", &["-q", "-F", img.to_str().unwrap()])?;
        run(
            "mount",
            &["-o", "loop", img.to_str().unwrap(), dir.to_str().unwrap()],
        )?;
        Ok(Self {
            dir,
            _base: base,
            deadman: None,
        })
    }

    fn freeze(&mut self) {
        let d = self.dir.to_str().unwrap().to_string();
        self.deadman = Some(
            Command::new("sh")
                .args(["-c", &format!("sleep 120; fsfreeze -u '{d}'")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn the dead-man thaw"),
        );
        run("fsfreeze", &["-f", &d]).expect("fsfreeze -f");
    }

    fn thaw(&mut self) {
        if let Some(mut c) = self.deadman.take() {
            let _ = run("fsfreeze", &["-u", self.dir.to_str().unwrap()]);
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for FreezableMount {
    fn drop(&mut self) {
        self.thaw();
        let _ = run("umount", &["-l", self.dir.to_str().unwrap()]);
    }
}

async fn status(req: reqwest::RequestBuilder) -> u16 {
    req.send().await.unwrap().status().as_u16()
}

/// The probe's stalled disk: under a 10 s freeze every write hung for 10 s while `/healthz` said
/// 200. Now a write whose commit misses the deadline (2 s here) answers 503, `/healthz` answers
/// 503, further writes are refused at once; after the thaw the server is healthy again, the late
/// write has been applied exactly once, and new writes are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_data_directory_is_unhealthy_within_the_commit_deadline() {
    let mut mount = match FreezableMount::new() {
        Ok(m) => m,
        Err(why) if std::env::var_os("PRIVFED_REQUIRE_FSFREEZE").is_none() => {
            eprintln!(
                "SKIPPED a_frozen_data_directory_is_unhealthy_within_the_commit_deadline: {why}"
            );
            return;
        }
        Err(why) => panic!("PRIVFED_REQUIRE_FSFREEZE is set but: {why}"),
    };
    const DEADLINE: Duration = Duration::from_secs(2);
    let store = EmbeddedStore::open_with(
        &mount.dir.join("data"),
        OpenMode::Create,
        EmbeddedOptions {
            commit_deadline: DEADLINE,
            ..EmbeddedOptions::default()
        },
    )
    .unwrap();
    let state = Arc::new(AppState::new(store, TOKEN));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(privfed_server::serve_with(
        listener,
        state.clone(),
        async {
            let _ = stopped.await;
        },
        fast(|_| {}),
    ));
    let c = reqwest::Client::new();
    let url = |p: &str| format!("http://{addr}{p}");
    let created = c
        .post(url("/v1/models"))
        .bearer_auth(TOKEN)
        .json(&crate::common::spec("m", 4, 2))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let update = || {
        c.post(url("/v1/models/m/updates"))
            .json(&serde_json::json!({"weights": [0.5, 0.5, 0.5, 0.5]}))
    };
    assert_eq!(status(update()).await, 202);
    assert_eq!(status(c.get(url("/healthz"))).await, 200);

    mount.freeze();
    let t0 = Instant::now();
    assert_eq!(status(update()).await, 503, "a write on a frozen disk");
    let answered = t0.elapsed();
    eprintln!("the stalled write answered 503 after {answered:?}");
    assert!(
        answered < DEADLINE + secs(3),
        "the stalled write answered after {answered:?} (deadline {DEADLINE:?})"
    );
    assert_eq!(status(c.get(url("/healthz"))).await, 503);
    let t1 = Instant::now();
    assert_eq!(status(update()).await, 503);
    assert!(
        t1.elapsed() < secs(1),
        "a write while stalled is refused at once, not after another deadline"
    );

    mount.thaw();
    let t2 = Instant::now();
    loop {
        if status(c.get(url("/healthz"))).await == 200 {
            break;
        }
        assert!(
            t2.elapsed() < secs(30),
            "still unhealthy 30 s after the thaw"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status(update()).await, 202);
    let snap: serde_json::Value = c
        .get(url("/v1/models/m"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Before the freeze, the late one (committed after the thaw), after the thaw; the one
    // refused at once was never queued.
    assert_eq!(snap["updates_accepted"], 3, "{snap}");
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
