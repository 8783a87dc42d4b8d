//! Over a real socket with the real embedded store: many concurrent clients, instances never
//! torn, counters exact, state durable across a clean restart.

use crate::common;

use privfed_client::client::{Client, Submitted};
use privfed_server::EmbeddedStore;
use std::collections::HashSet;
use std::time::{Duration, Instant};

const TOKEN: &str = "tok";

async fn start(
    dir: &std::path::Path,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    // The previous server's writer thread may still hold the database for a moment.
    let t0 = Instant::now();
    let store = loop {
        let opened = if dir
            .join(privfed_server::ddml::store::embedded::DB_FILE)
            .exists()
        {
            EmbeddedStore::open(dir)
        } else {
            EmbeddedStore::create(dir)
        };
        match opened {
            Ok(s) => break s,
            Err(e) if t0.elapsed() < Duration::from_secs(10) => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("cannot reopen the store: {e}"),
        }
    };
    common::serve_on_loopback(store, TOKEN).await
}

/// 32 concurrent clients × 60 updates, each update a constant vector with a unique value: every
/// instance afterwards is a constant vector of 0 (initial) or of a posted value (never a mix),
/// the accepted counter equals the number of 202s, and everything survives a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_cannot_tear_instances_and_state_survives_restart() {
    let dir = common::TempDir::new("socket");
    let (url, stop, handle) = start(&dir.0).await;
    let admin = Client::new(&url).unwrap().with_admin_token(TOKEN);
    let (dim, k) = (387usize, 8usize);
    admin
        .create_model(&common::spec("m", dim, k))
        .await
        .unwrap();
    assert_eq!(
        admin
            .create_model(&common::spec("m", dim, k))
            .await
            .unwrap_err()
            .status(),
        Some(409)
    );
    let mut tasks = Vec::new();
    for t in 0..32u32 {
        let c = Client::new(&url).unwrap();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for s in 0..60u32 {
                let drawn = c.draw("m").await.unwrap().weights;
                assert_eq!(drawn.len(), 387);
                assert!(drawn.iter().all(|w| *w == drawn[0]), "torn draw");
                let v = (t * 1000 + s + 1) as f32;
                let w = vec![v; 387];
                let r = if s % 2 == 0 {
                    c.submit("m", None, &w).await.unwrap()
                } else {
                    c.submit_json("m", None, &w).await.unwrap()
                };
                assert_eq!(r, Submitted::Accepted);
                acked.push(v);
            }
            acked
        }));
    }
    let mut sent = HashSet::new();
    for t in tasks {
        for v in t.await.unwrap() {
            sent.insert(v.to_bits());
        }
    }
    let c = Client::new(&url).unwrap();
    let info = c.model("m").await.unwrap();
    assert_eq!(info.updates_accepted, 32 * 60);
    // 400 draws see all 8 instances except with probability 8·(7/8)^400 ≈ 5e-23.
    let mut seen = HashSet::new();
    for _ in 0..400 {
        let w = c.draw("m").await.unwrap().weights;
        assert!(w.iter().all(|x| *x == w[0]), "torn instance");
        assert!(w[0] == 0.0 || sent.contains(&w[0].to_bits()));
        seen.insert(w[0].to_bits());
    }
    assert!(seen.len() <= k);
    let mean_before = info.mean.clone();

    // Clean restart: same counters and instances.
    stop.send(()).unwrap();
    handle.await.unwrap();
    let (url, stop, handle) = start(&dir.0).await;
    let c = Client::new(&url).unwrap();
    let info = c.model("m").await.unwrap();
    assert_eq!(info.updates_accepted, 32 * 60);
    assert_eq!(info.mean, mean_before);
    assert!(c.healthy().await.unwrap());
    stop.send(()).unwrap();
    handle.await.unwrap();
}
