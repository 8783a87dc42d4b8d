//! Connection limits and bounded reads over a real socket: idle,
//! header, body and write timeouts, the connection cap, shutdown with a deadline that releases
//! the embedded store's lock, bounded memory for concurrent views of a large model, streamed JSON
//! draws, and the smaller validation items.
//!
//! Timeouts are set to 1 s and checked only with generous "closed within N seconds" guards.

use crate::common;

use privfed_client::client::Client;
use privfed_server::{AppState, EmbeddedStore, ServeConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::serving::*;

/// Item 5: an idle keep-alive connection is closed after the idle timeout (the old server never
/// closed it). The header timeout is long here, so only the idle timeout can close it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_connection_is_closed() {
    let srv = start(
        fast(|c| {
            c.idle_timeout = secs(1);
            c.header_timeout = secs(60);
        }),
        |_| {},
    )
    .await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(secs(10), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    let t0 = Instant::now();
    assert!(
        read_until_closed(&mut s, secs(10)).await.is_some(),
        "idle connection still open after 10 s (idle timeout 1 s)"
    );
    assert!(t0.elapsed() >= Duration::from_millis(500));
}

/// Item 5: a slowloris client trickling header lines is closed after the header timeout, and a
/// connection that sends nothing at all as well (the old server kept both forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_headers_are_cut_off() {
    let srv = start(
        fast(|c| {
            c.header_timeout = secs(1);
            c.idle_timeout = secs(60);
        }),
        |_| {},
    )
    .await;
    let mut silent = TcpStream::connect(srv.addr).await.unwrap();
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let t0 = Instant::now();
    let mut closed = false;
    while t0.elapsed() < secs(10) {
        if s.write_all(b"X-Slow: a\r\n").await.is_err() {
            closed = true;
            break;
        }
        let mut b = [0u8; 1024];
        match tokio::time::timeout(Duration::from_millis(300), s.read(&mut b)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            Ok(Ok(_)) | Err(_) => {}
        }
    }
    assert!(closed, "slowloris connection still open after 10 s");
    assert!(
        read_until_closed(&mut silent, secs(10)).await.is_some(),
        "silent connection still open"
    );
}

/// Item 5: a body that stops arriving is answered 408 after the body timeout and the connection
/// is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_body_times_out_with_408() {
    let srv = start(fast(|c| c.body_timeout = secs(1)), |_| {}).await;
    srv.admin()
        .create_model(&common::spec("m", 100, 2))
        .await
        .unwrap();
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(
        b"POST /v1/models/m/updates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"weights\":[",
    )
    .await
    .unwrap();
    let got = read_until_closed(&mut s, secs(10))
        .await
        .expect("connection still open 10 s after a 1 s body timeout");
    let text = String::from_utf8_lossy(&got);
    assert_eq!(status_of(&text), 408, "{text}");
    assert!(text.contains("request_timeout"), "{text}");
    assert_eq!(srv.admin().model("m").await.unwrap().updates_accepted, 0);
}

/// Item 5: shutdown while a client holds a partial request returns within the deadline (the old
/// server waited forever), and the store's lock is released: a new `EmbeddedStore` opens the
/// same directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_a_partial_request_meets_its_deadline_and_releases_the_store() {
    let mut srv = start(
        fast(|c| {
            c.header_timeout = secs(600);
            c.shutdown_deadline = secs(1);
        }),
        |_| {},
    )
    .await;
    srv.admin()
        .create_model(&common::spec("m", 4, 2))
        .await
        .unwrap();
    let mut partial = TcpStream::connect(srv.addr).await.unwrap();
    partial
        .write_all(b"POST /v1/models/m/updates HTTP/1.1\r\nHost: x\r\nContent-Le")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(srv.state.take());
    let t0 = Instant::now();
    srv.stop.take().unwrap().send(()).unwrap();
    tokio::time::timeout(secs(10), &mut srv.task)
        .await
        .expect("serve did not return within 10 s of shutdown (deadline 1 s)")
        .unwrap()
        .unwrap();
    eprintln!("serve returned {:?} after shutdown", t0.elapsed());
    assert!(read_until_closed(&mut partial, secs(10)).await.is_some());
    // The store's writer thread closes the database once the last handle is gone.
    let t0 = Instant::now();
    let reopened = loop {
        match EmbeddedStore::open(&srv.dir.0) {
            Ok(s) => break s,
            Err(e) if t0.elapsed() < secs(10) => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("the store is still locked 10 s after serve returned: {e}"),
        }
    };
    use privfed_server::Store;
    assert_eq!(reopened.spec("m").await.unwrap().dim, 4);
}

/// Item 5: a client that never reads a large answer is dropped after the write timeout (the old
/// server kept the connection and the answer forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_large_answer_is_dropped_after_the_write_timeout() {
    let srv = start(fast(|c| c.write_timeout = secs(1)), |_| {}).await;
    let dim = privfed_server::ddml::model::MAX_DIM; // 16 MB binary: more than the socket buffers
    srv.admin()
        .create_model(&common::spec("big", dim, 1))
        .await
        .unwrap();
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(
        b"GET /v1/models/big/draw HTTP/1.1\r\nHost: x\r\nAccept: application/octet-stream\r\n\r\n",
    )
    .await
    .unwrap();
    let t0 = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if srv.state().metrics.connections_open() == 0 {
            break;
        }
        assert!(
            t0.elapsed() < secs(15),
            "the server still holds a connection whose client does not read"
        );
    }
    let got = read_until_closed(&mut s, secs(30)).await.expect("closed");
    assert!(
        got.len() < 4 * dim,
        "the whole answer arrived: {} bytes",
        got.len()
    );
}

/// Item 6: JSON draws of large models are streamed; the text decodes to exactly the binary draw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_json_draw_equals_the_binary_draw() {
    let srv = start(ServeConfig::default(), |_| {}).await;
    let dim = (privfed_server::ddml::api::STREAM_JSON_FLOATS * 5) / 2 + 3;
    let mut spec = common::spec("s", dim, 1);
    spec.init_std = Some(3.0);
    srv.admin().create_model(&spec).await.unwrap();
    let c = Client::new(&srv.url()).unwrap();
    let json = c.draw_json("s").await.unwrap().weights;
    let bin = c.draw("s").await.unwrap().weights;
    assert_eq!(json.len(), dim);
    assert!(
        json.iter()
            .zip(&bin)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    assert!(bin.iter().any(|x| *x != 0.0));
}

/// Item 10: `.` and `..` are refused as model names; the `Bearer` scheme is case-insensitive;
/// `spam_sigmas` outside [1, 1000] is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_bearer_scheme_and_spam_sigmas() {
    let srv = start(ServeConfig::default(), |_| {}).await;
    let create = |auth: &str, body: &str| {
        format!(
            "POST /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: {auth}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let ok = format!("Bearer {TOKEN}");
    for name in [".", ".."] {
        let a = raw(
            srv.addr,
            &create(
                &ok,
                &format!(r#"{{"name":"{name}","dim":2,"k":2,"update_guard":"off"}}"#),
            ),
        )
        .await;
        assert_eq!(status_of(&a), 400, "name {name}: {a}");
    }
    let a = raw(
        srv.addr,
        "GET /v1/models/. HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status_of(&a), 400, "{a}");
    for (i, scheme) in ["bearer", "BEARER", "BeArEr"].into_iter().enumerate() {
        let a = raw(
            srv.addr,
            &create(
                &format!("{scheme} {TOKEN}"),
                &format!(r#"{{"name":"m{i}","dim":2,"k":2,"update_guard":"off"}}"#),
            ),
        )
        .await;
        assert_eq!(status_of(&a), 201, "{scheme}: {a}");
    }
    let a = raw(
        srv.addr,
        &create(
            "bearer wrong",
            r#"{"name":"x","dim":2,"k":2,"update_guard":"off"}"#,
        ),
    )
    .await;
    assert_eq!(status_of(&a), 403, "{a}");
    let a = raw(
        srv.addr,
        &create(
            &format!("Basic {TOKEN}"),
            r#"{"name":"x","dim":2,"k":2,"update_guard":"off"}"#,
        ),
    )
    .await;
    assert_eq!(status_of(&a), 401, "{a}");
    for sigmas in ["1e-300", "1e300", "0.5", "1001"] {
        let body = format!(
            r#"{{"name":"s","dim":2,"k":4,"init_std":1,"spam_sigmas":{sigmas},"update_guard":"off"}}"#
        );
        let a = raw(srv.addr, &create(&ok, &body)).await;
        assert_eq!(status_of(&a), 400, "spam_sigmas {sigmas}: {a}");
    }
    let body = r#"{"name":"s","dim":2,"k":4,"init_std":1,"spam_sigmas":8,"update_guard":"off"}"#;
    assert_eq!(status_of(&raw(srv.addr, &create(&ok, body)).await), 201);
}

/// Item 10: `/metrics` counts 404 and 405 answers (the old metrics layer saw only matched
/// routes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_404_and_405() {
    let srv = start(ServeConfig::default(), |_| {}).await;
    let a = raw(
        srv.addr,
        "GET /no/such/route HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status_of(&a), 404);
    let a = raw(
        srv.addr,
        "DELETE /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status_of(&a), 405);
    let m = raw(
        srv.addr,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(
        m.contains(r#"privfed_http_requests_total{route="other",code="404"} 1"#),
        "{m}"
    );
    assert!(m.contains(r#"code="405"} 1"#), "{m}");
    assert!(m.contains("privfed_http_connections_open"), "{m}");
}

/// Item 10: creating models beyond `max_model_bytes` answers 507 `insufficient_storage`;
/// deleting one makes room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn total_model_memory_is_capped() {
    // Room for one model of 100 × 2 floats (800 bytes), not two.
    let srv = start(ServeConfig::default(), |st| st.max_model_bytes = 1000).await;
    let admin = srv.admin();
    admin
        .create_model(&common::spec("a", 100, 2))
        .await
        .unwrap();
    second_model_over_the_cap(&admin).await;
}

/// With a cap of 1000 bytes and model `a` (100 × 2 floats) present: a second such model is
/// refused with 507 until `a` is deleted.
async fn second_model_over_the_cap(admin: &Client) {
    let e = admin
        .create_model(&common::spec("b", 100, 2))
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(507), "{e}");
    admin.delete_model("a").await.unwrap();
    admin
        .create_model(&common::spec("b", 100, 2))
        .await
        .unwrap();
}

/// Item 10 on the Redis store: its `total_floats` (a SCAN of the model keys) feeds the same cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn total_model_memory_is_capped_on_redis() {
    use privfed_server::{RedisStore, Store};
    let redis = common::RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    assert_eq!(store.total_floats().await.unwrap(), 0);
    let mut state = AppState::new(store, TOKEN);
    state.max_model_bytes = 1000;
    let state = Arc::new(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let st = state.clone();
    tokio::spawn(privfed_server::serve(listener, st, std::future::pending()));
    let admin = Client::new(&url).unwrap().with_admin_token(TOKEN);
    admin
        .create_model(&common::spec("a", 100, 2))
        .await
        .unwrap();
    assert_eq!(state.store.total_floats().await.unwrap(), 200);
    second_model_over_the_cap(&admin).await;
}

/// Per-client rate limits (the issue's optional item): draws and updates of one client take
/// tokens of its bucket; an empty bucket answers 429 `rate_limited` with `Retry-After`, and
/// nothing is applied; other routes are not limited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draws_and_updates_are_rate_limited_per_client() {
    let srv = start(ServeConfig::default(), |st| {
        st.rate_limit = Some(privfed_server::http::ratelimit::RateLimiter::new(
            privfed_server::http::ratelimit::RateLimit::new(0.5, 3.0).unwrap(),
        ));
    })
    .await;
    srv.admin()
        .create_model(&common::spec("m", 2, 2))
        .await
        .unwrap();
    let c = Client::new(&srv.url()).unwrap();
    // Burst of 3: two draws and one update pass, the next draw and update are refused.
    let d = c.draw("m").await.unwrap();
    c.draw("m").await.unwrap();
    assert_eq!(
        c.submit("m", d.ticket.as_deref(), &[1.0, 2.0])
            .await
            .unwrap(),
        privfed_client::client::Submitted::Accepted
    );
    let e = c.draw("m").await.unwrap_err();
    assert_eq!(e.status(), Some(429), "{e}");
    let e = c.submit("m", None, &[1.0, 2.0]).await.unwrap_err();
    assert_eq!(e.status(), Some(429), "{e}");
    let answer = raw(
        srv.addr,
        "GET /v1/models/m/draw HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status_of(&answer), 429);
    assert!(
        answer.to_ascii_lowercase().contains("retry-after: 2"),
        "{answer}"
    );
    assert!(answer.contains("rate_limited"), "{answer}");
    // Reads of the model and health are not limited; the refused update was not applied.
    assert_eq!(c.model("m").await.unwrap().updates_accepted, 1);
    assert!(c.healthy().await.unwrap());
}
