//! Several server processes serving one secure-aggregation round from one Redis. Each "process"
//! is a server with its own Tokio runtime (on its own thread), its own Redis connection and its
//! own coordinator, on its own loopback socket; killing one drops its runtime at once (no
//! graceful shutdown: requests in flight are cut). Clients drive the protocol's state machine
//! directly so that each request can go to a different process.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use privfed_client::secagg::{Joined, SecAggClient};
use privfed_secagg::local::plain_sum;
use privfed_secagg::messages::{decode, encode};
use privfed_secagg::{Aggregate, Client, ServerMessage, Stage};
use privfed_server::ddml::store::redis::{Durability, RedisOptions};
use privfed_server::secagg::store::redis::DEFAULT_PREFIX;
use privfed_server::secagg::{Coordinator, RedisRoundStore};
use privfed_server::{AppState, RedisStore};
use rand::SeedableRng;
use rand::rngs::ChaCha20Rng;

use crate::common;

const TOKEN: &str = "secagg-redis-admin";

/// A server "process": its runtime runs on its own thread until [`Proc::kill`].
struct Proc {
    url: String,
    kill: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Proc {
    /// Starts a server over the Redis at `redis_url` (its own connection), with strict
    /// durability.
    fn start(redis_url: &str) -> Proc {
        Self::start_with(redis_url, Durability::Strict)
    }

    /// [`Proc::start`] with this durability policy.
    fn start_with(redis_url: &str, durability: Durability) -> Proc {
        let (url_tx, url_rx) = std::sync::mpsc::channel();
        let (kill_tx, kill_rx) = std::sync::mpsc::channel::<()>();
        let redis_url = redis_url.to_string();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                // A Redis just restarted may answer LOADING for a moment.
                let t0 = Instant::now();
                let store = loop {
                    let options = RedisOptions {
                        durability,
                        ..RedisOptions::default()
                    };
                    match RedisStore::connect_with(&redis_url, options).await {
                        Ok(s) => break s,
                        Err(e) if t0.elapsed() > Duration::from_secs(10) => panic!("{e}"),
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                };
                let rounds = RedisRoundStore::new(store.connection().clone(), DEFAULT_PREFIX);
                let mut state = AppState::new(store, TOKEN);
                state.secagg = Some(
                    Coordinator::open(Arc::new(rounds), TOKEN.into())
                        .await
                        .unwrap(),
                );
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                url_tx
                    .send(format!("http://{}", listener.local_addr().unwrap()))
                    .unwrap();
                tokio::spawn(privfed_server::serve(
                    listener,
                    Arc::new(state),
                    std::future::pending(),
                ));
            });
            // Until killed (or the test ends); then every task of this process stops at once.
            let _ = kill_rx.recv();
            rt.shutdown_background();
        });
        Proc {
            url: url_rx.recv_timeout(Duration::from_secs(30)).unwrap(),
            kill: Some(kill_tx),
            thread: Some(thread),
        }
    }

    fn kill(&mut self) {
        if let Some(k) = self.kill.take() {
            let _ = k.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How a client spreads its requests over the servers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Spread {
    /// Each request to the next server in turn.
    Alternate,
    /// The same server until a request fails, then the next (failover).
    Failover,
}

/// A device's HTTP side over several servers: every request that fails in transit or meets a
/// 503 is retried on the next server (within 60 s).
struct Multi {
    http: reqwest::Client,
    urls: Vec<String>,
    turn: AtomicUsize,
    spread: Spread,
}

impl Multi {
    fn new(urls: &[&str], spread: Spread, start: usize) -> Multi {
        Multi {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap(),
            urls: urls.iter().map(|u| u.to_string()).collect(),
            turn: AtomicUsize::new(start),
            spread,
        }
    }

    async fn send(
        &self,
        make: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
    ) -> reqwest::Response {
        let t0 = Instant::now();
        loop {
            let i = match self.spread {
                Spread::Alternate => self.turn.fetch_add(1, Ordering::Relaxed),
                Spread::Failover => self.turn.load(Ordering::Relaxed),
            };
            let url = &self.urls[i % self.urls.len()];
            match make(&self.http, url).send().await {
                Ok(r) if r.status() != 503 => return r,
                other => {
                    assert!(
                        t0.elapsed() < Duration::from_secs(60),
                        "gave up: {:?}",
                        other.map(|r| r.status())
                    );
                    if self.spread == Spread::Failover {
                        self.turn.fetch_add(1, Ordering::Relaxed);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// Joins with one of the round's join tickets.
    async fn join(&self, round: &str, ticket: &str) -> Joined {
        let body = serde_json::json!({ "ticket": ticket });
        let r = self
            .send(|h, u| {
                h.post(format!("{u}/v1/secagg/rounds/{round}/join"))
                    .json(&body)
            })
            .await;
        assert_eq!(r.status(), 200);
        let mut j: Joined = r.json().await.unwrap();
        j.round = round.to_string();
        j
    }

    async fn post(&self, j: &Joined, body: Vec<u8>) {
        let r = self
            .send(|h, u| {
                h.post(format!("{u}/v1/secagg/rounds/{}/messages", j.round))
                    .bearer_auth(&j.token)
                    .body(body.clone())
            })
            .await;
        // 200: a retry of a message that was stored before its answer was lost.
        assert!(
            r.status() == 202 || r.status() == 200,
            "client {}: {} {}",
            j.client,
            r.status(),
            r.text().await.unwrap_or_default()
        );
    }

    /// Takes part in the round, stopping before `drop_before`; `true` if it answered every
    /// stage (or was told the round finished).
    async fn participate(&self, j: &Joined, input: &[u64], drop_before: Option<Stage>) -> bool {
        let mut rng = ChaCha20Rng::from_rng(&mut rand::rng());
        if drop_before == Some(Stage::AdvertiseKeys) {
            return false;
        }
        let (mut client, first) = Client::new(j.config.clone(), j.client, &mut rng).unwrap();
        self.post(j, encode(&first)).await;
        loop {
            let Some(stage) = client.next_stage() else {
                return true;
            };
            if drop_before == Some(stage) {
                return false;
            }
            let r = self
                .send(|h, u| {
                    h.get(format!(
                        "{u}/v1/secagg/rounds/{}/next?client={}&wait=5",
                        j.round, j.client
                    ))
                    .bearer_auth(&j.token)
                })
                .await;
            match r.status().as_u16() {
                204 => continue,
                410 => {
                    let v: serde_json::Value = r.json().await.unwrap();
                    return v["status"] == "finished";
                }
                200 => {}
                s => panic!("client {}: next answered {s}", j.client),
            }
            let body = r.bytes().await.unwrap();
            let m: ServerMessage = decode(&body).unwrap();
            let answer = client.handle(&m, input, &mut rng).unwrap();
            self.post(j, encode(&answer)).await;
        }
    }
}

fn inputs(n: usize, dim: usize, bits: u32, seed: u64) -> Vec<Vec<u64>> {
    use rand::RngExt;
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    let m = privfed_secagg::mask::modulus_mask(bits);
    (0..n)
        .map(|_| (0..dim).map(|_| r.random::<u64>() & m).collect())
        .collect()
}

/// The round's status as one server sees it.
async fn status(url: &str, round: &str) -> serde_json::Value {
    SecAggClient::new(url)
        .unwrap()
        .with_retry_budget(Duration::from_secs(30))
        .status(round)
        .await
        .unwrap()
}

/// Until the round is over: whenever only silent clients (those in `drops` whose stage has
/// come) are pending, the admin closes the stage — through the servers in turn.
async fn operate(urls: &[&str], round: &str, drops: &[Option<Stage>]) {
    let mut turn = 0usize;
    let t0 = Instant::now();
    loop {
        assert!(t0.elapsed() < Duration::from_secs(120), "round stuck");
        turn += 1;
        let url = urls[turn % urls.len()];
        let v = status(url, round).await;
        if v["status"] != "collecting" {
            return;
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
            // 409 when another process closed the round meanwhile: fine.
            let _ = SecAggClient::new(url)
                .unwrap()
                .close_stage(TOKEN, round)
                .await;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Creates a round: its id and its join tickets, one per client.
async fn create(url: &str, n: usize, dim: usize, bits: u32) -> (String, Vec<String>) {
    SecAggClient::new(url)
        .unwrap()
        .create_round(
            TOKEN,
            &serde_json::json!({"clients": n, "bits": bits, "dim": dim, "stage_timeout_ms": 120000}),
        )
        .await
        .map(|c| (c.round, c.join_tickets))
        .unwrap()
}

async fn result(url: &str, round: &str) -> Aggregate {
    SecAggClient::new(url)
        .unwrap()
        .with_retry_budget(Duration::from_secs(30))
        .result(TOKEN, round)
        .await
        .unwrap()
}

/// Two processes, one Redis: 14 clients whose every request (join, post, poll) alternates
/// between the two servers, with dropouts at every stage; the admin closes stages through both.
/// The sum is the plain modular sum of the survivors' inputs, and both servers report it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn two_processes_serve_one_round_with_alternating_requests_and_dropouts() {
    let redis = common::RedisServer::start();
    let a = Proc::start(&redis.url());
    let b = Proc::start(&redis.url());
    let urls = [a.url.as_str(), b.url.as_str()];
    let (n, dim, bits) = (14usize, 300usize, 32u32);
    let (round, tickets) = create(urls[0], n, dim, bits).await;
    let xs = inputs(n, dim, bits, 11);
    let mut drops = vec![None; n];
    drops[1] = Some(Stage::AdvertiseKeys);
    drops[4] = Some(Stage::ShareKeys);
    drops[7] = Some(Stage::MaskedInput);
    drops[8] = Some(Stage::MaskedInput);
    drops[12] = Some(Stage::Unmasking);
    let mut tasks = Vec::new();
    let mut ids = Vec::new();
    let mut first = None;
    for i in 0..n {
        // Joins alternate too: ids are handed out by compare-and-set in the store.
        let m = Multi::new(&urls, Spread::Alternate, i);
        let j = m.join(&round, &tickets[i]).await;
        if i == 0 {
            // The ticket is spent in the store: the other process refuses it too.
            for url in urls {
                let again = reqwest::Client::new()
                    .post(format!("{url}/v1/secagg/rounds/{round}/join"))
                    .json(&serde_json::json!({ "ticket": &tickets[0] }))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(again.status(), 409, "a used ticket through {url}");
            }
        }
        ids.push(j.client);
        first.get_or_insert_with(|| j.clone());
        let (x, d) = (xs[i].clone(), drops[i]);
        tasks.push(tokio::spawn(async move { m.participate(&j, &x, d).await }));
    }
    assert_eq!(ids, (1..=n as u32).collect::<Vec<_>>());
    operate(&urls, &round, &drops).await;
    let mut finished = 0;
    for t in tasks {
        finished += usize::from(t.await.unwrap());
    }
    let out = result(urls[1], &round).await;
    assert_eq!(result(urls[0], &round).await, out);
    assert_eq!(
        out.dropped,
        vec![8, 9],
        "the masks of 8 and 9 were recovered"
    );
    let expected: Vec<u32> = (1..=n as u32)
        .filter(|&c| ![2, 5, 8, 9].contains(&c))
        .collect();
    assert_eq!(out.survivors, expected);
    assert_eq!(out.sum, plain_sum(&xs, &out.survivors, bits));
    // Every survivor but the one that dropped before unmasking answered every stage.
    assert_eq!(finished, expected.len() - 1);
    // Both processes say so, and answer a survivor's poll with "finished" (the one that did
    // not close the last stage rebuilt its replica from the store).
    let first = first.unwrap();
    for url in urls {
        let v = status(url, &round).await;
        assert_eq!(v["status"], "finished", "{v}");
        let v = poll(url, &first).await;
        assert_eq!((v.0, v.1["status"].as_str()), (410, Some("finished")));
    }
}

/// A client's poll for its next message through one server, with a short wait: the status and,
/// unless it is 200 or 204, the JSON body.
async fn poll(url: &str, j: &Joined) -> (u16, serde_json::Value) {
    let r = reqwest::Client::new()
        .get(format!(
            "{url}/v1/secagg/rounds/{}/next?client={}&wait=1",
            j.round, j.client
        ))
        .bearer_auth(&j.token)
        .send()
        .await
        .unwrap();
    let code = r.status().as_u16();
    let body = if matches!(code, 200 | 204) {
        serde_json::Value::Null
    } else {
        r.json().await.unwrap()
    };
    (code, body)
}

/// A round created on process A, whose clients talk to A, survives `A` being killed during the
/// masked-input stage: the clients fail over to B, B closes the remaining stages, the sum is
/// exact. Then a round deleted on B is gone for a new process C too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn a_round_started_on_one_process_completes_on_another_after_the_first_is_killed() {
    let redis = common::RedisServer::start();
    let mut a = Proc::start(&redis.url());
    let b = Proc::start(&redis.url());
    let urls = [a.url.clone(), b.url.clone()];
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let (n, dim, bits) = (10usize, 2000usize, 24u32);
    let (round, tickets) = create(urls[0], n, dim, bits).await;
    let xs = inputs(n, dim, bits, 12);
    let mut drops = vec![None; n];
    drops[9] = Some(Stage::MaskedInput);
    let mut tasks = Vec::new();
    for i in 0..n {
        let m = Multi::new(&urls, Spread::Failover, 0);
        let j = m.join(&round, &tickets[i]).await;
        let (x, d) = (xs[i].clone(), drops[i]);
        tasks.push(tokio::spawn(async move { m.participate(&j, &x, d).await }));
    }
    // Wait on A until nine masked inputs are in, then kill A.
    let t0 = Instant::now();
    loop {
        let v = status(urls[0], &round).await;
        if v["stage"] == "masked_input" && v["pending"] == 1 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "{v}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    a.kill();
    // B loads the round from the store (it never saw a request for it).
    let v = status(urls[1], &round).await;
    assert_eq!(
        (v["stage"].as_str(), v["pending"].as_u64()),
        (Some("masked_input"), Some(1)),
        "{v}"
    );
    operate(&urls[1..], &round, &drops).await;
    for t in tasks {
        t.await.unwrap();
    }
    let out = result(urls[1], &round).await;
    assert_eq!(out.survivors, (1..=9).collect::<Vec<u32>>());
    assert_eq!(out.dropped, vec![10]);
    assert_eq!(out.sum, plain_sum(&xs, &out.survivors, bits));
    // Deleted through B: a process started afterwards does not know it.
    let raw = reqwest::Client::new();
    let r = raw
        .delete(format!("{}/v1/secagg/rounds/{round}", urls[1]))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let c = Proc::start(&redis.url());
    let r = raw
        .get(format!("{}/v1/secagg/rounds/{round}", c.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// `kill -9` of redis-server (with the supported configuration: appendonly, appendfsync always)
/// during the masked-input stage, after nine of ten inputs were acknowledged, and a restart on
/// the same data: a process started after the restart (its replica rebuilt from Redis alone)
/// closes the stage, and the sum counts all nine acknowledged inputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn a_redis_restart_mid_round_loses_no_acknowledged_message() {
    let mut redis = common::RedisServer::start();
    let a = Proc::start(&redis.url());
    let b = Proc::start(&redis.url());
    let urls = [a.url.as_str(), b.url.as_str()];
    let (n, dim, bits) = (10usize, 1000usize, 20u32);
    let (round, tickets) = create(urls[0], n, dim, bits).await;
    let xs = inputs(n, dim, bits, 13);
    let mut drops = vec![None; n];
    drops[9] = Some(Stage::MaskedInput);
    let mut tasks = Vec::new();
    for i in 0..n {
        let m = Multi::new(&urls, Spread::Alternate, i);
        let j = m.join(&round, &tickets[i]).await;
        let (x, d) = (xs[i].clone(), drops[i]);
        tasks.push(tokio::spawn(async move { m.participate(&j, &x, d).await }));
    }
    let t0 = Instant::now();
    loop {
        let v = status(urls[1], &round).await;
        if v["stage"] == "masked_input" && v["pending"] == 1 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "{v}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    redis.restart();
    let c = Proc::start(&redis.url());
    let v = status(&c.url, &round).await;
    assert_eq!(
        (v["stage"].as_str(), v["pending_clients"].clone()),
        (Some("masked_input"), serde_json::json!([10])),
        "{v}"
    );
    let all = [urls[0], urls[1], c.url.as_str()];
    operate(&all[2..], &round, &drops).await;
    for t in tasks {
        t.await.unwrap();
    }
    let out = result(&c.url, &round).await;
    assert_eq!(out.survivors, (1..=9).collect::<Vec<u32>>());
    assert_eq!(out.dropped, vec![10]);
    assert_eq!(out.sum, plain_sum(&xs, &out.survivors, bits));
    assert_eq!(result(urls[0], &round).await, out);
}

/// A store that goes back in time: a best-effort Redis whose only persistence is an RDB
/// snapshot taken during the first stage, `kill -9`ed and restarted after that stage closed, so
/// it comes back without the close and without the messages stored after the snapshot. Both
/// processes' replicas are ahead of it: the round is aborted (every process agrees, with the
/// reason), never continued, and no sum is ever given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn a_store_that_went_back_in_time_aborts_the_round_on_every_process() {
    let mut redis = common::RedisServer::start_with(&["--save", "", "--appendonly", "no"]);
    let a = Proc::start_with(&redis.url(), Durability::BestEffort);
    let b = Proc::start_with(&redis.url(), Durability::BestEffort);
    let urls = [a.url.as_str(), b.url.as_str()];
    let n = 6usize;
    let (round, tickets) = create(urls[0], n, 8, 16).await;
    let mut joined = Vec::new();
    for (i, ticket) in tickets.iter().enumerate() {
        joined.push(
            Multi::new(&urls, Spread::Alternate, i)
                .join(&round, ticket)
                .await,
        );
    }
    // Everyone's keys, half through each server: the snapshot holds only the first four.
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let redis_client = redis::Client::open(redis.url()).unwrap();
    for (i, j) in joined.iter().enumerate() {
        if i == 4 {
            let mut con = redis_client
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let _: () = redis::cmd("SAVE").query_async(&mut con).await.unwrap();
        }
        let (_, first) = Client::new(j.config.clone(), j.client, &mut rng).unwrap();
        Multi::new(&urls, Spread::Alternate, i)
            .post(j, encode(&first))
            .await;
    }
    // The stage is complete: it closes (by whichever process saw the last key).
    let t0 = Instant::now();
    let seen = loop {
        let v = status(urls[0], &round).await;
        if v["stage"] == "share_keys" && status(urls[1], &round).await["stage"] == "share_keys" {
            break v["version"].as_u64().unwrap();
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    redis.restart();
    // Each process's round task (or the next request) finds the store behind its replica.
    let t0 = Instant::now();
    let raw = reqwest::Client::new();
    for url in urls {
        let v = loop {
            let r = raw
                .get(format!("{url}/v1/secagg/rounds/{round}"))
                .send()
                .await
                .unwrap();
            // 503 while Redis loads; 409 from the request that found the store behind.
            if r.status() == 200 {
                let v: serde_json::Value = r.json().await.unwrap();
                if v["status"] == "aborted" {
                    break v;
                }
            } else {
                assert!(matches!(r.status().as_u16(), 409 | 503), "{}", r.status());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "not aborted on {url}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let reason = v["reason"].as_str().unwrap();
        assert!(reason.contains("went back in time"), "{reason}");
        assert!(v["version"].as_u64().unwrap() > seen, "{v}");
        // No sum, and every client is told the round is over.
        let r = raw
            .get(format!("{url}/v1/secagg/rounds/{round}/result"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 409);
        for j in &joined {
            let (code, body) = poll(url, j).await;
            assert_eq!(code, 410, "{body}");
            assert!(
                body["reason"].as_str().unwrap().starts_with("aborted: "),
                "{body}"
            );
        }
    }
    assert_eq!(
        status(urls[0], &round).await["version"],
        status(urls[1], &round).await["version"]
    );
}

/// The retry of a message whose acknowledgment was lost, across processes: three clients'
/// messages are stored through one process, the stage is closed through the other, and the
/// re-sends go to that other process. The identical bytes are a duplicate (200); a different
/// message of a stored client and a message of the client never stored are refused (409), and
/// neither changes the round as either process reports it
/// (`crate::secagg::resent_after_close`, the embedded store's test, has the details).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
async fn a_stored_message_resent_to_another_process_after_its_stage_closed_is_a_duplicate() {
    let redis = common::RedisServer::start();
    let a = Proc::start(&redis.url());
    let b = Proc::start(&redis.url());
    crate::secagg::resent_after_close(&a.url, &b.url, TOKEN).await;
}
