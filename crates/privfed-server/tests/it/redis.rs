//! The Redis store against a real `redis-server` on a free loopback port (skipped with a message
//! when `redis-server` is not installed, except under `CI`): the API over real sockets, two server
//! processes' worth of state (two stores, two listeners) sharing one model, concurrency.

use crate::common;

use privfed_client::client::{Client, Submitted};
use privfed_server::RedisStore;
use std::collections::HashSet;

const TOKEN: &str = "tok";

async fn start(redis_url: &str) -> (String, tokio::sync::oneshot::Sender<()>) {
    let store = RedisStore::connect(redis_url).await.unwrap();
    let (url, tx, _) = common::serve_on_loopback(store, TOKEN).await;
    (url, tx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn two_servers_share_one_model_in_redis() {
    let redis = common::RedisServer::start();
    let (a, _stop_a) = start(&redis.url()).await;
    let (b, _stop_b) = start(&redis.url()).await;
    let admin_a = Client::new(&a).unwrap().with_admin_token(TOKEN);
    let admin_b = Client::new(&b).unwrap().with_admin_token(TOKEN);
    admin_a
        .create_model(&common::spec("m", 50, 6))
        .await
        .unwrap();
    // The model exists for the other process too.
    assert_eq!(
        admin_b
            .create_model(&common::spec("m", 50, 6))
            .await
            .unwrap_err()
            .status(),
        Some(409)
    );
    assert!(Client::new(&b).unwrap().healthy().await.unwrap());

    // 16 clients, half on each server, 40 updates each of constant vectors.
    let mut tasks = Vec::new();
    for t in 0..16u32 {
        let url = if t % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            let c = Client::new(&url).unwrap();
            let mut sent = Vec::new();
            for s in 0..40u32 {
                let w = c.draw("m").await.unwrap().weights;
                assert!(w.iter().all(|x| *x == w[0]), "torn draw");
                let v = (t * 1000 + s + 1) as f32;
                let r = if s % 2 == 0 {
                    c.submit("m", None, &[v; 50]).await.unwrap()
                } else {
                    c.submit_json("m", None, &[v; 50]).await.unwrap()
                };
                assert_eq!(r, Submitted::Accepted);
                sent.push(v.to_bits());
            }
            sent
        }));
    }
    let mut sent = HashSet::new();
    for t in tasks {
        sent.extend(t.await.unwrap());
    }
    let ca = Client::new(&a).unwrap();
    let cb = Client::new(&b).unwrap();
    let ia = ca.model("m").await.unwrap();
    let ib = cb.model("m").await.unwrap();
    assert_eq!(ia.updates_accepted, 16 * 40);
    assert_eq!(ia.mean, ib.mean);
    for _ in 0..200 {
        let w = cb.draw("m").await.unwrap().weights;
        assert!(w.iter().all(|x| *x == w[0]));
        assert!(w[0] == 0.0 || sent.contains(&w[0].to_bits()));
    }
    // Bad input changes nothing and gets the same codes as with the embedded store.
    assert_eq!(
        ca.submit("m", None, &[1.0; 49]).await.unwrap_err().status(),
        Some(400)
    );
    assert_eq!(
        ca.submit("m", None, &[f32::NAN; 50])
            .await
            .unwrap_err()
            .status(),
        Some(400)
    );
    assert_eq!(
        ca.submit("zz", None, &[1.0; 50])
            .await
            .unwrap_err()
            .status(),
        Some(404)
    );
    assert_eq!(cb.model("m").await.unwrap().updates_accepted, 16 * 40);

    // Delete through A: B sees it gone.
    admin_a.delete_model("m").await.unwrap();
    assert_eq!(cb.draw("m").await.unwrap_err().status(), Some(404));
    assert_eq!(cb.model("m").await.unwrap_err().status(), Some(404));
    assert_eq!(
        admin_b.delete_model("m").await.unwrap_err().status(),
        Some(404)
    );
    assert_eq!(
        ca.submit("m", None, &[1.0; 50]).await.unwrap_err().status(),
        Some(404)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn redis_spam_filter_and_recreation() {
    let redis = common::RedisServer::start();
    let (a, _stop) = start(&redis.url()).await;
    let admin = Client::new(&a).unwrap().with_admin_token(TOKEN);
    let mut s = common::spec("s", 4, 10);
    s.init_std = Some(1.0);
    s.spam_sigmas = Some(4.0);
    admin.create_model(&s).await.unwrap();
    let c = Client::new(&a).unwrap();
    let mean: Vec<f32> = c
        .model("s")
        .await
        .unwrap()
        .mean
        .iter()
        .map(|m| *m as f32)
        .collect();
    assert_eq!(
        c.submit("s", None, &mean).await.unwrap(),
        Submitted::Accepted
    );
    let mut bad = mean.clone();
    bad[1] += 1000.0;
    assert!(
        matches!(c.submit("s", None, &bad).await.unwrap(), Submitted::Rejected(m) if m.message.contains("outside"))
    );
    let info = c.model("s").await.unwrap();
    assert_eq!((info.updates_accepted, info.updates_rejected), (1, 1));
    // Re-create with another size: the old spec in the cache must not let a wrong-length write in.
    admin.delete_model("s").await.unwrap();
    admin.create_model(&common::spec("s", 3, 2)).await.unwrap();
    let r = c.submit("s", None, &[1.0; 4]).await;
    assert!(matches!(r, Err(e) if matches!(e.status(), Some(400) | Some(404))));
    // After the cache expires (1 s) the new spec is used.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(
        c.submit("s", None, &[1.0; 3]).await.unwrap(),
        Submitted::Accepted
    );
    assert_eq!(c.draw("s").await.unwrap().weights.len(), 3);
}
