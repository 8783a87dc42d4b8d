//! The secure-aggregation coordinator over a real socket with the embedded round store: whole
//! rounds with real clients (`privfed_client::secagg`), dropouts at every stage, hostile
//! requests, and a coordinator reopened from its store mid-round.

use std::sync::Arc;
use std::time::Duration;

use privfed_client::secagg::{Outcome, SecAggClient};
use privfed_secagg::local::{Enrollment, plain_sum};
use privfed_secagg::messages::{ClientMessage, ClientPayload, Header, encode};
use privfed_secagg::{Aggregate, Stage};
use privfed_secagg::{DeviceKey, Roster};
use privfed_server::secagg::{Coordinator, EmbeddedRoundStore};
use privfed_server::{AppState, EmbeddedStore};
use rand::{RngExt, SeedableRng, rngs::ChaCha20Rng};

use crate::common::{TempDir, free_port};

const TOKEN: &str = "secagg-admin";

struct Srv {
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Srv {
    async fn shutdown(mut self) {
        let _ = self.stop.take().unwrap().send(());
        let _ = self.task.await;
    }
}

/// Retries `open` for up to 10 s: a previous server's store writer thread and deadline tasks may
/// hold the database files for a moment after it shut down.
async fn opened<T, E: std::fmt::Display>(open: impl Fn() -> Result<T, E>) -> T {
    let t0 = std::time::Instant::now();
    loop {
        match open() {
            Ok(s) => return s,
            Err(_) if t0.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("cannot open the store: {e}"),
        }
    }
}

/// A server on a loopback port over the stores in `dir` (created on first use).
async fn start(dir: &std::path::Path, addr: &str) -> Srv {
    let store = if dir.join("privfed.redb").exists() {
        opened(|| EmbeddedStore::open(dir)).await
    } else {
        EmbeddedStore::create(dir).unwrap()
    };
    let mut state = AppState::new(store, TOKEN);
    let rounds = opened(|| EmbeddedRoundStore::open(dir)).await;
    state.secagg = Some(
        Coordinator::open(Arc::new(rounds), TOKEN.into())
            .await
            .unwrap(),
    );
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(privfed_server::serve(listener, Arc::new(state), async {
        let _ = rx.await;
    }));
    Srv {
        url,
        stop: Some(tx),
        task,
    }
}

fn inputs(n: usize, dim: usize, bits: u32, seed: u64) -> Vec<Vec<u64>> {
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    let m = privfed_secagg::mask::modulus_mask(bits);
    (0..n)
        .map(|_| (0..dim).map(|_| r.random::<u64>() & m).collect())
        .collect()
}

/// Runs a round of `n` clients, the ones in `drops` stopping before their stage; the admin
/// closes a stage once only silent clients are pending (as an operator's deadline would).
async fn round(
    http: &SecAggClient,
    n: u32,
    dim: usize,
    bits: u32,
    drops: Vec<Option<Stage>>,
) -> (Result<Aggregate, String>, Vec<Vec<u64>>) {
    round_in(http, n, dim, bits, drops, false).await
}

/// [`round`], in the active mode when `active`: an authority enrolls one device per client, the
/// round names the roster, every device joins with its signature.
async fn round_in(
    http: &SecAggClient,
    n: u32,
    dim: usize,
    bits: u32,
    drops: Vec<Option<Stage>>,
    active: bool,
) -> (Result<Aggregate, String>, Vec<Vec<u64>>) {
    let enrollment =
        active.then(|| Enrollment::new(n as usize, &mut ChaCha20Rng::seed_from_u64(9)));
    let created = http
        .create_round(
            TOKEN,
            &serde_json::json!({
                "clients": n, "bits": bits, "dim": dim, "stage_timeout_ms": 60000,
                "threat_model": if active { "active" } else { "honest-but-curious" },
                "roster": enrollment.as_ref().map(|e| &e.roster),
            }),
        )
        .await
        .unwrap();
    let xs = inputs(n as usize, dim, bits, 7);
    let mut tasks = Vec::new();
    let mut devices = enrollment.map(|e| (e.authority.verifying_key(), e.devices.into_iter()));
    for i in 0..n as usize {
        let (joined, credentials) = match &mut devices {
            Some((authority, it)) => {
                let (j, c) = http
                    .join_enrolled(&created.round, it.next().unwrap(), authority, 0)
                    .await
                    .unwrap();
                (j, Some(c))
            }
            None => (
                http.join_with_ticket(&created.round, &created.join_tickets[i])
                    .await
                    .unwrap(),
                None,
            ),
        };
        assert_eq!(joined.client as usize, i + 1);
        let (http, x, d) = (http.clone(), xs[i].clone(), drops[i]);
        tasks.push(tokio::spawn(async move {
            http.participate_with(&joined, credentials, &x, d).await
        }));
    }
    loop {
        let v = http.status(&created.round).await.unwrap();
        if v["status"] != "collecting" {
            break;
        }
        let stage = Stage::ALL
            .iter()
            .copied()
            .find(|s| Some(s.name()) == v["stage"].as_str());
        let pending: Vec<u64> = v["pending_clients"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        if !pending.is_empty()
            && pending
                .iter()
                .all(|&id| drops[id as usize - 1].is_some_and(|d| Some(d) <= stage))
        {
            let _ = http.close_stage(TOKEN, &created.round).await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for t in tasks {
        let p = t.await.unwrap().unwrap();
        assert!(
            matches!(
                p.outcome,
                Outcome::Finished | Outcome::Dropped(_) | Outcome::Over(_)
            ),
            "{p:?}"
        );
    }
    let result = http
        .result(TOKEN, &created.round)
        .await
        .map_err(|e| e.to_string());
    (result, xs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_over_http_sums_exactly_with_dropouts_at_every_stage() {
    let dir = TempDir::new("secagg-http");
    let srv = start(&dir.0, "127.0.0.1:0").await;
    let http = SecAggClient::new(&srv.url).unwrap();
    let mut drops = vec![None; 12];
    drops[1] = Some(Stage::AdvertiseKeys);
    drops[4] = Some(Stage::ShareKeys);
    drops[7] = Some(Stage::MaskedInput);
    drops[10] = Some(Stage::Unmasking);
    let (result, xs) = round(&http, 12, 300, 40, drops).await;
    let out = result.unwrap();
    assert_eq!(out.dropped, vec![8], "client 8's masks were recovered");
    assert!(out.survivors.contains(&11) && !out.survivors.contains(&2));
    assert_eq!(out.survivors.len(), 9);
    assert_eq!(out.sum, plain_sum(&xs, &out.survivors, 40));
    srv.shutdown().await;
}

/// A proxy on loopback in front of `backend` that forwards each request and its answer (one
/// request per connection), except that it withholds the answer to the first copy of every
/// distinct `POST …/messages`: it waits for the server's whole answer (the message is stored)
/// and then closes the device's connection without it, as a network that loses the
/// acknowledgment would. Returns the proxy's URL and the number of answers withheld.
async fn ack_losing_proxy(backend: &str) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let backend = backend.trim_start_matches("http://").to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let withheld = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(std::sync::Mutex::new(
        std::collections::HashSet::<Vec<u8>>::new(),
    ));
    let count = withheld.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut device, _)) = listener.accept().await else {
                return;
            };
            let (backend, seen, count) = (backend.clone(), seen.clone(), count.clone());
            tokio::spawn(async move {
                // The request: its head up to the blank line, then Content-Length bytes.
                let mut buf = Vec::new();
                let (head, head_end) = loop {
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..i + 4]).to_string();
                        assert!(
                            !head.to_ascii_lowercase().contains("transfer-encoding"),
                            "{head}"
                        );
                        let length: usize = head
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if buf.len() >= i + 4 + length {
                            break (head, i + 4);
                        }
                    }
                    let mut chunk = [0u8; 4096];
                    match device.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                };
                // Forwarded with `connection: close`, so the server's answer ends at its EOF.
                let mut forwarded: String = head
                    .trim_end()
                    .lines()
                    .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                    .map(|l| format!("{l}\r\n"))
                    .collect();
                forwarded.push_str("connection: close\r\n\r\n");
                let mut server = tokio::net::TcpStream::connect(&backend).await.unwrap();
                server.write_all(forwarded.as_bytes()).await.unwrap();
                server.write_all(&buf[head_end..]).await.unwrap();
                let mut answer = Vec::new();
                server.read_to_end(&mut answer).await.unwrap();
                let first_line = head.lines().next().unwrap_or_default();
                if first_line.starts_with("POST ") && first_line.contains("/messages") {
                    let key = [first_line.as_bytes(), &buf[head_end..]].concat();
                    if seen.lock().unwrap().insert(key) {
                        count.fetch_add(1, Ordering::SeqCst);
                        return; // the device's connection is dropped unanswered
                    }
                }
                let _ = device.write_all(&answer).await;
                let _ = device.shutdown().await;
            });
        }
    });
    (url, withheld)
}

/// Every acknowledgment of a client message is lost once: the server stores the message, the
/// device never hears so and sends it again, sometimes after its stage has closed (the last
/// message of a stage closes it). Every device finishes, the round completes, and the sum is
/// the plain sum of the survivors' inputs; the one dropout is handled as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_completes_when_every_acknowledgment_is_lost_once() {
    let dir = TempDir::new("secagg-lost-acks");
    let srv = start(&dir.0, "127.0.0.1:0").await;
    let (proxy, withheld) = ack_losing_proxy(&srv.url).await;
    let http = SecAggClient::new(&proxy).unwrap();
    let n = 6;
    let mut drops = vec![None; n];
    drops[2] = Some(Stage::MaskedInput);
    let (result, xs) = round(&http, n as u32, 40, 24, drops).await;
    let out = result.unwrap();
    assert_eq!(out.dropped, vec![3]);
    assert_eq!(out.survivors, vec![1, 2, 4, 5, 6]);
    assert_eq!(out.sum, plain_sum(&xs, &out.survivors, 24));
    // Keys from six, shares from six, masked inputs from five, unmasking from at least the
    // threshold of the five: each message's first answer was withheld.
    let lost = withheld.load(std::sync::atomic::Ordering::SeqCst);
    assert!(lost >= 6 + 6 + 5 + 3, "{lost} answers withheld");
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_round_over_http_sums_exactly_with_dropouts_at_every_stage() {
    let dir = TempDir::new("secagg-http-active");
    let srv = start(&dir.0, "127.0.0.1:0").await;
    let http = SecAggClient::new(&srv.url).unwrap();
    let mut drops = vec![None; 16];
    drops[1] = Some(Stage::AdvertiseKeys);
    drops[4] = Some(Stage::ShareKeys);
    drops[7] = Some(Stage::MaskedInput);
    drops[12] = Some(Stage::ConsistencyCheck);
    drops[10] = Some(Stage::Unmasking);
    let (result, xs) = round_in(&http, 16, 300, 40, drops, true).await;
    let out = result.unwrap();
    assert_eq!(out.dropped, vec![8], "client 8's masks were recovered");
    // Clients 11 and 13 sent masked input, then stopped: their inputs are in the sum.
    assert!(out.survivors.contains(&11) && out.survivors.contains(&13));
    assert_eq!(out.survivors.len(), 13);
    assert_eq!(out.sum, plain_sum(&xs, &out.survivors, 40));
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_round_admits_only_enrolled_devices_once_each() {
    let dir = TempDir::new("secagg-join");
    let srv = start(&dir.0, "127.0.0.1:0").await;
    let http = SecAggClient::new(&srv.url).unwrap();
    let raw = reqwest::Client::new();
    let base = format!("{}/v1/secagg/rounds", srv.url);
    let mut r = ChaCha20Rng::seed_from_u64(3);
    let e = Enrollment::new(4, &mut r);
    // Creation: active needs a roster, a roster needs the active mode.
    for bad in [
        serde_json::json!({"clients": 4, "bits": 16, "dim": 4, "threat_model": "active"}),
        serde_json::json!({"clients": 4, "bits": 16, "dim": 4, "roster": &e.roster}),
        serde_json::json!({"clients": 4, "bits": 16, "dim": 4, "threat_model": "lying"}),
    ] {
        let resp = raw
            .post(&base)
            .bearer_auth(TOKEN)
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{bad}");
    }
    let created = http
        .create_round(
            TOKEN,
            &serde_json::json!({"clients": 4, "bits": 16, "dim": 4, "threat_model": "active", "roster": &e.roster}),
        )
        .await
        .unwrap();
    let join = format!("{base}/{}/join", created.round);
    // No credential: 401. A device off the roster, or a signature of another round: 403.
    assert_eq!(raw.post(&join).send().await.unwrap().status(), 401);
    let outsider = DeviceKey::generate(&mut r);
    let binding = created.config.binding();
    let cred = |d: &DeviceKey, round: &str| serde_json::json!({"device": d.verifying_key(), "signature": d.sign_join(&binding, round).to_vec()});
    let resp = raw
        .post(&join)
        .json(&cred(&outsider, &created.round))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let resp = raw
        .post(&join)
        .json(&cred(&e.devices[0], "another-round"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    // An enrolled device joins once; a second join of the same device is refused.
    let resp = raw
        .post(&join)
        .json(&cred(&e.devices[0], &created.round))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = raw
        .post(&join)
        .json(&cred(&e.devices[0], &created.round))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 409);
    // A device that trusts another authority refuses the round's roster.
    let other = DeviceKey::generate(&mut r);
    let err = http
        .join_enrolled(
            &created.round,
            DeviceKey::generate(&mut r),
            &other.verifying_key(),
            0,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("signature"), "{err}");
    // A device that has accepted a newer roster refuses this round's version 1, which a server
    // could relay after the authority removed a device from it.
    let authority = e.authority.verifying_key();
    let err = http
        .join_enrolled(&created.round, e.devices[1].clone(), &authority, 2)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("older"), "{err}");
    // An expired roster is refused by the device's clock.
    let expired = Roster::sign(
        &e.authority,
        e.devices.iter().map(DeviceKey::verifying_key).collect(),
        5,
        1,
    );
    let stale = http
        .create_round(
            TOKEN,
            &serde_json::json!({"clients": 4, "bits": 16, "dim": 4, "threat_model": "active", "roster": &expired}),
        )
        .await
        .unwrap();
    let err = http
        .join_enrolled(&stale.round, e.devices[1].clone(), &authority, 0)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("expired"), "{err}");
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_few_survivors_abort_the_round_over_http() {
    let dir = TempDir::new("secagg-abort");
    let srv = start(&dir.0, "127.0.0.1:0").await;
    let http = SecAggClient::new(&srv.url).unwrap();
    let drops = (0..6)
        .map(|i| (i < 3).then_some(Stage::MaskedInput))
        .collect();
    let (result, _) = round(&http, 6, 10, 16, drops).await;
    let e = result.unwrap_err();
    assert!(e.contains("409") && e.contains("aborted"), "{e}");
    srv.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_typed_errors() {
    let dir = TempDir::new("secagg-hostile");
    let srv = start(&dir.0, "127.0.0.1:0").await;
    let http = SecAggClient::new(&srv.url).unwrap();
    let raw = reqwest::Client::new();
    let base = format!("{}/v1/secagg/rounds", srv.url);
    // Creating needs the admin token; bad parameters are 400.
    let r = raw
        .post(&base)
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    for bad in [
        serde_json::json!({"clients": 1, "bits": 16, "dim": 4}),
        serde_json::json!({"clients": 5, "bits": 0, "dim": 4}),
        serde_json::json!({"clients": 5, "bits": 16, "dim": 0}),
        serde_json::json!({"clients": 5, "bits": 16, "dim": 4, "threshold": 2}),
        serde_json::json!({"clients": 5, "bits": 16, "dim": 4, "graph": "ring"}),
        serde_json::json!({"clients": 5, "bits": 16, "dim": 4, "extra": 1}),
    ] {
        let r = raw
            .post(&base)
            .bearer_auth(TOKEN)
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"], "bad_request");
    }
    let created = http
        .create_round(
            TOKEN,
            &serde_json::json!({"clients": 3, "bits": 16, "dim": 4}),
        )
        .await
        .unwrap();
    let round = created.round.clone();
    let tickets = &created.join_tickets;
    assert_eq!(tickets.len(), 3, "one join ticket per client");
    let a = http.join_with_ticket(&round, &tickets[0]).await.unwrap();
    let b = http.join_with_ticket(&round, &tickets[1]).await.unwrap();
    let msgs = format!("{base}/{round}/messages");
    let advertise = |client: u32, binding: [u8; 32]| {
        encode(&ClientMessage {
            header: Header::new(binding, client),
            payload: ClientPayload::AdvertiseKeys {
                cipher_pk: [client as u8; 32],
                mask_pk: [client as u8 + 100; 32],
            },
        })
    };
    let binding = a.config.binding();
    // No token, a wrong token, another client's id with one's own token: refused.
    let r = raw
        .post(&msgs)
        .body(advertise(1, binding))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = raw
        .post(&msgs)
        .bearer_auth("0000")
        .body(advertise(1, binding))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = raw
        .post(&msgs)
        .bearer_auth(&a.token)
        .body(advertise(b.client, binding))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // Truncated and tampered bodies; another session.
    let good = advertise(a.client, binding);
    let r = raw
        .post(&msgs)
        .bearer_auth(&a.token)
        .body(good[..good.len() - 5].to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let mut other = binding;
    other[0] ^= 1;
    let r = raw
        .post(&msgs)
        .bearer_auth(&a.token)
        .body(advertise(a.client, other))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    // Accepted, then a retry is a duplicate, then a different message is a conflict.
    let r = raw
        .post(&msgs)
        .bearer_auth(&a.token)
        .body(good.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let r = raw
        .post(&msgs)
        .bearer_auth(&a.token)
        .body(good)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut changed = advertise(a.client, binding);
    let n = changed.len();
    changed[n - 1] ^= 1;
    let r = raw
        .post(&msgs)
        .bearer_auth(&a.token)
        .body(changed)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    // A message for a later stage is stale/early: 409.
    let early = encode(&ClientMessage {
        header: Header::new(binding, a.client),
        payload: ClientPayload::MaskedInput { packed: vec![0; 8] },
    });
    let r = raw
        .post(&msgs)
        .bearer_auth(&a.token)
        .body(early)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    // The result before the end, and of an unknown round.
    let r = raw
        .get(format!("{base}/{round}/result"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let r = raw.get(format!("{base}/nope")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    // Polling with the wrong token.
    let r = raw
        .get(format!("{base}/{round}/next?client=1&wait=0"))
        .bearer_auth("bad")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // Not yet: no message until the stage closes.
    let r = raw
        .get(format!("{base}/{round}/next?client=1&wait=0"))
        .bearer_auth(&a.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    // Once the first stage closes, nobody can join.
    http.join_with_ticket(&round, &tickets[2]).await.unwrap();
    http.close_stage(TOKEN, &round).await.unwrap();
    assert!(
        http.join_with_ticket(&round, &tickets[2])
            .await
            .unwrap_err()
            .to_string()
            .contains("409")
    );
    srv.shutdown().await;
}

/// The coordinator is stopped mid-round (during the masked-input stage, with nine of ten inputs
/// stored and the tenth client gone) and reopened from its store; the clients ride out the
/// outage, the operator's deadline closes the stage, and the round completes with the exact sum
/// and the tenth client's masks recovered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_resumes_after_the_server_restarts_mid_stage() {
    let dir = TempDir::new("secagg-restart");
    let addr = format!("127.0.0.1:{}", free_port());
    let srv = start(&dir.0, &addr).await;
    let http = SecAggClient::new(&srv.url)
        .unwrap()
        .with_retry_budget(Duration::from_secs(60));
    let (n, dim, bits) = (10u32, 5_000usize, 32u32);
    let created = http
        .create_round(
            TOKEN,
            &serde_json::json!({"clients": n, "bits": bits, "dim": dim, "stage_timeout_ms": 120000}),
        )
        .await
        .unwrap();
    let xs = inputs(n as usize, dim, bits, 9);
    let mut tasks = Vec::new();
    for (i, x) in xs.iter().cloned().enumerate() {
        let joined = http
            .join_with_ticket(&created.round, &created.join_tickets[i])
            .await
            .unwrap();
        let http = http.clone();
        let drop = (i == 9).then_some(Stage::MaskedInput);
        tasks.push(tokio::spawn(async move {
            http.participate(&joined, &x, drop).await
        }));
    }
    loop {
        let v = http.status(&created.round).await.unwrap();
        if v["stage"] == "masked_input" && v["pending"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    srv.shutdown().await;
    let srv = start(&dir.0, &addr).await;
    let v = http.status(&created.round).await.unwrap();
    assert_eq!(
        (v["stage"].as_str(), v["pending"].as_u64()),
        (Some("masked_input"), Some(1))
    );
    http.close_stage(TOKEN, &created.round).await.unwrap();
    for t in tasks {
        let p = t.await.unwrap().unwrap();
        assert!(matches!(
            p.outcome,
            Outcome::Finished | Outcome::Dropped(Stage::MaskedInput)
        ));
    }
    let out = http.result(TOKEN, &created.round).await.unwrap();
    assert_eq!(out.survivors, (1..=9).collect::<Vec<u32>>());
    assert_eq!(out.dropped, vec![10]);
    assert_eq!(out.sum, plain_sum(&xs, &out.survivors, bits));
    srv.shutdown().await;
}

/// Sends only the head of a `POST …/messages` that announces `length` body bytes, and returns
/// the status line the server answers with — before any of the body is sent.
async fn status_before_body(url: &str, round: &str, token: &str, length: usize) -> String {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let addr = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/secagg/rounds/{round}/messages HTTP/1.1\r\nHost: {addr}\r\n\
         Authorization: Bearer {token}\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        BufReader::new(stream).read_line(&mut line),
    )
    .await
    .expect("the server answers without waiting for the body")
    .unwrap();
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_refused_unread_without_a_valid_token_or_beyond_the_rounds_largest_message() {
    let dir = TempDir::new("secagg-unread");
    let srv = start(&dir.0, "127.0.0.1:0").await;
    let http = SecAggClient::new(&srv.url).unwrap();
    let created = http
        .create_round(
            TOKEN,
            &serde_json::json!({"clients": 3, "bits": 16, "dim": 4}),
        )
        .await
        .unwrap();
    let joined = http
        .join_with_ticket(&created.round, &created.join_tickets[0])
        .await
        .unwrap();
    // A made-up token with a 100 MB body: 403 before a byte of it is sent.
    let line = status_before_body(&srv.url, &created.round, "made-up", 100 << 20).await;
    assert!(line.starts_with("HTTP/1.1 403"), "{line}");
    // A made-up round: 404, likewise unread.
    let line = status_before_body(&srv.url, "0123456789abcdef", "made-up", 100 << 20).await;
    assert!(line.starts_with("HTTP/1.1 404"), "{line}");
    // A joined client announcing more than this round's largest message (d = 4 at 16 bits,
    // 2 neighbours: a few hundred bytes): 413, unread.
    let line = status_before_body(&srv.url, &created.round, &joined.token, 100 << 20).await;
    assert!(line.starts_with("HTTP/1.1 413"), "{line}");
    // A message under another client's id, with a valid token: 403.
    let raw = reqwest::Client::new();
    let other = ClientMessage {
        header: Header::new(created.config.binding(), joined.client % 3 + 1),
        payload: ClientPayload::AdvertiseKeys {
            cipher_pk: [9u8; 32],
            mask_pk: [10u8; 32],
        },
    };
    let r = raw
        .post(format!(
            "{}/v1/secagg/rounds/{}/messages",
            srv.url, created.round
        ))
        .bearer_auth(&joined.token)
        .body(encode(&other))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    srv.shutdown().await;
}

/// A stranger cannot fill an honest-but-curious round: its creation hands the administrator one
/// single-use join ticket per client, and a join without one (401), with a made-up one (403) or
/// with a used one (409) is refused before anything is stored; the round's public view counts
/// only the clients admitted. A round created `"open": true` has no tickets and admits anyone;
/// an active round cannot be open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_is_joined_only_with_an_unused_join_ticket_unless_it_is_open() {
    let dir = TempDir::new("secagg-tickets");
    let srv = start(&dir.0, "127.0.0.1:0").await;
    let http = SecAggClient::new(&srv.url).unwrap();
    let raw = reqwest::Client::new();
    let base = format!("{}/v1/secagg/rounds", srv.url);
    let created = http
        .create_round(
            TOKEN,
            &serde_json::json!({"clients": 3, "bits": 16, "dim": 4}),
        )
        .await
        .unwrap();
    let tickets = &created.join_tickets;
    assert_eq!(tickets.len(), 3);
    assert!(
        tickets.iter().all(|t| t.len() == 64),
        "256-bit tickets, hex"
    );
    let distinct: std::collections::BTreeSet<_> = tickets.iter().collect();
    assert_eq!(distinct.len(), 3);
    let join = format!("{base}/{}/join", created.round);
    let status = |body: Option<serde_json::Value>| {
        let req = raw.post(&join);
        let req = match body {
            Some(b) => req.json(&b),
            None => req,
        };
        async move { req.send().await.unwrap().status().as_u16() }
    };
    // No credential, a made-up ticket, a device credential on a round without a roster, and a
    // body that is neither.
    assert_eq!(status(None).await, 401);
    assert_eq!(
        status(Some(serde_json::json!({"ticket": "00".repeat(32)}))).await,
        403
    );
    assert_eq!(status(Some(serde_json::json!({"ticket": ""}))).await, 403);
    assert_eq!(
        status(Some(
            serde_json::json!({"device": vec![1u8; 32], "signature": vec![2u8; 64]})
        ))
        .await,
        401
    );
    assert_eq!(status(Some(serde_json::json!({"ticket": 5}))).await, 400);
    assert_eq!(http.status(&created.round).await.unwrap()["joined"], 0);
    // A ticket admits one client, through any route to the coordinator.
    let first = http
        .join_with_ticket(&created.round, &tickets[1])
        .await
        .unwrap();
    assert_eq!(first.client, 1);
    assert_eq!(
        status(Some(serde_json::json!({"ticket": &tickets[1]}))).await,
        409
    );
    http.join_with_ticket(&created.round, &tickets[0])
        .await
        .unwrap();
    assert_eq!(http.status(&created.round).await.unwrap()["joined"], 2);
    // An open round: no tickets, anyone joins.
    let open = http
        .create_round(
            TOKEN,
            &serde_json::json!({"clients": 3, "bits": 16, "dim": 4, "open": true}),
        )
        .await
        .unwrap();
    assert!(open.join_tickets.is_empty());
    assert_eq!(http.join(&open.round).await.unwrap().client, 1);
    // An active round is joined by enrolled devices: it cannot be open, and has no tickets.
    let e = Enrollment::new(4, &mut ChaCha20Rng::seed_from_u64(4));
    let resp = raw
        .post(&base)
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"clients": 4, "bits": 16, "dim": 4, "threat_model": "active", "roster": &e.roster, "open": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let active = http
        .create_round(TOKEN, &serde_json::json!({"clients": 4, "bits": 16, "dim": 4, "threat_model": "active", "roster": &e.roster}))
        .await
        .unwrap();
    assert!(active.join_tickets.is_empty());
    srv.shutdown().await;
}

/// A client's message is stored, its acknowledgment is lost (the server that stored it was
/// killed), the stage closes, then the client re-sends the identical bytes: a duplicate (200),
/// so the survivor goes on to the next stage. The adversary is a client that re-sends: a
/// different message for the closed stage, and a message from a joined client never stored in
/// that stage, stay refused (409), and nothing they send changes the round.
#[tokio::test]
async fn a_stored_message_resent_after_its_stage_closed_is_a_duplicate_and_nothing_else_gets_in() {
    let dir = TempDir::new("secagg-resend-closed");
    let srv = start(&dir.0, "127.0.0.1:0").await;
    resent_after_close(&srv.url, &srv.url, TOKEN).await;
    srv.shutdown().await;
}

/// The body of the test above, shared with the Redis store's (`secagg_redis.rs`): the round is
/// created and the messages first posted through `first`; the stage is closed, the messages
/// re-sent and the status read through `retry` (another process over the same store, or the
/// same server).
pub(crate) async fn resent_after_close(first: &str, retry: &str, token: &str) {
    let http = SecAggClient::new(first).unwrap();
    let again = SecAggClient::new(retry).unwrap();
    let raw = reqwest::Client::new();
    let created = http
        .create_round(
            token,
            &serde_json::json!({"clients": 4, "bits": 16, "dim": 4}),
        )
        .await
        .unwrap();
    let round = created.round.clone();
    let mut joined = Vec::new();
    for t in &created.join_tickets {
        joined.push(http.join_with_ticket(&round, t).await.unwrap());
    }
    let binding = joined[0].config.binding();
    let msgs = |url: &str| format!("{url}/v1/secagg/rounds/{round}/messages");
    let advertise = |client: u32, salt: u8| {
        encode(&ClientMessage {
            header: Header::new(binding, client),
            payload: ClientPayload::AdvertiseKeys {
                cipher_pk: [client as u8 ^ salt; 32],
                mask_pk: [client as u8 + 100; 32],
            },
        })
    };
    let post = |url: &str, token: String, body: Vec<u8>| {
        let (raw, msgs) = (raw.clone(), msgs(url));
        async move {
            let r = raw
                .post(&msgs)
                .bearer_auth(token)
                .body(body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.text().await.unwrap())
        }
    };
    // Three of four advertise; the fourth stays silent; the operator closes the stage.
    for j in &joined[..3] {
        let (s, body) = post(first, j.token.clone(), advertise(j.client, 0)).await;
        assert_eq!(s, 202, "{body}");
    }
    again.close_stage(token, &round).await.unwrap();
    let before = again.status(&round).await.unwrap();
    // The identical bytes again: already delivered.
    let (s, body) = post(
        retry,
        joined[0].token.clone(),
        advertise(joined[0].client, 0),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["status"],
        "duplicate"
    );
    // Other bytes from a stored client, and any message from the client never stored: refused.
    let (s, body) = post(
        retry,
        joined[1].token.clone(),
        advertise(joined[1].client, 1),
    )
    .await;
    assert_eq!(s, 409, "{body}");
    let (s, body) = post(
        retry,
        joined[3].token.clone(),
        advertise(joined[3].client, 0),
    )
    .await;
    assert_eq!(s, 409, "{body}");
    assert_eq!(again.status(&round).await.unwrap(), before);
    assert_eq!(http.status(&round).await.unwrap(), before);
}
