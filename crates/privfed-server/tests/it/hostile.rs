//! Anonymous clients against the Draw-and-Discard routes, over a real socket with the embedded
//! store: a draw flood from many addresses must not void an honest device's ticket, and an
//! update that can be refused without its body is refused before one byte of the body is read.

use crate::serving::{TOKEN, fast, read_until_closed, secs, status_of};
use privfed_server::EmbeddedStore;
use privfed_server::ddml::store::embedded::{EmbeddedOptions, OpenMode};
use privfed_server::ddml::ticket::{DrawQuota, TicketLimits};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// A server whose models keep `max_tickets` tickets with a 30 s step time, and the given cap of
/// tickets per client address.
async fn server(max_tickets: usize, per_client: Option<usize>) -> crate::serving::Srv {
    let dir = crate::common::TempDir::new("hostile");
    let options = EmbeddedOptions {
        limits: TicketLimits {
            max_tickets,
            min_age: secs(30),
            ..TicketLimits::default()
        },
        ..EmbeddedOptions::default()
    };
    let store = EmbeddedStore::open_with(&dir.0, OpenMode::Create, options).unwrap();
    crate::serving::start_with(dir, store, fast(|_| {}), |state| {
        state.draw_quota = per_client.map(|n| DrawQuota::new(n, secs(30)));
    })
    .await
}

/// A client whose connections come from `127.0.0.{last}`.
fn client_from(last: u8) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, last)))
        .build()
        .unwrap()
}

/// Creates model `m` (dim 4) whose update guard needs the draw's ticket.
async fn guarded_model(addr: SocketAddr) {
    let r = client_from(1)
        .post(format!("http://{addr}/v1/models"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({
            "name": "m", "dim": 4, "k": 3, "init_std": 0.5,
            "update_guard": {"learning_rate": 0.01, "noise": {"kind": "none"}}
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

/// Draws from `m`: the status, the ticket and the weights.
async fn draw(c: &reqwest::Client, addr: SocketAddr) -> (u16, Option<String>, Vec<u8>) {
    let r = c
        .get(format!("http://{addr}/v1/models/m/draw"))
        .header("accept", "application/octet-stream")
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    if status == 429 {
        assert!(
            r.headers().get("retry-after").is_some(),
            "a 429 says when to retry"
        );
    }
    let ticket = r
        .headers()
        .get("privfed-ticket")
        .map(|v| v.to_str().unwrap().to_string());
    (status, ticket, r.bytes().await.unwrap().to_vec())
}

/// Posts `weights` (LE f32 bytes) with `ticket`; the status.
async fn post(c: &reqwest::Client, addr: SocketAddr, ticket: &str, weights: Vec<u8>) -> u16 {
    c.post(format!("http://{addr}/v1/models/m/updates"))
        .header("content-type", "application/octet-stream")
        .header("privfed-ticket", ticket)
        .body(weights)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// Floods `m` with draws from 20 addresses (127.0.0.2 … 127.0.0.21, 4 tasks each) for `for_`;
/// answers (200s, 429s).
async fn flood(addr: SocketAddr, for_: Duration) -> (u64, u64) {
    let ok = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + for_;
    let mut tasks = Vec::new();
    for last in 2..22u8 {
        let c = client_from(last);
        for _ in 0..4 {
            let (c, ok, refused) = (c.clone(), ok.clone(), refused.clone());
            tasks.push(tokio::spawn(async move {
                while Instant::now() < until {
                    match draw(&c, addr).await.0 {
                        200 => ok.fetch_add(1, Ordering::Relaxed),
                        429 => refused.fetch_add(1, Ordering::Relaxed),
                        s => panic!("draw answered {s}"),
                    };
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    (ok.load(Ordering::Relaxed), refused.load(Ordering::Relaxed))
}

/// The probe's lockout: draws are anonymous and free, and a model forgot its oldest ticket
/// beyond its cap, so a flood of draws voided every honest device's ticket within a second.
/// Now a ticket younger than the step time is never forgotten: with a book of 1,000 tickets and
/// a flood of many times that from 20 addresses, an honest ticket drawn before the flood and
/// posted 3 s into it is accepted. Without a per-client cap the flood fills the book and further
/// draws wait (429 with `Retry-After`); with a cap of 40 per address, the 20 flooding addresses
/// hold at most 800 tickets and an honest device still draws during the flood.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_flood_does_not_void_a_young_ticket() {
    for per_client in [None, Some(40)] {
        let srv = server(1_000, per_client).await;
        guarded_model(srv.addr).await;
        let honest = client_from(1);
        let (s, ticket, weights) = draw(&honest, srv.addr).await;
        assert_eq!(s, 200);
        let ticket = ticket.expect("a draw answers a ticket");

        let (ok, refused) = flood(srv.addr, secs(3)).await;
        eprintln!("cap {per_client:?}: flood drew {ok}, was refused {refused}");
        assert!(refused > 0, "the flood was never refused: {ok} draws");
        match per_client {
            None => assert!(ok >= 999, "the flood could not fill the book: {ok}"),
            Some(cap) => assert!(ok <= 20 * cap as u64, "{ok} draws beyond 20 × {cap}"),
        }
        // The honest device posts its step (here: the instance unchanged) 3 s after its draw.
        assert_eq!(
            post(&honest, srv.addr, &ticket, weights).await,
            202,
            "the honest ticket was voided by the flood"
        );
        if per_client.is_some() {
            let (s, t, w) = draw(&honest, srv.addr).await;
            assert_eq!(s, 200, "an honest draw during the flood was refused");
            assert_eq!(post(&honest, srv.addr, &t.unwrap(), w).await, 202);
        }
        let d = &srv.state().defences;
        let fired = d.count(privfed_server::http::defence::Defence::DrawQuota)
            + d.count(privfed_server::http::defence::Defence::TicketsFull);
        assert_eq!(fired, refused, "every refusal is counted");
    }
}

/// Sends a request head (no body) and returns the answer, which must come while the body is
/// still unsent (within 5 s; the body timeout is 30 s).
async fn answer_without_body(addr: SocketAddr, head: &str) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let got = read_until_closed(&mut s, secs(5))
        .await
        .expect("the server waited for a body it should have refused unread");
    String::from_utf8_lossy(&got).into_owned()
}

/// The probe's memory pinning: `POST …/updates` read and parsed the whole body before it looked
/// at the ticket. Now the ticket is checked first: a made-up ticket (409), a missing one (428)
/// and a declared body over the model's limit (413) are answered without the body, and a used
/// ticket answers its first outcome (202 `replayed`) without it. Every refusal is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_are_refused_before_their_body_is_read() {
    let srv = server(1_000, None).await;
    guarded_model(srv.addr).await;
    let head = |ticket: Option<&str>, len: usize| {
        let t = ticket.map_or(String::new(), |t| format!("Privfed-Ticket: {t}\r\n"));
        format!(
            "POST /v1/models/m/updates HTTP/1.1\r\nHost: x\r\nContent-Type: \
             application/octet-stream\r\nContent-Length: {len}\r\n{t}Connection: close\r\n\r\n"
        )
    };
    let made_up = "0123456789abcdef0123456789abcdef";
    let a = answer_without_body(srv.addr, &head(Some(made_up), 16)).await;
    assert_eq!(status_of(&a), 409, "{a}");
    assert!(a.contains("ticket_invalid"), "{a}");
    let a = answer_without_body(srv.addr, &head(None, 16)).await;
    assert_eq!(status_of(&a), 428, "{a}");
    let a = answer_without_body(srv.addr, &head(Some(made_up), 1 << 30)).await;
    assert_eq!(status_of(&a), 413, "{a}");

    let honest = client_from(1);
    let (_, ticket, weights) = draw(&honest, srv.addr).await;
    let ticket = ticket.unwrap();
    assert_eq!(post(&honest, srv.addr, &ticket, weights).await, 202);
    let a = answer_without_body(srv.addr, &head(Some(&ticket), 16)).await;
    assert_eq!(status_of(&a), 202, "{a}");
    assert!(a.contains("replayed"), "{a}");
    assert_eq!(
        srv.state()
            .defences
            .count(privfed_server::http::defence::Defence::UnreadRefused),
        2
    );
}

/// A body that fails to arrive (the client stops sending) returns its ticket: the device can
/// retry with it and is accepted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_whose_body_never_came_can_be_retried() {
    let srv = server(1_000, None).await;
    guarded_model(srv.addr).await;
    let honest = client_from(1);
    let (_, ticket, weights) = draw(&honest, srv.addr).await;
    let ticket = ticket.unwrap();
    {
        let mut s = TcpStream::connect(srv.addr).await.unwrap();
        s.write_all(
            format!(
                "POST /v1/models/m/updates HTTP/1.1\r\nHost: x\r\nContent-Type: \
                 application/octet-stream\r\nContent-Length: 16\r\nPrivfed-Ticket: {ticket}\r\n\
                 \r\n\0\0"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        // The connection drops mid-body.
    }
    let t0 = Instant::now();
    loop {
        match post(&honest, srv.addr, &ticket, weights.clone()).await {
            202 => break,
            // The server notices the dropped connection asynchronously.
            409 if t0.elapsed() < secs(10) => tokio::time::sleep(Duration::from_millis(50)).await,
            s => panic!("the retry answered {s}"),
        }
    }
    let snap = client_from(1)
        .get(format!("http://{}/v1/models/m", srv.addr))
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(snap["updates_accepted"], 1, "{snap}");
}

/// A client over its cap of tickets is told when to come back: 429 `tickets_full` with a
/// `Retry-After` that the device client reads (`ClientError::retry_after`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_over_its_ticket_cap_is_told_when_to_retry() {
    let srv = server(1_000, Some(1)).await;
    guarded_model(srv.addr).await;
    let c = privfed_client::client::Client::new(&srv.url()).unwrap();
    let first = c.draw("m").await.unwrap();
    assert!(first.ticket.is_some());
    let e = c.draw("m").await.unwrap_err();
    assert_eq!(e.status(), Some(429), "{e}");
    assert!(e.to_string().contains("tickets_full"), "{e}");
    let wait = e.retry_after().expect("a Retry-After");
    assert!(
        wait >= secs(1) && wait <= secs(30),
        "Retry-After {wait:?} for a 30 s step time"
    );
    // Posting the first ticket's update frees the client's slot.
    let w = first.weights.clone();
    c.submit("m", first.ticket.as_deref(), &w).await.unwrap();
    assert!(c.draw("m").await.is_ok());
}
