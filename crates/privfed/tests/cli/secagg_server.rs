//! Secure aggregation against the real `privfed serve` binary: `privfed secagg simulate
//! --server`, a round that survives `kill -9` of the server mid-stage, and a round served by two
//! server processes over one Redis that survives `kill -9` of one of them.

use crate::common::{RedisServer, TempDir, fails_with, json_ok, loopback_addr, words};
use crate::serve_ops::Served;
use privfed_client::secagg::{Outcome, SecAggClient};
use privfed_secagg::Stage;
use privfed_secagg::local::plain_sum;
use std::time::Duration;

#[test]
fn secagg_simulate_against_privfed_serve_and_over_loopback() {
    let dir = TempDir::new("secagg-serve");
    let served = Served::start(&dir.0, &[]);
    let url = format!("http://{}", served.addr);
    let v = json_ok(&[
        "secagg",
        "simulate",
        "--clients",
        "16",
        "--dim",
        "500",
        "--bits",
        "24",
        "--dropout",
        "0.25",
        "--seed",
        "4",
        "--server",
        &url,
        "--admin-token",
        "t",
        "--json",
        "--quiet",
    ]);
    assert_eq!(v["exact"], true, "{v}");
    assert_eq!(v["survivors"], 12);
    assert_eq!(v["recovered_dropouts"], 4);
    assert_eq!(v["transport"], url.as_str());
    // A wrong admin token cannot create a round.
    fails_with(
        &[
            "secagg",
            "simulate",
            "--clients",
            "4",
            "--dim",
            "5",
            "--server",
            &url,
            "--admin-token",
            "wrong",
            "--quiet",
        ],
        "403",
    );
    // --http: the same over a loopback server started in-process.
    let v = json_ok(&words(
        "secagg simulate --clients 10 --dim 100 --dropout 0.2 --dropout-stage random --seed 2 --http --json --quiet",
    ));
    assert_eq!(v["exact"], true, "{v}");
    assert!(
        v["transport"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
}

/// `kill -9` of `privfed serve` during the masked-input stage (nine of ten inputs stored, the
/// tenth client gone): restarted on the same port and data directory, it resumes the round from
/// its store; the clients retry through the outage and the sum is exact.
#[test]
fn a_round_survives_kill_9_of_the_server_mid_stage() {
    let dir = TempDir::new("secagg-kill9");
    let addr = loopback_addr();
    let mut served = Served::start_on(&dir.0, &addr, &[]);
    let url = format!("http://{addr}");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let http = SecAggClient::new(&url)
            .unwrap()
            .with_retry_budget(Duration::from_secs(60));
        let (n, dim, bits) = (10usize, 4000usize, 30u32);
        let created = http
            .create_round(
                "t",
                &serde_json::json!({"clients": n, "bits": bits, "dim": dim, "stage_timeout_ms": 120000}),
            )
            .await
            .unwrap();
        let m = privfed_secagg::mask::modulus_mask(bits);
        let xs: Vec<Vec<u64>> = (0..n)
            .map(|i| (0..dim).map(|j| ((i * 7919 + j * 104_729) as u64) & m).collect())
            .collect();
        let mut tasks = Vec::new();
        for (i, x) in xs.iter().cloned().enumerate() {
            let joined = http
                .join_with_ticket(&created.round, &created.join_tickets[i])
                .await
                .unwrap();
            let http = http.clone();
            let drop = (i == n - 1).then_some(Stage::MaskedInput);
            tasks.push(tokio::spawn(async move { http.participate(&joined, &x, drop).await }));
        }
        loop {
            let v = http.status(&created.round).await.unwrap();
            if v["stage"] == "masked_input" && v["pending"] == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // SIGKILL: no shutdown, no flush beyond what was committed.
        served.child.kill().unwrap();
        served.child.wait().unwrap();
        let _restarted = Served::start_on(&dir.0, &addr, &[]);
        let v = http.status(&created.round).await.unwrap();
        assert_eq!(v["stage"], "masked_input", "{v}");
        assert_eq!(v["pending"], 1, "{v}");
        http.close_stage("t", &created.round).await.unwrap();
        for t in tasks {
            let p = t.await.unwrap().unwrap();
            assert!(
                matches!(p.outcome, Outcome::Finished | Outcome::Dropped(Stage::MaskedInput)),
                "{p:?}"
            );
        }
        let out = http.result("t", &created.round).await.unwrap();
        assert_eq!(out.survivors, (1..=9).collect::<Vec<u32>>());
        assert_eq!(out.dropped, vec![10]);
        assert_eq!(out.sum, plain_sum(&xs, &out.survivors, bits));
    });
}

/// Sends `signal` (a `kill` name) to a child.
fn signal(child: &std::process::Child, signal: &str) {
    let ok = std::process::Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .expect("run kill")
        .success();
    assert!(ok, "kill -{signal}");
}

/// Two `privfed serve --store redis://…` processes, A and B, serve one round from one
/// redis-server: the round is created on A, odd clients talk only to A and even ones only to B.
/// A is killed (`kill -9`) twice and restarted on the same port each time, with no state of its
/// own: it rebuilds the round from Redis, and its clients, retrying through the outage, go on.
/// 1. In the first stage, with its clients' first messages in flight (A stopped, then killed):
///    B alone has stored exactly the even clients' keys.
/// 2. In the middle of the masked-input stage (A's clients long-polling or posting): B keeps
///    serving, and its clients' inputs all arrive.
///
/// The operator closes that stage (client 10 never sends its input) through B; the sum is exact
/// and both processes report the same result.
#[test]
#[cfg_attr(not(has_redis_server), ignore = "redis-server not on PATH")]
fn two_serve_processes_share_a_round_in_redis_and_survive_kill_9_of_one() {
    let redis = RedisServer::start();
    let store = ["--store", &redis.url()];
    let (dir_a, dir_b) = (
        TempDir::new("secagg-redis-a"),
        TempDir::new("secagg-redis-b"),
    );
    let addr_a = loopback_addr();
    let mut a = Served::start_on(&dir_a.0, &addr_a, &store);
    let b = Served::start(&dir_b.0, &store);
    let urls = [format!("http://{addr_a}"), format!("http://{}", b.addr)];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let via = |i: usize| {
            SecAggClient::new(&urls[i % 2])
                .unwrap()
                .with_retry_budget(Duration::from_secs(60))
        };
        let (n, dim, bits) = (10usize, 3000usize, 28u32);
        let created = via(0)
            .create_round(
                "t",
                &serde_json::json!({"clients": n, "bits": bits, "dim": dim, "stage_timeout_ms": 120000}),
            )
            .await
            .unwrap();
        let (round, tickets) = (created.round, created.join_tickets);
        let m = privfed_secagg::mask::modulus_mask(bits);
        let xs: Vec<Vec<u64>> = (0..n)
            .map(|i| (0..dim).map(|j| ((i * 7919 + j * 104_729 + 3) as u64) & m).collect())
            .collect();
        let mut joined = Vec::new();
        for (i, ticket) in tickets.iter().enumerate() {
            // Client i + 1 joins through the server it will use throughout.
            let j = via(i).join_with_ticket(&round, ticket).await.unwrap();
            assert_eq!(j.client as usize, i + 1);
            joined.push(j);
        }
        let watch = via(1);
        let pending = |v: &serde_json::Value| -> Vec<u64> {
            let p = v["pending_clients"].as_array().unwrap();
            p.iter().map(|c| c.as_u64().unwrap()).collect()
        };
        // 1. A stops answering (its clients' first messages wait in its socket), then dies.
        signal(&a.child, "STOP");
        let mut tasks = Vec::new();
        for (i, (x, j)) in xs.iter().cloned().zip(joined).enumerate() {
            let http = via(i);
            let drop = (i == n - 1).then_some(Stage::MaskedInput);
            tasks.push(tokio::spawn(async move { http.participate(&j, &x, drop).await }));
        }
        let t0 = std::time::Instant::now();
        loop {
            let v = watch.status(&round).await.unwrap();
            assert_eq!(v["stage"], "advertise_keys", "{v}");
            if pending(&v) == [1, 3, 5, 7, 9] {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "{v}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        a.child.kill().unwrap();
        a.child.wait().unwrap();
        let v = watch.status(&round).await.unwrap();
        assert_eq!(
            (v["stage"].as_str(), pending(&v)),
            (Some("advertise_keys"), vec![1, 3, 5, 7, 9]),
            "{v}"
        );
        a = Served::start_on(&dir_a.0, &addr_a, &store);
        // 2. Mid-stage: some masked inputs stored, others on their way.
        loop {
            let v = watch.status(&round).await.unwrap();
            if v["stage"] == "masked_input" && v["pending"].as_u64().unwrap() <= 6 {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "{v}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        a.child.kill().unwrap();
        a.child.wait().unwrap();
        // B alone: it answers, and the inputs of its clients (even ids) are all stored.
        loop {
            let v = watch.status(&round).await.unwrap();
            assert_eq!(v["stage"], "masked_input", "{v}");
            if pending(&v).iter().all(|c| c % 2 == 1 || *c == 10) {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(90), "{v}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _a = Served::start_on(&dir_a.0, &addr_a, &store);
        loop {
            let v = watch.status(&round).await.unwrap();
            if pending(&v) == [10] {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(120), "{v}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        watch.close_stage("t", &round).await.unwrap();
        for t in tasks {
            let p = t.await.unwrap().unwrap();
            assert!(
                matches!(p.outcome, Outcome::Finished | Outcome::Dropped(Stage::MaskedInput)),
                "{p:?}"
            );
        }
        let out = via(1).result("t", &round).await.unwrap();
        assert_eq!(out.survivors, (1..=9).collect::<Vec<u32>>());
        assert_eq!(out.dropped, vec![10]);
        assert_eq!(out.sum, plain_sum(&xs, &out.survivors, bits));
        assert_eq!(via(0).result("t", &round).await.unwrap(), out);
    });
}
