//! Model identity, tickets, quarantine and failing closed, over a real
//! socket, on real redb files and a real `redis-server`.

use crate::common;
use privfed_server::client::{Client, Submitted};
use privfed_server::ddml::store::embedded::DB_FILE;
use privfed_server::{EmbeddedStore, RedisStore};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "t0ken";

/// Starts a POST of `dim` little-endian floats to `/v1/models/{name}/updates` and sends all but
/// the last byte; the returned stream finishes the upload with [`finish_upload`].
pub(crate) async fn start_upload(
    url: &str,
    name: &str,
    dim: usize,
    ticket: Option<&str>,
) -> tokio::net::TcpStream {
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = privfed_server::ddml::model::encode_f32(&vec![0.5f32; dim]);
    let ticket = ticket
        .map(|t| format!("Privfed-Ticket: {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST /v1/models/{name}/updates HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n{ticket}Content-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body[..body.len() - 1]).await.unwrap();
    s.flush().await.unwrap();
    // Let the server read the head and look the model up before the model changes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    s
}

/// Sends the last byte and returns the answer's status.
pub(crate) async fn finish_upload(mut s: tokio::net::TcpStream) -> u16 {
    s.write_all(&[0x3f]).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = s.read(&mut buf).await.unwrap();
    let head = String::from_utf8_lossy(&buf[..n]);
    head.split(' ').nth(1).unwrap().parse().unwrap()
}

/// Item 1: an update validated against a model that is deleted and re-created (other `dim`,
/// then the same `dim`) while it uploads must not land in the replacement. The old code answered
/// 202, wrote 3 weights into a 5-weight model (GET then answered 500 and the embedded store
/// refused to open after a restart) and, with the same dim, put the update into the new model.
async fn update_racing_a_recreation(url: &str) {
    let admin = Client::new(url).unwrap().with_admin_token(TOKEN);
    admin.create_model(&common::spec("m", 3, 2)).await.unwrap();
    let up = start_upload(url, "m", 3, None).await;
    admin.delete_model("m").await.unwrap();
    admin.create_model(&common::spec("m", 5, 2)).await.unwrap();
    assert_eq!(finish_upload(up).await, 404);
    let c = Client::new(url).unwrap();
    let info = c.model("m").await.unwrap();
    assert_eq!((info.updates_accepted, info.mean.len()), (0, 5));
    assert_eq!(c.draw("m").await.unwrap().weights.len(), 5);

    // Same dim: the update meant for the deleted model is refused too.
    let up = start_upload(url, "m", 5, None).await;
    admin.delete_model("m").await.unwrap();
    admin.create_model(&common::spec("m", 5, 2)).await.unwrap();
    assert_eq!(finish_upload(up).await, 404);
    assert_eq!(c.model("m").await.unwrap().updates_accepted, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_update_racing_a_recreation_is_refused_and_the_store_reopens() {
    let dir = common::TempDir::new("race");
    let store = EmbeddedStore::create(&dir.0).unwrap();
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    update_racing_a_recreation(&url).await;
    stop.send(()).unwrap();
    h.await.unwrap();
    // The store opens again and serves the model (the old code: "instance … is corrupt").
    let store = common::reopen(&dir.0).await;
    assert!(store.quarantined().is_empty());
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    assert_eq!(
        Client::new(&url)
            .unwrap()
            .model("m")
            .await
            .unwrap()
            .mean
            .len(),
        5
    );
    stop.send(()).unwrap();
    h.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn redis_update_racing_a_recreation_is_refused() {
    let redis = common::RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    update_racing_a_recreation(&url).await;
    stop.send(()).unwrap();
    h.await.unwrap();
}

/// Tickets: a draw issues one; the update with it is applied once (a retry is answered as a
/// replay and applies nothing); unknown, malformed and cross-model tickets are refused; a ticket
/// outlives the overwrite of the instance it drew.
async fn tickets_apply_once(url: &str) {
    let admin = Client::new(url).unwrap().with_admin_token(TOKEN);
    admin.create_model(&common::spec("a", 4, 2)).await.unwrap();
    admin.create_model(&common::spec("b", 4, 2)).await.unwrap();
    let c = Client::new(url).unwrap();
    let d = c.draw("a").await.unwrap();
    let t = d.ticket.clone().expect("a draw issues a ticket");
    assert_eq!(t.len(), 32);
    assert_eq!(
        c.submit("a", Some(&t), &[1.0; 4]).await.unwrap(),
        Submitted::Accepted
    );
    assert_eq!(
        c.submit("a", Some(&t), &[2.0; 4]).await.unwrap(),
        Submitted::Replayed
    );
    assert_eq!(
        c.submit_json("a", Some(&t), &[2.0; 4]).await.unwrap(),
        Submitted::Replayed
    );
    assert_eq!(c.model("a").await.unwrap().updates_accepted, 1);

    // Unknown, malformed, and another model's ticket.
    let unknown = "0123456789abcdef0123456789abcdef";
    let e = c.submit("a", Some(unknown), &[1.0; 4]).await.unwrap_err();
    assert_eq!(e.status(), Some(409), "{e}");
    let e = c.submit("a", Some("nope"), &[1.0; 4]).await.unwrap_err();
    assert_eq!(e.status(), Some(400), "{e}");
    let tb = c.draw("b").await.unwrap().ticket.unwrap();
    let e = c.submit("a", Some(&tb), &[1.0; 4]).await.unwrap_err();
    assert_eq!(e.status(), Some(409), "{e}");

    // Draw, let many other updates overwrite every instance, then use the old ticket.
    let old = c.draw("a").await.unwrap().ticket.unwrap();
    for _ in 0..40 {
        let d = c.draw("a").await.unwrap();
        c.submit("a", d.ticket.as_deref(), &[3.0; 4]).await.unwrap();
    }
    assert_eq!(
        c.submit("a", Some(&old), &[4.0; 4]).await.unwrap(),
        Submitted::Accepted
    );
    assert_eq!(c.model("a").await.unwrap().updates_accepted, 42);

    // A ticket of a deleted and re-created model is refused.
    let t = c.draw("a").await.unwrap().ticket.unwrap();
    admin.delete_model("a").await.unwrap();
    admin.create_model(&common::spec("a", 4, 2)).await.unwrap();
    let e = c.submit("a", Some(&t), &[1.0; 4]).await.unwrap_err();
    assert_eq!(e.status(), Some(409), "{e}");
    assert_eq!(c.model("a").await.unwrap().updates_accepted, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_tickets_apply_once() {
    let dir = common::TempDir::new("tickets");
    let store = EmbeddedStore::create(&dir.0).unwrap();
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    tickets_apply_once(&url).await;
    stop.send(()).unwrap();
    h.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn redis_tickets_apply_once() {
    let redis = common::RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    tickets_apply_once(&url).await;
    stop.send(()).unwrap();
    h.await.unwrap();
}

/// Item 1 (the rest): a model whose stored records are damaged is quarantined at start-up; the
/// other models are served; deleting it removes its records and the name can be used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_model_is_quarantined_and_the_others_served() {
    let dir = common::TempDir::new("quarantine");
    {
        let store = EmbeddedStore::create(&dir.0).unwrap();
        let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
        let admin = Client::new(&url).unwrap().with_admin_token(TOKEN);
        admin
            .create_model(&common::spec("good", 3, 2))
            .await
            .unwrap();
        admin
            .create_model(&common::spec("bad", 3, 2))
            .await
            .unwrap();
        stop.send(()).unwrap();
        h.await.unwrap();
    }
    // Damage one instance of `bad` (wrong length), as the old race did.
    tokio::time::sleep(Duration::from_millis(100)).await;
    {
        let db = redb::Database::open(dir.0.join(DB_FILE)).unwrap();
        let w = db.begin_write().unwrap();
        {
            let table: redb::TableDefinition<(&str, u32), &[u8]> =
                redb::TableDefinition::new("instances");
            let mut t = w.open_table(table).unwrap();
            t.insert(("bad", 1u32), [0u8; 7].as_slice()).unwrap();
        }
        w.commit().unwrap();
    }
    let store = common::reopen(&dir.0).await;
    let q = store.quarantined();
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].0, "bad");
    assert!(q[0].1.contains("instance 1"), "{}", q[0].1);
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    let c = Client::new(&url).unwrap();
    assert_eq!(c.draw("good").await.unwrap().weights.len(), 3);
    let e = c.draw("bad").await.unwrap_err();
    assert_eq!(e.status(), Some(500));
    assert!(e.to_string().contains("quarantined"), "{e}");
    let admin = Client::new(&url).unwrap().with_admin_token(TOKEN);
    assert_eq!(
        admin
            .create_model(&common::spec("bad", 3, 2))
            .await
            .unwrap_err()
            .status(),
        Some(409)
    );
    admin.delete_model("bad").await.unwrap();
    admin
        .create_model(&common::spec("bad", 4, 2))
        .await
        .unwrap();
    assert_eq!(c.draw("bad").await.unwrap().weights.len(), 4);
    stop.send(()).unwrap();
    h.await.unwrap();
    // After a restart nothing is quarantined any more.
    assert!(common::reopen(&dir.0).await.quarantined().is_empty());
}

/// Item 7: with the data directory deleted under the running server, writes answer 503 (the old
/// code answered "202 accepted and durable" into an unlinked file), `/healthz` answers 503, and
/// opening the directory again is an error instead of a silently empty store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_data_directory_fails_closed() {
    let dir = common::TempDir::new("deleted");
    let store = EmbeddedStore::create(&dir.0).unwrap();
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    let admin = Client::new(&url).unwrap().with_admin_token(TOKEN);
    admin.create_model(&common::spec("m", 3, 2)).await.unwrap();
    let c = Client::new(&url).unwrap();
    let d = c.draw("m").await.unwrap();
    assert_eq!(
        c.submit("m", d.ticket.as_deref(), &[1.0; 3]).await.unwrap(),
        Submitted::Accepted
    );
    std::fs::remove_dir_all(&dir.0).unwrap();
    let d = c.draw("m").await.unwrap();
    let e = c
        .submit("m", d.ticket.as_deref(), &[1.0; 3])
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(503), "{e}");
    // It stays failed, also for admin writes, and says so.
    let e = c.submit("m", None, &[1.0; 3]).await.unwrap_err();
    assert_eq!(e.status(), Some(503), "{e}");
    assert_eq!(
        admin
            .create_model(&common::spec("n", 3, 2))
            .await
            .unwrap_err()
            .status(),
        Some(503)
    );
    assert!(!c.healthy().await.unwrap());
    stop.send(()).unwrap();
    h.await.unwrap();
    match EmbeddedStore::open(&dir.0) {
        Err(privfed_server::StoreError::Missing(p)) => assert!(p.ends_with(DB_FILE), "{p}"),
        Err(e) => panic!("expected Missing, got {e}"),
        Ok(_) => panic!("a missing store was opened"),
    }
}

/// Item 7: the database file replaced by another file under the running server (a restore
/// gone wrong) is detected the same way: 503 and unhealthy, never a false acknowledgment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_database_file_fails_closed() {
    let dir = common::TempDir::new("replaced");
    let store = EmbeddedStore::create(&dir.0).unwrap();
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    let admin = Client::new(&url).unwrap().with_admin_token(TOKEN);
    admin.create_model(&common::spec("m", 3, 2)).await.unwrap();
    let path = dir.0.join(DB_FILE);
    let copy = dir.0.join("copy");
    std::fs::copy(&path, &copy).unwrap();
    std::fs::rename(&copy, &path).unwrap();
    let c = Client::new(&url).unwrap();
    let e = c.submit("m", None, &[1.0; 3]).await.unwrap_err();
    assert_eq!(e.status(), Some(503), "{e}");
    assert!(!c.healthy().await.unwrap());
    stop.send(()).unwrap();
    h.await.unwrap();
}

/// `EmbeddedStore::create` refuses to overwrite an existing store.
#[tokio::test]
async fn creating_over_an_existing_store_is_refused() {
    let dir = common::TempDir::new("exists");
    drop(EmbeddedStore::create(&dir.0).unwrap());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let e = EmbeddedStore::create(&dir.0).err().expect("refused");
    assert!(e.to_string().contains("exists"), "{e}");
}

/// The embedded store's tickets outlive a clean restart, after checkpoints (a small
/// journal, so the used tickets reach the database's table rather than only the journal). A
/// ticket used before the restart answers its first outcome and is not applied again (unless
/// its own update overwrote the instance it drew, one chance in 1000: then it is refused); a
/// ticket drawn before and used after is applied once; a ticket of the old process that was
/// never issued (one bit changed) is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_tickets_outlive_checkpoints_and_a_restart() {
    use privfed_server::ddml::store::embedded::{EmbeddedOptions, OpenMode};
    let dir = common::TempDir::new("tickets-restart");
    let options = EmbeddedOptions {
        journal_bytes: 4096,
        ..EmbeddedOptions::default()
    };
    let store = EmbeddedStore::open_with(&dir.0, OpenMode::Create, options).unwrap();
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    let admin = Client::new(&url).unwrap().with_admin_token(TOKEN);
    let spec = privfed_server::ddml::model::CreateModel {
        init_std: Some(1.0),
        spam_sigmas: Some(3.0),
        ..common::spec("m", 3, 1000)
    };
    admin.create_model(&spec).await.unwrap();
    let c = Client::new(&url).unwrap();
    let (near, far) = (vec![0.0f32; 3], vec![1e4f32; 3]);
    let used = c.draw("m").await.unwrap().ticket.unwrap();
    let rejected = c.draw("m").await.unwrap().ticket.unwrap();
    let fresh = c.draw("m").await.unwrap().ticket.unwrap();
    assert_eq!(
        c.submit("m", Some(&used), &near).await.unwrap(),
        Submitted::Accepted
    );
    assert!(matches!(
        c.submit("m", Some(&rejected), &far).await.unwrap(),
        Submitted::Rejected(_)
    ));
    // Rejections without tickets fill the 4 KiB journal many times over (they overwrite no
    // instance, so the tickets above stay verifiable).
    for _ in 0..200 {
        assert!(matches!(
            c.submit("m", None, &far).await.unwrap(),
            Submitted::Rejected(_)
        ));
    }
    let metrics = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let checkpoints: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("privfed_store_checkpoints_total "))
        .and_then(|v| v.trim().parse().ok())
        .expect("checkpoints in /metrics");
    assert!(checkpoints > 0, "no checkpoint");
    stop.send(()).unwrap();
    h.await.unwrap();

    let store = common::reopen(&dir.0).await;
    let (url, stop, h) = common::serve_on_loopback(store, TOKEN).await;
    let c = Client::new(&url).unwrap();
    let mut forged = fresh.clone().into_bytes();
    forged[0] = if forged[0] == b'0' { b'1' } else { b'0' };
    let forged = String::from_utf8(forged).unwrap();
    let e = c.submit("m", Some(&forged), &near).await.unwrap_err();
    assert_eq!(e.status(), Some(409), "{e}");
    match c.submit("m", Some(&used), &near).await {
        Ok(Submitted::Replayed) => {}
        Err(e) if e.status() == Some(409) => {}
        other => panic!("a ticket used before the restart: {other:?}"),
    }
    match c.submit("m", Some(&rejected), &near).await {
        Ok(Submitted::Rejected(_)) => {}
        Err(e) if e.status() == Some(409) => {}
        other => panic!("a ticket rejected before the restart: {other:?}"),
    }
    assert_eq!(
        c.submit("m", Some(&fresh), &near).await.unwrap(),
        Submitted::Accepted
    );
    assert_eq!(
        c.submit("m", Some(&fresh), &near).await.unwrap(),
        Submitted::Replayed
    );
    let info = c.model("m").await.unwrap();
    assert_eq!((info.updates_accepted, info.updates_rejected), (2, 201));
    stop.send(()).unwrap();
    h.await.unwrap();
}
